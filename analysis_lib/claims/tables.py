"""Findings tables: the verdicts of a chapter's claims as one row per claim, and the ways the
book reads them (side by side for two settings, as lines for the prose, one claim's
outcome); and the mean with its t interval over seeds that every table of results states
(:func:`seed_interval`, :func:`summarize`), computed as a claim's evidence is."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from . import get
from .claim import Evidence, Verdict


def _units(verdict: Verdict) -> list[list]:
    """A verdict's units as ``[unit, estimate, low, high]`` (None where not a number)."""
    def number(x: object) -> float | None:
        value = float(x)  # type: ignore[arg-type]
        return round(value, 6) if math.isfinite(value) else None

    return [[str(r.unit), number(r.estimate), number(r.low), number(r.high)]
            for r in verdict.units.itertuples()]


def table(verdicts: Sequence[Verdict]) -> pd.DataFrame:
    """A findings table: one row per claim, indexed by claim id. Its ``attrs["units"]``
    keeps each claim's units as numbers (:func:`_units`), for the findings page's chart."""
    rows = []
    for v in verdicts:
        rows.append({"claim id": v.claim.id, "claim": v.claim.claim,
                     "paper": f"{v.claim.paper} {v.claim.where}",
                     "what the paper reports": v.claim.reported,
                     "statistic": v.claim.statistic,
                     "smallest effect": v.claim.smallest_effect,
                     "the paper's effect": v.claim.paper_effect,
                     "control": f"{v.claim.control[0]}: {v.claim.control[1]}",
                     "what this run shows": v.shown,
                     "verdict": v.outcome, "how": v.reason})
    frame = pd.DataFrame(rows)
    frame = frame.set_index("claim id") if len(frame) else frame
    frame.attrs["units"] = {v.claim.id: _units(v) for v in verdicts}
    return frame


def side_by_side(tables: Mapping[str, pd.DataFrame], claim_ids: Sequence[str]) -> pd.DataFrame:
    """The same claims judged in several settings (``{"default schedule": findings, ...}``,
    each a :func:`table`), one row per claim: what each setting shows and its verdict, in
    columns named after the setting. A claim a table lacks is an error."""
    rows = []
    for cid in claim_ids:
        row = {"claim id": cid, "claim": get(cid).claim}
        for name, found in tables.items():
            outcome_of(found, cid)
            row[f"{name}: shows"] = found.loc[cid, "what this run shows"]
            row[f"{name}: verdict"] = found.loc[cid, "verdict"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("claim id")


def verdict_lines(findings: pd.DataFrame, claim_ids: Sequence[str] | None = None) -> list[str]:
    """One line per claim of a findings table (every claim it holds, in its order, or those
    named, in the order named): the verdict, the claim and what this run shows (the
    estimates with their intervals, or why nothing was measured); a named claim the table
    lacks is an error, not a silent omission."""
    ids = list(findings.index) if claim_ids is None else claim_ids
    return [f"- {outcome_of(findings, cid)}: {findings.loc[cid, 'claim']} ({cid}); this run: "
            f"{findings.loc[cid, 'what this run shows']}" for cid in ids]


def outcome_of(findings: pd.DataFrame, claim_id: str) -> str:
    """The verdict of one claim in a findings table, by id (an unknown id is an error)."""
    get(claim_id)
    if claim_id not in findings.index:
        raise KeyError(f"the findings table holds no claim {claim_id!r}; it holds "
                       f"{list(findings.index)}")
    return str(findings.loc[claim_id, "verdict"])


def seed_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and the t interval over seeds (:meth:`~.claim.Evidence.interval` of
    :meth:`~.claim.Evidence.from_values`): ``(mean, low, high)``; NaN values are left
    out, and one value has no interval (NaN bounds: no spread to estimate)."""
    evidence = Evidence.from_values("seeds", values)
    low, high = evidence.interval(1 - level)
    return evidence.estimate, float(low), float(high)


def summarize(frame: pd.DataFrame, by: Sequence[str], value: str) -> pd.DataFrame:
    """``mean``, ``low``, ``high`` (:func:`seed_interval`) of ``value`` for each group."""
    out = []
    for key, group in frame.groupby(list(by), sort=False):
        mean, low, high = seed_interval(group[value])
        key = key if isinstance(key, tuple) else (key,)
        out.append({**dict(zip(by, key)), "mean": mean, "low": low, "high": high,
                    "n": int(group[value].notna().sum())})
    return pd.DataFrame(out)


def spread_table(frame: pd.DataFrame, by: Sequence[str] = ("method", "layer"),
                 value: str = "test", count: str = "pairs") -> pd.DataFrame:
    """Per group of ``by`` (in the frame's order): the median and quartiles (``q1``, ``q3``)
    of ``value``, its mean with the t interval (:func:`seed_interval`: ``mean``, ``low``,
    ``high``) and the group's rows (``count``). The median and quartiles show the spread of
    the values themselves, the interval how well their mean is known."""
    rows = []
    for key, group in frame.groupby(list(by), sort=False):
        x = group[value].to_numpy()
        mean, low, high = seed_interval(x)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), "median": float(np.median(x)),
                     "q1": float(np.quantile(x, 0.25)), "q3": float(np.quantile(x, 0.75)),
                     "mean": mean, "low": low, "high": high, count: len(x)})
    return pd.DataFrame(rows)


def interval_columns(frame: pd.DataFrame, by: str = "method",
                     parts: Sequence[str] = ("train", "test")) -> pd.DataFrame:
    """Per value of ``by``: each column of ``parts`` as its mean (:func:`seed_interval`) and
    the interval beside it as text (``<part>_interval``, empty where no mean), and the
    group's first non-empty ``note`` (why a row has no numbers)."""
    rows = []
    for name, group in frame.groupby(by, sort=False):
        row = {by: name}
        for part in parts:
            mean, low, high = seed_interval(group[part])
            row[part] = mean
            row[f"{part}_interval"] = f"[{low:.4f}, {high:.4f}]" if np.isfinite(mean) else ""
        row["note"] = next((n for n in group.get("note", []) if n), "")
        rows.append(row)
    return pd.DataFrame(rows)

