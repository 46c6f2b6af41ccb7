"""Numbers and findings for a page's prose, stated by the cell that computes them.

A chapter never types a result into its prose: the code cell that computes a result ends
with :func:`say`, which shows the sentence as rendered Markdown under the cell, and the
markdown around it explains what to read in it. The sentence renders the same in the built
book, in JupyterLab, in VS Code and anywhere else a notebook opens (a glue role in a markdown
cell renders only in the built book), and a page run under any profile states what its own
tables show. :func:`verdicts` states a chapter's verdicts the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ..claims.verdicts import ALPHA, permutations_for

__all__ = ["CAUSE_TEXT", "accuracy_sentence", "answer", "cause_sentence", "estimate",
           "listing", "missing_schedule", "permutation_floor", "record_findings", "say",
           "values_line",
           "verdicts"]

#: what a folded result of a solution says until the reader opens it
FOLDED = "The solution's result: open it after your own attempt"


def say(text: str) -> None:
    """Show ``text`` (Markdown: a sentence or a list the run computed) under the cell.

    In a notebook it is a Markdown output, rendered wherever the notebook is open and in the
    built book; in plain Python it is printed. Returns nothing, so that a cell ending with it
    shows the text once.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"say() shows Markdown text, got {text!r}")
    from IPython import get_ipython
    from IPython.display import Markdown, display

    if get_ipython() is None:
        print(text)
    else:
        display(Markdown(text))


def answer(*values: Any) -> None:
    """Show an exercise's solution result: a table (anything with an HTML view, such as a
    data frame) as ``display`` shows it, anything else as ``print`` does (the values joined
    by spaces). In the built book (where the solution sits in a dropdown the reader opens)
    it is shown as it is; anywhere else (JupyterLab, where Run All runs every solution) it is
    folded in an HTML ``<details>`` the reader opens, so that running the notebook gives no
    answer away.
    """
    import html
    import os

    from IPython import get_ipython
    from IPython.display import HTML, display

    from .render import PAGE_ENV

    if not values:
        raise ValueError("answer() shows a result: pass the text or the table to show")
    table = values[0] if len(values) == 1 and hasattr(values[0], "_repr_html_") else None
    if os.environ.get(PAGE_ENV) or get_ipython() is None:
        if table is None:
            print(*values)
        else:
            display(table)
        return
    body = table._repr_html_() if table is not None else \
        f"<pre>{html.escape(' '.join(str(v) for v in values))}</pre>"
    display(HTML(f"<details><summary>{FOLDED}</summary>{body}</details>"))


def listing(items: Iterable[str], none: str = "none", code: bool = True) -> str:
    """``a``, ``b`` and ``c`` (each in code style unless ``code=False``), or ``none``."""
    words = [f"`{x}`" if code else str(x) for x in items]
    if not words:
        return none
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


def values_line(values: Mapping[str, float], digits: int = 2, none: str = "none") -> str:
    """``neuronsim`` 0.35, ``mixedsim`` 0.51, ... for a mapping of measure to value, or
    ``none`` when it is empty."""
    return ", ".join(f"`{k}` {v:.{digits}f}" for k, v in values.items()) or none


def estimate(value: float, low: float | None = None, high: float | None = None,
             digits: int = 3) -> str:
    """A signed estimate with its interval: ``+0.123 [+0.101, +0.145]`` (no interval when
    ``low`` or ``high`` is missing)."""
    shown = f"{value:+.{digits}f}"
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return shown
    return f"{shown} [{low:+.{digits}f}, {high:+.{digits}f}]"


#: :func:`cause_sentence`'s reading of each finding of
#: :func:`analysis_lib.claims.causes.setting_cause`; ``{factor}`` is the setting
#: (``training length``), ``{change}`` what was done to it (``the longer schedule``)
CAUSE_TEXT = {
    "shows either way": "the claim shows both with and without {change}, so {factor} is not "
                        "what it needs",
    "the cause": "the claim shows with {change} and not without it, so {factor} is the cause",
    "a cause": "{change} takes the contradiction away without showing the claim, so {factor} "
               "is a cause; more units would say whether it is the only one",
    "not the cause": "the claim is still contradicted with {change}, so {factor} is not the "
                     "cause",
    "brings the contradiction": "the claim is contradicted with {change} and not without it, "
                                "so {change} brings the contradiction rather than taking it "
                                "away: {factor} is not what hides the claim",
    "no contradiction": "the page's own units do not contradict the claim, so there is no "
                        "cause to name",
    "undecided": "with {change} the units disagree or none is decided, so {factor} is neither "
                 "confirmed nor ruled out as the cause",
}


