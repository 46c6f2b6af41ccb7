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
:func:`declared` reads them; :func:`check` validates values against them
(:func:`analysis_lib.studies.rules.validate`), in the notebook (right after its parameters)
and in the book's build before any notebook runs, so a bad value stops with one error that
lists every problem and its fix.

Profiles (``profiles/*.yml``) are read by :func:`read_yaml`, which builds plain values only:
any YAML tag (``!!omap``, ``!!python/...``, ``!!set``, a timestamp) is refused with the key
that holds it, before anything reaches a notebook.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..studies.rules import TYPES, Parameter, ParameterError, validate

__all__ = ["RULES", "MAX_YAML_VALUES", "Parameter", "ParameterError", "check", "declared",
           "notebook_path", "parse_cell", "read_yaml", "validate"]

_LINE = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s*:\s*(?P<type>\w+)\s*=\s*(?P<rest>.*)$")
_RULES = re.compile(r"\[(?P<rules>[^\[\]]*(?:\[[^\]]*\][^\[\]]*)*)\]\s*$")


#: the rules a parameter's comment may declare in ``[...]``: sizes (``min``, ``max``: a
#: number's value or a list's length), each item's type, range and allowed values (``items``,
#: ``item_min``, ``item_max``, ``choices``), names that must resolve (``model``, ``corpus``,
#: ``task``), for a dict its allowed keys (``keys``; a dict's other rules apply to its values),
#: for layer counts the model they must fit (``depth: 'finetune'``: every item at most
#: the number of transformer layers of the first model that parameter names), a mapping
#: of fine-tuning settings (``grid``: each key a field of
#: :class:`analysis_lib.studies.shared.FinetuneGrid`, checked against that field's rules),
#: and for a random model's sizes their ranges and consistency (``sizes``:
#: :func:`analysis_lib.models.random_init.size_problems`). Every number must be finite, and a
#: list holds no item twice.
RULES = ("min", "max", "choices", "items", "item_min", "item_max", "model", "corpus", "task",
         "keys", "depth", "sizes", "grid")


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
        elif key == "grid":  # the fine-tuning grid: each setting with the rules it declares
            from ..studies.shared import FinetuneGrid

            rules["fields"] = FinetuneGrid.parameters()
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


def check(values: Mapping[str, Any], notebook: str | Path) -> None:
    """Validate a running notebook's parameters (``globals()``) against the rules its own
    ``parameters`` cell declares. A parameter papermill injected that the notebook does not
    declare (a misspelt ``-p`` name, which papermill passes through and the notebook would
    never read) is refused with the closest declared names."""
    spec = declared(notebook)
    unknown = [name for name in injected(values) if name not in spec]
    if unknown:
        import difflib

        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, list(spec), n=1)
            hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ParameterError(
            f"parameters given to this notebook that it does not declare: "
            f"{', '.join(hints)}; it would run with its defaults instead. Its parameters: "
            f"{', '.join(spec)} (papermill --help-notebook lists them)")
    validate(values, spec)


#: the first line of the cell papermill injects with the parameters it was given
INJECTED_HEADER = "# Parameters"


def injected(values: Mapping[str, Any]) -> list[str]:
    """The names papermill injected into a running notebook: the assignments of its
    injected-parameters cell, read back from IPython's input history (``In`` in
    ``values``, the notebook's ``globals()``). Empty outside papermill."""
    history = values.get("In") or values.get("_ih") or []
    names: list[str] = []
    for source in history if isinstance(history, list) else []:
        if isinstance(source, str) and source.lstrip().startswith(INJECTED_HEADER):
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            names += [target.id for node in tree.body if isinstance(node, ast.Assign)
                      for target in node.targets if isinstance(target, ast.Name)]
    return list(dict.fromkeys(names))


# --------------------------------------------------------------------------- YAML

_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null",
                                                  "seq", "map")}


#: The most values a YAML document may expand to, aliases counted each time they are used.
MAX_YAML_VALUES = 100_000
#: The most characters a YAML document may hold, and may expand to through its aliases
#: (a profile or a sweep spec is a few kilobytes).
MAX_YAML_BYTES = 1_000_000
#: The deepest a YAML document may nest lists and mappings (a profile nests three deep).
MAX_YAML_DEPTH = 64


def read_yaml(text: str, source: str = "YAML") -> Any:
    """Parse YAML into plain values (str, int, float, bool, None, lists, dicts) only.

    Refused with a ``ValueError`` naming the key, before any value is built: a node with
    another tag, explicit (``!!omap``, ``!!python/tuple``, ``!custom``) or implicit (a
    timestamp, a set); a key written twice in one mapping (YAML keeps the last silently);
    a document that aliases expand past :data:`MAX_YAML_VALUES` values or
    :data:`MAX_YAML_BYTES` characters (an alias bomb); a text longer than
    :data:`MAX_YAML_BYTES`; lists and mappings nested deeper than :data:`MAX_YAML_DEPTH`
    (checked on the parser's event stream, before anything recursive reads the text); a
    mapping key that is a list or a mapping. Each node is visited once, so the check takes
    time linear in the text, aliases included.
    """
    import yaml

    if not isinstance(text, str):
        raise TypeError(f"{source}: YAML text must be a string, got {type(text).__name__}")
    if len(text) > MAX_YAML_BYTES:
        raise ValueError(f"{source} is {len(text):,} characters long, more than "
                         f"{MAX_YAML_BYTES:,}; a profile or sweep spec is a few kilobytes: "
                         "is this the right file?")
    try:
        _check_depth(text, source)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise ValueError(f"{source} is not valid YAML: {str(error)[:500]}") from error
    if node is None:
        return None
    size, chars = _check_nodes(node, source, "(top level)", {})
    if size > MAX_YAML_VALUES or chars > MAX_YAML_BYTES:
        raise ValueError(f"{source} expands to {size:,} values and {chars:,} characters "
                         f"through its aliases (*name), more than {MAX_YAML_VALUES:,} values "
                         f"or {MAX_YAML_BYTES:,} characters; write the values out instead")
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as error:  # e.g. an integer of thousands of digits
        raise ValueError(f"{source}: a value cannot be read ({str(error)[:200]}); write it "
                         "as a quoted string or a number of ordinary size") from error


def _check_depth(text: str, source: str) -> None:
    """Refuse lists and mappings nested deeper than :data:`MAX_YAML_DEPTH`, read from the
    parser's event stream (no recursion, unlike composing the document)."""
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else "?"
                raise ValueError(f"{source} nests lists and mappings more than "
                                 f"{MAX_YAML_DEPTH} deep (line {line}); a profile or sweep "
                                 "spec needs a few levels: flatten it")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_nodes(node, source: str, where: str, sizes: dict) -> tuple[int, int]:
    """Check one node and everything under it (each node once); returns how many values and
    characters it expands to."""
    import yaml

    if id(node) in sizes:
        return sizes[id(node)]
    where = where if len(where) <= 80 else where[:77] + "..."
    if node.tag not in _PLAIN_TAGS:
        raise ValueError(f"{source}: the value of {where} has the YAML tag {node.tag!r}; only "
                         "plain values (strings, numbers, booleans, null, lists, mappings) are "
                         "accepted. Remove the tag (write a list as [a, b], a mapping as "
                         "{key: value}, a date as a quoted string).")
    if isinstance(node, yaml.MappingNode):
        children = _mapping_children(node, source, where)
    elif isinstance(node, yaml.SequenceNode):
        children = [(item, f"{where}[{k}]") for k, item in enumerate(node.value)]
    else:
        children = []
    size, chars = 1, len(node.value) if isinstance(node, yaml.ScalarNode) else 1
    for child, place in children:
        child_size, child_chars = _check_nodes(child, source, place, sizes)
        size, chars = size + child_size, chars + child_chars
    sizes[id(node)] = (size, chars)
    return size, chars


def _mapping_children(node, source: str, where: str) -> list[tuple[Any, str]]:
    """A mapping node's keys and values with where each is, refusing a key that is a list or
    a mapping and a key written twice."""
    import yaml

    keys, out = set(), []
    for key, value in node.value:
        line = key.start_mark.line + 1
        if not isinstance(key, yaml.ScalarNode):
            raise ValueError(f"{source}: a key in {where} (line {line}) is a list or a "
                             "mapping; keys must be plain names")
        if (key.tag, key.value) in keys:
            raise ValueError(f"{source}: the key {key.value[:80]!r} appears twice in {where} "
                             f"(line {line}); keep one")
        keys.add((key.tag, key.value))
        out += [(key, f"a key in {where}"), (value, repr(key.value))]
    return out
