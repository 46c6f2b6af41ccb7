"""One rule for every verdict of the book.

A claim (:mod:`analysis_lib.claims`) is tested on one or more *units* (a task, a
model, a measure, a layer pair). Each unit brings an :class:`Evidence`: an estimate of the
claim's statistic, its standard error over the right resampling unit (fine-tuning seeds,
folds of sentences, seed pairs, test examples) and, where the error comes from few values,
the degrees of freedom of a t reference. :func:`decide` turns them into one verdict:

* ``holds``: the statistic is beyond the smallest effect in the claimed direction
  (one-sided test of ``theta <= delta`` rejected); for a cost claim (``at_most``), below
  the smallest effect (``theta >= delta`` rejected);
* ``opposite``: it is beyond the smallest effect the other way (for a claim of no
  difference: beyond it in either direction);
* ``equivalent``: it lies within ``+-delta`` (two one-sided tests, TOST, both rejected): no
  difference that matters; for a claim of no difference this is the claim;
* ``inconclusive``: none of these at the chosen level, or no spread to judge by (one
  seed).

Every one-sided test is at ``alpha / 2``, so that a unit decides exactly where its printed
two-sided ``1 - alpha`` interval (95%) lies wholly beyond the smallest effect, or wholly
inside it for equivalence: a reader checks any verdict against the interval beside it (the
convention of ICH E9 for directional and equivalence claims alike). With several units, each
family of p-values (holds, opposite, equivalent) is Holm-adjusted over the units before it
is compared with ``alpha / 2``, which only makes a unit harder to decide. The claim's
verdict is the units' common outcome when they all agree; ``mixed`` (with the counts) when
they reach different decided outcomes or some of them the opposite of the claim, so that a
contradiction is never hidden as "inconclusive"; and ``inconclusive`` when some units are
undecided and none contradicts the others. An undecided or mixed claim's reason counts the
estimates that run against the paper (the other side of zero; for a claim of no difference,
beyond the smallest effect), significant or not. A claim with nothing to judge reads ``not
measured``, as does one whose runs did not train
(:func:`~analysis_lib.claims.training_gate.training_problem`). Two rules set units aside
before the tests, each naming what it left out: the floor rule (a statistic read on a
variable at its floor) and the adequacy rule (a unit that reads a fine-tuned model no better
than the head on its frozen encoder: :func:`with_adequacy`); a claim left with no unit reads
``not measured`` with their reasons. A claim whose factor cannot be told from another
without a control condition the results lack reads ``not measured`` too, with what its
statistic would read without the control beside the reason. A unit whose values move in
steps larger than the smallest effect (ranks among a few layers: :meth:`Evidence.in_steps`)
is never read as ``equivalent``: values that agree to such a step are no evidence of no
difference.

:func:`reference_decide` is the same rule written out with intervals instead of p-values,
one unit at a time (no adjustment); tests hold the two together. :func:`judge` draws a
chapter's findings from its results: each claim's evidence function
(:mod:`analysis_lib.claims.claim`) gives the units and :func:`decide` the verdict. The
records (claims, evidence, verdicts) live in :mod:`analysis_lib.claims.claim`, the findings
tables in :mod:`analysis_lib.claims.tables`, the training gate in
:mod:`analysis_lib.claims.training_gate` and the cause comparison in
:mod:`analysis_lib.claims.causes`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ..similarity.stats import holm
from . import get, preconditions, results_read
from .claim import (
    ALPHA,
    MIXED,
    NOT_MEASURED,
    Claim,
    DidNotTrain,
    Evidence,
    NotMeasured,
    Uncontrolled,
    Verdict,
    check_unit,
)
from .tables import table
from .training_gate import ADEQUACY, GRID, describe


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


def _one_sided(est, se, df, delta):
    """p-values of the questions for statistic ``est`` (direction ``greater``): above
    ``+delta``, below ``-delta``, inside ``(-delta, +delta)`` (TOST), and below ``+delta``
    (the one-sided test a cost claim, ``at_most``, holds by)."""
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
    return up, down, inside, below_high


def decide(claim: Claim | str, evidence: Iterable[Evidence] | Evidence, *,
           alpha: float = ALPHA) -> Verdict:
    """The verdict of ``claim`` on ``evidence`` (one :class:`Evidence` per unit, in any
    iterable, a generator included; or one record).

    The units are compared with the claim's smallest effect on their own scale
    (:attr:`~analysis_lib.claims.claim.Claim.delta`: Fisher's z of a correlation claim's).
    ``units`` of the result holds, per unit, the estimate, its ``1 - alpha`` interval (95%),
    the Holm-adjusted one-sided p-values of the three questions (each decides below
    ``alpha / 2``), ``reach`` (the interval's half-width, the one-sided bound that must fit
    inside the smallest effect for equivalence: :func:`_reach`) and the unit's outcome.
    An undecided claim says in its reason when equivalence was out of reach at these sample
    sizes (three seeds give a t reference with two degrees of freedom).
    """
    claim = get(claim) if isinstance(claim, str) else claim
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    delta = _check_smallest_effect(claim.delta)
    if isinstance(evidence, Evidence):
        evidence = [evidence]
    evidence = list(evidence)  # a generator is read once, here, and checked below
    for e in evidence:
        if not isinstance(e, Evidence):
            raise TypeError(f"decide takes Evidence records, got {type(e).__name__}; build "
                            "them with Evidence.from_values(...) and its siblings")
    # the adequacy rule (a fine-tuned model no better than its frozen head) and the floor
    # rule (a statistic read on a variable at its floor): neither is evidence
    adequacy = {e.unit: why for e in evidence if (why := inadequate(e))}
    floors = {e.unit: why for e in evidence if e.unit not in adequacy and (why := at_floor(e))}
    rules = {"the adequacy rule": adequacy, "the floor rule": floors}
    named = {rule: "; ".join(f"{unit}: {why}" for unit, why in out.items())
             for rule, out in rules.items() if out}
    refused = adequacy.keys() | floors.keys()
    evidence = [e for e in evidence if np.isfinite(e.estimate) and e.unit not in refused]
    if not evidence and refused:
        return not_measured(claim, "; ".join(f"{rule}: {why}" for rule, why in named.items()))
    if not evidence:
        return Verdict(claim, NOT_MEASURED, _empty_units(), alpha, "not measured in this run")
    floor_note = "".join(
        f"; {rule} leaves out {len(rules[rule])} unit{'s' * (len(rules[rule]) > 1)} ({why})"
        for rule, why in named.items())
    sign = -1.0 if claim.direction == "less" else 1.0
    est = sign * np.array([e.estimate for e in evidence], dtype=np.float64)
    se = np.array([e.se for e in evidence], dtype=np.float64)
    df = np.array([np.nan if e.df is None else e.df for e in evidence], dtype=np.float64)
    up, down, inside, below = _one_sided(est, se, df, delta)
    p_holds, p_opposite, p_equiv = holm(up), holm(down), holm(inside)
    if claim.direction == "none":  # a claim of no difference: the two sides are "opposite"
        p_opposite = holm(np.minimum(up, down))
        p_holds = np.full_like(p_holds, np.nan)
    if claim.direction == "at_most":  # a cost claim: it holds when the cost is below +delta
        p_holds, p_opposite = holm(below), holm(up)
        p_equiv = np.full_like(p_equiv, np.nan)
    level = alpha / 2  # each side of the printed 1 - alpha interval
    outcome = np.where(p_holds < level, "holds",
                       np.where(p_opposite < level, "opposite",
                                np.where(p_equiv < level, "equivalent", "inconclusive")))
    outcome = np.where(np.isfinite(se), outcome, "inconclusive")
    # values that move in steps larger than the smallest effect agree to the step, not to
    # within it: no spread among them is no evidence of no difference
    coarse = np.array([e.step > delta for e in evidence], dtype=bool)
    outcome = np.where(coarse & (outcome == "equivalent"), "inconclusive", outcome)
    raw = np.array([e.estimate for e in evidence])
    bounds = np.array([e.interval(alpha) for e in evidence], dtype=np.float64)
    reach = _reach(se, df, level)
    units = pd.DataFrame({
        "unit": [e.unit for e in evidence], "estimate": raw,
        "low": bounds[:, 0], "high": bounds[:, 1], "se": se,
        "n": [e.n for e in evidence],
        "p_holds": p_holds, "p_opposite": p_opposite, "p_equivalent": p_equiv,
        "reach": reach, "outcome": outcome, "note": [e.note for e in evidence]})
    combined = _combine(list(outcome))
    causes = [undecided_cause(e, r, delta, claim.direction, alpha) if out == "inconclusive"
              else ""
              for e, r, out in zip(evidence, reach, outcome)]
    units["cause"] = causes
    reason = _reason(list(outcome), len(evidence))
    if combined in ("inconclusive", MIXED):
        reason = _undecided_reason(claim, reason, evidence, causes, est, reach, delta,
                                   outcome == "inconclusive")
    return Verdict(claim, combined, units, alpha, reason + floor_note)


def _undecided_reason(claim: Claim, reason: str, evidence: list[Evidence], causes: list[str],
                      est: np.ndarray, reach: np.ndarray, delta: float,
                      undecided: np.ndarray) -> str:
    """An undecided or mixed claim's reason: the undecided units' causes first, then where
    its estimates point (the paper's way or against it) and whether equivalence (or a cost
    below the smallest effect) was in reach in the ``undecided`` units (a decided unit
    needs no other outcome)."""
    if any(causes):
        reason = f"undecided: {_cause_summary(causes)}; {reason}"
    beyond = {"none": np.abs(est) > delta, "at_most": est > delta}
    against = int(np.sum(beyond.get(claim.direction, est < 0)))
    if against:
        reason += (f"; {against} of {len(evidence)} estimates run against the paper "
                   + ("(beyond the smallest effect)" if claim.direction in beyond else
                      "(on the other side of zero)"))
    short = ~(reach < delta) & undecided
    if short.any():
        # what the interval is over (seeds, models, pairs, folds) is the unit's own: name
        # its count, never assume seeds
        counts = ", ".join(dict.fromkeys(_over(e) for e, out in zip(evidence, short) if out))
        what = "a cost below it" if claim.direction == "at_most" else "equivalence"
        reason += (f"; {what} is out of reach in {int(short.sum())} of {len(evidence)} "
                   f"units: their one-sided bound (at least {np.nanmin(reach[short]):.3f}) is not "
                   f"inside the smallest effect {delta:.3g} with the values their intervals "
                   f"are over ({counts}); more of those (as each unit says: seeds, models, "
                   "pairs or folds) would be needed to show no difference")
    coarse = [e for e, cause in zip(evidence, causes) if cause.startswith("too coarse")]
    if coarse:
        steps = ", ".join(dict.fromkeys(f"{e.step:.3g}" for e in coarse))
        reason += (f"; equivalence is out of reach in {len(coarse)} of {len(evidence)} units "
                   f"whose values move in steps of {steps}, larger than the smallest effect "
                   f"{delta:.3g}: no number of such values can show a change smaller than "
                   "a step")
    return reason


def _over(evidence: Evidence) -> str:
    """What a unit's interval is over, in words: its count of values, or its own standard
    error where it names none (a bootstrap over sentences, a binomial error)."""
    if evidence.n is None:
        return "its own standard error" if np.isfinite(evidence.se) else "a single estimate"
    return {0: "no values", 1: "one value"}.get(evidence.n, f"{evidence.n} values")


#: why a unit stays undecided, in the order :func:`undecided_cause` tries them (a claim
#: whose runs did not train or whose precondition does not hold reads ``not measured``
#: before this question is asked, with its own reason)
UNDECIDED_CAUSES = {
    "at its floor": "some of the values of a variable the statistic reads sit at its floor "
                    "(chance, the majority baseline): the statistic reads the floor there",
    "no headroom": "the control already sits within the smallest effect of its ceiling: the "
                   "effect the claim predicts has no room to show",
    "held back by the adjustment": "the unit's own interval decides it (wholly beyond the "
                                   "smallest effect, or wholly inside it), but Holm's "
                                   "adjustment over the claim's units, which keeps the chance "
                                   "that any of them is decided wrongly at the level, asks "
                                   "more of it",
    "its objects part": "of the distinct objects the unit is over (models, pairs of models), "
                        "some clear the smallest effect the paper's way and others sit "
                        "within it of zero or run against it: the claim shows for some of "
                        "them and not for others, which more of the same would not change",
    "too coarse": "the unit's values move in steps larger than the smallest effect (ranks "
                  "among a few layers), so values that agree to the step could still differ "
                  "by as much as the effect: they cannot show that there is no difference",
    "too few units": "the interval is wider than the smallest effect: with more of the values "
                     "it is over (seeds, models, pairs, folds) it could be decided",
    "near the smallest effect": "the interval is narrower than the smallest effect, but the "
                                "estimate lies so near it that the interval straddles it",
}


def inadequate(evidence: Evidence) -> str:
    """Why the adequacy rule refuses ``evidence`` ("" when it does not): it reads a trained
    model that does not clear its adequacy line (a :class:`~analysis_lib.claims.claim.Level`
    of kind ``adequacy``, attached by :func:`with_adequacy`), so it measures a model not
    trained enough for the claim."""
    short = [level for level in evidence.levels if level.kind == "adequacy" and level.stuck]
    return "; ".join(f"not trained enough for it: {level.describe()}" for level in short)


def with_adequacy(evidence: Iterable[Evidence], lines: Mapping[str, Any] | None
                  ) -> list[Evidence]:
    """``evidence`` with the adequacy lines of the fine-tuned models each unit reads.

    ``lines``: per ``"model, task"`` of a fine-tuning grid, the
    :class:`~analysis_lib.claims.claim.Level` of kind ``adequacy`` its fine-tuned models must
    clear (:func:`~analysis_lib.claims.tables.adequacy`). A unit reads a (model, task)'s
    models when its label names the task (a whole name: ``tweets-sentiment`` and
    ``tweets-sentiment:pos`` both name ``tweets-sentiment``), and the model too where it
    names any of the grid's models; a unit over two tasks (a cross-task contrast) reads
    both. ``None`` or an empty mapping leaves ``evidence`` as it is."""
    units = list(evidence)
    if not lines:
        return units
    keyed = {tuple(key.split(", ", 1)): level for key, level in lines.items()}
    models = {model for model, _ in keyed}
    out = []
    for unit in units:
        named = {model for model in models if _names(unit.unit, model)}
        levels = [level for (model, task), level in keyed.items()
                  if _names(unit.unit, task) and (not named or model in named)]
        out.append(unit.reading(*levels) if levels else unit)
    return out


def _names(label: str, name: str) -> bool:
    """Whether a unit's label names ``name`` as a whole name (not inside a longer one)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", label) is not None


