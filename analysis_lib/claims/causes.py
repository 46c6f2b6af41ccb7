"""Is one setting (training length, depth, width, ...) the cause of a claim that does not
show? The same units judged with the setting as a page has it and changed, compared by
their verdicts (:func:`setting_cause`), never by raw statistics, so that a change that moves
an estimate within its noise names no cause. Every chapter asks the question through this
module; Phang et al.'s UNTUNED claim (:func:`~analysis_lib.claims.papers.phang.untuned`) is
asked it for three factors: the depth dropped (:func:`untuned_by_depth`,
:func:`depth_change`), the pooling its head reads (:func:`untuned_by_pooling`,
:func:`pooling_change`) and the schedule (:func:`schedule_change`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .claim import MIXED, NOT_MEASURED, VERDICTS, Claim, Evidence, claim_of
from .papers import phang
from .tables import outcome_of
from .verdicts import decide

#: what :func:`setting_cause` finds about one setting (training length, depth, width...) as
#: the cause of a claim that does not show, and what each finding means
CAUSES = {
    "shows either way": "the claim shows with the setting as the page has it and changed",
    "the cause": "the claim does not show as the page has it and shows with it changed",
    "a cause": "changing it takes a contradiction away without showing the claim",
    "not the cause": "the claim is contradicted with it changed, as it was without",
    "brings the contradiction": "the claim is contradicted with it changed and not without "
                                "it: the change brings the contradiction",
    "no contradiction": "the page's own units do not contradict the claim: nothing to explain",
    "undecided": "with it changed, the units disagree or none is decided",
}
_SHOWN = frozenset({"holds", "equivalent"})


def setting_cause(before: Iterable[str], after: Iterable[str]) -> str:
    """Is one setting the cause of a claim that does not show? A key of :data:`CAUSES`.

    ``before`` and ``after`` are the claim's verdicts (:data:`VERDICTS`: ``mixed`` holds
    a contradiction, ``not measured`` shows nothing; one per unit: a
    task, a model, the claim as a whole) with the setting as the page has it and changed
    (trained longer, cut to the paper's share of depth, made wider). Verdicts, not raw
    statistics, are compared, so a change that moves an estimate within its noise names no
    cause. Every chapter asks the question through this function.
    """
    before, after = [str(v) for v in before], [str(v) for v in after]
    for verdict in before + after:
        if verdict not in VERDICTS:
            raise ValueError(f"{verdict!r} is not a verdict; verdicts are {list(VERDICTS)}")
    if not before or not after:
        raise ValueError("setting_cause needs at least one verdict before and one after")
    against = {"opposite", MIXED}  # a unit, or some units, contradict the claim
    if all(v in _SHOWN for v in after):
        return "shows either way" if all(v in _SHOWN for v in before) else "the cause"
    if all(v == "opposite" for v in after):
        judged = set(before) - {NOT_MEASURED}
        return "brings the contradiction" if judged and not against & judged else \
            "not the cause"
    if not against & set(before):
        return "no contradiction"
    if not against & set(after):
        return "a cause"
    return "undecided"


def changes(before: pd.DataFrame, after: pd.DataFrame, on: Sequence[str], estimate: str
            ) -> pd.DataFrame:
    """Units judged with a setting as the page has it (``before``) and changed (``after``),
    matched on the columns ``on``; both frames hold ``estimate``, ``low``, ``high`` and
    ``verdict`` per unit. One row per unit: ``unit`` (its ``on`` values), ``before``,
    ``verdict_before``, ``after``, ``low``, ``high`` (the changed setting's interval) and
    ``verdict_after``; the input of :func:`setting_cause`."""
    if not len(before) or not len(after):
        return pd.DataFrame(columns=["unit", "before", "verdict_before", "after", "low",
                                     "high", "verdict_after"])
    both = before.merge(after, on=list(on), suffixes=("_before", "_after"))
    return pd.DataFrame({
        "unit": both[list(on)].astype(str).agg(", ".join, axis=1),
        "before": both[f"{estimate}_before"], "verdict_before": both.verdict_before,
        "after": both[f"{estimate}_after"], "low": both.low_after, "high": both.high_after,
        "verdict_after": both.verdict_after})


def claim_change(before: pd.DataFrame, after: pd.DataFrame, claim_id: str) -> pd.DataFrame:
    """One claim judged in two findings tables
    (:func:`~analysis_lib.claims.tables.table`: the page's runs and the runs with one
    setting changed), as :func:`changes`' one-row table with the findings' own
    ``what this run shows`` in place of numbers (``shown_before``, ``shown_after``)."""
    return pd.DataFrame([{
        "unit": claim_id, "verdict_before": outcome_of(before, claim_id),
        "verdict_after": outcome_of(after, claim_id),
        "shown_before": str(before.loc[claim_id, "what this run shows"]),
        "shown_after": str(after.loc[claim_id, "what this run shows"])}])


def by_setting(claim: Claim, evidence_by: Mapping[Any, Sequence[Evidence]], column: str,
               statistic: str) -> pd.DataFrame:
    """One claim judged by the one rule on its own at each setting (a training step, a
    width, ...): ``evidence_by`` maps each setting to the claim's evidence there (one unit),
    in the order the table keeps. One row per setting: the setting (``column``), the unit's
    estimate (``statistic``), ``low``, ``high``, ``n`` (the values it rests on) and the
    ``verdict``; :func:`first_to_last` reads it."""
    rows = []
    for setting, evidence in evidence_by.items():
        verdict = decide(claim, evidence)
        unit = verdict.units.iloc[0] if len(verdict.units) else {}
        n = unit.get("n", np.nan)
        rows.append({column: setting,
                     **{name: float(unit.get(field, np.nan)) for name, field in
                        ((statistic, "estimate"), ("low", "low"), ("high", "high"))},
                     "n": int(n) if pd.notna(n) else 0, "verdict": verdict.outcome})
    return pd.DataFrame(rows)


def first_to_last(by_setting_table: pd.DataFrame, statistic: str) -> pd.DataFrame:
    """:func:`by_setting`'s first and last settings (the earliest checkpoint against the
    trained models; the base width against the wider models) as :func:`changes`, whose
    verdicts say whether that setting is the cause of a claim that does not show."""
    column = by_setting_table.columns[0]
    first, last = by_setting_table.iloc[[0]], by_setting_table.iloc[[-1]]
    unit = f"{column} {first[column].iloc[0]} to {last[column].iloc[0]}"
    return changes(first.assign(unit=unit), last.assign(unit=unit), ["unit"], statistic)


# ----------------------------------------------- the UNTUNED claim with one factor changed


def untuned_by_depth(scores: pd.DataFrame) -> pd.DataFrame:
    """The depth ablation of the claim of ``phang.untuned``: per task and number of top layers
    dropped (1 .. L-1), the full model's accuracy minus UNTUNED's, over seeds, judged by the claim's
    rule, beside the share of the model's depth dropped. Phang et al. drop the top four of
    RoBERTa-base's twelve layers (a third); in a 6-layer model the same share is two layers, the
    claim's own reading, and in a 12-layer model four, so a verdict at that row says what the model
    does at the paper's share of its depth. ``phang_share`` marks the row closest to
    :data:`~analysis_lib.claims.papers.phang.PHANG_SHARE` (at least one layer)."""
    n_layers = int(scores.layer.max()) if len(scores) else 0
    rows = []
    for (model, task), group in scores.groupby(["model", "task"], sort=False):
        for dropped in range(1, n_layers):
            verdict = decide(claim_of(phang.untuned), phang.per_seed(
                group, phang.full_minus("UNTUNED", dropped), "full - UNTUNED"))
            unit = verdict.units.iloc[0]
            rows.append({"model": model, "task": task, "dropped": dropped,
                         "share": dropped / n_layers, "full - UNTUNED": float(unit.estimate),
                         "low": float(unit.low), "high": float(unit.high),
                         "verdict": verdict.outcome})
    out = pd.DataFrame(rows)
    if len(out):
        out["phang_share"] = out.dropped == max(1, round(n_layers * phang.PHANG_SHARE))
    return out


def _at_claim(by_depth: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`untuned_by_depth` that the claim of ``phang.untuned`` reads: two layers
    below the top (or as many as the model can drop)."""
    return by_depth[by_depth.dropped == min(2, int(by_depth.dropped.max()))]


def depth_change(by_depth: pd.DataFrame) -> pd.DataFrame:
    """The claim of ``phang.untuned``'s units as the page reads them (two layers below the
    top) and at Phang et al.'s share of depth
    (:data:`~analysis_lib.claims.papers.phang.PHANG_SHARE`), per (model, task):
    :func:`changes`, whose verdicts say whether this model's depth is the cause of a claim
    that does not show. Empty for a model of one transformer layer (no layer to drop)."""
    if not len(by_depth):
        return changes(by_depth, by_depth, ["model", "task"], "full - UNTUNED")
    return changes(_at_claim(by_depth), by_depth[by_depth.phang_share],
                   ["model", "task"], "full - UNTUNED")


def untuned_by_pooling(pooled: pd.DataFrame) -> pd.DataFrame:
    """The claim of ``phang.untuned``'s statistic on
    :func:`~analysis_lib.readout.pooling_scores`: per (model, task,
    pooling), the probe's top-layer accuracy minus its accuracy two layers below (or as many as the
    model can drop), over seeds, judged by the claim's rule."""
    rows = []
    for (model, task, pooling), group in pooled.groupby(["model", "task", "pooling"],
                                                        sort=False):
        top = int(group.layer.max())
        below = max(1, top - 2)
        wide = group.pivot_table(index="seed", columns="layer", values="accuracy")
        verdict = decide(claim_of(phang.untuned), [Evidence.from_values(
            f"{model}, {task}, {pooling}", wide[top] - wide[below])])
        unit = verdict.units.iloc[0]
        rows.append({"model": model, "task": task, "pooling": pooling, "layer": below,
                     "top - UNTUNED": float(unit.estimate), "low": float(unit.low),
                     "high": float(unit.high), "verdict": verdict.outcome})
    return pd.DataFrame(rows)


def pooling_change(by_pooling: pd.DataFrame) -> pd.DataFrame:
    """:func:`untuned_by_pooling`'s units read from the first token and from the mean over
    the tokens, per (model, task): :func:`changes`, whose verdicts say whether reading the
    first token is the cause of a claim that does not show."""
    first = by_pooling[by_pooling.pooling == "first"] if len(by_pooling) else by_pooling
    mean = by_pooling[by_pooling.pooling == "mean"] if len(by_pooling) else by_pooling
    return changes(first, mean, ["model", "task"], "top - UNTUNED")


def schedule_change(by_depth: pd.DataFrame, longer: pd.DataFrame) -> pd.DataFrame:
    """The claim of ``phang.untuned``'s units (two layers below the top) with a page's runs
    (``by_depth``) and with a longer schedule's (``longer``, both :func:`untuned_by_depth`),
    per (model, task): :func:`changes`, whose verdicts say whether the short run is the
    cause of a claim that does not show."""
    return changes(_at_claim(by_depth), _at_claim(longer),
                   ["model", "task"], "full - UNTUNED")
