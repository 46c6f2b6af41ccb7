"""Numbers and findings for a page's prose, computed by the run and glued into the text.

A chapter never types a result into its prose: a code cell computes it and :func:`glue`
stores it under a name (myst-nb's ``glue``), and the markdown refers to it with
``{glue:md}`name``` (text) or ``{glue:text}`name:.3f``` (a number). A page built under any
profile therefore states what its own tables show.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

__all__ = ["CAUSE_TEXT", "accuracy_sentence", "cause_sentence", "estimate", "glue", "listing",
           "missing_schedule", "record_findings", "values_line", "verdict"]


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


def estimate(value: float, low: float | None = None, high: float | None = None,
             digits: int = 3) -> str:
    """A signed estimate with its interval: ``+0.123 [+0.101, +0.145]`` (no interval when
    ``low`` or ``high`` is missing)."""
    shown = f"{value:+.{digits}f}"
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return shown
    return f"{shown} [{low:+.{digits}f}, {high:+.{digits}f}]"


#: :func:`cause_sentence`'s reading of each finding of
#: :func:`analysis_lib.studies.causes.setting_cause`; ``{factor}`` is the setting
#: (``training length``), ``{change}`` what was done to it (``the longer schedule``)
CAUSE_TEXT = {
    "shows either way": "the claim shows both with and without {change}, so {factor} is not "
                        "what it needs",
    "the cause": "the claim shows with {change} and not without it, so {factor} is the cause",
    "a cause": "{change} takes the contradiction away without showing the claim, so {factor} "
               "is a cause; more units would say whether it is the only one",
    "not the cause": "the claim is still contradicted with {change}, so {factor} is not the "
                     "cause",
    "no contradiction": "the page's own units do not contradict the claim, so there is no "
                        "cause to name",
    "undecided": "with {change} the units disagree or none is decided, so {factor} is neither "
                 "confirmed nor ruled out as the cause",
}


def cause_sentence(change: pd.DataFrame, *, factor: str, varied: str) -> str:
    """Whether ``factor`` is the cause of a claim that does not show, in a sentence: each
    unit's estimate and verdict with the setting changed (``varied`` names the change, e.g.
    ``the longer schedule``) and as the page has it, then the finding of
    :func:`analysis_lib.studies.causes.setting_cause` on those verdicts. ``change``: a
    table of :func:`~analysis_lib.studies.causes.changes` or
    :func:`~analysis_lib.studies.causes.claim_change`; an empty one is "not measured"."""
    from ..studies.causes import setting_cause

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
    """An accuracy table (:func:`analysis_lib.studies.finetuning.accuracy_table`) against
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
    """Keep a chapter's findings table (:func:`analysis_lib.studies.tables.table`) in its
    executed notebook, shown nowhere, for the book's findings page and ``python -m
    analysis_lib findings`` (:mod:`analysis_lib.book.findings`); ``part`` names a chapter's
    second table. Returns the table."""
    from myst_nb import glue as _glue

    from .findings import RECORD

    columns = [c for c in ("what this run shows", "verdict", "how") if c in table.columns]
    units = table.attrs.get("units", {})
    rows = [{"claim id": str(claim_id), **{c: str(row[c]) for c in columns},
             "units": units.get(str(claim_id), [])}
            for claim_id, row in table[columns].iterrows()]
    _glue(f"{RECORD}-{part}" if part else RECORD, _Rows(rows), display=False)
    return table


def glue_verdicts(findings: pd.DataFrame) -> None:
    """Glue every claim's :func:`verdict` of a findings table for the prose, each under
    ``verdict-`` and its claim id (``{glue:md}`verdict-wu-within-model```). Returns
    nothing, so that a cell ending with it shows nothing."""
    for claim_id in findings.index:
        glue(f"verdict-{claim_id}", verdict(findings, str(claim_id)))


def glue_not_measured(claim_ids: Iterable[str], reason: str) -> None:
    """Glue claims that a run does not measure as such, with ``reason``, under the names
    :func:`glue_verdicts` uses."""
    from ..studies.tables import table
    from ..studies.verdicts import not_measured

    glue_verdicts(table([not_measured(claim_id, reason) for claim_id in claim_ids]))


def verdict(findings: pd.DataFrame, claim_id: str) -> str:
    """A claim's verdict in bold with what this run shows, for a chapter's summary:
    ``**holds** (this run: +0.21 [+0.18, +0.24])``."""
    from ..studies.tables import outcome_of

    return (f"**{outcome_of(findings, claim_id)}** (this run: "
            f"{findings.loc[claim_id, 'what this run shows']})")