def at_floor(evidence: Evidence) -> str:
    """Why the floor rule refuses ``evidence`` ("" when it does not): a variable its
    statistic reads sits at its floor in so many values that fewer than the statistic needs
    lie clear of it (:class:`~analysis_lib.claims.claim.Level`). A correlation or difference
    read there measures the floor, not the claim."""
    stuck = [level for level in evidence.levels if level.kind == "floor" and level.stuck]
    return "; ".join(f"{level.describe()}, and the statistic needs {level.needed} clear of it"
                     for level in stuck)


def undecided_cause(evidence: Evidence, reach: float, delta: float,
                    direction: str = "greater", alpha: float = ALPHA) -> str:
    """Why an undecided unit is undecided: the first key of :data:`UNDECIDED_CAUSES` that
    applies, with its numbers. ``reach`` is the unit's one-sided bound (:func:`_reach`),
    ``delta`` the claim's smallest effect on the units' scale, ``direction`` the claim's,
    ``alpha`` the level of :func:`decide` (the unit's interval is its ``1 - alpha`` one)."""
    floors = [level for level in evidence.levels if level.kind == "floor" and level.at_level]
    if floors:
        return "at its floor: " + "; ".join(level.describe() for level in floors)
    ceilings = [level for level in evidence.levels if level.kind == "ceiling" and level.stuck]
    if ceilings:
        return "no headroom: " + "; ".join(level.describe() for level in ceilings)
    held = _held_back(evidence, delta, direction, alpha)
    if held:
        return f"held back by the adjustment: {held}"
    parted = _parted(evidence, delta, direction) if not reach < delta else ""
    if parted:
        return f"its objects part: {parted}"
    if evidence.step > delta and reach < delta and direction != "at_most":
        return (f"too coarse: its values move in steps of {evidence.step:.3g}, larger than "
                f"the smallest effect {delta:.3g}; estimate {evidence.estimate:+.3f}, "
                f"one-sided bound {reach:.3f}")
    if not reach < delta:
        spread = "no spread" if not np.isfinite(reach) else f"a one-sided bound of {reach:.3f}"
        return (f"too few units: {spread} from {_over(evidence)}, not inside the smallest "
                f"effect {delta:.3g}")
    return (f"near the smallest effect: {evidence.estimate:+.3f}, one-sided bound {reach:.3f}, "
            f"smallest effect {delta:.3g}")


