"""One rule for every verdict of the book.

A claim (:mod:`analysis_lib.studies.claims`) is tested on one or more *units* (a task, a
model, a measure, a layer pair). Each unit brings an :class:`Evidence`: an estimate of the
claim's statistic, its standard error over the right resampling unit (fine-tuning seeds,
folds of sentences, seed pairs, test examples) and, where the error comes from few values,
the degrees of freedom of a t reference. :func:`decide` turns them into one verdict:

``holds``         the statistic is beyond the smallest effect in the claimed direction
                  (one-sided test of ``theta <= delta`` rejected);
``opposite``      it is beyond the smallest effect the other way (for a claim of no
                  difference: beyond it in either direction);
``equivalent``    it lies within ``+-delta`` (two one-sided tests, TOST, both rejected): no
                  difference that matters; for a claim of no difference this is the claim;
``inconclusive``  none of these at the chosen level, or no spread to judge by (one seed).

With several units, each family of p-values (holds, opposite, equivalent) is Holm-adjusted
over the units before it is compared with ``alpha``. The claim's verdict is the units'
common outcome when they all agree; ``mixed`` (with the counts) when they reach different
decided outcomes or some of them the opposite of the claim, so that a contradiction is never
hidden as "inconclusive"; and ``inconclusive`` when some units are undecided and none
contradicts the others. An undecided or mixed claim's reason counts the estimates that run
against the paper (the other side of zero; for a claim of no difference, beyond the smallest
effect), significant or not. A claim with nothing to judge reads ``not measured``, as does one
whose runs did not train (:func:`training_problem`).

:func:`reference_decide` is the same rule written out with intervals instead of p-values,
one unit at a time (no adjustment); tests hold the two together.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats

from .claim import Claim, DidNotTrain, Evidence, NotMeasured, check_unit
from .claims import get

#: a unit's outcome
OUTCOMES = ("holds", "opposite", "equivalent", "inconclusive")
#: what a claim reads when the units disagree (:func:`decide`)
MIXED = "mixed"
#: what a claim reads in place of a verdict when nothing was measured, or its runs did not
#: train (:func:`untrained`)
NOT_MEASURED = "not measured"
#: every verdict a claim can read
VERDICTS = (*OUTCOMES, MIXED, NOT_MEASURED)
#: the level of every verdict of the book
ALPHA = 0.05


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict and the numbers behind it (``units``: one row per unit)."""

    claim: Claim
    outcome: str
    units: pd.DataFrame = field(repr=False)
    alpha: float = ALPHA
    reason: str = ""

    @property
    def shown(self) -> str:
        """The estimates with their intervals, one unit after another."""
        if self.outcome == NOT_MEASURED and not self.reason.startswith("not measured"):
            return f"not measured: {self.reason}"
        if self.units.empty:
            return self.reason or "not measured"
        parts = []
        for row in self.units.itertuples():
            text = f"{row.estimate:+.3f}" if np.isfinite(row.estimate) else "n/a"
            if np.isfinite(row.low):
                text += f" [{row.low:+.3f}, {row.high:+.3f}]"
            parts.append(f"{row.unit}: {text}" if row.unit else text)
        return "; ".join(parts)


def _check_smallest_effect(delta: float) -> float:
    delta = float(delta)
    if not (np.isfinite(delta) and delta >= 0):
        raise ValueError(f"the smallest effect must be a finite number >= 0 (a distance from "
                         f"zero on the statistic's scale), got {delta}; for a claim of a "
                         "decrease set direction='less', not a negative effect")
    return delta


def _cdf(z: np.ndarray, df: np.ndarray) -> np.ndarray:
    """P(T <= z) for a t reference with ``df`` (NaN: normal)."""
    normal = ~np.isfinite(df)
    out = np.empty_like(z)
    out[normal] = stats.norm.cdf(z[normal])
    out[~normal] = stats.t.cdf(z[~normal], df[~normal])
    return out


