"""What a claim is, and what evidence for it is: the records every paper module fills in.

One :class:`Claim` per claim of a paper: which paper makes it and where, what it says, the
number this book computes to test it, the direction the claim predicts for that number, the
smallest effect that would matter (with the reason), and the control the number is read
against (:data:`CONTROL_KINDS`: the best simple baseline, a null from the same layers, or a
control condition), which the statistic subtracts or compares with, and the papers' own
effect size beside the smallest effect (``paper_effect``, quoted; ``paper_value``, the same on the
statistic's scale where the paper states a number): a smallest effect larger than the papers'
own effect would reject the papers' data.

A claim also names the chapter whose results test it and its ``evidence``: the one function
that turns those results into :class:`Evidence`, one record per unit (a task, a model, a
measure, a pair of seeds). The function's parameters name the results it reads
(:attr:`Claim.reads`); it raises :class:`NotMeasured` or :class:`DidNotTrain` when those
results cannot test the claim, and :class:`Uncontrolled` when they cannot separate the
claim's factor from another without a control condition they lack.
:func:`analysis_lib.claims.verdicts.judge` calls it and draws the verdict by the book's one
rule, :func:`analysis_lib.claims.verdicts.decide`.

A statistic is always oriented so that the claim reads as one of four statements:

* ``"greater"``: the statistic exceeds ``+smallest_effect``;
* ``"less"``: the statistic is below ``-smallest_effect``;
* ``"none"``: the statistic lies within ``+-smallest_effect`` (a claim of no difference);
* ``"at_most"``: the statistic, a cost, stays below ``+smallest_effect`` (a claim that one
  setting does as well as another: "costs little", "reaches the full score"); a setting
  that does better costs nothing and satisfies it.

Smallest effects are on the statistic's own scale: CKA-like similarities in [0, 1], test
accuracies, held-out alignment distances, Pearson correlations (on Fisher's z scale where
the claim says ``fisher_z``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from .training_gate import TRAINED_ABOVE_MAJORITY

PAPERS = {
    "Wu": "Wu et al. 2020, Similarity analysis of contextual word representation models",
    "Phang": "Phang et al. 2021, Fine-tuned transformers show clusters of similar "
             "representations across layers",
    "Merchant": "Merchant et al. 2020, What happens to BERT embeddings during fine-tuning?",
    "Ren": "Ren et al. 2023, All roads lead to Rome? Exploring the invariance of "
           "transformers' representations",
}
DIRECTIONS = ("greater", "less", "none", "at_most")
#: what a claim's statistic is read against: a simple alternative it must beat
#: (``baseline``: ridge for a fitted map, the full model for a cut one, no relation for a
#: correlation), the same layers with the correspondence of their stimuli broken
#: (``null``: a permutation null at the page's sizes), or the same models in a control
#: condition (``condition``: another layer, the pretrained model, the other task's model on
#: the same stimuli)
CONTROL_KINDS = ("baseline", "null", "condition")
#: the chapters whose results test the claims, one notebook each
CHAPTERS = ("representation", "attention", "finetuning", "truncation", "seeds", "domains")


@dataclass(frozen=True)
class Claim:
    """One claim of one paper, and how this book tests it."""

    id: str
    paper: str
    where: str
    claim: str
    reported: str
    statistic: str
    direction: str
    smallest_effect: float
    why: str
    control: tuple[str, str] = ("", "")
    paper_effect: str = ""
    paper_value: float | None = None
    #: the chapter whose results :attr:`evidence` reads (one of :data:`CHAPTERS`)
    chapter: str = field(default="", kw_only=True)
    #: results -> the units' evidence; its parameter names are the results it reads
    evidence: Callable[..., list[Evidence]] | None = field(default=None, kw_only=True,
                                                           repr=False, compare=False)
    #: the results (run -> training problem) that stop the claim when any run in them
    #: failed the training gate, checked in this order
    gates: tuple[str, ...] = field(default=(), kw_only=True)
    #: the units' estimates are Fisher's z of a correlation, so the smallest effect (a
    #: correlation) is compared as its ``atanh``
    fisher_z: bool = field(default=False, kw_only=True)
    #: the id of the claim this one presupposes (the paper explains this claim's effect
    #: through it): where that claim does not hold on the same results, this one gets no
    #: verdict, and says so with both claims' numbers
    requires: str = field(default="", kw_only=True)

    @property
    def reads(self) -> tuple[str, ...]:
        """Which chapter results the claim's evidence reads (the names of its function's
        parameters that have no default; one with a default is a setting, not a
        result)."""
        if self.evidence is None:
            return ()
        return tuple(name for name, p in inspect.signature(self.evidence).parameters.items()
                     if p.default is inspect.Parameter.empty)

    @property
    def delta(self) -> float:
        """The smallest effect on the scale of the units' estimates."""
        return float(np.arctanh(self.smallest_effect)) if self.fisher_z \
            else self.smallest_effect

    def __post_init__(self):
        if self.paper not in PAPERS:
            raise ValueError(f"claim {self.id!r}: paper must be one of {sorted(PAPERS)}, "
                             f"got {self.paper!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"claim {self.id!r}: direction must be one of {DIRECTIONS}, "
                             f"got {self.direction!r}")
        if not self.smallest_effect >= 0:
            raise ValueError(f"claim {self.id!r}: smallest_effect must be >= 0, "
                             f"got {self.smallest_effect!r}")
        if self.control[0] not in CONTROL_KINDS or not self.control[1]:
            raise ValueError(f"claim {self.id!r}: control must name its kind (one of "
                             f"{CONTROL_KINDS}) and what it is, got {self.control!r}")
        if not self.paper_effect:
            raise ValueError(f"claim {self.id!r}: paper_effect must quote the paper's own "
                             "effect size beside the smallest effect (or say that the paper "
                             "shows it in a figure only)")
        if self.evidence is not None and self.chapter not in CHAPTERS:
            raise ValueError(f"claim {self.id!r}: chapter must be one of {CHAPTERS}, got "
                             f"{self.chapter!r}")
        if self.fisher_z and not self.smallest_effect < 1:
            raise ValueError(f"claim {self.id!r}: a correlation's smallest effect must be "
                             f"below 1, got {self.smallest_effect!r}")