def _held_back(evidence: Evidence, delta: float, direction: str, alpha: float) -> str:
    """Where the unit's own interval decides it (:func:`reference_decide`), what it reads
    alone, in words; "" where it does not. Holm's adjustment over a claim's units is then
    the only thing that left it undecided."""
    if not np.isfinite(evidence.se):
        return ""
    alone = reference_decide(direction, evidence.estimate, evidence.se, delta, alpha,
                             evidence.df, evidence.step)
    if alone not in ("holds", "opposite", "equivalent"):
        return ""
    low, high = evidence.interval(alpha)
    return (f"its {1 - alpha:.0%} interval [{low:+.3f}, {high:+.3f}] alone reads {alone}, "
            f"and Holm's adjustment over the claim's units asks more of it")


def _parted(evidence: Evidence, delta: float, direction: str) -> str:
    """The distinct objects of a unit (:attr:`~analysis_lib.claims.claim.Evidence.named`)
    that clear the smallest effect the claim's way and those that do not, in words; "" when
    the unit names none, all of them fall on one side, or the claim is not one of a
    direction (a claim of no difference, a cost)."""
    if direction not in ("greater", "less") or len(evidence.named) < 2:
        return ""
    sign = -1.0 if direction == "less" else 1.0
    clear = [(name, v) for name, v in evidence.named if sign * v > delta]
    short = [(name, v) for name, v in evidence.named if sign * v <= delta]
    if not clear or not short:
        return ""

    def listed(pairs: list[tuple[str, float]]) -> str:
        return ", ".join(f"{name} {v:+.3f}" for name, v in pairs)
    return (f"{len(clear)} of {len(evidence.named)} clear the smallest effect {delta:.3g} "
            f"({listed(clear)}) and {len(short)} do not ({listed(short)})")


