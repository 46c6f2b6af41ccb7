"""The rules a study's parameters obey, and the check that applies them.

A parameter (:class:`Parameter`) has a name, a type, a default, a help text and rules:
sizes (``min``, ``max``: a number's value or a list's length), each item's type, range and
allowed values (``items``, ``item_min``, ``item_max``, ``choices``), names that must resolve
(``model``, ``corpus``, ``task``), a dict's allowed keys (``keys``; its other rules apply to
its values), a random model's sizes (``sizes``), layer counts that must fit a model
(``depth``: the name of the parameter that names the model), and a mapping of settings each
with rules of its own (``fields``: the :class:`Parameter` of each key, as
:class:`analysis_lib.training.grid.FinetuneGrid` declares the fine-tuning grid). Every
number must be finite, and a list holds no item twice.

:func:`validate` checks values against parameters and raises one :class:`ParameterError`
that lists every problem and its fix. Notebooks declare their parameters in a cell
(:mod:`analysis_lib.book.params` reads it); a study's own settings declare theirs in code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int, "float": (int, float), "str": str, "bool": bool, "list": list, "dict": dict}

class ParameterError(ValueError):
    """One or more notebook parameters are invalid; the message lists each and the fix."""


@dataclass
class Parameter:
    """One declared parameter: its name, type, default, help text and rules."""

    name: str
    type: str
    default: Any
    help: str = ""
    rules: dict[str, Any] = field(default_factory=dict)


def _type_name(kind) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def _size_problems(name: str, value: Any, rules: dict) -> list[str]:
    is_list = isinstance(value, (list, tuple))
    size, unit = (len(value), " items") if is_list else (value, "")
    out = []
    if "min" in rules and size < rules["min"]:
        out.append(f"{name}={value!r}: needs at least {rules['min']}{unit}")
    if "max" in rules and size > rules["max"]:
        out.append(f"{name}={value!r}: at most {rules['max']}{unit}")
    return out


def _range_problems(name: str, items: list, rules: dict) -> list[str]:
    """Numeric items below ``item_min`` or above ``item_max``."""
    numbers = [v for v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]
    out = []
    low = [v for v in numbers if "item_min" in rules and v < rules["item_min"]]
    if low:
        out.append(f"{name}: items {low!r} are below {rules['item_min']}")
    high = [v for v in numbers if "item_max" in rules and v > rules["item_max"]]
    if high:
        out.append(f"{name}: items {high!r} are above {rules['item_max']}")
    return out


def _item_problems(name: str, items: list, rules: dict) -> list[str]:
    out = []
    if "items" in rules:
        bad = [v for v in items if not isinstance(v, rules["items"])
               or (rules["items"] is int and isinstance(v, bool))]
        if bad:
            out.append(f"{name}: items {bad!r} must be {_type_name(rules['items'])}")
    out += _range_problems(name, items, rules)
    if rules.get("task"):
        from .data.tasks import TASKS

        bad = [v for v in items if v not in TASKS]
        if bad:
            out.append(f"{name}: unknown task {bad!r}; valid: {list(TASKS)}")
    if "choices" in rules:
        bad = [v for v in items if v not in rules["choices"]]
        if bad:
            out.append(f"{name}: {bad!r} not allowed; choose from {list(rules['choices'])}")
    if rules.get("model"):
        out += [f"{name}: {p}" for p in _model_problems(items)]
    if rules.get("corpus"):
        out += _corpus_problems(name, items)
    return out


def _corpus_problems(name: str, items: list) -> list[str]:
    """Corpus names that are neither registered nor an existing text file of one's own."""
    from pathlib import Path

    from .data.corpora import is_corpus_file, list_corpora

    out = []
    files = [v for v in items if is_corpus_file(v)]
    missing = [v for v in files if not Path(v).expanduser().is_file()]
    if missing:
        shown = ", ".join(str(Path(v).expanduser().absolute()) for v in missing)
        out.append(f"{name}: corpus file {shown} does not exist (a relative path is read "
                   "from the working folder: the book's build resolves it from where the "
                   "build was started; give an absolute path to be sure)")
    bad = [v for v in items if v not in list_corpora() and v not in files]
    if bad:
        out.append(f"{name}: unknown corpus {bad!r}; valid: {sorted(list_corpora())}, or "
                   "the path of a text file with one sentence per line")
    return out


