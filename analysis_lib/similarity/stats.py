"""Uncertainty for similarity values: bootstrap intervals and permutation tests.

Both work for one pair of representations and for whole layer x layer matrices. Resampling
is over stimuli (rows), the same rows for every layer in one draw, so a matrix's entries stay
comparable. Words of one sentence are not independent: pass ``groups`` (e.g. the sentence index
of every word row, ``Extraction.word_sentence``) to resample or shuffle whole sentences.

For statistics that are not one measure of two arrays (a curve over layers, a difference of
two conditions, an average over fine-tuning seeds), the same resampling is offered on its own:
:func:`group_weights` (a resample of whole groups as row multiplicities, for measures that take
``weights``, such as :func:`~.measures.rsa`), :func:`group_bootstrap` (the samples of any statistic
of those weights), :func:`two_sample_permutation` (whole groups shuffled between two
conditions) and :func:`p_greater` (the one-sided p-value every test here reports); several
tests' p-values are adjusted together by :func:`holm`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from tqdm.auto import tqdm

from ..errors import UndefinedMeasure
from ..runtime import checks
from ..runtime.profile import profiled
from .pairwise import pairwise
from .registry import canonical


@dataclass(frozen=True)
class BootstrapResult:
    """Point estimate on all stimuli, percentile interval, and the bootstrap samples
    (``samples[b]`` has the shape of ``estimate``)."""

    estimate: np.ndarray | float
    low: np.ndarray | float
    high: np.ndarray | float
    samples: np.ndarray
    level: float
    #: how many resamples the measure was undefined on, because they drew copies of too few
    #: stimuli; they are NaN in ``samples`` and left out of the interval
    undefined: int = 0


@dataclass(frozen=True)
class PermutationResult:
    """Observed value, one-sided p-value (the chance of a value at least as high with the
    stimuli of one side shuffled) and the null samples."""

    statistic: np.ndarray | float
    p_value: np.ndarray | float
    null: np.ndarray


def _as_layers(X, Y):
    """``(single, A, B)``: one array each (``single``) or lists of layers. A list is read as
    layers, so a list whose items are numbers or 1-D rows is refused: it is one layer's rows."""
    single = not isinstance(X, (list, tuple))
    A = [X] if single else list(X)
    B = None if Y is None else ([Y] if single else list(Y))
    if single and B is None:
        raise ValueError("give Y when X is a single array")
    for name, side in (("X", A), ("Y", B or [])):
        if not single and side and np.ndim(side[0]) < 2:
            raise ValueError(f"{name} is a list of {len(side)} rows of numbers, but a list means "
                             f"layers (a matrix of results); for one layer pass an array: "
                             f"np.asarray({name}) (stimuli x neurons)")
    return single, A, B


def _n_rows(A) -> int:
    rows = {np.asarray(x).shape[0] for x in A}
    if len(rows) != 1:
        raise ValueError(f"every layer must have the same rows (stimuli), got {sorted(rows)}")
    return rows.pop()


def _group_index(groups, n):
    if groups is None:
        return None
    g = np.asarray(groups)
    if g.shape != (n,):
        raise ValueError(f"groups must have one entry per row ({n}), got shape {g.shape}")
    _, inverse = np.unique(g, return_inverse=True)
    if inverse.max() < 1:
        raise ValueError("groups hold a single group: resampling or shuffling whole groups "
                         "needs at least two (give each sentence its own group id)")
    return [np.flatnonzero(inverse == k) for k in range(inverse.max() + 1)]


def _compute(A, B, measure, options):
    return pairwise(A, B, measure, progress=False, **options)


#: the intervals :func:`bootstrap` gives (the first is the default)
INTERVALS = ("normal", "percentile", "basic")