def figure(where: str) -> str:
    """The ``paper_effect`` of a claim whose paper shows its effect in a figure only."""
    return f"in a figure only ({where}), no number stated"


#: why 0.02 is the smallest effect of a CKA-like similarity
SIM = ("0.02 in CKA is about the spread of one number between two samples of 500 "
       "sentences; smaller differences would not survive a change of corpus sample")
#: why 0.02 is the smallest effect of a test accuracy
ACC = ("0.02 accuracy is about one binomial standard error on the book's 500 test "
       "examples; a smaller gap is not a difference a reader could act on")


#: the kinds of :class:`Level`: the least a variable can read where it carries no
#: information (``floor``: chance, the majority baseline), the most it can read
#: (``ceiling``: a seed's own score, which a map from another seed cannot beat), and the
#: line a trained model must clear for a claim about trained models to read it
#: (``adequacy``: a fine-tuned model's accuracy against the head on its frozen encoder)
LEVEL_KINDS = ("floor", "ceiling", "adequacy")


@dataclass(frozen=True)
class Level:
    """A variable a unit's statistic reads, beside its floor or ceiling.

    A correlation or a difference read where one of its variables sits at its floor
    measures the floor, not the claim: UNTUNED's accuracy at the majority baseline in most
    layers gives a correlation with CKA from a few examples' difference. A claim whose
    control already sits at the ceiling has no room left for the effect it predicts. The
    evidence function that computes a statistic names the variables it reads with their
    levels (:meth:`Evidence.reading`); the verdict rule
    (:func:`~analysis_lib.claims.verdicts.decide`) refuses a unit read on a variable at its
    floor and names a ceiling as the cause of a claim that stays undecided. An ``adequacy``
    level is a precondition of the same shape: a fine-tuned model whose accuracy does not
    clear the head on its frozen encoder by ``resolution`` was not trained enough for a
    claim about fine-tuning, and the rule refuses every unit that reads it
    (:func:`~analysis_lib.claims.verdicts.with_adequacy` attaches these levels).

    ``values``: the variable's values in the unit (one per layer, seed or pair); ``bound``:
    the floor or ceiling, one number or one per value; a value is *at* it when it lies
    within ``resolution`` of it (beyond it counts as at it too); ``needed``: how many values
    must lie clear of the level for the statistic to read the variable (one for a
    difference, three for a correlation: two points always correlate).
    """

    variable: str
    values: tuple[float, ...]
    bound: tuple[float, ...]
    resolution: float
    kind: str = "floor"
    needed: int = 1

    def __init__(self, variable: str, values: Iterable[float], bound: float | Iterable[float],
                 resolution: float, kind: str = "floor", needed: int = 1) -> None:
        given = tuple(float(v) for v in values)
        bounds = (tuple(float(b) for b in bound) if isinstance(bound, Iterable)
                  else (float(bound),) * len(given))
        if kind not in LEVEL_KINDS:
            raise ValueError(f"level of {variable!r}: kind must be one of {LEVEL_KINDS}, got "
                             f"{kind!r}")
        if len(bounds) != len(given):
            raise ValueError(f"level of {variable!r}: {len(bounds)} bounds for {len(given)} "
                             "values; give one bound, or one per value")
        if not np.isfinite(bounds).all() or not np.isfinite(given).all():
            raise ValueError(f"level of {variable!r}: its values and bound must be finite "
                             "numbers (leave a value that was not measured out)")
        if not (np.isfinite(resolution) and resolution >= 0):
            raise ValueError(f"level of {variable!r}: resolution must be a finite number >= 0, "
                             f"got {resolution!r}")
        if isinstance(needed, bool) or not isinstance(needed, (int, np.integer)) or needed < 1:
            raise ValueError(f"level of {variable!r}: needed must be a count >= 1, got "
                             f"{needed!r}")
        for name, value in (("variable", variable), ("values", given), ("bound", bounds),
                            ("resolution", float(resolution)), ("kind", kind),
                            ("needed", int(needed))):
            object.__setattr__(self, name, value)

    @classmethod
    def accuracy(cls, variable: str, accuracies: Iterable[float],
                 majority: float | Iterable[float], needed: int = 1) -> Level:
        """Accuracies beside their floor, the majority baseline, at the resolution of the
        book's training gate (:data:`~analysis_lib.claims.training_gate.TRAINED_ABOVE_MAJORITY`):
        an accuracy that would not count as learnt for a fine-tuned run sits at its floor."""
        return cls(variable, accuracies, majority, TRAINED_ABOVE_MAJORITY, "floor", needed)

    @property
    def is_clear(self) -> np.ndarray:
        """Whether each value lies clear of the level, more than ``resolution`` above a
        floor or below a ceiling (one boolean per value)."""
        gaps = np.subtract(self.values, self.bound) * (-1 if self.kind == "ceiling" else 1)
        return np.asarray(gaps > self.resolution, dtype=bool).reshape(len(self.values))

    @property
    def clear(self) -> int:
        """How many values lie clear of the level."""
        return int(self.is_clear.sum())

    @property
    def at_level(self) -> int:
        """How many values sit at the level (within ``resolution``, or beyond it)."""
        return len(self.values) - self.clear

    @property
    def stuck(self) -> bool:
        """Whether fewer than ``needed`` values lie clear of the level, so that the
        statistic cannot read the variable."""
        return self.clear < self.needed

    def describe(self) -> str:
        """The level in words: ``UNTUNED's accuracy at its floor (0.450, within 0.02) in 4
        of 5 values`` (a bound that differs between values is given as its range)."""
        shown = (f"{self.bound[0]:.3f}" if len(set(self.bound)) <= 1 and self.bound
                 else f"{min(self.bound):.3f} to {max(self.bound):.3f}")
        if self.kind == "adequacy":
            values = ", ".join(f"{v:.3f}" for v in self.values)
            where = (f" in {self.at_level} of {len(self.values)} values"
                     if len(self.values) > 1 else "")
            return (f"{self.variable}: {values}, not above {shown} by more than "
                    f"{self.resolution:.3g}{where}")
        return (f"{self.variable} at its {self.kind} ({shown}, within {self.resolution:.3g}) "
                f"in {self.at_level} of {len(self.values)} values")


