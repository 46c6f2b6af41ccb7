"""Notebook parameters, declared once: the notebook's ``parameters`` cell.

Each line of a study notebook's ``parameters`` cell declares one parameter with its type, its
default and a comment that explains it and may end with rules in square brackets::

    n_sentences: int = 500  # sentences sampled from each corpus [min: 5; max: 50000]
    models: list = ["minilm"]  # model names [model; min: 1]

A long comment continues on the comment-only lines right below its parameter
(:func:`logical_lines`), so that the cell fits a reader's screen; ``papermill
--help-notebook`` shows its first line.

Rules are ``key: value`` pairs separated by ``;`` (no ``=``, which papermill's
``--help-notebook`` would not parse): ``min`` / ``max`` (a number, or a list's length),
``choices`` (allowed values, or allowed items of a list), ``items`` (the type of a list's
items), ``model`` (every item a model name :func:`analysis_lib.models.check_name` accepts)
and ``corpus`` (a corpus name).
:func:`declared` reads them; :func:`check` validates values against them
(:func:`analysis_lib.rules.validate`), in the notebook (right after its parameters)
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

from ..rules import TYPES, Parameter, ParameterError, validate
from ..runtime.plain_yaml import MAX_YAML_VALUES, read_yaml

__all__ = ["RULES", "MAX_YAML_VALUES", "Parameter", "ParameterError", "check", "declared",
           "logical_lines", "notebook_path", "parse_cell", "read_yaml", "validate"]

_LINE = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s*:\s*(?P<type>\w+)\s*=\s*(?P<rest>.*)$")
_RULES = re.compile(r"\[(?P<rules>[^\[\]]*(?:\[[^\]]*\][^\[\]]*)*)\]\s*$")


#: the rules a parameter's comment may declare in ``[...]``: sizes (``min``, ``max``: a
#: number's value or a list's length), each item's type, range and allowed values (``items``,
#: ``item_min``, ``item_max``, ``choices``), names that must resolve (``model``, ``corpus``,
#: ``task``), for a dict its allowed keys (``keys``; a dict's other rules apply to its values),
#: for layer counts the model they must fit (``depth: 'finetune'``: every item at most
#: the number of transformer layers of the first model that parameter names), a mapping
#: of fine-tuning settings (``grid``: each key a field of
#: :class:`analysis_lib.training.grid.FinetuneGrid`, checked against that field's rules),
#: and for a random model's sizes their ranges and consistency (``sizes``:
#: :func:`analysis_lib.models.random_init.size_problems`). Every number must be finite, and a
#: list holds no item twice. Three rules check nothing and say what the work grows with, for
#: the projection of a run's time (:mod:`analysis_lib.book.projection`): ``rows`` (the
#: inputs every extraction, measure and map works on), ``pairs`` (models compared pair by
#: pair) and ``resamples``.
RULES = ("min", "max", "choices", "items", "item_min", "item_max", "model", "corpus", "task",
         "keys", "depth", "sizes", "grid", "rows", "pairs", "resamples")


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
            from ..training.grid import FinetuneGrid

            rules["fields"] = FinetuneGrid.parameters()
        else:
            rules[key] = ast.literal_eval(value.strip()) if value else True
    return rules


def logical_lines(source: str) -> list[str]:
    """The lines of a ``parameters`` cell with each parameter's comment whole: comment-only
    lines right after a parameter's line continue its comment (a long comment wraps, so
    that no line runs past the reader's screen), and are joined onto it."""
    out: list[str] = []
    for line in source.splitlines():
        text = line.strip()
        owner = _LINE.match(out[-1].strip()) if out else None
        if text.startswith("#") and owner:
            more = text.lstrip("#").strip()
            joined = _split_comment(owner["rest"])[1]
            out[-1] = f"{out[-1].rstrip()} {more}" if joined else f"{out[-1].rstrip()}  # {more}"
            continue
        out.append(line)
    return out


def parse_cell(source: str) -> dict[str, Parameter]:
    """The parameters declared by the source of a ``parameters`` cell."""
    out: dict[str, Parameter] = {}
    for line in logical_lines(source):
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
