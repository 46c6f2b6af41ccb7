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

from .claims import Claim, get

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
class Evidence:
    """One unit's estimate of a claim's statistic.

    ``se``: standard error (0 for a number without sampling error, NaN when there is no
    spread to estimate, e.g. one seed); ``df``: degrees of freedom of a t reference (``None``:
    normal); ``n``: how many values the estimate comes from; ``unit``: what it is about.
    """

    unit: str
    estimate: float
    se: float
    df: float | None = None
    n: int | None = None
    note: str = ""

    def __post_init__(self) -> None:
        # evidence no estimate can give is refused where it is made, so that the verdict
        # rule and its interval-form twin never read it
        _check_unit(self.unit, self.estimate, self.se, self.df)
        if self.n is not None and not (isinstance(self.n, (int, np.integer)) and self.n >= 0):
            raise ValueError(f"evidence {self.unit!r}: n must be a count (an integer >= 0), "
                             f"got {self.n!r}")

    def interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """The two-sided ``1 - alpha`` interval ``estimate +- q se``, ``q`` the quantile of
        Student's t with ``df`` degrees of freedom (of the normal when ``df`` is None): the
        book's one t interval. NaN bounds when there is no spread to judge by (``se`` NaN,
        one seed)."""
        q = (stats.norm.ppf(1 - alpha / 2) if self.df is None or not np.isfinite(self.df)
             else stats.t.ppf(1 - alpha / 2, self.df))
        return self.estimate - q * self.se, self.estimate + q * self.se

    @classmethod
    def from_values(cls, unit: str, values: Iterable[float], note: str = "") -> Evidence:
        """Mean of independent values (one per seed, seed pair, ...) and its t standard
        error; one value gives no spread (``se`` NaN). A NaN value is a unit that was not
        measured (a run that gave nothing): it is left out and the note says how many were;
        an infinite value is no estimate of anything and is refused."""
        given = np.asarray(list(values), dtype=np.float64).ravel()
        if np.isinf(given).any():
            raise ValueError(
                f"evidence {unit!r}: {int(np.isinf(given).sum())} of its {given.size} values "
                "are infinite, which no estimate can be (a division by zero or an overflow "
                "upstream); fix the computation that gave them, or pass NaN for a value "
                "that was not measured")
        x = given[np.isfinite(given)]
        if x.size < given.size:
            dropped = f"{given.size - x.size} of {given.size} values not measured (NaN)"
            note = f"{note}; {dropped}" if note else dropped
        if x.size == 0:
            return cls(unit, float("nan"), float("nan"), None, 0, note or "not measured")
        if x.size == 1:
            alone = "one value: no spread to judge by"
            return cls(unit, float(x[0]), float("nan"), None, 1,
                       f"{note}; {alone}" if note and given.size > 1 else note or alone)
        return cls(unit, float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)),
                   float(x.size - 1), int(x.size), note)

    @classmethod
    def from_paired(cls, unit: str, first: Mapping[Any, float], second: Mapping[Any, float],
                    note: str = "") -> Evidence:
        """``first - second`` paired by key (a fine-tuning seed: the two runs of one seed
        share the head's initialisation and the batch order), over the keys both hold, as
        :meth:`from_values`."""
        return cls.from_values(unit, [first[k] - second[k] for k in first if k in second],
                               note)

    @classmethod
    def from_jackknife(cls, unit: str, estimate: float, replicates: Sequence[float],
                       note: str = "") -> Evidence:
        """An estimate with the grouped-jackknife standard error of its leave-one-out
        ``replicates`` (``se^2 = (K-1)/K sum (theta_k - mean)^2``, t with K-1 df)."""
        r = np.asarray(replicates, dtype=np.float64)
        k = r.size
        if np.isinf(r).any():
            raise ValueError(f"evidence {unit!r}: {int(np.isinf(r).sum())} of its {k} "
                             "jackknife replicates are infinite, which no estimate can be; "
                             "fix the computation that gave them")
        if k < 2 or not np.isfinite(r).all():
            return cls(unit, float(estimate), float("nan"), None, k, note or "no jackknife")
        se = math.sqrt((k - 1) / k * float(np.sum((r - r.mean()) ** 2)))
        return cls(unit, float(estimate), se, float(k - 1), k, note)

    @classmethod
    def from_proportions(cls, unit: str, p1: float, n1: int, p2: float, n2: int,
                         note: str = "") -> Evidence:
        """``p1 - p2`` for two accuracies on ``n1`` and ``n2`` test examples, with the
        binomial standard error of the difference (independent test sets; the same test set
        makes it conservative)."""
        for name, p, n in (("p1", p1, n1), ("p2", p2, n2)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"evidence {unit!r}: {name} = {p!r} is not a proportion "
                                 "(it must lie in [0, 1]); pass accuracies, not percentages")
            if not (isinstance(n, (int, np.integer)) and n >= 1):
                raise ValueError(f"evidence {unit!r}: a proportion needs a count of test "
                                 f"examples >= 1, got {n!r}")
        se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
        return cls(unit, float(p1 - p2), se, None, min(n1, n2), note)

    @classmethod
    def from_correlation(cls, unit: str, r: float, n: int, note: str = "") -> Evidence:
        """A Pearson correlation as Fisher's z (``atanh r``) with standard error
        ``1/sqrt(n-3)``; compare with a smallest effect on the same z scale. A correlation
        beyond +-1 (more than rounding) is no correlation and is refused, not clipped."""
        if np.isfinite(r) and abs(r) > 1 + 1e-9:
            raise ValueError(f"evidence {unit!r}: a correlation of {r!r} is impossible (it "
                             "must lie in [-1, 1]); the statistic passed is not a correlation")
        if n < 4 or not np.isfinite(r):
            return cls(unit, float(np.arctanh(np.clip(r, -0.999999, 0.999999)))
                       if np.isfinite(r) else float("nan"), float("nan"), None, n,
                       note or "fewer than 4 points")
        r = float(np.clip(r, -0.999999, 0.999999))
        return cls(unit, float(np.arctanh(r)), 1 / math.sqrt(n - 3), None, n, note)

    @classmethod
    def from_samples(cls, unit: str, estimate: float, samples: Sequence[float],
                     note: str = "") -> Evidence:
        """An estimate with the standard deviation of its bootstrap samples as error (NaN
        samples, resamples where the statistic was undefined, are left out; an infinite one
        is refused)."""
        s = np.asarray(samples, dtype=np.float64)
        if np.isinf(s).any():
            raise ValueError(f"evidence {unit!r}: {int(np.isinf(s).sum())} of its {s.size} "
                             "bootstrap samples are infinite, which no estimate can be")
        s = s[np.isfinite(s)]
        if s.size < 2:
            return cls(unit, float(estimate), float("nan"), None, s.size, note)
        return cls(unit, float(estimate), float(s.std(ddof=1)), None, int(s.size), note)


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


