"""The estimators of the cross-product measures, written once for every path.

A kernel computes a measure of two layers from their :class:`~.core.LayerStats` (centred
data, Gram matrix, eigendecomposition, each computed once per layer) and what their
:class:`~.pairwise.Pair` shares: the centred cross-product ``C = Xc' Yc`` and the canonical
decomposition. Each measure's record in :mod:`.registry` names its kernel; the all-pairs
engine (:mod:`.pairwise`), and through it the single-pair functions of :mod:`.measures`,
call them, the streamed and leave-out matrices (:mod:`.streaming`, :mod:`.leave_out`) call
the same estimators on moments, and :mod:`.reference` defines every measure once more,
plainly, for the tests to hold these to. Kernels are written against the array API
(:mod:`._backend`), so the same lines run on NumPy arrays and torch tensors.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from array_api_compat import array_namespace
from array_api_compat import device as array_device
from numpy.typing import ArrayLike

from ..runtime import checks
from ._backend import NUMPY
from .core import (
    MIN_ROWS,
    LayerStats,
    as_matrix,
    in_range,
    span_sq_norms,
    standardize_pair,
    tied_runs,
    varying,
)


def valid_neurons(stats: LayerStats):
    """Neurons with non-zero variance (constant neurons carry no signal): the rule of
    :func:`.core.varying`."""
    return varying(stats.sq_norms)


def neuron_best_both(a: LayerStats, b: LayerStats, C):
    """Per-neuron best |correlation| of X's neurons in Y and of Y's neurons in X, from one
    correlation matrix (in C's dtype; float64 results)."""
    return best_correlations(C, a.sq_norms, b.sq_norms)


def best_correlations(C, sq_a, sq_b):
    """Each varying neuron's best |correlation| with the other side's neurons, for both
    sides: ``max_j |C_ij| / sqrt(sq_a_i sq_b_j)`` over the rows and over the columns of the
    centred cross-product ``C``, given each neuron's centred sum of squares. Constant
    neurons are left out on both sides. Shared by the in-memory and the streamed
    neuronsim."""
    xp = array_namespace(C)
    va, vb = varying(sq_a), varying(sq_b)
    all_a, all_b = bool(xp.all(va)), bool(xp.all(vb))
    if not (all_a or bool(xp.any(va))) or not (all_b or bool(xp.any(vb))):
        raise ValueError("every neuron of X or of Y is constant; correlation is undefined")
    R = xp.abs(C if all_a else C[va, :])
    R = R if all_b else R[:, vb]
    for side, (sq, every, keep) in enumerate(((sq_a, all_a, va), (sq_b, all_b, vb))):
        scale = xp.astype(1.0 / xp.sqrt(sq if every else sq[keep]), C.dtype)
        R = R * (scale[:, None] if side == 0 else scale[None, :])
    return (xp.clip(xp.astype(xp.max(R, axis=1), xp.float64), None, 1.0),
            xp.clip(xp.astype(xp.max(R, axis=0), xp.float64), None, 1.0))


def neuron_best(a: LayerStats, b: LayerStats, C):
    return neuron_best_both(a, b, C)[0]


def top_mean(values, top_k: int | None) -> float:
    xp = array_namespace(values)
    if top_k is None:
        return float(xp.mean(values))
    top_k = checks.integer(top_k, "top_k (a positive integer, or None for all)", 1)
    return float(xp.mean(xp.sort(values, descending=True)[:top_k]))


def mixed_values(a: LayerStats, b: LayerStats, C):
    xp = a.xp
    va = valid_neurons(a)
    if not bool(xp.any(va)):
        raise ValueError("every neuron of X is constant; the regression r-value is undefined")
    # coordinates of each X neuron's projection onto span(Y), in the work dtype. span(Y) does
    # not change when Y's neurons are rescaled, so its basis comes from the z-scored layer:
    # with raw scales, a few huge neurons (a decoder's massive activations) would push
    # every other direction under the rank cut relative to the largest eigenvalue
    every = bool(xp.all(va))
    C = xp.astype(C if every else C[va, :], a.bk.dtype(a.dtype), copy=False)
    r2 = span_sq_norms(C, b) / (a.sq_norms if every else a.sq_norms[va])
    return xp.sqrt(xp.clip(r2, 0.0, 1.0))


class CanonicalSVD(NamedTuple):
    """The thin SVD ``T = u diag(rho) vt`` of the whitened cross-product of two layers'
    top ``ka`` and ``kb`` principal directions: ``rho`` are the canonical correlations."""

    u: Any
    rho: Any
    vt: Any
    ka: int
    kb: int


def canonical_values(a: LayerStats, b: LayerStats, C, variance, cut):
    """The canonical correlations (descending) of the two layers' top principal directions
    that explain ``variance`` of each (all of them when ``variance`` is None)."""
    T, _, _ = _whitened_cross(a, b, C, variance, cut)
    return a.xp.clip(_singular_values(T), 0.0, 1.0)


def canonical_svd(a: LayerStats, b: LayerStats, C, variance, cut) -> CanonicalSVD:
    """:class:`CanonicalSVD` of one pair: the correlations with their directions."""
    return canonical_svds([(a, b, C)], variance, cut)[0]


def canonical_svds(items, variance, cut) -> list[CanonicalSVD]:
    """:func:`canonical_svd` (through the eigendecomposition of the smaller Gram matrix of
    ``T``) of several pairs
    ``(a, b, C)`` at once: the eigendecompositions run side by side on the CPU
    (:meth:`~._backend.Backend.eighs`), which uses the cores better than one small
    decomposition after another. ``items`` may be a generator: only the small matrices
    ``T`` of the pairs are kept, not their cross-products."""
    prepared, bk = [], NUMPY
    for a, b, C in items:
        prepared.append(_whitened_cross(a, b, C, variance, cut))
        bk = a.bk
    if not prepared:
        return []
    eigs = bk.eighs([_smaller_gram(T) for T, _, _ in prepared])
    out = []
    for (T, ka, kb), (lam, E) in zip(prepared, eigs):
        u, rho, vt = _svd_from_gram(T, lam, E)
        out.append(CanonicalSVD(u, array_namespace(T).clip(rho, 0.0, 1.0), vt, ka, kb))
    return out


def _whitened_cross(a: LayerStats, b: LayerStats, C, variance, cut):
    """``T = Wa' C Wb`` (float64), whose singular values are the canonical correlations of
    the two layers' top principal directions (``ka`` and ``kb`` of them)."""
    ka, kb = a.n_components(variance, cut), b.n_components(variance, cut)
    if ka == 0 or kb == 0:
        raise ValueError("X or Y has no variance (all neurons constant); CCA is undefined")
    # the two products run in C's dtype (float32 for float32 layers, unless the measure asked
    # for float64 cross-products), as the cross-products themselves do; the decomposition of
    # T is float64
    xp = a.xp
    dt = np.dtype(np.float32 if C.dtype == a.bk.dtype(np.float32) else np.float64)
    Wa, Wb = a.whitener(ka, dt), b.whitener(kb, dt)
    # the cheaper order: k_a d_b (d_a + k_b) against k_b d_a (d_b + k_a) multiply-adds
    if ka * C.shape[1] * (C.shape[0] + kb) <= kb * C.shape[0] * (C.shape[1] + ka):
        T = (Wa.T @ C) @ Wb
    else:
        T = Wa.T @ (C @ Wb)
    return xp.astype(T, xp.float64), ka, kb


def _smaller_gram(T):
    """``T T'`` or ``T' T``, whichever is smaller."""
    return T @ T.T if T.shape[0] <= T.shape[1] else T.T @ T


def _singular_values(T):
    """Singular values of T (descending) from the eigenvalues of the smaller of T T' and T'T
    (about twice as fast as an SVD; the squares lose nothing that matters for values in
    [0, 1] in float64)."""
    xp = array_namespace(T)
    return xp.sqrt(xp.clip(xp.flip(xp.linalg.eigvalsh(_smaller_gram(T)), axis=0), 0.0, None))


def _svd_from_gram(T, lam, E):
    """Thin SVD ``T = u diag(rho) vt`` from the eigendecomposition ``(lam, E)`` (ascending)
    of :func:`_smaller_gram` ``(T)``, falling back to LAPACK's SVD when a singular value is
    too small to recover the other side's vectors from ``T' u / rho``."""
    xp = array_namespace(T)
    lam, E = xp.flip(lam, axis=0), xp.flip(E, axis=1)
    rho = xp.sqrt(xp.clip(lam, 0.0, None))
    if rho.shape[0] == 0 or float(rho[-1]) <= 1e-6 * max(float(rho[0]), 1e-300):
        u, rho, vt = xp.linalg.svd(T, full_matrices=False)
        return u, rho, vt
    if T.shape[0] <= T.shape[1]:
        return E, rho, (T.T @ E / rho).T
    return T @ E / rho, rho, E.T


def pw_weights(stats: LayerStats, k: int, u, rho):
    """Morcos et al.'s weights over canonical variates H = X0 u of one side:
    alpha ~ |H.T Xc| 1 with H.T Xc = u.T diag(sqrt(lam_k)) V_k.T.

    Canonical directions whose correlations tie (within :data:`~.core.TIE_TOL`) are
    only defined as a subspace: any rotation of them is an equally valid SVD, and which one
    the eigensolver returns can change with the BLAS thread count. The absolute values in
    alpha are not rotation-invariant, so within each tied group the directions are first
    rotated to a basis fixed by X itself (the right singular vectors of the group's
    ``H.T Xc``; :func:`~.reference.pwcca`), which makes the weights, and PWCCA, the same on
    every machine. The tolerance is far above float32's rounding of the correlations, so
    float32 and float64 layers find the same groups; the rotation runs in float64.
    """
    xp = stats.xp
    B = stats.loadings(k, np.float64)
    M = xp.astype(u.T, B.dtype) @ B  # H.T Xc, one row per direction
    for start, end in tied_runs(stats.bk.host(rho)):
        block = M[start:end, :]
        # the group's left singular vectors, from the eigenvectors of its small Gram matrix
        P = xp.flip(xp.linalg.eigh(block @ block.T)[1], axis=1)
        M[start:end, :] = P.T @ block
    w = xp.sum(xp.abs(M), axis=1, dtype=xp.float64)
    return w / xp.sum(w)


def pwcca_both(a: LayerStats, b: LayerStats, C, variance, cut):
    """PWCCA of (X, Y) and of (Y, X) from one SVD."""
    u, rho, vt, ka, kb = canonical_svd(a, b, C, variance, cut)
    return (float(pw_weights(a, ka, u, rho) @ rho),
            float(pw_weights(b, kb, vt.T, rho) @ rho))


def linear_cka_value(a: LayerStats, b: LayerStats, C, debiased: bool) -> float:
    xp = a.xp
    rows = None
    if debiased:
        ra, rb = a.row_sq_norms, b.row_sq_norms
        rows = tuple(float(v) for v in (ra @ rb, ra @ ra, rb @ rb, xp.sum(ra), xp.sum(rb)))
    ga, gb = a.gram_sq, b.gram_sq
    cross_sq = float(xp.sum(C * C, dtype=xp.float64))
    return cka_from_sums(a.n, cross_sq, (np.sqrt(ga), np.sqrt(gb)), (ga, gb), rows)


def cka_from_sums(n: int, cross_sq: float, norms: tuple[float, float],
                  gram_sqs: tuple[float, float], rows: tuple | None) -> float:
    """Linear CKA from ``||Xc'Yc||_F^2``, the Gram norms ``||Xc'Xc||_F``, ``||Yc'Yc||_F``
    and their squares; debiased (Song et al. 2012) when ``rows`` holds the sums over the
    centred rows' squared norms ``(rx.ry, rx.rx, ry.ry, sum rx, sum ry)``. Shared by the
    whole-array measure, the streamed one (:mod:`.streaming`) and the leave-out matrices."""
    if rows is None:
        return cka_ratio(cross_sq, norms[0], norms[1], False)
    if n < 4:
        raise ValueError(f"debiased CKA needs at least 4 stimuli, got {n}")
    rxy, rxx, ryy, sx, sy = rows
    return cka_ratio(unbiased_hsic(*linear_hsic_sums(cross_sq, rxy, sx, sy), n),
                     unbiased_hsic(*linear_hsic_sums(gram_sqs[0], rxx, sx, sx), n),
                     unbiased_hsic(*linear_hsic_sums(gram_sqs[1], ryy, sy, sy), n), True)


def cka_ratio(xy: float, xx: float, yy: float, debiased: bool) -> float:
    """CKA from its three HSIC terms: ``xy / sqrt(xx yy)`` for the debiased estimator (each
    term an unbiased HSIC), ``xy / (xx yy)`` for the biased one, whose ``xx`` and ``yy`` are
    already the norms ``||K~||_F``, ``||L~||_F`` of the centred kernels. Checked to lie in
    its range (:func:`~.core.in_range`)."""
    if debiased:
        if xx <= 0 or yy <= 0:
            raise ValueError("debiased HSIC of X or Y with itself is not positive (too few "
                             "stimuli or no variance); use more stimuli or the biased "
                             "estimator")
        return in_range(xy / np.sqrt(xx * yy), -1.0, "debiased CKA")
    den = xx * yy
    if den == 0:
        raise ValueError("X or Y has no variance (all neurons constant); CKA is undefined")
    return in_range(xy / den, 0.0, "CKA")


def unbiased_hsic(kl: float, k1: float, l1: float, kl1: float, n: int) -> float:
    """Song et al. (2012)'s unbiased HSIC, times ``n(n-3)``, from four sums of the kernel
    matrices with zeroed diagonals ``K~``, ``L~``: ``kl = sum(K~ * L~)``, ``k1 = 1'K~1``,
    ``l1 = 1'L~1`` and ``kl1 = (K~1).(L~1)``. The one definition of the estimator outside
    :func:`.reference.hsic_unbiased`; its sums come from Gram matrices
    (:func:`gram_hsic_sums`) or, for linear kernels, from the data's moments
    (:func:`linear_hsic_sums`)."""
    return float(kl + k1 * l1 / ((n - 1.0) * (n - 2.0)) - 2.0 / (n - 2.0) * kl1)


def gram_hsic_sums(K, L) -> tuple[float, float, float, float]:
    """:func:`unbiased_hsic`'s sums of two n x n kernel matrices (any backend)."""
    xp = array_namespace(K)
    off = 1.0 - xp.eye(K.shape[0], dtype=K.dtype, device=array_device(K))
    K, L = K * off, L * off
    k_rows, l_rows = xp.sum(K, axis=0), xp.sum(L, axis=0)
    return (float(xp.sum(K * L)), float(xp.sum(k_rows)), float(xp.sum(l_rows)),
            float(k_rows @ l_rows))


def linear_hsic_sums(cross_sq: float, rr: float, sx: float, sy: float
                     ) -> tuple[float, float, float, float]:
    """:func:`unbiased_hsic`'s sums for the linear kernels ``K = Xc Xc'``, ``L = Yc Yc'`` of
    centred data, from ``||Xc'Yc||_F^2``, ``rr = rx.ry`` (the rows' squared norms, the
    kernels' diagonals) and their sums ``sx``, ``sy``: centring makes ``K 1 = 0``, so
    ``K~ 1 = -rx``."""
    return cross_sq - rr, -sx, -sy, rr


def cka_of_grams(K, L, debiased: bool, centred: bool = False) -> float:
    """CKA of two n x n kernel matrices (Kornblith et al. 2019), biased or debiased;
    ``centred`` says that ``K`` and ``L`` are already double-centred (the biased
    estimator's ``HKH``)."""
    if debiased:
        n = K.shape[0]
        return cka_ratio(unbiased_hsic(*gram_hsic_sums(K, L), n),
                         unbiased_hsic(*gram_hsic_sums(K, K), n),
                         unbiased_hsic(*gram_hsic_sums(L, L), n), True)
    if not centred:
        K, L = center_gram(K), center_gram(L)
    xp = array_namespace(K)
    return cka_ratio(float(xp.sum(K * L)), float(xp.sqrt(xp.sum(K * K))),
                     float(xp.sqrt(xp.sum(L * L))), False)


def center_gram(K):
    """``H K H``: a kernel matrix with its rows' and columns' means removed."""
    xp = array_namespace(K)
    K = K - xp.mean(K, axis=0, keepdims=True)
    return K - xp.mean(K, axis=1, keepdims=True)


def procrustes_value(a: LayerStats, b: LayerStats, C) -> float:
    den = np.sqrt(a.total_var * b.total_var)
    if den == 0:
        raise ValueError("X or Y has no variance (all neurons constant); Procrustes is undefined")
    xp = a.xp
    return float(min(float(xp.sum(xp.linalg.svdvals(xp.astype(C, xp.float64)))) / den, 1.0))


def full_canonical_values(a: LayerStats, b: LayerStats, C, reg: float):
    """Canonical correlations over the full spaces, ridge-regularised when ``reg > 0``."""
    reg = checks.number(reg, "reg", 0.0)
    if reg == 0:
        return canonical_values(a, b, C, None, "reach")
    xp = a.xp
    Wa, Wb = _ridge_whitener(a, reg), _ridge_whitener(b, reg)
    return xp.clip(xp.linalg.svdvals(Wa.T @ xp.astype(C, xp.float64) @ Wb), 0.0, 1.0)


def _ridge_whitener(stats: LayerStats, reg: float):
    """The ridge-regularised whitener over the layer's whole space (every direction)."""
    if stats.rank == 0:
        raise ValueError("X or Y has no variance; CCA is undefined")
    return stats.whitener(stats.eig[1].shape[1], np.float64, ridge=reg)


def check_variance(variance) -> None:
    if variance is not None and not (0 < variance <= 1):
        raise ValueError(f"variance must be in (0, 1] or None, got {variance!r}")


# --------------------------------------------------------------------------- pair kernels
#
# ``kernel(a, b, pair, options, directions) -> (value of (a, b), value of (b, a))``: ``a`` and
# ``b`` are the two prepared layers, ``pair`` the :class:`~.pairwise.Pair` that computes and
# holds what the pair's measures share (its cross-products, its canonical decomposition),
# ``directions`` which of the two values are wanted (a symmetric measure returns one value
# twice). A value is computed the same way whichever else is asked for, so that a measure's
# number never depends on the other measures of a suite.


#: the most entries of a cross-product neuronsim forms at once (64 MB in float32): a pair of
#: wider layers is taken in blocks of the second layer's neurons, so that its memory grows
#: with the rows and one block, not with the product of the two widths
CROSS_BLOCK = 1 << 24


def blocked_best_both(a: LayerStats, b: LayerStats):
    """:func:`neuron_best_both` without the whole cross-product: ``b``'s neurons in blocks
    of at most :data:`CROSS_BLOCK` entries of ``C``, each block read by
    :func:`best_correlations` (the best of ``a``'s neurons kept over the blocks, ``b``'s
    taken block by block)."""
    xp = a.xp
    if not bool(xp.any(varying(a.sq_norms))) or not bool(xp.any(varying(b.sq_norms))):
        raise ValueError("every neuron of X or of Y is constant; correlation is undefined")
    width = max(1, CROSS_BLOCK // max(a.d, 1))
    dt = a.bk.dtype(np.promote_types(a.dtype, b.dtype))
    left = xp.astype(a.Xc, dt, copy=False).T
    best_a, best_b = None, []
    for start in range(0, b.d, width):
        block = slice(start, min(start + width, b.d))
        sq_b = b.sq_norms[block]
        if not bool(xp.any(varying(sq_b))):
            continue  # constant neurons only: left out, as in the whole product
        found_a, found_b = best_correlations(left @ xp.astype(b.Xc[:, block], dt, copy=False),
                                             a.sq_norms, sq_b)
        best_a = found_a if best_a is None else xp.maximum(best_a, found_a)
        best_b.append(found_b)
    return best_a, xp.concat(best_b)


def neuronsim_pair(a, b, pair, options, directions):
    if a.d * b.d <= CROSS_BLOCK or pair.has_cross():
        ab, ba = neuron_best_both(a, b, pair.cross())
    else:
        ab, ba = blocked_best_both(a, b)
    top_k = options.get("top_k")
    return (top_mean(ab, top_k) if directions[0] else None,
            top_mean(ba, top_k) if directions[1] else None)


def mixedsim_pair(a, b, pair, options, directions):
    top_k, C = options.get("top_k"), pair.cross()
    return (top_mean(mixed_values(a, b, C), top_k) if directions[0] else None,
            top_mean(mixed_values(b, a, C.T), top_k) if directions[1] else None)


def linear_cka_pair(a, b, pair, options, directions):
    debiased = options.get("debiased", False)
    if gram_form(a.n, a.d, b.d, options.get("form", "auto")):
        value = cka_of_grams(a.row_gram, b.row_gram, debiased, centred=True)
    else:
        value = linear_cka_value(a, b, pair.cross(), debiased)
    return value, value


CKA_FORMS = ("auto", "feature", "gram")


def check_cka_options(options) -> None:
    if options.get("form", "auto") not in CKA_FORMS:
        raise ValueError(f"form must be 'auto', 'feature' or 'gram', got {options['form']!r}")


def gram_form(n: int, d1: int, d2: int, form: str) -> bool:
    """Whether linear CKA is computed from the n x n Gram matrices (``form='gram'``, or
    ``'auto'`` when they are the cheaper route: n small against the widths) rather than
    from the d1 x d2 cross-product."""
    if form not in CKA_FORMS:
        raise ValueError(f"form must be 'auto', 'feature' or 'gram', got {form!r}")
    return form == "gram" or (form == "auto" and n * (d1 + d2) < d1 * d2 + d1 * d1 + d2 * d2)


def procrustes_pair(a, b, pair, options, directions):
    value = procrustes_value(a, b, pair.cross())
    return value, value


def cca_pair(a, b, pair, options, directions):
    rho = full_canonical_values(a, b, pair.cross(np.float64), options.get("reg", 0.0))
    # ridge CCA has min(d_a, d_b) correlations; a row-space layer's beyond its rows are 0
    count = min(a.width, b.width) if options.get("reg", 0.0) else rho.shape[0]
    value = float(a.xp.mean(rho) if count == rho.shape[0] else a.xp.sum(rho) / count)
    return value, value


def pwcca_pair(a, b, pair, options, directions):
    sa, sb, (u, rho, vt, ka, kb) = pair.get("canonical")
    return (float(pw_weights(sa, ka, u, rho) @ rho) if directions[0] else None,
            float(pw_weights(sb, kb, vt.T, rho) @ rho) if directions[1] else None)


def svcca_pair(a, b, pair, options, directions):
    value = top_mean(pair.get("canonical")[2].rho, options.get("top_k"))
    return value, value


def canonical_inputs(a: LayerStats, b: LayerStats, C, options):
    """The layers and cross-product SVCCA and PWCCA decompose (z-scored with
    ``standardize=True``)."""
    return standardize_pair(a, b, C) if options.get("standardize") else (a, b, C)


def canonical_of_pairs(pairs, options) -> list:
    """The pair quantity ``canonical`` of several pairs (one row of a matrix) at once:
    ``(a, b, CanonicalSVD)`` of SVCCA's inputs (:func:`canonical_inputs`), the
    decompositions side by side (:func:`canonical_svds`). The cross-products in float64
    when SVCCA keeps every direction (``variance=None``: plain CCA, whose smallest
    directions float32 products would not resolve), else in the work dtype."""
    variance, cut = options.get("variance", 0.99), options.get("cut", "reach")
    dtype = np.float64 if variance is None else None
    sides = [canonical_inputs(p.a, p.b, p.cross(dtype), options) for p in pairs]
    # a generator: each pair's (z-scored) cross-product is dropped once its T is formed
    found = canonical_svds(((sa, sb, C) for sa, sb, C in sides), variance, cut)
    return [(sa, sb, svd) for (sa, sb, _), svd in zip(sides, found)]


def check_canonical_options(options) -> None:
    check_variance(options.get("variance", 0.99))
    if options.get("cut", "reach") not in ("reach", "below"):
        raise ValueError(f"cut must be 'reach' or 'below', got {options.get('cut')!r}")


def check_reg(reg) -> None:
    checks.number(reg, "reg", 0.0)


def cka_of_prepared_grams(a, b, pair, options, directions):
    """RBF CKA's kernel: the CKA of two layers' prepared Gram matrices (double-centred
    already unless debiased)."""
    debiased = options.get("debiased", False)
    value = cka_of_grams(a.K, b.K, debiased, centred=not debiased)
    return value, value


def rbf_gram(X: ArrayLike, threshold: float = 1.0) -> np.ndarray:
    """RBF Gram matrix ``exp(-D / (2 s^2))`` of squared distances D, with
    ``s^2 = threshold^2 * median(D)`` (median over all n^2 entries, Kornblith et al.'s
    convention)."""
    A = as_matrix(X, "X", MIN_ROWS).astype(np.float64)
    Xc = A - A.mean(axis=0)  # distances do not move; |x|^2 terms stay small (large offsets)
    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    sq = np.einsum("ij,ij->i", Xc, Xc)
    D = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (Xc @ Xc.T), 0.0)
    med = np.median(D)
    if med == 0:
        raise ValueError("the median squared distance between stimuli is 0 (most rows are "
                         "identical); the RBF bandwidth is undefined")
    return np.exp(-D / (2.0 * threshold ** 2 * med))
