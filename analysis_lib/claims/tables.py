"""Findings tables: the verdicts of a chapter's claims as one row per claim, and the ways the
book reads them (side by side for two settings, as lines for the prose, one claim's
outcome); and the mean with its t interval over seeds that every table of results states
(:func:`seed_interval`, :func:`summarize`), computed as a claim's evidence is: a grid's
accuracy against its frozen head (:func:`accuracy_table`), the block and band fits of
Phang et al.'s views over seeds (:func:`structure_summary`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..similarity import structure
from . import get
from .claim import Evidence, Level, Verdict
from .training_gate import ABOVE_FROZEN_HEAD


class _Runs(Protocol):
    """Runs of a grid (:class:`analysis_lib.training.grid.Runs`): one row per run, and a
    run's record by (model, task, seed)."""

    @property
    def frame(self) -> pd.DataFrame: ...

    def get(self, model: str, task: str, seed: int) -> Any: ...


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


def summarize(frame: pd.DataFrame, by: Sequence[str], value: str, *,
              also: Mapping[str, str] | None = None) -> pd.DataFrame:
    """``mean``, ``low``, ``high`` (:func:`seed_interval`) and ``n`` (the values it rests
    on) of ``value`` for each group of ``by``, in the frame's order; ``also`` adds columns
    read from the same groups, each by ``"mean"`` or ``"first"`` (a column the group
    shares, such as its majority baseline)."""
    also = dict(also or {})
    for column, how in also.items():
        if how not in ("mean", "first"):
            raise ValueError(f"also[{column!r}]: {how!r} is not a reading; use 'mean' or "
                             "'first'")
    out = []
    for key, group in frame.groupby(list(by), sort=False):
        mean, low, high = seed_interval(group[value])
        key = key if isinstance(key, tuple) else (key,)
        row = {**dict(zip(by, key)), "mean": mean, "low": low, "high": high,
               "n": int(group[value].notna().sum())}
        for column, how in also.items():
            row[column] = group[column].mean() if how == "mean" else group[column].iloc[0]
        out.append(row)
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


def accuracy_table(runs: _Runs, frozen_head: pd.DataFrame) -> pd.DataFrame:
    """Per (model, task) of a grid (:class:`analysis_lib.training.grid.Runs`): test
    accuracy, mean over seeds with a 95% t interval (``mean``, ``low``, ``high``, ``n``),
    the optimizer steps of each run (``steps``), the majority baseline, the frozen head
    (``frozen_head``: a frame with columns ``model, task, frozen_head``, such as
    :func:`analysis_lib.collect.frozen_head` gives), and ``against_frozen``: "above" when
    the whole interval lies above the frozen head, "below" when it lies below it,
    "overlaps" otherwise. The claims read a (model, task)'s fine-tuned models only where
    their mean clears the frozen head by
    :data:`~analysis_lib.claims.training_gate.ABOVE_FROZEN_HEAD` (:func:`adequacy`)."""
    table = summarize(runs.frame, ["model", "task"], "accuracy")
    first = runs.frame.groupby(["model", "task"], sort=False).first()
    keys = list(zip(table.model, table.task))
    table["steps"] = [runs.get(m, t, int(first.loc[(m, t), "seed"])
                               ).record["history"][-1]["steps"] for m, t in keys]
    table["majority"] = [float(first.loc[key, "majority"]) for key in keys]
    table = table.merge(frozen_head[["model", "task", "frozen_head"]], on=["model", "task"])
    table["against_frozen"] = np.select(
        [table["low"] > table["frozen_head"], table["high"] < table["frozen_head"]],
        ["above", "below"], "overlaps")
    return table


def adequacy(runs: _Runs, frozen_head: pd.DataFrame) -> dict[str, Level]:
    """The adequacy line of each (model, task) of a grid's runs, by ``"model, task"``: the
    fine-tuned models' mean test accuracy (:func:`accuracy_table`) beside the head on the
    frozen encoder (``frozen_head``, as :func:`analysis_lib.collect.frozen_head` gives it),
    which it must clear by :data:`~analysis_lib.claims.training_gate.ABOVE_FROZEN_HEAD` for
    a claim about fine-tuning to read them. Pass the lines to
    :func:`~analysis_lib.claims.verdicts.judge` as the result
    :data:`~analysis_lib.claims.training_gate.ADEQUACY`."""
    return adequacy_lines(accuracy_table(runs, frozen_head))


def adequacy_lines(scores: pd.DataFrame) -> dict[str, Level]:
    """:func:`adequacy` from an :func:`accuracy_table` (its ``model``, ``task``, ``mean``,
    ``n`` and ``frozen_head``)."""
    missing = {"model", "task", "mean", "n", "frozen_head"} - set(scores.columns)
    if missing:
        raise ValueError(f"adequacy reads an accuracy table (accuracy_table(runs, heads)); "
                         f"this one lacks the columns {sorted(missing)}")
    return {f"{row.model}, {row.task}": Level(
                f"{row.model} fine-tuned on {row.task} (test accuracy, "
                + (f"mean over {row.n} seeds" if row.n > 1 else "one run")
                + ", against the head on its frozen encoder)",
                [row.mean], row.frozen_head, ABOVE_FROZEN_HEAD, kind="adequacy")
            for row in scores.itertuples()}


def structure_summary(views: Mapping[tuple[str, str, str], Mapping[str, Sequence[np.ndarray]]]
                      ) -> pd.DataFrame:
    """Block and band R^2 of every view: means with t intervals over its matrices (seeds or
    seed pairs), one row per (model, task, pooling, view)."""
    rows = []
    for (model, task, pooling), view in views.items():
        table = structure.structure_table(view)
        for name, group in table.groupby("view", sort=False):
            row: dict[str, Any] = {"model": model, "task": task, "pooling": pooling,
                                   "view": name, "matrices": len(group)}
            for column in ("block2_r2", "band_r2", "block3_r2", "within", "between"):
                mean, low, high = seed_interval(group[column])
                row[column] = mean
                if column in ("block2_r2", "band_r2"):  # an R^2 is at most 1
                    row[f"{column}_low"], row[f"{column}_high"] = low, min(high, 1.0)
            row["block2_starts"] = group["block2_starts"].iloc[0]
            rows.append(row)
    return pd.DataFrame(rows)
