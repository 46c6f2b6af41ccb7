"""Layer x layer matrices with one group of rows left out at a time (the grouped jackknife).

Recomputing the matrix without each of K groups of rows costs K whole passes. For measures
that read only the centred second moments of a pair of layers, the K leave-out matrices follow
from one pass instead: with every layer centred once on all its rows, the cross-product of
two layers over the rows outside group k is

    C_k = sum_{f != k} X_f' Y_f  -  s_x s_y' / n_k,      s_x = sum of X's rows outside k,

the same identity for each layer's own Gram matrix, and then the measure's own kernel (its
record's in :mod:`.registry`) runs on those moments. ``X_f' Y_f`` over the K groups together
cost one product of the whole layers, so the K matrices cost about what one does, where
recomputing costs K. The rows of each group are centred on the global mean, so the
correction term is small and no digits are lost to large activation offsets.

Measures read this way: :data:`~.registry.FROM_MOMENTS` (biased linear CKA and neuronsim,
whose kernels cost little beside the products). Any other measure (Procrustes and the CCA
family spend their time in a decomposition per pair and per group, which moments do not
save), debiased CKA, or a layer with a neuron that is constant on some leave-out set but not
on all rows (whose rounding rule needs the rows themselves) takes the plain path:
``leave_out_matrices_plain``, which recomputes :func:`~.pairwise.pairwise` on each subset
and is the reference the moment path is tested against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..errors import UndefinedMeasure
from ..runtime.profile import profiled
from .core import LayerStats, rounding, work_dtype
from .pairwise import _layer_list, pairwise
from .registry import FROM_MOMENTS, REGISTRY, canonical, check_options, options_of

__all__ = ["leave_out_matrices", "leave_out_matrices_plain", "leave_out_suite"]


class _Moments:
    """What the moment-reading kernels need of one layer on a subset of its rows: row count,
    each neuron's centred sum of squares and ``||Xc'Xc||_F^2``, no data."""

    xp = np

    def __init__(self, n: int, sq_norms: np.ndarray, gram_sq: float, name: str):
        self.n, self.sq_norms, self.gram_sq, self.name = n, sq_norms, gram_sq, name
        self.d = sq_norms.shape[0]


class _MomentPair:
    """What a kernel reads of a pair (:class:`~.pairwise.Pair`), from moments: the
    cross-product of the rows outside one group."""

    def __init__(self, C):
        self.C = C

    def cross(self, dtype=None):
        return self.C


def leave_out_matrices_plain(layers: Sequence, groups, measure: str = "linear_cka",
                             **options: Any) -> list[np.ndarray]:
    """``[pairwise(rows outside group k) for each group k]``: the definition, one whole
    recomputation per group."""
    layers, groups, labels = _checked(layers, groups)
    return [pairwise([np.asarray(x)[groups != k] for x in layers], measure=measure,
                     progress=False, **options) for k in labels]


@profiled("resampling", lambda layers, groups, measure="linear_cka", **k: f"leave-out {measure}")
def leave_out_matrices(layers: Sequence, groups: ArrayLike | None, measure: str = "linear_cka",
                       **options: Any) -> list[np.ndarray]:
    """The matrix of one measure over the layers with each group of rows left out in turn,
    in the order of the sorted group labels; equal (to rounding) to
    ``leave_out_matrices_plain``, from one pass over the rows where the measure allows
    (see the module notes).

    Parameters
    ----------
    layers : list of arrays (n, d_i) over the same n rows
    groups : array (n,) of group labels (for example the fold of each row's sentence); at
        least two groups, each leaving at least 2 rows outside it
    measure, **options : as for :func:`~.pairwise.pairwise`
    """
    return leave_out_suite(layers, groups, [measure], **options)[canonical(measure)]


def leave_out_suite(layers: Sequence, groups: ArrayLike | None, measures: Sequence[str],
                    **options: Any) -> dict[str, list[np.ndarray]]:
    """:func:`leave_out_matrices` of several measures from one pass: ``{canonical name:
    matrices}``. The measures read from moments share each pair's leave-out cross-products,
    so each gives exactly the numbers it gives alone; options go to the measures that take
    them (as for :func:`~.pairwise.pairwise_suite`)."""
    if isinstance(measures, str):
        measures = [measures]
    names = list(dict.fromkeys(canonical(m) for m in measures))
    if not names:
        raise ValueError("measures is empty: name at least one measure")
    check_options(names, options)
    layers, groups, labels = _checked(layers, groups)
    given = {name: {o: v for o, v in options.items() if o in REGISTRY[name].options}
             for name in names}
    fast = [name for name in names if name in FROM_MOMENTS
            and not given[name].get("debiased") and not given[name].get("dtype")]
    moments = _LayerMoments.of(layers, groups, labels) if fast else None
    out = {} if moments is None else _from_moments(moments, fast, options, len(labels))
    for name in names:
        if name not in out:
            out[name] = leave_out_matrices_plain(layers, groups, name, **given[name])
    return {name: out[name] for name in names}


def _from_moments(moments: list[_LayerMoments], names: list[str], options: dict[str, Any],
                  n_groups: int) -> dict[str, list[np.ndarray]]:
    """The leave-out matrices of the measures ``names`` from the layers' moments, each
    pair's cross-products computed once for all of them."""
    L = len(moments)
    kernels = {name: (REGISTRY[name].kernel, {**options_of(name, options), "form": "feature"})
               for name in names}  # moments: the feature form
    # every measure here is 1 for a layer with itself
    out = {name: [np.eye(L) for _ in range(n_groups)] for name in names}
    for i in range(L):
        for j in range(i + 1, L):
            for k, C in enumerate(moments[i].cross_leave_outs(moments[j])):
                a, b = moments[i].stats[k], moments[j].stats[k]
                for name, (kernel, taken) in kernels.items():
                    out[name][k][i, j], out[name][k][j, i] = kernel(
                        a, b, _MomentPair(C), taken, (True, True))
    return out


def _checked(layers, groups):
    layers = _layer_list(layers, "layers")[0]
    groups = np.asarray(groups)
    n = {np.shape(x)[0] for x in layers}
    if groups.ndim != 1 or n != {len(groups)}:
        raise ValueError(f"groups must give one label per row: {len(groups)} labels for "
                         f"layers with row counts {sorted(n)}")
    labels, counts = np.unique(groups, return_counts=True)
    if len(labels) < 2:
        raise ValueError(f"groups must hold at least two groups, got {len(labels)}")
    if (len(groups) - counts).min() < 2:
        raise ValueError("leaving one group out must keep at least 2 rows; use more groups "
                         "or smaller ones")
    return layers, groups, labels


class _LayerMoments:
    """One layer centred on all its rows, sorted by group, with each group's column sums
    and sums of squares, and the leave-out :class:`_Moments` of every group."""

    def __init__(self, Xs, bounds, sums, stats):
        self.Xs, self.bounds, self.sums, self.stats = Xs, bounds, sums, stats

    @classmethod
    def of(cls, layers, groups, labels) -> list[_LayerMoments] | None:
        """The moments of every layer, or None when a neuron is constant on some leave-out
        set but not on all rows (the plain path decides those by the rows themselves)."""
        dt = work_dtype(*[np.asarray(x) for x in layers])
        order = np.argsort(np.searchsorted(labels, groups), kind="stable")
        counts = np.bincount(np.searchsorted(labels, groups), minlength=len(labels))
        bounds = np.concatenate([[0], np.cumsum(counts)])
        found = []
        for i, X in enumerate(layers):
            X = np.asarray(X)
            Xs = LayerStats(X, dtype=dt, name=f"layers[{i}]").Xc[order]
            if not Xs.any():
                raise UndefinedMeasure(f"layers[{i}] has no variance (every neuron constant), so "
                                       f"no measure is defined for it; leave that layer out")
            blocks = [Xs[bounds[k]:bounds[k + 1]] for k in range(len(labels))]
            if _constant_somewhere(X, blocks, counts):
                return None
            sums = np.stack([b.sum(axis=0, dtype=np.float64) for b in blocks])
            grams = [(b.T @ b).astype(np.float64) for b in blocks]
            found.append(cls(Xs, bounds, sums, _leave_out_stats(grams, sums, counts,
                                                                f"layers[{i}]")))
        return found

    def blocks(self):
        return [self.Xs[a:b] for a, b in zip(self.bounds[:-1], self.bounds[1:])]

    def cross_leave_outs(self, other: _LayerMoments):
        """``C_k`` of this layer with ``other`` over the rows outside each group, in the
        work dtype of the products (as the whole-matrix path): the groups' products differ
        from the total by a tenth of it, not by orders of magnitude, so no digits are lost."""
        parts = [a.T @ b for a, b in zip(self.blocks(), other.blocks())]
        total = parts[0].copy()
        for part in parts[1:]:
            total += part
        s_a, s_b = self.sums.sum(axis=0), other.sums.sum(axis=0)
        for k, part in enumerate(parts):
            u = (s_a - self.sums[k]) / self.stats[k].n
            C = np.subtract(total, part)
            C -= np.outer(u.astype(C.dtype), (s_b - other.sums[k]).astype(C.dtype))
            yield C


def _leave_out_stats(grams, sums, counts, name) -> list[_Moments]:
    total, s, n = sum(grams), sums.sum(axis=0), int(counts.sum())
    stats = []
    for k, gram in enumerate(grams):
        n_k, s_k = n - int(counts[k]), s - sums[k]
        G = total - gram - np.outer(s_k, s_k) / n_k
        stats.append(_Moments(n_k, np.clip(np.diagonal(G).copy(), 0.0, None),
                              float(np.sum(G * G)), f"{name} without group {k}"))
    return stats


def _constant_somewhere(X, blocks, counts) -> bool:
    """Whether a neuron varies over all rows but is constant, up to rounding, on the rows
    outside some group."""
    hi = np.stack([b.max(axis=0) for b in blocks]).astype(np.float64)
    lo = np.stack([b.min(axis=0) for b in blocks]).astype(np.float64)
    peak = np.abs(X).max(axis=0).astype(np.float64)
    varies = hi.max(axis=0) > lo.min(axis=0)
    n = int(counts.sum())
    for k in range(len(blocks)):
        rest = np.arange(len(blocks)) != k
        spread = hi[rest].max(axis=0) - lo[rest].min(axis=0)
        # the plain path zeroes a neuron whose largest deviation from its mean is within
        # rounding; that deviation lies between half the spread and the spread
        if np.any(varies & (spread <= 2 * rounding(n - int(counts[k])) * peak)):
            return True
    return False