@dataclass(frozen=True)
class Evidence:
    """One unit's estimate of a claim's statistic.

    ``se``: standard error (0 for a number without sampling error, NaN when there is no
    spread to estimate, e.g. one seed); ``df``: degrees of freedom of a t reference (``None``:
    normal); ``n``: how many values the estimate comes from; ``unit``: what it is about;
    ``levels``: the variables the statistic reads beside their floors or ceilings
    (:class:`Level`; add them with :meth:`reading`); ``named``: the values of distinct
    objects (models, pairs of models) the estimate is the mean of, by name
    (:meth:`from_named`), so that an undecided unit can say which of them carry it;
    ``step``: the smallest change one of its values can show (0 for a statistic on a
    continuous scale; add it with :meth:`in_steps`), so that values alike because their
    scale cannot tell them apart are not read as evidence of no difference.
    """

    unit: str
    estimate: float
    se: float
    df: float | None = None
    n: int | None = None
    note: str = ""
    levels: tuple[Level, ...] = ()
    named: tuple[tuple[str, float], ...] = ()
    step: float = 0.0

    def __post_init__(self) -> None:
        # evidence no estimate can give is refused where it is made, so that the verdict
        # rule and its interval-form twin never read it
        check_unit(self.unit, self.estimate, self.se, self.df)
        if self.n is not None and not (isinstance(self.n, (int, np.integer)) and self.n >= 0):
            raise ValueError(f"evidence {self.unit!r}: n must be a count (an integer >= 0), "
                             f"got {self.n!r}")
        if not all(isinstance(level, Level) for level in self.levels):
            raise TypeError(f"evidence {self.unit!r}: levels must be Level records")
        if isinstance(self.step, (bool, str)) or not (
                isinstance(self.step, (int, float, np.number)) and 0 <= self.step < np.inf):
            raise ValueError(f"evidence {self.unit!r}: step must be a finite number >= 0 (0 for "
                             f"a statistic on a continuous scale), got {self.step!r}")

    def reading(self, *levels: Level) -> Evidence:
        """This evidence, with the variables its statistic reads beside their floors or
        ceilings (:class:`Level`), for the verdict rule's floor check."""
        return replace(self, levels=(*self.levels, *levels))

    def in_steps(self, step: float) -> Evidence:
        """This evidence, whose values move only in steps of ``step`` (a rank among L layers,
        scaled to [0, 1], moves by 1/(L-1)). Seeds that all read the same step agree with no
        spread, yet a change smaller than a step would read the same: where the step is
        larger than the claim's smallest effect, the verdict rule does not read such a unit
        as showing no difference (:func:`~analysis_lib.claims.verdicts.decide`)."""
        return replace(self, step=float(step))

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
        measured (a run that gave nothing; None reads as NaN): it is left out and the note
        says how many were; an infinite value is no estimate of anything and is refused, and
        so is a value that is not a number (text, a boolean)."""
        given = np.asarray([np.nan if v is None else v for v in values])
        if given.dtype.kind not in "iuf":  # text, booleans, mixed objects
            raise TypeError(
                f"evidence {unit!r}: values must be numbers (int or float; NaN or None for "
                f"a value that was not measured), got {given.dtype.name} values such as "
                f"{given.ravel()[:3].tolist()!r}; convert them first (float(text))")
        given = given.astype(np.float64).ravel()
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
    def from_named(cls, unit: str, values: Mapping[str, float], note: str = "") -> Evidence:
        """:meth:`from_values` of the values of distinct objects (models, pairs of models:
        not exchangeable draws such as seeds), by name: the note prints them one by one
        (:func:`per_value`) and the unit keeps them (``named``), so that a unit left
        undecided because its objects part (some clear the smallest effect, others sit at
        chance) says so instead of asking for more of them."""
        found = cls._listed(unit, values, note, "per value")
        named = tuple((str(k), float(v)) for k, v in values.items()
                      if v is not None and np.isfinite(v))
        return replace(found, named=named)

    @classmethod
    def from_seeds(cls, unit: str, values: Mapping[Any, float], note: str = "") -> Evidence:
        """:meth:`from_values` of one value per fine-tuning seed, by seed: the note prints
        them one by one (``per seed: 0 +0.012, 1 +0.034``), so that a reader sees whether
        one run carries the mean or widens the interval (a run stopped early, a seed at
        chance)."""
        return cls._listed(unit, values, note, "per seed")

    @classmethod
    def _listed(cls, unit: str, values: Mapping[Any, float], note: str, label: str
                ) -> Evidence:
        """:meth:`from_values` of ``values`` (checked there first), its note ending with
        them one by one (:func:`per_value`)."""
        found = cls.from_values(unit, list(values.values()), note)
        shown = per_value(values, label)
        return replace(found, note=f"{found.note}; {shown}" if found.note else shown)

    @classmethod
    def from_paired(cls, unit: str, first: Mapping[Any, float], second: Mapping[Any, float],
                    note: str = "") -> Evidence:
        """``first - second`` paired by key (a fine-tuning seed: the two runs of one seed
        share the head's initialisation and the batch order), over the keys both hold, as
        :meth:`from_seeds`."""
        return cls.from_seeds(unit, {k: first[k] - second[k] for k in first if k in second},
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
    def from_seed_pairs(cls, unit: str, values: Mapping[tuple[Any, Any], float],
                        note: str = "") -> Evidence:
        """The mean of one value per pair of seeds (or models), with the seed as the unit:
        pairs that share a seed are not independent, so the standard error is the grouped
        jackknife over seeds (each replicate leaves out one seed and every pair with it,
        :meth:`from_jackknife`; ``K - 1`` degrees of freedom for ``K`` seeds), and ``n`` is
        the number of seeds. A t interval over the pairs themselves would count 15 pairs of
        6 seeds as 15 independent values and be too narrow to cover another draw of the
        seeds. ``values`` maps ``(seed a, seed b)`` to the pair's value (ordered pairs
        allowed); NaN values are left out. Fewer than three seeds leave no replicate with a
        pair: no spread to judge by. With three or more, the note ends with each seed's mean
        over the pairs it is in, the pairs each jackknife replicate leaves out (``per seed,
        the mean of its pairs: 0 +0.551, ...``, the seeds in the order the pairs first name
        them), so that a reader sees whether one seed carries the mean."""
        given = {pair: float(v) for pair, v in values.items() if np.isfinite(v)}
        for pair in given:
            if not (isinstance(pair, tuple) and len(pair) == 2 and pair[0] != pair[1]):
                raise ValueError(f"evidence {unit!r}: a seed pair must be a tuple of two "
                                 f"different seeds, got {pair!r}")
        seeds = list(dict.fromkeys(seed for pair in given for seed in pair))
        described = f"{len(given)} pairs of {len(seeds)} seeds, the seed the unit"
        note = f"{note}; {described}" if note else described
        if not given:
            return cls(unit, float("nan"), float("nan"), None, 0, note)
        estimate = float(np.mean(list(given.values())))
        replicates = [float(np.mean(kept)) for seed in seeds
                      if (kept := [v for pair, v in given.items() if seed not in pair])]
        if len(replicates) < 3 or len(replicates) != len(seeds):
            alone = [seed for seed in seeds if all(seed in pair for pair in given)]
            why = ("fewer than three seeds" if len(seeds) < 3 else
                   f"every pair measured holds {alone[0]}, so leaving it out leaves none")
            return cls(unit, estimate, float("nan"), None, len(seeds),
                       f"{note}; {why}: no spread to judge by")
        each = {seed: float(np.mean([v for pair, v in given.items() if seed in pair]))
                for seed in seeds}
        note = f"{note}; {per_value(each, 'per seed, the mean of its pairs')}"
        return replace(cls.from_jackknife(unit, estimate, replicates, note), n=len(seeds))

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


def per_value(values: Mapping[Any, float], label: str = "per value") -> str:
    """A unit's values one by one, for its note (``per value: minilm - mpnet +0.110,
    minilm - smollm2 +0.004``; ``label`` "per seed" for a unit over seeds), so that a reader
    sees which models, pairs or seeds carry its mean."""
    return f"{label}: " + ", ".join(
        f"{name} {value:+.3f}" if value is not None and np.isfinite(value)
        else f"{name} not measured" for name, value in values.items())


def check_unit(unit: str, estimate: float, se: float, df: float | None) -> None:
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


class Paper:
    """One paper's claims, each registered by :meth:`Paper.claim` on the function that computes its
    evidence, so that a claim's record sits beside its computation."""

    def __init__(self, name: str):
        if name not in PAPERS:
            raise ValueError(f"paper must be one of {sorted(PAPERS)}, got {name!r}")
        self.name = name
        self.claims: list[Claim] = []

    def claim(self, id: str, where: str, claim: str, reported: str, statistic: str,
              direction: str, smallest_effect: float, why: str, **fields: Any
              ) -> Callable[[Callable[..., list[Evidence]]], Callable[..., list[Evidence]]]:
        """A decorator: the :class:`Claim` of this paper whose evidence the decorated
        function computes (``fields``: the record's other fields, ``chapter`` among them).
        The function itself is returned unchanged."""
        def register(evidence: Callable[..., list[Evidence]]) -> Callable[..., list[Evidence]]:
            if any(c.id == id for c in self.claims):
                raise ValueError(f"{self.name}: two claims share the id {id!r}")
            record = Claim(id, self.name, where, claim, reported, statistic, direction,
                           smallest_effect, why, evidence=evidence, **fields)
            self.claims.append(record)
            _OF_EVIDENCE[evidence] = record
            return evidence
        return register