def _cause_summary(causes: list[str]) -> str:
    """The undecided units' causes, counted by kind, with the first unit's numbers."""
    found = [c for c in causes if c]
    kinds = list(dict.fromkeys(c.split(":")[0] for c in found))
    return "; ".join(
        f"{kind} in {sum(c.startswith(kind) for c in found)} of {len(causes)} units "
        f"({next(c for c in found if c.startswith(kind)).split(': ', 1)[1]})"
        for kind in kinds)


def _reach(se: np.ndarray, df: np.ndarray, level: float) -> np.ndarray:
    """Per unit, the one-sided bound ``t(1 - level) se`` (normal where ``df`` is NaN; at
    :func:`decide`'s ``level``, ``alpha / 2``, the printed interval's half-width). Even
    the best case for equivalence (an estimate of exactly 0, and the last and most lenient
    step of Holm's adjustment) is decided only when this bound lies inside the smallest
    effect, so a unit whose bound does not is out of reach at its sample size. Infinite
    without a spread (one seed)."""
    finite_df = np.isfinite(df)
    quantile = np.where(finite_df, stats.t.ppf(1 - level, np.where(finite_df, df, 1)),
                        stats.norm.ppf(1 - level))
    return np.where(np.isfinite(se), quantile * se, np.inf)