@profiled("resampling", lambda *a, **k: f"bootstrap {k.get('measure', 'linear_cka')}")
def bootstrap(X: ArrayLike, Y: ArrayLike | None = None, measure: str = "linear_cka", *,
              n_boot: int = 1000,
              level: float = 0.95, seed: int = 0, groups: ArrayLike | None = None,
              progress: bool | None = None,
              interval: str = "normal", **options: Any) -> BootstrapResult:
    """Bootstrap interval of a similarity, resampling stimuli with replacement.

    Parameters
    ----------
    X, Y : arrays (n, d), or lists of them (layers) for a matrix; Y=None with a list compares
        the list with itself.
    measure : str
        A name accepted by :func:`~.pairwise.pairwise` (not the attention methods).
    n_boot : int
        Number of resamples.
    level : float
        Coverage of the interval (0.95 gives the 2.5th and 97.5th percentiles).
    groups : array (n,), optional
        Resample whole groups (e.g. sentences) instead of single rows.
    progress : bool, optional
        Show a progress bar; by default one appears when the resampling runs longer than a
        second.
    interval : {'normal', 'percentile', 'basic'}
        'normal' (the default): the estimate plus and minus the normal quantile times the
        standard deviation of the resampled values, so the interval is centred on the
        estimate and reads only the resamples' spread. 'percentile': the quantiles of the
        resampled values. 'basic' (reverse percentile): ``2 * estimate - quantiles``.

    Notes
    -----
    Duplicated rows in a resample make stimuli identical. That shifts some measures: RSA sees
    perfectly similar pairs, and CKA's chance level rises with fewer distinct stimuli (about
    63% of the rows of a resample are distinct), so for low similarities the resampled values
    lie above the estimate: on 500 x 64 unrelated layers the estimate is 0.063 and the
    resamples lie near 0.11. That shift is made by the resampling, not by the estimator, so
    neither the 'percentile' interval (which follows it and can miss the estimate) nor the
    'basic' one (which subtracts it and misses the estimate the other way) describes the
    estimate's uncertainty; the default 'normal' interval uses the spread alone. Where the
    shift is negligible (few neurons for the rows) all three cover the true value at about
    their nominal rate (tested on synthetic data with a known value).
    """
    name = canonical(measure)
    if name.startswith("attention_"):
        raise ValueError("bootstrap resamples rows of (n, d) arrays; for attention, resample "
                         "sentences and call attention_similarity yourself")
    checks.number(level, "level", 0, 1, open_low=True, open_high=True)
    checks.integer(n_boot, "n_boot", low=2, high=MAX_RESAMPLES)
    checks.integer(seed, "seed", low=0)
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {INTERVALS}, got {interval!r}")
    single, A, B = _as_layers(X, Y)
    n = _n_rows(A + (B or []))
    if groups is not None:
        _group_index(groups, n)  # one entry per row, two groups or more
    rng = np.random.default_rng(seed)
    estimate = _compute(A, B, name, options)
    samples = np.empty((n_boot,) + estimate.shape)
    for k in tqdm(range(n_boot), desc="bootstrap", disable=progress is False, leave=False,
                  delay=1.0 if progress is None else 0.0):
        if groups is None:
            rows = rng.integers(0, n, size=n)
        else:  # whole groups, drawn as group_bootstrap draws them
            rows = np.repeat(np.arange(n), group_weights(groups, rng))
        take = [np.asarray(x)[rows] for x in A]
        try:
            samples[k] = _compute(take, None if B is None else [np.asarray(x)[rows] for x in B],
                                  name, options)
        except UndefinedMeasure:  # the resample drew copies of too few stimuli
            samples[k] = np.nan
    undefined = _check_undefined(samples, n_boot)
    alpha = (1 - level) / 2
    if interval == "normal":
        spread = stats.norm.ppf(1 - alpha) * np.nanstd(samples, axis=0, ddof=1)
        low, high = estimate - spread, estimate + spread
    else:
        low, high = np.nanquantile(samples, [alpha, 1 - alpha], axis=0)
        if interval == "basic":
            low, high = 2 * estimate - high, 2 * estimate - low
    if single:
        return BootstrapResult(float(estimate[0, 0]), float(low[0, 0]), float(high[0, 0]),
                               samples[:, 0, 0], level, undefined)
    return BootstrapResult(estimate, low, high, samples, level, undefined)


#: the largest share of resamples that may be undefined before a bootstrap refuses to answer
MAX_UNDEFINED = 0.05
#: the most resamples or permutations a call takes: a 95% interval's Monte Carlo error is
#: already far below its width at 10,000, and each resample recomputes the measure
MAX_RESAMPLES = 100_000