#: every claim by the function that computes its evidence (:func:`claim_of`)
_OF_EVIDENCE: dict[Callable[..., list[Evidence]], Claim] = {}


def claim_of(evidence: Callable[..., list[Evidence]]) -> Claim:
    """The claim whose evidence ``evidence`` computes (``claim_of(phang.untuned)``): how code
    outside the papers' modules names a claim, so that a claim's id is written once, in its
    paper's module."""
    try:
        return _OF_EVIDENCE[evidence]
    except KeyError:
        name = getattr(evidence, "__qualname__", repr(evidence))
        raise ValueError(f"{name} computes no claim's evidence; pass the function a paper's "
                         "module registers with @Paper.claim") from None


class NoVerdict(Exception):
    """Raised by an evidence function when its chapter's results cannot test the claim."""


class NotMeasured(NoVerdict):
    """The results cannot test the claim (a section that did not run, a design that cannot
    separate the claim's factor from another); the message says why."""


class Uncontrolled(NotMeasured):
    """The results cannot separate the factor the claim names from another that differs
    with it, because the control condition that tells them apart was not run (a tagging
    task is syntactic and labels every token; only a token-level task without syntax
    separates the two). ``units`` are what the statistic reads without that control: the
    verdict shows what they would read beside the reason, and never judges the claim by
    them."""

    def __init__(self, why: str, units: Sequence[Evidence]):
        self.units = list(units)
        super().__init__(why)


