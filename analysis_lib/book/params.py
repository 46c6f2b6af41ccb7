"""Notebook parameters, declared once: the notebook's ``parameters`` cell.

Each line of a study notebook's ``parameters`` cell declares one parameter with its type, its
default and a comment that explains it and may end with rules in square brackets::

    n_sentences: int = 500  # sentences sampled from each corpus [min: 5; max: 50000]
    models: list = ["minilm"]  # model names [model; min: 1]

Rules are ``key: value`` pairs separated by ``;`` (no ``=``, which papermill's
``--help-notebook`` would not parse): ``min`` / ``max`` (a number, or a list's length),
``choices`` (allowed values, or allowed items of a list), ``items`` (the type of a list's
items), ``model`` (every item a model name :func:`analysis_lib.models.check_name` accepts)
and ``corpus`` (a corpus name).
:func:`declared` reads them; :func:`check` validates values against them, in the notebook
(right after its parameters) and in the book's build before any notebook runs, so a bad value
stops with one error that lists every problem and its fix.

Profiles (``profiles/*.yml``) are read by :func:`read_yaml`, which builds plain values only:
any YAML tag (``!!omap``, ``!!python/...``, ``!!set``, a timestamp) is refused with the key
that holds it, before anything reaches a notebook.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int, "float": (int, float), "str": str, "bool": bool, "list": list, "dict": dict}
_LINE = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s*:\s*(?P<type>\w+)\s*=\s*(?P<rest>.*)$")
_RULES = re.compile(r"\[(?P<rules>[^\[\]]*(?:\[[^\]]*\][^\[\]]*)*)\]\s*$")


#: the rules a parameter's comment may declare in ``[...]``: sizes (``min``, ``max``: a
#: number's value or a list's length), each item's type, range and allowed values (``items``,
#: ``item_min``, ``item_max``, ``choices``), names that must resolve (``model``, ``corpus``,
#: ``task``), for a dict its allowed keys (``keys``; a dict's other rules apply to its values),
#: for layer counts the model they must fit (``depth: 'ft_models'``: every item at most
#: the number of transformer layers of the first model that parameter names), and for a
#: random model's sizes their ranges and consistency (``sizes``:
#: :func:`analysis_lib.models.random_init.size_problems`). Every number must be finite, and a
#: list holds no item twice.
RULES = ("min", "max", "choices", "items", "item_min", "item_max", "model", "corpus", "task",
         "keys", "depth", "sizes")


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


def _split_comment(rest: str) -> tuple[str, str]:
    """``default  # comment`` -> (default source, comment), with '#' inside strings kept."""
    quote = None
    for k, ch in enumerate(rest):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return rest[:k].strip(), rest[k + 1:].strip()
    return rest.strip(), ""


def _parse_rules(text: str, name: str) -> dict[str, Any]:
    rules: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        key, _, value = part.partition(":")
        key = key.strip()
        if key not in RULES:
            raise ValueError(f"parameter {name}: unknown rule {key!r} in [{text}]")
        if key == "items":
            rules[key] = TYPES[value.strip()]
        else:
            rules[key] = ast.literal_eval(value.strip()) if value else True
    return rules


def parse_cell(source: str) -> dict[str, Parameter]:
    """The parameters declared by the source of a ``parameters`` cell."""
    out: dict[str, Parameter] = {}
    for line in source.splitlines():
        match = _LINE.match(line.strip())
        if not match:
            continue
        default_src, comment = _split_comment(match["rest"])
        rules_match = _RULES.search(comment)
        rules = _parse_rules(rules_match["rules"], match["name"]) if rules_match else {}
        help_text = comment[:rules_match.start()].strip() if rules_match else comment
        if match["type"] not in TYPES:
            raise ValueError(f"parameter {match['name']}: type {match['type']!r} is not one of "
                             f"{sorted(TYPES)}")
        out[match["name"]] = Parameter(match["name"], match["type"],
                                       ast.literal_eval(default_src), help_text, rules)
    return out


def notebook_path(notebook: str | Path) -> Path:
    """Find a notebook by name (``"representation"``) or path: in the working folder, then in
    the book's ``notebooks/`` folder."""
    from .paths import ROOT

    path = Path(notebook)
    if path.suffix != ".ipynb":
        path = path.with_suffix(".ipynb")
    for candidate in (path, Path.cwd() / path.name, ROOT / "notebooks" / path.name):
        if candidate.is_file():
            return candidate
    raise ValueError(f"notebook {notebook!r} not found in {Path.cwd()} or "
                     f"{ROOT / 'notebooks'}")


def declared(notebook: str | Path) -> dict[str, Parameter]:
    """The parameters a notebook declares in its cell tagged ``parameters``."""
    import nbformat

    nb = nbformat.read(str(notebook_path(notebook)), as_version=4)
    for cell in nb.cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return parse_cell(cell.source)
    return {}


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
        from ..data.tasks import TASKS

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
        from ..data.corpora import list_corpora

        bad = [v for v in items if v not in list_corpora()]
        if bad:
            out.append(f"{name}: unknown corpus {bad!r}; valid: {sorted(list_corpora())}")
    return out