def _problems(name: str, value: Any, param: Parameter) -> list[str]:
    kind = TYPES[param.type]
    if not isinstance(value, kind) or (param.type in ("int", "float")
                                       and isinstance(value, bool)):
        hint = ""
        if isinstance(value, str) and param.type in ("dict", "list"):
            hint = (f" (papermill's -p passes text as it is; give a {param.type} with -y, "
                    f"e.g. -y '{name}: {'{...}' if param.type == 'dict' else '[...]'}', or "
                    "from a YAML file with -f)")
        shown = repr(value) if len(repr(value)) <= 200 else repr(value)[:197] + "..."
        return [f"{name}={shown}: must be {_type_name(kind)}, got {type(value).__name__}"
                f"{hint}"]
    if isinstance(value, dict) and "fields" in param.rules:
        return _fields_problems(name, value, param.rules["fields"])
    if isinstance(value, dict):  # names of tasks are its keys; every other rule, its values
        value_rules = {k: v for k, v in param.rules.items() if k not in ("task", "sizes")}
        problems = (_key_problems(name, value, param.rules) + _finite_problems(
            name, list(value.values())) + _item_problems(name, list(value.values()),
                                                         value_rules))
        if param.rules.get("sizes") and not problems:
            from .models.random_init import size_problems

            problems += [f"{name}: {p}" for p in size_problems(value)]
        return problems
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    finite = _finite_problems(name, items)
    if finite:
        return finite
    return (_size_problems(name, value, param.rules) + _repeat_problems(name, value)
            + _item_problems(name, items, param.rules))


def _fields_problems(name: str, value: dict, spec: Mapping[str, Parameter]) -> list[str]:
    """A mapping of settings (``fields`` rule): each key one of ``spec``, each value checked
    against that setting's own rules, named ``name.key``."""
    unknown = [k for k in value if k not in spec]
    out = [f"{name}: unknown settings {unknown!r}; allowed: {list(spec)}"] if unknown else []
    for key, item in value.items():
        if key in spec:
            out += _problems(f"{name}.{key}", item, spec[key])
    return out


def _finite_problems(name: str, items: list) -> list[str]:
    """NaN and infinities, which pass every comparison of a range rule."""
    bad = [v for v in items if isinstance(v, float) and not math.isfinite(v)]
    return [f"{name}: {bad!r} must be finite numbers"] if bad else []


def _repeat_problems(name: str, value: Any) -> list[str]:
    """Items a list holds twice (two seeds 0 are one seed counted twice)."""
    if not isinstance(value, (list, tuple)):
        return []
    seen: list = []
    twice = []
    for item in value:
        if item in seen and item not in twice:
            twice.append(item)
        seen.append(item)
    return [f"{name}={value!r}: holds {twice!r} more than once; list each once"] if twice else []


def _key_problems(name: str, value: dict, rules: dict) -> list[str]:
    out = []
    if "keys" in rules:
        bad = [k for k in value if k not in rules["keys"]]
        if bad:
            out.append(f"{name}: unknown keys {bad!r}; allowed: {list(rules['keys'])}")
    if rules.get("task"):
        from .data.tasks import TASKS

        bad = [k for k in value if k not in TASKS]
        if bad:
            out.append(f"{name}: unknown task {bad!r} among the keys; valid: {list(TASKS)}")
    return out


def validate(values: Mapping[str, Any], spec: Mapping[str, Parameter], *,
             partial: bool = False, source: str = "notebook parameters") -> None:
    """Check ``values`` against declared parameters; one :class:`ParameterError` lists every
    problem. ``partial``: only the values given are checked (a profile may set a subset);
    a value for an undeclared parameter is a problem either way."""
    problems = []
    for name, param in spec.items():
        if name not in values:
            if not partial:
                problems.append(f"{name}: missing (add it to the parameters cell)")
            continue
        problems += _problems(name, values[name], param)
    problems += _depth_problems(values, spec)
    if problems:
        raise ParameterError(f"invalid {source}:\n  - " + "\n  - ".join(problems))


def _depth_problems(values: Mapping[str, Any], spec: Mapping[str, Parameter]) -> list[str]:
    """Layer counts above the depth of the model they apply to (``depth`` rule), checked when
    the counts or the models are among ``values`` (the others from their defaults); a model
    whose depth cannot be read here (a hub model not yet cached) is left to the run."""

    def value(name):
        return values[name] if name in values else spec[name].default

    problems = []
    for name, param in spec.items():
        source = param.rules.get("depth")
        if not source or not {name, source, "model_options"} & set(values):
            continue
        counts, models = value(name), value(source)
        if isinstance(models, dict):  # a mapping of settings: its ``models`` field
            fields = spec[source].rules.get("fields", {})
            default = fields["models"].default if "models" in fields else []
            models, source = models.get("models", default), f"{source}.models"
        options = value("model_options") if "model_options" in spec else None
        from .models.loading import depth_of  # (torch: imported only where a rule needs it)

        try:
            depth = depth_of(models[0], options if isinstance(options, dict) else None)
        except (TypeError, ValueError, IndexError, KeyError):
            continue  # the model's own rule reports it
        high = [k for k in counts if isinstance(k, int) and depth is not None and k > depth]
        if high:
            problems.append(f"{name}: items {high!r} are above the {depth} transformer layers "
                            f"of {models[0]!r} (the first of {source}); use 1..{depth}")
    return problems


def _model_problems(names: Sequence[Any]) -> list[str]:
    from .models import check_name

    problems = []
    for name in names:
        try:
            check_name(name)
        except (TypeError, ValueError) as error:
            problems.append(str(error))
    return problems
