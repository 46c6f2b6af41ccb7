"""The pair kernels of the cross-product measures, written once for every path.

A kernel computes a measure of two layers from their :class:`~._core.LayerStats` (centred
data, Gram matrix, eigendecomposition, each computed once per layer) and their centred
cross-product ``C = Xc' Yc``. The single-pair functions of :mod:`.measures`, the all-pairs
matrices of :mod:`.pairwise` and the streamed measures of :mod:`.streaming` call the same
kernels, so they agree to rounding; :mod:`.reference` defines every measure once more, plainly,
and the tests hold the kernels to it.

Each cross-product measure's pair kernel is registered in :data:`KERNELS` under the measure's
name (a test checks that every cross-product measure of the registry has one)::

    kernel(a, b, C, both, options, shared) -> (value of (a, b), value of (b, a) or None)

``both`` asks an asymmetric measure for the reverse direction too (None for a symmetric one);
``shared`` is one dict per pair that the kernels of one suite share (SVCCA reads the canonical
correlations that PWCCA's decomposition found). Kernels are written against the array API
(:mod:`._backend`), so the same lines run on NumPy arrays and torch tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from array_api_compat import array_namespace

from ..runtime import checks
from ._backend import NUMPY
from ._core import LayerStats, in_range, span_sq_norms, standardize_pair
from .reference import tied_runs


def valid_neurons(stats: LayerStats):
    """Neurons with non-zero variance (constant neurons carry no signal)."""
    return _varying(stats.sq_norms)


def _varying(sq_norms):
    xp = array_namespace(sq_norms)
    return sq_norms > (xp.max(sq_norms) * 1e-20 if sq_norms.shape[0] else 0)


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
    va, vb = _varying(sq_a), _varying(sq_b)
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
    # the two products run in the work dtype (float32 for float32 layers), as the
    # cross-products themselves do; the decomposition of T is float64
    xp, dt = a.xp, np.promote_types(a.dtype, b.dtype)
    Wa, Wb = a.whitener(ka, dt), b.whitener(kb, dt)
    C = xp.astype(C, a.bk.dtype(dt), copy=False)
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

    Canonical directions whose correlations tie (within :data:`~.reference.TIE_TOL`) are
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
    whole-array measure and the streamed one (:mod:`.streaming`)."""
    if rows is None:
        den = norms[0] * norms[1]
        if den == 0:
            raise ValueError("X or Y has no variance (all neurons constant); CKA is undefined")
        return in_range(cross_sq / den, 0.0, "linear CKA")
    if n < 4:
        raise ValueError(f"debiased CKA needs at least 4 stimuli, got {n}")
    rxy, rxx, ryy, sx, sy = rows
    xy = _debias(cross_sq, rxy, sx, sy, n)
    xx = _debias(gram_sqs[0], rxx, sx, sx, n)
    yy = _debias(gram_sqs[1], ryy, sy, sy, n)
    if xx <= 0 or yy <= 0:
        raise ValueError("debiased HSIC of X or Y with itself is not positive (too few stimuli "
                         "or no variance); use more stimuli or the biased estimator")
    return in_range(xy / np.sqrt(xx * yy), -1.0, "debiased linear CKA")


def _debias(xty: float, rr: float, sx: float, sy: float, n: int) -> float:
    """Unbiased HSIC (Song et al. 2012) of linear kernels of centred data, up to the factor
    1/(n(n-3)) that cancels in CKA: ||X'Y||^2 - n/(n-2) rx.ry + |X|^2 |Y|^2 / ((n-1)(n-2)),
    from ``rr = rx.ry`` and the sums ``sx``, ``sy`` of the row squared norms."""
    return float(xty - n / (n - 2.0) * rr + sx * sy / ((n - 1.0) * (n - 2.0)))


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
    lam, V = stats.eig
    xp = stats.xp
    if float(xp.sum(lam)) == 0:
        raise ValueError("X or Y has no variance; CCA is undefined")
    return V / xp.sqrt(lam + reg * xp.mean(lam))


def check_variance(variance) -> None:
    if variance is not None and not (0 < variance <= 1):
        raise ValueError(f"variance must be in (0, 1] or None, got {variance!r}")


# --------------------------------------------------------------------------- pair kernels

#: every cross-product measure's pair kernel, by the measure's canonical name
KERNELS: dict[str, Callable] = {}


def _registered(name: str):
    def register(fn):
        KERNELS[name] = fn
        return fn
    return register


@_registered("neuronsim")
def _neuronsim(a, b, C, both, options, shared):
    ab, ba = neuron_best_both(a, b, C)
    top_k = options.get("top_k")
    return top_mean(ab, top_k), top_mean(ba, top_k) if both else None


@_registered("mixedsim")
def _mixedsim(a, b, C, both, options, shared):
    top_k = options.get("top_k")
    return (top_mean(mixed_values(a, b, C), top_k),
            top_mean(mixed_values(b, a, C.T), top_k) if both else None)


@_registered("linear_cka")
def _linear_cka(a, b, C, both, options, shared):
    return linear_cka_value(a, b, C, options.get("debiased", False)), None


@_registered("procrustes")
def _procrustes(a, b, C, both, options, shared):
    return procrustes_value(a, b, C), None


@_registered("cca")
def _cca(a, b, C, both, options, shared):
    return float(a.xp.mean(full_canonical_values(a, b, C, options.get("reg", 0.0)))), None


def _svcca_inputs(a, b, C, options):
    """The layers and cross-product SVCCA and PWCCA decompose (z-scored with
    ``standardize=True``), with their variance threshold and cut."""
    sa, sb, Cs = standardize_pair(a, b, C) if options.get("standardize") else (a, b, C)
    return sa, sb, Cs, options.get("variance", 0.99), options.get("cut", "reach")


@_registered("pwcca")
def _pwcca(a, b, C, both, options, shared):
    if "svd" not in shared:
        sa, sb, Cs, variance, cut = _svcca_inputs(a, b, C, options)
        shared["svd"] = (sa, sb, canonical_svd(sa, sb, Cs, variance, cut))
    sa, sb, (u, rho, vt, ka, kb) = shared["svd"]
    return (float(pw_weights(sa, ka, u, rho) @ rho),
            float(pw_weights(sb, kb, vt.T, rho) @ rho) if both else None)


@_registered("svcca")
def _svcca(a, b, C, both, options, shared):
    if "svd" in shared:  # PWCCA's decomposition: both measures read the same correlations
        rho = shared["svd"][2].rho
    else:
        sa, sb, Cs, variance, cut = _svcca_inputs(a, b, C, options)
        rho = canonical_values(sa, sb, Cs, variance, cut)
    return top_mean(rho, options.get("top_k")), None