def untrained(claim: Claim | str, problems: Mapping[str, str]) -> Verdict:
    """The verdict of a claim whose runs did not train: none. It reads
    :data:`NOT_MEASURED`, and says which runs failed the training gate and why
    (``problems``: run -> :func:`~analysis_lib.claims.training_gate.training_problem`)."""
    return not_measured(claim, describe(problems))


def not_measured(claim: Claim | str, reason: str) -> Verdict:
    """No verdict for ``claim``, and why (a run that did not train, a design that cannot
    separate the claim's factor from another): it reads :data:`NOT_MEASURED`."""
    claim = get(claim) if isinstance(claim, str) else claim
    return Verdict(claim, NOT_MEASURED, _empty_units(), ALPHA, reason)


def judge(claims: Sequence[Claim], results: Mapping[str, Any], *, alpha: float = ALPHA
          ) -> pd.DataFrame:
    """The findings table (:func:`~analysis_lib.claims.tables.table`) of ``claims`` on a
    chapter's ``results``.

    ``claims``: usually :func:`analysis_lib.claims.of_chapter`; ``results``: what the
    chapter computed, by name. Per claim, in order: the first of its
    :attr:`~analysis_lib.claims.claim.Claim.gates` that holds a run which failed the
    training gate stops it (:func:`untrained`); otherwise its evidence function reads the
    results its parameters name (one the chapter did not compute reads ``None``) and
    :func:`decide` draws the verdict, or the function says why there is none
    (:class:`~analysis_lib.claims.claim.NotMeasured`,
    :class:`~analysis_lib.claims.claim.DidNotTrain`; with
    :class:`~analysis_lib.claims.claim.Uncontrolled`, the claim reads ``not measured`` and
    its reason adds what the units it could read would read). A claim that presupposes
    another (:attr:`~analysis_lib.claims.claim.Claim.requires`) keeps its verdict only
    where every claim down its chain of preconditions holds on the same results
    (:func:`conditional`, the first that does not is named); a chain that cycles or names
    no claim is a ``ValueError`` (:func:`~analysis_lib.claims.preconditions`; ids are
    looked up among ``claims`` first). A result that no claim reads is an error: a
    misspelt name would otherwise leave its claim "not measured". A measured claim's reason
    ends with what the rule reads at half and at twice its smallest effect
    (:func:`at_other_effects`)."""
    claims = list(claims)
    chains = {id(claim): preconditions(claim, claims) for claim in claims}
    known = {name for claim in claims for name in results_read(claim, claims)}
    unknown = sorted(set(results) - known)
    if unknown:
        raise KeyError(f"no claim reads the results {unknown}; the claims read "
                       f"{sorted(known)} (check the names)")
    judged: dict[str, Verdict] = {}

    def one(claim: Claim) -> Verdict:
        if claim.id not in judged:
            judged[claim.id] = _judge_one(claim, results, alpha)
        return judged[claim.id]

    found = []
    for claim in claims:
        verdict = one(claim)
        if verdict.outcome != NOT_MEASURED:
            for precondition in chains[id(claim)]:
                if one(precondition).outcome != "holds":
                    verdict = conditional(verdict, one(precondition))
                    break
        found.append(verdict)
    return table(found)


