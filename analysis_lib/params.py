"""Checks for notebook parameters, so a bad value stops a notebook at its parameters cell.

Each notebook calls :func:`check` right after its ``parameters`` cell with a small spec of
what each parameter must be; a wrong type, an impossible size or an unknown model or corpus
raises one ``ValueError`` that lists every problem and how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class ParameterError(ValueError):
    """One or more notebook parameters are invalid; the message lists each and the fix."""


def _type_name(kind) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def check(values: Mapping[str, Any], spec: Mapping[str, dict[str, Any]]) -> None:
    """Validate ``values`` (usually ``globals()``) against ``spec``.

    ``spec`` maps a parameter name to rules: ``type`` (a type or tuple of types; ``int``
    also rejects bools), ``min`` / ``max`` (numbers, or the length of a list), ``choices``
    (allowed values, or allowed items for a list), ``items`` (type of list items), ``model``
    (True: every item must be a loadable model name), ``corpus`` (True: a known corpus name).
    """
    problems = []
    for name, rules in spec.items():
        if name not in values:
            problems.append(f"{name}: missing (add it to the parameters cell)")
            continue
        value = values[name]
        kind = rules.get("type")
        if kind is not None and (not isinstance(value, kind) or (
                kind is int and isinstance(value, bool))):
            problems.append(f"{name}={value!r}: must be {_type_name(kind)}, got "
                            f"{type(value).__name__}")
            continue
        size = len(value) if isinstance(value, (list, tuple)) else value
        if "min" in rules and size < rules["min"]:
            what = "items" if isinstance(value, (list, tuple)) else "value"
            problems.append(f"{name}={value!r}: needs at least {rules['min']} ({what})")
        if "max" in rules and size > rules["max"]:
            problems.append(f"{name}={value!r}: at most {rules['max']}")
        items = value if isinstance(value, (list, tuple)) else [value]
        if "items" in rules:
            bad = [v for v in items if not isinstance(v, rules["items"])]
            if bad:
                problems.append(f"{name}: items {bad!r} must be {_type_name(rules['items'])}")
        if "choices" in rules:
            bad = [v for v in items if v not in rules["choices"]]
            if bad:
                problems.append(f"{name}: {bad!r} not allowed; choose from "
                                f"{list(rules['choices'])}")
        if rules.get("model"):
            problems += [f"{name}: {p}" for p in _model_problems(items)]
        if rules.get("corpus"):
            from .corpora import list_corpora

            bad = [v for v in items if v not in list_corpora()]
            if bad:
                problems.append(f"{name}: unknown corpus {bad!r}; valid: "
                                f"{sorted(list_corpora())}")
    if problems:
        raise ParameterError("invalid notebook parameters:\n  - " + "\n  - ".join(problems))


def _model_problems(names: Sequence[Any]) -> list[str]:
    import re
    from pathlib import Path

    from .models import _HUB_ID, FAMILIES

    problems = []
    for name in names:
        if not isinstance(name, str):
            problems.append(f"model {name!r} must be a string")
        elif name.startswith("random:"):
            if name.split(":", 1)[1] not in FAMILIES:
                problems.append(f"unknown family in {name!r}; valid: "
                                f"{', '.join('random:' + f for f in FAMILIES)}")
        elif name != "minilm" and not Path(name).expanduser().is_dir() and (
                not _HUB_ID.match(name) or re.match(r"^(random|\.|/)", name)):
            problems.append(f"unknown model {name!r}: use 'minilm', 'random:<family>', a hub "
                            "id or a local folder")
    return problems