def cause_sentence(change: pd.DataFrame, *, factor: str, varied: str) -> str:
    """Whether ``factor`` is the cause of a claim that does not show, in a sentence: each
    unit's estimate and verdict with the setting changed (``varied`` names the change, e.g.
    ``the longer schedule``) and as the page has it, then the finding of
    :func:`analysis_lib.claims.causes.setting_cause` on those verdicts. ``change``: a
    table of :func:`~analysis_lib.claims.causes.changes` or
    :func:`~analysis_lib.claims.causes.claim_change`; an empty one is "not measured"."""
    from ..claims.causes import setting_cause

    if not len(change):
        return "not measured: no unit is judged both as the page has it and changed"

    def shown(row, side: str) -> str:
        if f"shown_{side}" in row and isinstance(row[f"shown_{side}"], str):
            return row[f"shown_{side}"]
        if side == "after":
            return estimate(row["after"], row.get("low"), row.get("high"))
        return estimate(row["before"])

    units = "; ".join(
        f"{row['unit']}: {shown(row, 'after')}, {row['verdict_after']} (as the page has it: "
        f"{shown(row, 'before')}, {row['verdict_before']})" for _, row in change.iterrows())
    finding = setting_cause(change.verdict_before, change.verdict_after)
    reading = CAUSE_TEXT[finding].format(factor=factor, change=varied)
    return f"With {varied}, {units}: {reading}."


def missing_schedule(profile: str) -> str:
    """What a page says where the cache holds no runs of another profile's schedule (or,
    for ``"none"``, where the page was asked to read none: a build of that profile itself)."""
    if profile == "none":
        return "not read: `longer_profile` is `none`"
    return (f"not measured: the cache holds no runs of the `{profile}` profile's schedule "
            f"(`python -m analysis_lib book --profile {profile}` trains them)")


def accuracy_sentence(table: pd.DataFrame) -> str:
    """An accuracy table (:func:`analysis_lib.claims.tables.accuracy_table`) against
    the frozen head, in a sentence."""
    return "; ".join(
        f"{r.model} on {r.task}, {r.steps} steps: {r['mean']:.3f} [{r.low:.3f}, {r.high:.3f}] "
        f"against the frozen head's {r.frozen_head:.3f} ({r.against_frozen})"
        for _, r in table.iterrows())


class _Rows:
    """A findings table as JSON text for the notebook's record (nothing is shown)."""

    def __init__(self, rows: list[dict[str, Any]]):
        self.rows = rows

    def __repr__(self) -> str:
        import json

        return json.dumps({"rows": self.rows})


def record_findings(table: pd.DataFrame, part: str = "") -> pd.DataFrame:
    """Keep a chapter's findings table (:func:`analysis_lib.claims.tables.table`) in its
    executed notebook, shown nowhere, for the book's findings page and ``python -m
    analysis_lib findings`` (:mod:`analysis_lib.book.findings`); ``part`` names a chapter's
    second table. Returns what the cell shows: the table's columns a reader reads beside
    the text (:data:`SHOWN`, indexed by claim id); the findings page has every column."""
    from myst_nb import glue as _glue

    from .findings import RECORD

    columns = [c for c in ("what this run shows", "verdict", "how") if c in table.columns]
    units = table.attrs.get("units", {})
    rows = [{"claim id": str(claim_id), **{c: str(row[c]) for c in columns},
             "units": units.get(str(claim_id), [])}
            for claim_id, row in table[columns].iterrows()]
    _glue(f"{RECORD}-{part}" if part else RECORD, _Rows(rows), display=False)
    return table[[c for c in SHOWN if c in table.columns]]


#: the columns of a chapter's findings table its page shows (the rest, the statistic, the
#: paper's effect, the control and how a verdict was reached, are on the findings page)
SHOWN = ("claim", "what the paper reports", "what this run shows", "verdict")


def verdicts(findings: pd.DataFrame) -> None:
    """State every claim of a findings table under the cell, one line each
    (:func:`analysis_lib.claims.tables.verdict_lines`: the verdict, the claim, its id and
    what this run shows); a chapter's summary reads them."""
    from ..claims.tables import verdict_lines

    say("\n".join(verdict_lines(findings)))


def permutation_floor(n_perm: int, tests: int, alpha: float = ALPHA) -> str:
    """A sentence on what ``n_perm`` permutations can show over ``tests`` Holm-adjusted
    tests (layers, tasks): the smallest p-value, and the permutations needed to reach
    ``alpha``."""
    floor, needed = 1 / (n_perm + 1), permutations_for(alpha, tests)
    enough = "enough" if n_perm >= needed else "too few"
    return (f"smallest possible p with {n_perm} permutations: {floor:.4f}; Holm over "
            f"{tests} tests needs at least {needed} to reach {alpha} ({enough} here)")