def _problems(name: str, value: Any, param: Parameter) -> list[str]:
    kind = TYPES[param.type]
    if not isinstance(value, kind) or (param.type in ("int", "float")
                                       and isinstance(value, bool)):
        return [f"{name}={value!r}: must be {_type_name(kind)}, got {type(value).__name__}"]
    if isinstance(value, dict):  # names of tasks are its keys; every other rule, its values
        value_rules = {k: v for k, v in param.rules.items() if k not in ("task", "sizes")}
        problems = (_key_problems(name, value, param.rules) + _finite_problems(
            name, list(value.values())) + _item_problems(name, list(value.values()),
                                                         value_rules))
        if param.rules.get("sizes") and not problems:
            from ..models.random_init import size_problems

            problems += [f"{name}: {p}" for p in size_problems(value)]
        return problems
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    finite = _finite_problems(name, items)
    if finite:
        return finite
    return (_size_problems(name, value, param.rules) + _repeat_problems(name, value)
            + _item_problems(name, items, param.rules))


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
        from ..data.tasks import TASKS

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
    from ..models.loading import depth_of

    def value(name):
        return values[name] if name in values else spec[name].default

    problems = []
    for name, param in spec.items():
        source = param.rules.get("depth")
        if not source or not {name, source, "model_options"} & set(values):
            continue
        counts, models = value(name), value(source)
        options = value("model_options") if "model_options" in spec else None
        try:
            depth = depth_of(models[0], options if isinstance(options, dict) else None)
        except (TypeError, ValueError, IndexError, KeyError):
            continue  # the model's own rule reports it
        high = [k for k in counts if isinstance(k, int) and depth is not None and k > depth]
        if high:
            problems.append(f"{name}: items {high!r} are above the {depth} transformer layers "
                            f"of {models[0]!r} (the first of {source}); use 1..{depth}")
    return problems


def check(values: Mapping[str, Any], notebook: str | Path) -> None:
    """Validate a running notebook's parameters (``globals()``) against the rules its own
    ``parameters`` cell declares."""
    validate(values, declared(notebook))


def _model_problems(names: Sequence[Any]) -> list[str]:
    from ..models import check_name

    problems = []
    for name in names:
        try:
            check_name(name)
        except (TypeError, ValueError) as error:
            problems.append(str(error))
    return problems


# --------------------------------------------------------------------------- YAML

_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null",
                                                  "seq", "map")}


#: The most values a YAML document may expand to, aliases counted each time they are used.
MAX_YAML_VALUES = 100_000


def read_yaml(text: str, source: str = "YAML") -> Any:
    """Parse YAML into plain values (str, int, float, bool, None, lists, dicts) only.

    Refused with a ``ValueError`` naming the key, before any value is built: a node with
    another tag, explicit (``!!omap``, ``!!python/tuple``, ``!custom``) or implicit (a
    timestamp, a set); a key written twice in one mapping (YAML keeps the last silently);
    a document that aliases expand past :data:`MAX_YAML_VALUES` values (an alias bomb).
    Each node is visited once, so the check takes time linear in the text, aliases included.
    """
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise ValueError(f"{source} is not valid YAML: {error}") from error
    if node is None:
        return None
    size = _check_nodes(node, source, "(top level)", {})
    if size > MAX_YAML_VALUES:
        raise ValueError(f"{source} expands to {size:,} values through its aliases (*name), "
                         f"more than {MAX_YAML_VALUES:,}; write the values out instead")
    return yaml.safe_load(text)


def _check_nodes(node, source: str, where: str, sizes: dict) -> int:
    """Check one node and everything under it (each node once); returns how many values it
    expands to."""
    import yaml

    if id(node) in sizes:
        return sizes[id(node)]
    if node.tag not in _PLAIN_TAGS:
        raise ValueError(f"{source}: the value of {where} has the YAML tag {node.tag!r}; only "
                         "plain values (strings, numbers, booleans, null, lists, mappings) are "
                         "accepted. Remove the tag (write a list as [a, b], a mapping as "
                         "{key: value}, a date as a quoted string).")
    size = 1
    if isinstance(node, yaml.MappingNode):
        keys = set()
        for key, value in node.value:
            size += _check_nodes(key, source, f"a key in {where}", sizes)
            if isinstance(key, yaml.ScalarNode):
                if (key.tag, key.value) in keys:
                    raise ValueError(f"{source}: the key {key.value!r} appears twice in {where} "
                                     f"(line {key.start_mark.line + 1}); keep one")
                keys.add((key.tag, key.value))
            size += _check_nodes(value, source, repr(key.value), sizes)
    elif isinstance(node, yaml.SequenceNode):
        for k, item in enumerate(node.value):
            size += _check_nodes(item, source, f"{where}[{k}]", sizes)
    sizes[id(node)] = size
    return size
