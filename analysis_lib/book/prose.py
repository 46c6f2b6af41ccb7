"""Numbers and findings for a page's prose, computed by the run and glued into the text.

A chapter never types a result into its prose: a code cell computes it and :func:`glue`
stores it under a name (myst-nb's ``glue``), and the markdown refers to it with
``{glue:md}`name``` (text) or ``{glue:text}`name:.3f``` (a number). A page built under any
profile therefore states what its own tables show.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["glue", "listing", "values_line"]


def glue(name: str, value: Any) -> Any:
    """Store ``value`` for the prose under ``name`` (shown nowhere else); return it.

    Strings are stored as markdown (for ``{glue:md}``), numbers as they are (for
    ``{glue:text}`` with a format, e.g. ``{glue:text}`name:.2f```).
    """
    from IPython.display import Markdown
    from myst_nb import glue as _glue

    if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"a glue name uses letters, digits, '_' and '-', got {name!r}")
    stored = Markdown(value) if isinstance(value, str) else value
    _glue(name, stored, display=False)
    return value


def listing(items: Iterable[str], none: str = "none", code: bool = True) -> str:
    """``a``, ``b`` and ``c`` (each in code style unless ``code=False``), or ``none``."""
    words = [f"`{x}`" if code else str(x) for x in items]
    if not words:
        return none
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


def values_line(values: Mapping[str, float], digits: int = 2) -> str:
    """``neuronsim`` 0.35, ``mixedsim`` 0.51, ... for a mapping of measure to value."""
    return ", ".join(f"`{k}` {v:.{digits}f}" for k, v in values.items())