def _judge_one(claim: Claim, results: Mapping[str, Any], alpha: float) -> Verdict:
    if claim.evidence is None:
        raise ValueError(f"claim {claim.id!r} names no evidence function, so no results "
                         "can judge it")
    problems = next((results[name] for name in claim.gates if results.get(name)), None)
    if problems:
        return untrained(claim, problems)
    try:
        units = claim.evidence(**{name: results.get(name) for name in claim.reads})
    except DidNotTrain as stop:
        return untrained(claim, stop.problems)
    except Uncontrolled as stop:
        alone = _decided(claim, stop.units, results, alpha)
        return not_measured(claim, f"{stop}; without that control, this claim's statistic "
                                   f"would read {alone.outcome}, {alone.shown}")
    except NotMeasured as stop:
        return not_measured(claim, str(stop))
    return _decided(claim, units, results, alpha)


def _decided(claim: Claim, units: Sequence[Evidence], results: Mapping[str, Any],
             alpha: float) -> Verdict:
    """:func:`decide` on a claim's units, after the adequacy rule where the claim reads the
    fine-tuning grid."""
    if GRID in claim.gates:
        units = with_adequacy(units, results.get(ADEQUACY))
    units = list(units)
    verdict = decide(claim, units, alpha=alpha)
    if verdict.outcome == NOT_MEASURED:
        return verdict
    return replace(verdict, reason=verdict.reason + at_other_effects(claim, units, alpha,
                                                                      verdict.outcome))


#: the multiples of a claim's smallest effect at which :func:`judge` reads its verdict too
OTHER_EFFECTS = (0.5, 2.0)


def at_other_effects(claim: Claim, evidence: Sequence[Evidence], alpha: float = ALPHA,
                     outcome: str | None = None) -> str:
    """The clause a measured claim's reason ends with in the findings (:func:`judge`): what
    :func:`decide` reads on the same ``evidence`` with the claim's smallest effect halved
    and doubled (:data:`OTHER_EFFECTS`; for a correlation claim, on Fisher's z). The
    smallest effect is a choice, argued claim by claim but a choice, and the clause shows
    whether the verdict rests on where that line was drawn. A verdict that needs its units
    beyond the line (holds for a directional claim, opposite) reads the same at half of it,
    and one that needs them inside it (equivalent, a cost that holds) the same at twice it;
    the clause says which reading would change, and to what."""
    outcome = outcome or decide(claim, evidence, alpha=alpha).outcome
    scaled = {factor: _scaled(claim, factor) for factor in OTHER_EFFECTS}
    read = {factor: decide(other, evidence, alpha=alpha).outcome
            for factor, other in scaled.items()}
    if all(found == outcome for found in read.values()):
        return "; the same at half and at twice the smallest effect"
    named = {0.5: "half", 2.0: "twice"}
    return "; " + ", ".join(f"{named[factor]} the smallest effect "
                            f"({scaled[factor].smallest_effect:.3g}) reads {found}"
                            for factor, found in read.items())