def _check_undefined(samples: np.ndarray, n_boot: int) -> int:
    """How many resamples were undefined: a warning when a few were (they are left out of
    the interval), an error when more than :data:`MAX_UNDEFINED` of them were (an interval
    from the rest would describe a different sampling scheme)."""
    undefined = int(np.isnan(samples.reshape(n_boot, -1)).all(axis=1).sum())
    if undefined > MAX_UNDEFINED * n_boot:
        raise UndefinedMeasure(
            f"the measure is undefined on {undefined} of {n_boot} resamples (they drew copies "
            "of too few distinct stimuli, e.g. rows without variance): the data are too few or "
            "too repetitive for a bootstrap; use more stimuli, or resample whole groups")
    if undefined:
        warnings.warn(f"the measure is undefined on {undefined} of {n_boot} resamples (copies "
                      "of too few distinct stimuli); they are left out of the interval "
                      "(BootstrapResult.undefined)", RuntimeWarning, stacklevel=3)
    return undefined


@profiled("resampling", lambda *a, **k: f"permutations {k.get('measure', 'linear_cka')}")
def permutation_test(X: ArrayLike, Y: ArrayLike | None = None, measure: str = "linear_cka", *,
                     n_perm: int = 1000,
                     seed: int = 0, groups: ArrayLike | None = None,
                     progress: bool | None = None,
                     **options: Any) -> PermutationResult:
    """Permutation test of "no relation": the rows of the second side are shuffled (the same
    shuffle for all its layers), breaking the stimulus correspondence.

    Returns the observed value and ``p = (1 + #{null >= observed}) / (1 + n_perm)``. With a
    list and Y=None the list is compared with a shuffled copy of itself. ``groups`` shuffles
    whole groups of rows among groups of the same size. ``progress``: a progress bar (by
    default one appears when the test runs longer than a second).
    """
    name = canonical(measure)
    if name.startswith("attention_"):
        raise ValueError("permutation_test shuffles rows of (n, d) arrays, not attention maps")
    checks.integer(n_perm, "n_perm", low=1, high=MAX_RESAMPLES)
    checks.integer(seed, "seed", low=0)
    single, A, B = _as_layers(X, Y)
    second = A if B is None else B
    n = _n_rows(A + second)
    index = _group_index(groups, n)
    if index is not None:
        _check_shuffles(index)
    rng = np.random.default_rng(seed)
    observed = _compute(A, second, name, options)
    null = np.empty((n_perm,) + observed.shape)
    for k in tqdm(range(n_perm), desc="permutation", disable=progress is False, leave=False,
                  delay=1.0 if progress is None else 0.0):
        rows = rng.permutation(n) if index is None else _shuffle_groups(index, rng, n)
        null[k] = _compute(A, [np.asarray(x)[rows] for x in second], name, options)
    p = p_greater(null, observed)
    if single:
        return PermutationResult(float(observed[0, 0]), float(p[0, 0]), null[:, 0, 0])
    return PermutationResult(observed, p, null)


def _check_shuffles(index: list[np.ndarray]) -> None:
    """Refuse groups that leave the shuffle no freedom, and warn when they leave little.
    Whole groups swap only with groups of the same size, so the distinct shuffles number the
    product of ``count!`` over the sizes: 1 when every group has its own size (the null is
    the observed value and p would be 1 whatever the data)."""
    counts = np.unique([len(g) for g in index], return_counts=True)[1]
    # (capped: only whether the count reaches 20 matters, and 4! already does)
    distinct = math.prod(math.factorial(min(int(c), 5)) for c in counts)
    if distinct == 1:
        raise ValueError(
            f"no group of rows can swap with another: the {len(index)} groups all have "
            "different sizes, and whole groups only swap with groups of their size, so the "
            "shuffle can only return the observed order (p would be 1); use groups of equal "
            "sizes (e.g. the same number of words per sentence) or shuffle rows (groups=None)")
    if distinct < 1 / 0.05:
        warnings.warn(f"the groups allow only {distinct} distinct shuffles (whole groups swap "
                      f"only with groups of their size), so no p-value can fall below "
                      f"{1 / distinct:.2f}; use more groups of each size", RuntimeWarning,
                      stacklevel=3)