def _check_unit(unit: str, estimate: float, se: float, df: float | None) -> None:
    """Refuse a unit's numbers that no estimate can have: an infinite estimate, a negative
    standard error, degrees of freedom that are not positive. A NaN estimate or error stays
    allowed: they mean "not measured" and "no spread to judge by"."""
    where = f"evidence {unit!r}"
    numbers = (("estimate", estimate), ("standard error", se)) + (
        (("df", df),) if df is not None else ())
    for name, value in numbers:
        if isinstance(value, (bool, str)) or not isinstance(value, (int, float, np.number)):
            raise TypeError(f"{where}: the {name} must be a number, got {value!r} (NaN "
                            "where it is not known)")
    if np.isinf(estimate):
        raise ValueError(f"{where}: the estimate is {estimate}, which no statistic of the book "
                         "can be; fix the computation that gave it (pass NaN for a unit that "
                         "was not measured)")
    if se < 0 or np.isneginf(se):
        raise ValueError(f"{where}: the standard error is {se}, and a standard error is never "
                         "negative; pass its absolute value (or NaN when there is no spread)")
    if df is not None and not (df > 0):
        raise ValueError(f"{where}: degrees of freedom must be positive, got {df} (pass None "
                         "for a normal reference, NaN se for a single value)")


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


def decide(claim: Claim | str, evidence: Sequence[Evidence], *, alpha: float = ALPHA,
           smallest_effect: float | None = None) -> Verdict:
    """The verdict of ``claim`` on ``evidence`` (one :class:`Evidence` per unit).

    ``smallest_effect`` overrides the claim's (e.g. on the Fisher z scale of a correlation
    claim, pass ``atanh`` of it). ``units`` of the result holds, per unit, the estimate, its
    95% interval, the Holm-adjusted p-values of the three questions, ``reach`` (the one-sided
    bound that must fit inside the smallest effect for equivalence: :func:`_reach`) and the
    unit's outcome. An undecided claim says in its reason when equivalence was out of reach
    at these sample sizes (three seeds give a t reference with two degrees of freedom).
    """
    claim = get(claim) if isinstance(claim, str) else claim
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    delta = _check_smallest_effect(claim.smallest_effect if smallest_effect is None
                                   else smallest_effect)
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
    _check_unit("reference", estimate, se, df)
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