#: the clause :func:`at_other_effects` writes, in either of its forms, at a reason's end
_OTHER_EFFECTS_CLAUSE = re.compile(
    r"(?:^|; )(the same at half and at twice the smallest effect|half the smallest effect "
    r"\([^)]*\) reads \w+, twice the smallest effect \([^)]*\) reads \w+)$")


def other_effects_clause(reason: str) -> str:
    """The clause :func:`at_other_effects` ended ``reason`` with (without its ``"; "``; the
    whole of a reason that is that clause alone), or ``""`` where it ends with none (a
    claim not measured, a reason from :func:`decide` alone)."""
    found = _OTHER_EFFECTS_CLAUSE.search(reason)
    return found.group(1) if found else ""


def _scaled(claim: Claim, factor: float) -> Claim:
    """``claim`` with its smallest effect ``factor`` times as large on the scale its units
    are compared on (:attr:`~analysis_lib.claims.claim.Claim.delta`): for a correlation
    claim, Fisher's z, so that twice a correlation of 0.5 is 0.8, not 1."""
    if claim.fisher_z:
        return replace(claim, smallest_effect=math.tanh(factor * claim.delta))
    return replace(claim, smallest_effect=factor * claim.smallest_effect)


def conditional(verdict: Verdict, precondition: Verdict) -> Verdict:
    """``verdict`` where its claim's precondition (``precondition``, the verdict of the
    claim it presupposes on the same results) holds; otherwise no verdict, with a reason
    that gives both: what the precondition's claim reads, and what this claim's statistic
    would have read. A paper that explains an effect through a structure makes no
    prediction where the structure is absent, so neither "holds" nor "opposite" would test
    it there."""
    if precondition.outcome == "holds":
        return verdict
    pre = precondition.claim
    return not_measured(verdict.claim, (
        f"its precondition does not hold in this run: {pre.id} ({pre.claim}) reads "
        f"{precondition.outcome}, {precondition.shown}; without it, this claim's statistic "
        f"would read {verdict.outcome}, {verdict.shown}"))


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
                                 "p_opposite", "p_equivalent", "reach", "outcome", "note",
                                 "cause"])


def reference_decide(direction: str, estimate: float, se: float, delta: float,
                     alpha: float = ALPHA, df: float | None = None, step: float = 0.0) -> str:
    """One unit, read from its printed two-sided ``1 - alpha`` interval: wholly beyond the
    smallest effect the claim's way, ``holds``; wholly beyond it the other way (for a claim
    of no difference, beyond ``+-delta`` either way), ``opposite``; wholly inside
    ``+-delta``, ``equivalent``, unless the values move in steps (``step``) larger than
    ``delta``. For a cost (``at_most``) the interval below ``+delta`` holds and above it is
    the opposite. It refuses the same impossible numbers as :func:`decide`."""
    check_unit("reference", estimate, se, df)
    delta = _check_smallest_effect(delta)
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    if not np.isfinite(estimate):
        return NOT_MEASURED
    if not np.isfinite(se):
        return "inconclusive"
    q = stats.norm.ppf(1 - alpha / 2) if df is None else stats.t.ppf(1 - alpha / 2, df)
    x = -estimate if direction == "less" else estimate
    low, high = x - q * se, x + q * se
    if direction == "at_most":  # a cost: below +delta holds, above it is the opposite
        return "holds" if high < delta else "opposite" if low > delta else "inconclusive"
    if direction == "none":
        if low > delta or high < -delta:
            return "opposite"
    elif low > delta:
        return "holds"
    elif high < -delta:
        return "opposite"
    if -delta < low and high < delta and not step > delta:
        return "equivalent"
    return "inconclusive"


def permutations_for(alpha: float = ALPHA, tests: int = 1) -> int:
    """The fewest permutations whose smallest p-value, ``1/(n+1)``, lets the most
    significant of ``tests`` Holm-adjusted tests fall below ``alpha``: ``n + 1 > tests /
    alpha``."""
    return int(math.ceil(tests / alpha))