def holm(p: ArrayLike) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN entries stay NaN and do not count)."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    order = ok[np.argsort(p[ok], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def _one_sided(est, se, df, delta):
    """p-values of the three questions for statistic ``est`` (direction ``greater``):
    above ``+delta``, below ``-delta``, and inside ``(-delta, +delta)`` (TOST)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = se == 0
        up = np.where(exact, np.where(est > delta, 0.0, 1.0),
                      1 - _cdf((est - delta) / np.where(exact, 1, se), df))
        down = np.where(exact, np.where(est < -delta, 0.0, 1.0),
                        _cdf((est + delta) / np.where(exact, 1, se), df))
        above_low = np.where(exact, np.where(est > -delta, 0.0, 1.0),
                             1 - _cdf((est + delta) / np.where(exact, 1, se), df))
        below_high = np.where(exact, np.where(est < delta, 0.0, 1.0),
                              _cdf((est - delta) / np.where(exact, 1, se), df))
    inside = np.maximum(above_low, below_high)
    return up, down, inside


def decide(claim: Claim | str, evidence: Sequence[Evidence], *, alpha: float = ALPHA
           ) -> Verdict:
    """The verdict of ``claim`` on ``evidence`` (one :class:`Evidence` per unit).

    The units are compared with the claim's smallest effect on their own scale
    (:attr:`~analysis_lib.studies.claim.Claim.delta`: Fisher's z of a correlation claim's).
    ``units`` of the result holds, per unit, the estimate, its 95% interval, the
    Holm-adjusted p-values of the three questions, ``reach`` (the one-sided bound that must
    fit inside the smallest effect for equivalence: :func:`_reach`) and the unit's outcome.
    An undecided claim says in its reason when equivalence was out of reach at these sample
    sizes (three seeds give a t reference with two degrees of freedom).
    """
    claim = get(claim) if isinstance(claim, str) else claim
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    delta = _check_smallest_effect(claim.delta)
    for e in evidence:
        if not isinstance(e, Evidence):
            raise TypeError(f"decide takes Evidence records, got {type(e).__name__}; build "
                            "them with Evidence.from_values(...) and its siblings")
    evidence = [e for e in evidence if np.isfinite(e.estimate)]
    if not evidence:
        return Verdict(claim, NOT_MEASURED, _empty_units(), alpha, "not measured in this run")
    sign = -1.0 if claim.direction == "less" else 1.0
    est = sign * np.array([e.estimate for e in evidence], dtype=np.float64)
    se = np.array([e.se for e in evidence], dtype=np.float64)
    df = np.array([np.nan if e.df is None else e.df for e in evidence], dtype=np.float64)
    up, down, inside = _one_sided(est, se, df, delta)
    p_holds, p_opposite, p_equiv = holm(up), holm(down), holm(inside)
    if claim.direction == "none":  # a claim of no difference: the two sides are "opposite"
        p_opposite = holm(np.minimum(up, down) * 2)
        p_holds = np.full_like(p_holds, np.nan)
    outcome = np.where(p_holds < alpha, "holds",
                       np.where(p_opposite < alpha, "opposite",
                                np.where(p_equiv < alpha, "equivalent", "inconclusive")))
    outcome = np.where(np.isfinite(se), outcome, "inconclusive")
    raw = np.array([e.estimate for e in evidence])
    bounds = np.array([e.interval(alpha) for e in evidence], dtype=np.float64)
    reach = _reach(se, df, alpha)
    units = pd.DataFrame({
        "unit": [e.unit for e in evidence], "estimate": raw,
        "low": bounds[:, 0], "high": bounds[:, 1], "se": se,
        "n": [e.n for e in evidence],
        "p_holds": p_holds, "p_opposite": p_opposite, "p_equivalent": p_equiv,
        "reach": reach, "outcome": outcome, "note": [e.note for e in evidence]})
    combined = _combine(list(outcome))
    reason = _reason(list(outcome), len(evidence))
    # an undecided claim says where its estimates point: the paper's way or against it
    against = int(np.sum(np.abs(est) > delta if claim.direction == "none" else est < 0))
    if combined in ("inconclusive", MIXED) and against:
        reason += (f"; {against} of {len(evidence)} estimates run against the paper "
                   + ("(beyond the smallest effect)" if claim.direction == "none" else
                      "(on the other side of zero)"))
    out_of_reach = int(np.sum(~(reach < delta)))
    if combined in ("inconclusive", MIXED) and out_of_reach:
        reason += (f"; equivalence is out of reach in {out_of_reach} of {len(evidence)} units: "
                   f"their one-sided bound (at least {np.nanmin(reach):.3f}) is not inside the "
                   f"smallest effect {delta:.3g}, so more seeds or samples are needed to show "
                   "no difference")
    return Verdict(claim, combined, units, alpha, reason)


def _reach(se: np.ndarray, df: np.ndarray, level: float) -> np.ndarray:
    """Per unit, the one-sided bound ``t(1 - level) se`` (normal where ``df`` is NaN). Even
    the best case for equivalence (an estimate of exactly 0, and the last and most lenient
    step of Holm's adjustment) is decided only when this bound lies inside the smallest
    effect, so a unit whose bound does not is out of reach at its sample size. Infinite
    without a spread (one seed)."""
    finite_df = np.isfinite(df)
    quantile = np.where(finite_df, stats.t.ppf(1 - level, np.where(finite_df, df, 1)),
                        stats.norm.ppf(1 - level))
    return np.where(np.isfinite(se), quantile * se, np.inf)


#: the book's training gate (:func:`training_problem`): a fine-tuned run has trained when its
#: validation accuracy lies at least this far above the majority baseline...
TRAINED_ABOVE_MAJORITY = 0.02
#: ...and its training loss fell by at least this share of its first value (the first and
#: the last point of its loss curve, or of its per-epoch losses for an older record)
TRAINED_LOSS_DROP = 0.10


def training_problem(record: Mapping[str, Any]) -> str:
    """Why a fine-tuned run did not train ("" when it did): the book's training gate, one
    rule for every chapter. ``record`` is the run's record
    (:attr:`analysis_lib.training.finetune.FineTuned.record`). A claim read from a run that
    did not train gets no verdict (:func:`untrained`): its statistic compares a model that
    has not learnt the task. A run passes only on evidence: a finite validation accuracy
    beside its majority baseline and a loss curve of at least two finite points; an empty
    record, a one-point curve or a NaN accuracy is named, never read as trained."""
    if not isinstance(record, Mapping) or not record:
        return ("its record is empty: nothing shows that it trained (a run's record holds its "
                "validation metrics and its loss curve; rerun it)")
    problems = []
    validation = (record.get("metrics") or {}).get("validation") or {}
    accuracy, majority = validation.get("accuracy"), validation.get("majority_baseline")
    if accuracy is None or majority is None:
        problems.append("its record has no validation accuracy and majority baseline to "
                        "compare")
    elif not (0 <= float(accuracy) <= 1 and 0 <= float(majority) <= 1):
        problems.append(f"its validation accuracy ({accuracy}) or majority baseline "
                        f"({majority}) is not a share in [0, 1]")
    elif accuracy < majority + TRAINED_ABOVE_MAJORITY:
        problems.append(f"validation accuracy {accuracy:.3f} is not "
                        f"{TRAINED_ABOVE_MAJORITY} above the majority baseline "
                        f"{majority:.3f}")
    curve = record.get("loss_curve") or record.get("history") or []
    losses = [float(point.get("train_loss", float("nan"))) for point in curve]
    if len(losses) < 2:
        problems.append(f"its loss curve has {len(losses)} point{'s' * (len(losses) != 1)}: "
                        "no drop to judge by")
    elif not np.isfinite(losses).all():
        problems.append("its training loss is not a number at some point (the run diverged)")
    elif min(losses) < 0:
        problems.append(f"its training loss reads {min(losses):.3g}, and a cross-entropy is "
                        "never negative: the record is not a training run's")
    elif not losses[-1] <= losses[0] * (1 - TRAINED_LOSS_DROP):
        problems.append(f"training loss went from {losses[0]:.3f} to {losses[-1]:.3f}, less "
                        f"than a {TRAINED_LOSS_DROP:.0%} drop")
    return "; ".join(problems)


def untrained(claim: Claim | str, problems: Mapping[str, str]) -> Verdict:
    """The verdict of a claim whose runs did not train: none. It reads
    :data:`NOT_MEASURED`, and says which runs failed the training gate and why
    (``problems``: run -> :func:`training_problem`)."""
    why = "; ".join(f"{run}: {problem}" for run, problem in problems.items())
    return not_measured(claim, f"did not train ({why})")


def gate(findings: pd.DataFrame, problems: Mapping[str, str] | None,
         claim_ids: Sequence[str]) -> pd.DataFrame:
    """A findings table (:func:`table`) with each of ``claim_ids`` read as
    :func:`untrained` when any run it reads failed the training gate (``problems``: run ->
    :func:`training_problem`, only the runs that failed); the other claims as they were."""
    if not problems:
        return findings
    out = findings.copy()
    for claim_id in claim_ids:
        if claim_id in out.index:
            out.loc[claim_id] = table([untrained(claim_id, problems)]).loc[claim_id]
    return out


def not_measured(claim: Claim | str, reason: str) -> Verdict:
    """No verdict for ``claim``, and why (a run that did not train, a design that cannot
    separate the claim's factor from another): it reads :data:`NOT_MEASURED`."""
    claim = get(claim) if isinstance(claim, str) else claim
    return Verdict(claim, NOT_MEASURED, _empty_units(), ALPHA, reason)


def judge(claims: Sequence[Claim], results: Mapping[str, Any], *, alpha: float = ALPHA
          ) -> pd.DataFrame:
    """The findings table (:func:`table`) of ``claims`` on a chapter's ``results``.

    ``claims``: usually :func:`analysis_lib.studies.claims.of_chapter`; ``results``: what the
    chapter computed, by name. Per claim, in order: the first of its
    :attr:`~analysis_lib.studies.claim.Claim.gates` that holds a run which failed the
    training gate stops it (:func:`untrained`); otherwise its evidence function reads the
    results its parameters name (one the chapter did not compute reads ``None``) and
    :func:`decide` draws the verdict, or the function says why there is none
    (:class:`~analysis_lib.studies.claim.NotMeasured`,
    :class:`~analysis_lib.studies.claim.DidNotTrain`). A result that no claim reads is an
    error: a misspelt name would otherwise leave its claim "not measured"."""
    known = {name for claim in claims for name in (*claim.reads, *claim.gates)}
    unknown = sorted(set(results) - known)
    if unknown:
        raise KeyError(f"no claim reads the results {unknown}; the claims read "
                       f"{sorted(known)} (check the names)")
    found = []
    for claim in claims:
        if claim.evidence is None:
            raise ValueError(f"claim {claim.id!r} names no evidence function, so no results "
                             "can judge it")
        problems = next((results[name] for name in claim.gates if results.get(name)), None)
        if problems:
            found.append(untrained(claim, problems))
            continue
        try:
            units = claim.evidence(**{name: results.get(name) for name in claim.reads})
        except DidNotTrain as stop:
            found.append(untrained(claim, stop.problems))
        except NotMeasured as stop:
            found.append(not_measured(claim, str(stop)))
        else:
            found.append(decide(claim, units, alpha=alpha))
    return table(found)


def _combine(outcomes: list[str]) -> str:
    """The claim's verdict from its units' outcomes (see the module docs)."""
    found = set(outcomes)
    if len(found) == 1:
        return outcomes[0]
    decided = found - {"inconclusive"}
    if len(decided) > 1 or "opposite" in found:
        return MIXED
    return "inconclusive"


def _reason(outcomes: list[str], m: int) -> str:
    counts = pd.Series(outcomes).value_counts()
    adjusted = f"Holm over {m} units" if m > 1 else "one unit"
    if len(counts) == 1:
        return adjusted
    parts = ", ".join(f"{k} in {v}" for k, v in counts.items())
    return f"units disagree ({parts} of {m}); {adjusted}"


def _empty_units() -> pd.DataFrame:
    return pd.DataFrame(columns=["unit", "estimate", "low", "high", "se", "n", "p_holds",
                                 "p_opposite", "p_equivalent", "reach", "outcome", "note"])


def reference_decide(direction: str, estimate: float, se: float, delta: float,
                     alpha: float = ALPHA, df: float | None = None) -> str:
    """One unit, read from intervals: the one-sided ``1 - alpha`` bounds against the
    smallest effect for ``holds`` and ``opposite``, the ``1 - 2 alpha`` two-sided interval
    inside ``+-delta`` for ``equivalent`` (a claim of no difference is ``opposite`` when
    the ``1 - alpha`` two-sided interval lies wholly beyond ``+-delta``). It refuses the
    same impossible numbers as :func:`decide`."""
    check_unit("reference", estimate, se, df)
    delta = _check_smallest_effect(delta)
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    if not np.isfinite(estimate):
        return NOT_MEASURED
    if not np.isfinite(se):
        return "inconclusive"
    q1 = stats.norm.ppf(1 - alpha) if df is None else stats.t.ppf(1 - alpha, df)
    q2 = stats.norm.ppf(1 - alpha / 2) if df is None else stats.t.ppf(1 - alpha / 2, df)
    x = -estimate if direction == "less" else estimate
    if direction == "none":
        if x - q2 * se > delta or x + q2 * se < -delta:
            return "opposite"
    elif x - q1 * se > delta:
        return "holds"
    elif x + q1 * se < -delta:
        return "opposite"
    if -delta < x - q1 * se and x + q1 * se < delta:
        return "equivalent"
    return "inconclusive"


def permutations_for(alpha: float = ALPHA, tests: int = 1) -> int:
    """The fewest permutations whose smallest p-value, ``1/(n+1)``, lets the most
    significant of ``tests`` Holm-adjusted tests fall below ``alpha``: ``n + 1 > tests /
    alpha``."""
    return int(math.ceil(tests / alpha))


def table(verdicts: Sequence[Verdict]) -> pd.DataFrame:
    """A findings table: one row per claim, indexed by claim id."""
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
    return frame.set_index("claim id") if len(frame) else frame


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


#: what :func:`setting_cause` finds about one setting (training length, depth, width...) as
#: the cause of a claim that does not show, and what each finding means
CAUSES = {
    "shows either way": "the claim shows with the setting as the page has it and changed",
    "the cause": "the claim does not show as the page has it and shows with it changed",
    "a cause": "changing it takes a contradiction away without showing the claim",
    "not the cause": "the claim is contradicted with it changed",
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
        return "not the cause"
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
    """One claim judged in two findings tables (:func:`table`: the page's runs and the runs
    with one setting changed), as :func:`changes`' one-row table with the findings' own
    ``what this run shows`` in place of numbers (``shown_before``, ``shown_after``)."""
    return pd.DataFrame([{
        "unit": claim_id, "verdict_before": outcome_of(before, claim_id),
        "verdict_after": outcome_of(after, claim_id),
        "shown_before": str(before.loc[claim_id, "what this run shows"]),
        "shown_after": str(after.loc[claim_id, "what this run shows"])}])


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
