"""Is one setting (training length, depth, width, ...) the cause of a claim that does not
show? The same units judged with the setting as a page has it and changed, compared by
their verdicts (:func:`setting_cause`), never by raw statistics, so that a change that moves
an estimate within its noise names no cause. Every chapter asks the question through this
module: a claim's own evidence function computed at each setting (a keyword argument with a
default is a setting, :attr:`~analysis_lib.claims.claim.Claim.reads`), judged unit by unit
(:func:`by_unit`) or as one unit (:func:`by_setting`), and two settings' units compared
(:func:`changes`, :func:`first_to_last`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .claim import MIXED, NOT_MEASURED, VERDICTS, Claim, Evidence
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
        rows.append({column: setting, **_judged(unit, statistic, verdict.outcome)})
    return pd.DataFrame(rows)


def _judged(unit, statistic: str, outcome: str) -> dict[str, Any]:
    """One judged unit's row (a row of a verdict's units, or {} for none): its estimate
    named ``statistic``, ``low``, ``high``, ``n`` and the ``verdict``."""
    n = unit.get("n", np.nan)
    return {**{name: float(unit.get(field, np.nan)) for name, field in
               ((statistic, "estimate"), ("low", "low"), ("high", "high"))},
            "n": int(n) if pd.notna(n) else 0, "verdict": outcome}


def by_unit(claim: Claim, evidence_by: Mapping[Any, Sequence[Evidence]], column: str,
            statistic: str) -> pd.DataFrame:
    """One claim judged at each setting (layers dropped, the vector a head reads, ...), each
    unit of its evidence on its own, as the claim judges a unit: ``evidence_by`` maps each
    setting to the claim's evidence there (its evidence function called with the setting),
    in the order the table keeps. One row per setting and unit: the setting (``column``),
    ``unit`` (the unit's name), its estimate (``statistic``), ``low``, ``high``, ``n`` (the
    values it rests on) and its ``verdict``. Two settings' rows are :func:`changes`' input,
    matched on ``unit``."""
    rows = []
    for setting, evidence in evidence_by.items():
        for one in evidence:
            verdict = decide(claim, [one])
            rows.append({column: setting, "unit": one.unit,
                         **_judged(verdict.units.iloc[0], statistic, verdict.outcome)})
    return pd.DataFrame(rows, columns=[column, "unit", statistic, "low", "high", "n",
                                       "verdict"])


def first_to_last(by_setting_table: pd.DataFrame, statistic: str) -> pd.DataFrame:
    """:func:`by_setting`'s first and last settings (the earliest checkpoint against the
    trained models; the base width against the wider models) as :func:`changes`, whose
    verdicts say whether that setting is the cause of a claim that does not show."""
    column = by_setting_table.columns[0]
    first, last = by_setting_table.iloc[[0]], by_setting_table.iloc[[-1]]
    unit = f"{column} {first[column].iloc[0]} to {last[column].iloc[0]}"
    return changes(first.assign(unit=unit), last.assign(unit=unit), ["unit"], statistic)
