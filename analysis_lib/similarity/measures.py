"""Representation similarity measures of Wu et al. 2020, Kornblith et al. 2019 and Merchant et al.

Conventions: ``X`` is (n, d1), ``Y`` is (n, d2), rows are the same n stimuli in the same order.
Every function returns a similarity (higher = more similar). Asymmetric measures average over
the neurons (or canonical directions) of ``X``, the *first* argument.

Each measure is a thin wrapper around a *pair kernel* ``_k_<name>(a, b, C, ...)`` that takes the
two layers' :class:`~._core.LayerStats` and their centred cross-product ``C = Xc.T @ Yc``;
:func:`~.pairwise.pairwise` calls the same kernels while computing every cross-product once, so
the single-pair functions and the all-pairs matrices agree to rounding.

The kernels are written once against the array API: every cross-product measure takes
``device`` (default CUDA when available, else the CPU) and ``backend`` (``"torch"``, the
default, or ``"numpy"``, the reference path); see :mod:`._backend`. Inputs and results are
NumPy.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from array_api_compat import array_namespace

from . import _backend
from ._core import (
    LayerStats,
    as_matrix,
    check_pair,
    cross,
    fill_eigs,
    in_range,
    span_sq_norms,
    standardize_pair,
    work_dtype,
)
from .reference import TIE_TOL as TIE_TOL
from .reference import tied_runs

# --------------------------------------------------------------------------- kernels


def _valid(stats: LayerStats):
    """Neurons with non-zero variance (constant neurons carry no signal)."""
    s = stats.sq_norms
    return s > (stats.xp.max(s) * 1e-20 if s.shape[0] else 0)


def _k_neuron_both(a: LayerStats, b: LayerStats, C):
    """Per-neuron best |correlation| of X's neurons in Y and of Y's neurons in X, from one
    correlation matrix (in C's dtype; float64 results)."""
    xp = a.xp
    va, vb = _valid(a), _valid(b)
    all_a, all_b = bool(xp.all(va)), bool(xp.all(vb))
    if not (all_a or bool(xp.any(va))) or not (all_b or bool(xp.any(vb))):
        raise ValueError("every neuron of X or of Y is constant; correlation is undefined")
    R = xp.abs(C if all_a else C[va, :])
    R = R if all_b else R[:, vb]
    R = R * xp.astype(a.scales if all_a else a.scales[va], C.dtype)[:, None]
    R = R * xp.astype(b.scales if all_b else b.scales[vb], C.dtype)[None, :]
    return (xp.clip(xp.astype(xp.max(R, axis=1), xp.float64), None, 1.0),
            xp.clip(xp.astype(xp.max(R, axis=0), xp.float64), None, 1.0))


def _k_neuron_values(a: LayerStats, b: LayerStats, C):
    return _k_neuron_both(a, b, C)[0]


def _top_mean(values, top_k: int | None) -> float:
    xp = array_namespace(values)
    if top_k is None:
        return float(xp.mean(values))
    if not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")
    return float(xp.mean(xp.sort(values, descending=True)[:top_k]))


def _k_mixed_values(a: LayerStats, b: LayerStats, C):
    xp = a.xp
    va = _valid(a)
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


def _k_cca(a: LayerStats, b: LayerStats, C, variance, cut, uv: bool = False):
    if uv:
        return _k_cca_many([(a, b, C)], variance, cut)[0]
    T, _, _ = _cca_matrix(a, b, C, variance, cut)
    return a.xp.clip(_singular_values(T), 0.0, 1.0)


def _k_cca_many(items, variance, cut) -> list:
    """``_k_cca(a, b, C, variance, cut, uv=True)`` (``u, rho, vt, ka, kb``: the thin SVD
    of ``T``, through the eigendecomposition of its smaller Gram matrix) of several pairs
    ``(a, b, C)`` at once: the eigendecompositions run side by side on the CPU
    (:meth:`~._backend.Backend.eighs`), which uses the cores better than one small
    decomposition after another. ``items`` may be a generator: only the small matrices
    ``T`` of the pairs are kept, not their cross-products."""
    prepared, bk = [], None
    for a, b, C in items:
        prepared.append(_cca_matrix(a, b, C, variance, cut))
        bk = a.bk
    if not prepared:
        return []
    eigs = bk.eighs([_smaller_gram(T) for T, _, _ in prepared])
    out = []
    for (T, ka, kb), (lam, E) in zip(prepared, eigs):
        u, rho, vt = _svd_from_gram(T, lam, E)
        out.append((u, array_namespace(T).clip(rho, 0.0, 1.0), vt, ka, kb))
    return out


def _cca_matrix(a: LayerStats, b: LayerStats, C, variance, cut):
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


def _pw_weights(stats: LayerStats, k: int, u, rho):
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


def _k_pwcca_both(a: LayerStats, b: LayerStats, C, variance, cut):
    """PWCCA of (X, Y) and of (Y, X) from one SVD."""
    u, rho, vt, ka, kb = _k_cca(a, b, C, variance, cut, uv=True)
    return (float(_pw_weights(a, ka, u, rho) @ rho),
            float(_pw_weights(b, kb, vt.T, rho) @ rho))


def _k_linear_cka(a: LayerStats, b: LayerStats, C, debiased: bool) -> float:
    xp = a.xp
    rows = None
    if debiased:
        ra, rb = _row_sq(a), _row_sq(b)
        rows = tuple(float(v) for v in (ra @ rb, ra @ ra, rb @ rb, xp.sum(ra), xp.sum(rb)))
    ga, gb = a.gram_sq, b.gram_sq
    cross_sq = float(xp.sum(C * C, dtype=xp.float64))
    return _cka_from_sums(a.n, cross_sq, (np.sqrt(ga), np.sqrt(gb)), (ga, gb), rows)


def _cka_from_sums(n: int, cross_sq: float, norms: tuple[float, float],
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


def _row_sq(stats: LayerStats):
    if "_row_sq" not in stats.__dict__:
        stats._row_sq = stats.bk.row_sq_norms(stats.Xc)
    return stats._row_sq


def _debias(xty: float, rr: float, sx: float, sy: float, n: int) -> float:
    """Unbiased HSIC (Song et al. 2012) of linear kernels of centred data, up to the factor
    1/(n(n-3)) that cancels in CKA: ||X'Y||^2 - n/(n-2) rx.ry + |X|^2 |Y|^2 / ((n-1)(n-2)),
    from ``rr = rx.ry`` and the sums ``sx``, ``sy`` of the row squared norms."""
    return float(xty - n / (n - 2.0) * rr + sx * sy / ((n - 1.0) * (n - 2.0)))


def _k_procrustes(a: LayerStats, b: LayerStats, C) -> float:
    den = np.sqrt(a.total_var * b.total_var)
    if den == 0:
        raise ValueError("X or Y has no variance (all neurons constant); Procrustes is undefined")
    xp = a.xp
    return float(min(float(xp.sum(xp.linalg.svdvals(xp.astype(C, xp.float64)))) / den, 1.0))


# --------------------------------------------------------------------------- public measures


def _stats(X, Y, dtype=None, standardize=False, min_rows=2, device=None, backend="torch"):
    X, Y = check_pair(X, Y, min_rows)
    dt = work_dtype(X, Y, dtype=dtype)
    bk = _backend.get(device, backend)
    a = LayerStats(X, dtype=dt, name="X", backend=bk)
    b = LayerStats(Y, dtype=dt, name="Y", backend=bk)
    C = cross(a, b)
    return standardize_pair(a, b, C) if standardize else (a, b, C)


def neuron_correlations(X, Y, *, dtype=None,
        device=None, backend: str = "torch") -> np.ndarray:
    """For each non-constant neuron of X, its largest absolute correlation with any neuron of
    Y (the values :func:`neuronsim` averages), in X's column order."""
    a, b, C = _stats(X, Y, dtype, min_rows=2, device=device, backend=backend)
    return a.bk.host(_k_neuron_values(a, b, C))


def neuronsim(X, Y, *, top_k: int | None = None, dtype=None,
        device=None, backend: str = "torch") -> float:
    """Neuron-level similarity (Wu et al. 2020 §3.1, App. A.1; after Bau et al. 2019).

    For each neuron (column) k of X, the largest absolute Pearson correlation with any neuron
    of Y, ``max_k' |rho(X[:, k], Y[:, k'])|``; averaged over X's neurons. Asymmetric.

    Parameters
    ----------
    X : array (n, d1); Y : array (n, d2)
    top_k : int, optional
        Average only the k best-matched neurons of X (Wu et al. footnote 3).

    Notes
    -----
    Constant neurons have no correlation: those of X are left out of the average, those of Y
    can match nothing. If all of X's or Y's neurons are constant a ValueError is raised.
    """
    return _top_mean(neuron_correlations(X, Y, dtype=dtype, device=device, backend=backend),
                     top_k)


def mixed_correlations(X, Y, *, dtype=None,
        device=None, backend: str = "torch") -> np.ndarray:
    """For each non-constant neuron of X, the r-value of its regression on all of Y's neurons
    (the values :func:`mixedsim` averages)."""
    a, b, C = _stats(X, Y, dtype, min_rows=2, device=device, backend=backend)
    return a.bk.host(_k_mixed_values(a, b, C))


def mixedsim(X, Y, *, top_k: int | None = None, dtype=None,
        device=None, backend: str = "torch") -> float:
    """Mixed neuron-representation similarity (Wu et al. 2020 §3.2, App. A.2).

    For each (centred) neuron x_k of X, the r-value of its least-squares regression on all of
    Y's (centred) neurons: ``||P_Y x_k|| / ||x_k||`` with ``P_Y`` the projection onto the column
    space of Y (the square root of the regression's R^2); averaged over X's neurons.
    Asymmetric: X's neurons are predicted from Y.

    A rank-deficient Y is handled exactly: the projection uses the non-negligible principal
    directions of Y's z-scored neurons (eigenvalues above ``RANK_RTOL`` of the largest; the
    span is the same as the raw neurons', and neurons of very different scales, such as a
    decoder's massive activations, leave every direction in it). With n <= d2 every neuron is
    predicted perfectly (r = 1), as for any least-squares fit with as many regressors as points.
    Constant neurons of X are left out.
    """
    return _top_mean(mixed_correlations(X, Y, dtype=dtype, device=device, backend=backend),
                     top_k)


def canonical_correlations(X, Y, variance: float | None = 0.99, *, standardize: bool = False,
                           cut: str = "reach", dtype=None,
        device=None, backend: str = "torch") -> np.ndarray:
    """The canonical correlations (descending) that :func:`svcca` averages, with its
    options."""
    _check_variance(variance)
    a, b, C = _stats(X, Y, dtype, standardize, min_rows=2, device=device, backend=backend)
    fill_eigs([a, b])
    return a.bk.host(_k_cca(a, b, C, variance, cut))


def svcca(X, Y, variance: float | None = 0.99, *, standardize: bool = False, cut: str = "reach",
          top_k: int | None = None, dtype=None,
        device=None, backend: str = "torch") -> float:
    """SVCCA similarity (Raghu et al. 2017; Wu et al. 2020's svsim, App. A.3).

    Each side is reduced to the orthonormal basis of its top principal directions (left singular
    vectors ``U[:, :l]`` of the centred matrix) that explain ``variance`` of its variance; the
    canonical correlations are the singular values of ``U_x[:, :lx].T @ U_y[:, :ly]``; the
    similarity is their mean. Symmetric.

    Parameters
    ----------
    variance : float in (0, 1] or None
        Share of variance to keep; None keeps every direction (plain mean CCA).
    standardize : bool
        z-score each neuron first, as Wu et al.'s released code does (default: the paper's
        definition, no z-scoring).
    cut : {'reach', 'below'}
        'reach' keeps the fewest directions whose cumulative variance reaches ``variance``
        (paper); 'below' keeps those whose cumulative variance stays below it (released code,
        typically one fewer).
    top_k : int, optional
        Average only the k largest correlations.

    Notes
    -----
    Invariant to orthogonal transforms and isotropic scaling of either side; with
    ``variance=None`` invariant to any invertible linear map. Zero-variance and exactly
    repeated directions are dropped before the CCA.
    """
    return _top_mean(canonical_correlations(X, Y, variance, standardize=standardize, cut=cut,
                                            dtype=dtype, device=device, backend=backend), top_k)


def pwcca(X, Y, variance: float | None = 0.99, *, standardize: bool = False,
          cut: str = "reach", dtype=None,
        device=None, backend: str = "torch") -> float:
    """Projection-weighted CCA (Morcos et al. 2018; Wu et al. 2020's pwsim, App. A.3).

    With the canonical variates ``H_X = X0 u`` of the SVCCA computation (``u`` the left singular
    vectors of ``X0.T @ Y0``) the weights are ``alpha ~ |H_X.T Xc| 1`` over X's centred neurons,
    normalised to sum to 1, and the similarity is ``alpha . rho``. Asymmetric: weighted by how
    much of X each canonical direction accounts for. Works whichever side has more neurons.
    Options as :func:`svcca`.
    """
    _check_variance(variance)
    a, b, C = _stats(X, Y, dtype, standardize, min_rows=2, device=device, backend=backend)
    fill_eigs([a, b])
    return _k_pwcca_both(a, b, C, variance, cut)[0]


@dataclass(frozen=True)
class CCAResult:
    """Result of :func:`cca`: mean canonical correlation, R^2_CCA (mean squared canonical
    correlation) and the correlations themselves (descending)."""

    mean: float
    r2: float
    correlations: np.ndarray


def cca(X, Y, *, reg: float = 0.0, dtype=None, warn: bool = True, device=None,
        backend: str = "torch") -> CCAResult:
    """Canonical correlation analysis over the full spaces of X and Y.

    Returns the mean canonical correlation and R^2_CCA (Ren et al. 2023 use the latter).

    Parameters
    ----------
    reg : float >= 0
        Ridge regularisation: each side's covariance ``G`` becomes ``G + reg * mean(eig(G)) I``
        before whitening, which shrinks spurious correlations when n is not well above d.

    Notes
    -----
    With n stimuli and d1 + d2 close to or above n, unregularised CCA finds correlations near 1
    for any data (it has enough freedom to fit noise). A warning is given when
    ``n < 5 * max(d1, d2)`` and ``reg == 0``; use ``reg``, fewer dimensions (:func:`svcca`),
    or more stimuli.
    """
    if reg < 0:
        raise ValueError(f"reg must be >= 0, got {reg}")
    a, b, C = _stats(X, Y, dtype, min_rows=2, device=device, backend=backend)
    fill_eigs([a, b])
    if warn and reg == 0 and a.n < 5 * max(a.d, b.d):
        warnings.warn(
            f"CCA with n={a.n} stimuli and {a.d}/{b.d} neurons over-fits (correlations are "
            "biased towards 1); pass reg>0, reduce dimensions with svcca(), or use more stimuli",
            UserWarning, stacklevel=2)
    rho = a.bk.host(_k_cca_any(a, b, C, reg))
    if rho.size == 0:
        raise ValueError("X or Y has no variance; CCA is undefined")
    return CCAResult(float(rho.mean()), float((rho ** 2).mean()), rho)


def _k_cca_any(a: LayerStats, b: LayerStats, C, reg: float):
    """Canonical correlations over the full spaces, ridge-regularised when ``reg > 0``."""
    if reg == 0:
        return _k_cca(a, b, C, None, "reach")
    xp = a.xp
    Wa, Wb = _ridge_whitener(a, reg), _ridge_whitener(b, reg)
    return xp.clip(xp.linalg.svdvals(Wa.T @ xp.astype(C, xp.float64) @ Wb), 0.0, 1.0)


def _ridge_whitener(stats: LayerStats, reg: float):
    lam, V = stats.eig
    xp = stats.xp
    if float(xp.sum(lam)) == 0:
        raise ValueError("X or Y has no variance; CCA is undefined")
    return V / xp.sqrt(lam + reg * xp.mean(lam))


def linear_cka(X, Y, *, debiased: bool = False, form: str = "auto", dtype=None,
        device=None, backend: str = "torch") -> float:
    """Linear centred kernel alignment (Kornblith et al. 2019; Wu et al. 2020's ckasim).

    ``||Xc.T Yc||_F^2 / (||Xc.T Xc||_F ||Yc.T Yc||_F)`` (feature form), equal to
    ``<K, L> / (||K|| ||L||)`` with ``K = Xc Xc.T``, ``L = Yc Yc.T`` (Gram form). Symmetric.

    Parameters
    ----------
    debiased : bool
        Use the unbiased HSIC estimator (Song et al. 2012) as Kornblith et al.'s code does.
    form : {'auto', 'feature', 'gram'}
        'auto' picks the cheaper one: Gram when n is small relative to d1 and d2.

    Notes
    -----
    Invariant to orthogonal transforms, isotropic scaling and translation of either side, not
    to arbitrary invertible maps. Null floor: for independent Gaussian X and Y the biased
    estimate is about ``d/(n - 1 + d)`` (d = d1 = d2), not 0 - compare against it, or use
    ``debiased=True``, whose expectation is about 0.
    """
    X, Y = check_pair(X, Y, 4 if debiased else 2)
    n, d1, d2 = X.shape[0], X.shape[1], Y.shape[1]
    if form not in ("auto", "feature", "gram"):
        raise ValueError(f"form must be 'auto', 'feature' or 'gram', got {form!r}")
    if form == "gram" or (form == "auto" and n * (d1 + d2) < d1 * d2 + d1 * d1 + d2 * d2):
        dt, bk = work_dtype(X, Y, dtype=dtype), _backend.get(device, backend)
        a = LayerStats(X, dtype=dt, name="X", backend=bk)
        b = LayerStats(Y, dtype=dt, name="Y", backend=bk)
        K = bk.host(a.Xc @ a.Xc.T).astype(np.float64)
        L = bk.host(b.Xc @ b.Xc.T).astype(np.float64)
        return _cka_from_grams(K, L, debiased, centred=True)
    a, b, C = _stats(X, Y, dtype, min_rows=2, device=device, backend=backend)
    return _k_linear_cka(a, b, C, debiased)


def _center_gram(K: np.ndarray) -> np.ndarray:
    K = K - K.mean(axis=0, keepdims=True)
    return K - K.mean(axis=1, keepdims=True)


def _hsic_u(K: np.ndarray, L: np.ndarray) -> float:
    """Unbiased HSIC of two Gram matrices (Song et al. 2012), times n(n-3)."""
    n = K.shape[0]
    Kt, Lt = K.copy(), L.copy()
    np.fill_diagonal(Kt, 0.0)
    np.fill_diagonal(Lt, 0.0)
    k1, l1 = Kt.sum(axis=1), Lt.sum(axis=1)
    return float(np.sum(Kt * Lt) + k1.sum() * l1.sum() / ((n - 1.0) * (n - 2.0))
                 - 2.0 / (n - 2.0) * (k1 @ l1))


def _cka_from_grams(K: np.ndarray, L: np.ndarray, debiased: bool, centred: bool = False
                    ) -> float:
    if debiased:
        xy, xx, yy = _hsic_u(K, L), _hsic_u(K, K), _hsic_u(L, L)
        if xx <= 0 or yy <= 0:
            raise ValueError("debiased HSIC of X or Y with itself is not positive (too few "
                             "stimuli or no variance); use more stimuli or debiased=False")
        return in_range(xy / np.sqrt(xx * yy), -1.0, "debiased CKA")
    if not centred:
        K, L = _center_gram(K), _center_gram(L)
    den = np.linalg.norm(K) * np.linalg.norm(L)
    if den == 0:
        raise ValueError("X or Y has no variance (all neurons constant); CKA is undefined")
    return in_range(np.sum(K * L) / den, 0.0, "CKA")


def rbf_gram(X, threshold: float = 1.0) -> np.ndarray:
    """RBF Gram matrix ``exp(-D / (2 s^2))`` of squared distances D, with
    ``s^2 = threshold^2 * median(D)`` (median over all n^2 entries, Kornblith et al.'s
    convention)."""
    X = as_matrix(X, "X", 2).astype(np.float64)
    X = X - X.mean(axis=0)  # distances do not move; |x|^2 terms stay small (large offsets)
    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    sq = np.einsum("ij,ij->i", X, X)
    D = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (X @ X.T), 0.0)
    med = np.median(D)
    if med == 0:
        raise ValueError("the median squared distance between stimuli is 0 (most rows are "
                         "identical); the RBF bandwidth is undefined")
    return np.exp(-D / (2.0 * threshold ** 2 * med))


def rbf_cka(X, Y, threshold: float = 1.0, *, debiased: bool = False) -> float:
    """CKA with RBF kernels (Kornblith et al. 2019), bandwidth ``threshold`` times the square
    root of the median squared distance. Costs O(n^2) memory and O(n^2 d) time. Symmetric;
    invariant to orthogonal transforms, translation and isotropic scaling."""
    X, Y = check_pair(X, Y, 4 if debiased else 2)
    return _cka_from_grams(rbf_gram(X, threshold), rbf_gram(Y, threshold), debiased)


def procrustes(X, Y, *, dtype=None,
        device=None, backend: str = "torch") -> float:
    """Normalised orthogonal Procrustes similarity: ``||Xc.T Yc||_* / (||Xc||_F ||Yc||_F)``
    (nuclear norm), in [0, 1]; ``2 - 2 * similarity`` is the squared Procrustes distance of the
    centred, unit-Frobenius-norm matrices after the best rotation (zero-padding the narrower
    side). Symmetric; invariant to orthogonal transforms, isotropic scaling and translation."""
    a, b, C = _stats(X, Y, dtype, min_rows=2, device=device, backend=backend)
    return _k_procrustes(a, b, C)


def _check_variance(variance) -> None:
    if variance is not None and not (0 < variance <= 1):
        raise ValueError(f"variance must be in (0, 1] or None, got {variance!r}")