def _shuffle_groups(index, rng, n):
    """A row permutation that maps each group onto a random group of the same size."""
    rows = np.empty(n, dtype=np.int64)
    sizes = np.array([len(g) for g in index])
    for size in np.unique(sizes):
        members = np.flatnonzero(sizes == size)
        targets = rng.permutation(members)
        for src, dst in zip(members, targets):
            rows[index[src]] = index[dst]
    return rows


def p_greater(null: np.ndarray, observed) -> np.ndarray:
    """One-sided permutation p-value of each entry, ``(1 + #{null >= observed}) / (1 +
    n_perm)`` over the first axis of ``null`` (ties within 1e-12 count as reached): never
    below ``1 / (n_perm + 1)``, the floor a test's number of permutations sets."""
    null = np.asarray(null, dtype=np.float64)
    return (1 + (null >= np.asarray(observed) - 1e-12).sum(axis=0)) / (1 + len(null))


def group_weights(groups, rng: np.random.Generator) -> np.ndarray:
    """Row multiplicities of one bootstrap resample of whole groups: every group (e.g. a
    sentence) is drawn with replacement as many times as there are groups, and each of its
    rows weighs the number of times its group was drawn (0 for groups not drawn). The
    same resample as duplicating the rows, for measures that take ``weights``."""
    ids, index = np.unique(np.asarray(groups), return_inverse=True)
    if len(ids) < 2:
        raise ValueError("the rows come from a single group; a bootstrap over groups needs at "
                         "least two (give each sentence its own group id)")
    counts = rng.multinomial(len(ids), np.full(len(ids), 1.0 / len(ids)))
    return counts[index].astype(np.int64)


def group_bootstrap(statistic, groups, *, n_boot: int = 1000, seed: int = 0,
                    progress: bool = False) -> np.ndarray:
    """``n_boot`` samples of ``statistic(weights, rng)``, ``weights`` from
    :func:`group_weights` (``rng`` lets the statistic draw more, such as a fine-tuning seed
    per resample: a two-level bootstrap). Returns an array (n_boot, *statistic's shape);
    NaN entries (a resample where the statistic is undefined) are kept for the caller to
    count."""
    checks.integer(n_boot, "n_boot", low=2, high=MAX_RESAMPLES)
    checks.integer(seed, "seed", low=0)
    rng = np.random.default_rng(seed)
    samples = [np.asarray(statistic(group_weights(groups, rng), rng), dtype=np.float64)
               for _ in tqdm(range(n_boot), desc="bootstrap", disable=not progress,
                             leave=False)]
    return np.stack(samples)


def two_sample_permutation(statistic, groups, first, *, n_perm: int = 1000, seed: int = 0,
                           progress: bool = False) -> PermutationResult:
    """Permutation test of "the condition does not matter" for ``statistic(mask)``, where
    ``mask`` marks the rows of the first condition: whole groups are shuffled between the two
    conditions (the first keeps its number of groups), and ``p = p_greater(null, observed)``
    is small when the observed statistic is larger than the shuffles give.

    ``groups`` (n,) gives each row's group; ``first`` (n,) bool marks the first condition's
    rows, and a group must lie in one condition."""
    checks.integer(n_perm, "n_perm", low=1, high=MAX_RESAMPLES)
    checks.integer(seed, "seed", low=0)
    groups, first = np.asarray(groups), np.asarray(first, dtype=bool)
    if groups.shape != first.shape or groups.ndim != 1:
        raise ValueError(f"groups and first must be one entry per row, got shapes "
                         f"{groups.shape} and {first.shape}")
    ids = np.unique(groups)
    inside = np.unique(groups[first])
    if np.intersect1d(inside, np.unique(groups[~first])).size:
        raise ValueError("a group has rows in both conditions; give the two conditions' groups "
                         "different ids")
    observed = np.asarray(statistic(first), dtype=np.float64)
    rng = np.random.default_rng(seed)
    null = np.stack([np.asarray(statistic(np.isin(groups, rng.permutation(ids)[:len(inside)])),
                                dtype=np.float64)
                     for _ in tqdm(range(n_perm), desc="permutation", disable=not progress,
                                   leave=False)])
    return PermutationResult(observed, p_greater(null, observed), null)


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