class DidNotTrain(NoVerdict):
    """The runs the claim reads failed the training gate (``problems``: run -> problem)."""

    def __init__(self, problems: Mapping[str, str]):
        self.problems = dict(problems)
        super().__init__("; ".join(f"{run}: {why}" for run, why in self.problems.items()))


#: a unit's outcome
OUTCOMES = ("holds", "opposite", "equivalent", "inconclusive")
#: what a claim reads when the units disagree (:func:`~analysis_lib.claims.verdicts.decide`)
MIXED = "mixed"
#: what a claim reads in place of a verdict when nothing was measured, or its runs did not
#: train (:func:`~analysis_lib.claims.verdicts.untrained`)
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
        """The estimates with their intervals, one unit after another, each with its note
        (what the unit's number leaves out or shares) in parentheses."""
        if self.outcome == NOT_MEASURED and not self.reason.startswith("not measured"):
            return f"not measured: {self.reason}"
        if self.units.empty:
            return self.reason or "not measured"
        parts = []
        for row in self.units.itertuples():
            text = f"{row.estimate:+.3f}" if np.isfinite(row.estimate) else "n/a"
            if np.isfinite(row.low):
                text += f" [{row.low:+.3f}, {row.high:+.3f}]"
            note = getattr(row, "note", "")
            if isinstance(note, str) and note:
                text += f" ({note})"
            parts.append(f"{row.unit}: {text}" if row.unit else text)
        return "; ".join(parts)
