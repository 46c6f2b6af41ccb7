"""Representation similarity measures of Wu et al. 2020, Kornblith et al. 2019 and Merchant et al.

Conventions: ``X`` is (n, d1), ``Y`` is (n, d2), rows are the same n stimuli in the same order.
Every function returns a similarity (higher = more similar). Asymmetric measures average over
the neurons (or canonical directions) of ``X``, the *first* argument.

Each cross-product measure is a thin wrapper around its kernel in :mod:`.kernels`, which takes
the two layers' :class:`~._core.LayerStats` and their centred cross-product ``C = Xc.T @ Yc``;
:func:`~.pairwise.pairwise` calls the same kernels while computing every cross-product once, so
the single-pair functions and the all-pairs matrices agree to rounding.

The kernels are written once against the array API: every cross-product measure takes
``device`` (default CUDA when available, else the CPU) and ``backend`` (``"auto"``, the
default: torch when PyTorch is installed, else NumPy; ``"torch"``; or ``"numpy"``, the
reference path); see :mod:`._backend`. Inputs and results are NumPy.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from ..runtime import checks
from ..runtime.device import DeviceLike
from . import _backend
from ._core import (
    LayerStats,
    as_matrix,
    check_pair,
    cross,
    fill_eigs,
    in_range,
    standardize_pair,
    work_dtype,
)
from .kernels import canonical_values as canonical_values_of
from .kernels import (
    check_variance,
    full_canonical_values,
    linear_cka_value,
    mixed_values,
    neuron_best,
    procrustes_value,
    pwcca_both,
    top_mean,
)

# --------------------------------------------------------------------------- public measures


def _stats(X, Y, dtype=None, standardize=False, min_rows=2, device=None, backend="auto"):
    X, Y = check_pair(X, Y, min_rows)
    dt = work_dtype(X, Y, dtype=dtype)
    bk = _backend.get(device, backend)
    a = LayerStats(X, dtype=dt, name="X", backend=bk)
    b = LayerStats(Y, dtype=dt, name="Y", backend=bk)
    C = cross(a, b)
    return standardize_pair(a, b, C) if standardize else (a, b, C)


def neuron_correlations(X: ArrayLike, Y: ArrayLike, *, dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> np.ndarray:
    """For each non-constant neuron of X, its largest absolute correlation with any neuron of
    Y (the values :func:`neuronsim` averages), in X's column order."""
    a, b, C = _stats(X, Y, dtype, min_rows=2, device=device, backend=backend)
    return a.bk.host(neuron_best(a, b, C))


def neuronsim(X: ArrayLike, Y: ArrayLike, *, top_k: int | None = None,
              dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> float:
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
    return top_mean(neuron_correlations(X, Y, dtype=dtype, device=device, backend=backend),
                     top_k)


def mixed_correlations(X: ArrayLike, Y: ArrayLike, *, dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> np.ndarray:
    """For each non-constant neuron of X, the r-value of its regression on all of Y's neurons
    (the values :func:`mixedsim` averages)."""
    a, b, C = _stats(X, Y, dtype, min_rows=2, device=device, backend=backend)
    return a.bk.host(mixed_values(a, b, C))


def mixedsim(X: ArrayLike, Y: ArrayLike, *, top_k: int | None = None,
             dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> float:
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
    return top_mean(mixed_correlations(X, Y, dtype=dtype, device=device, backend=backend),
                     top_k)


def canonical_correlations(X: ArrayLike, Y: ArrayLike, variance: float | None = 0.99, *,
                           standardize: bool = False,
                           cut: str = "reach", dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> np.ndarray:
    """The canonical correlations (descending) that :func:`svcca` averages, with its
    options."""
    check_variance(variance)
    a, b, C = _stats(X, Y, dtype, standardize, min_rows=2, device=device, backend=backend)
    fill_eigs([a, b])
    return a.bk.host(canonical_values_of(a, b, C, variance, cut))


def svcca(X: ArrayLike, Y: ArrayLike, variance: float | None = 0.99, *, standardize: bool = False,
          cut: str = "reach",
          top_k: int | None = None, dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> float:
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
    return top_mean(canonical_correlations(X, Y, variance, standardize=standardize, cut=cut,
                                            dtype=dtype, device=device, backend=backend), top_k)


def pwcca(X: ArrayLike, Y: ArrayLike, variance: float | None = 0.99, *, standardize: bool = False,
          cut: str = "reach", dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> float:
    """Projection-weighted CCA (Morcos et al. 2018; Wu et al. 2020's pwsim, App. A.3).

    With the canonical variates ``H_X = X0 u`` of the SVCCA computation (``u`` the left singular
    vectors of ``X0.T @ Y0``) the weights are ``alpha ~ |H_X.T Xc| 1`` over X's centred neurons,
    normalised to sum to 1, and the similarity is ``alpha . rho``. Asymmetric: weighted by how
    much of X each canonical direction accounts for. Works whichever side has more neurons.
    Options as :func:`svcca`.
    """
    check_variance(variance)
    a, b, C = _stats(X, Y, dtype, standardize, min_rows=2, device=device, backend=backend)
    fill_eigs([a, b])
    return pwcca_both(a, b, C, variance, cut)[0]


@dataclass(frozen=True)
class CCAResult:
    """Result of :func:`cca`: mean canonical correlation, R^2_CCA (mean squared canonical
    correlation) and the correlations themselves (descending)."""

    mean: float
    r2: float
    correlations: np.ndarray


def cca(X: ArrayLike, Y: ArrayLike, *, reg: float = 0.0, dtype: DTypeLike | None = None,
        warn: bool = True, device: DeviceLike = None,
        backend: str = "auto") -> CCAResult:
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
    reg = checks.number(reg, "reg", 0.0)
    a, b, C = _stats(X, Y, dtype, min_rows=2, device=device, backend=backend)
    fill_eigs([a, b])
    if warn and reg == 0 and a.n < 5 * max(a.d, b.d):
        warnings.warn(
            f"CCA with n={a.n} stimuli and {a.d}/{b.d} neurons over-fits (correlations are "
            "biased towards 1); pass reg>0, reduce dimensions with svcca(), or use more stimuli",
            UserWarning, stacklevel=2)
    rho = a.bk.host(full_canonical_values(a, b, C, reg))
    if rho.size == 0:
        raise ValueError("X or Y has no variance; CCA is undefined")
    return CCAResult(float(rho.mean()), float((rho ** 2).mean()), rho)


def linear_cka(X: ArrayLike, Y: ArrayLike, *, debiased: bool = False, form: str = "auto",
               dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> float:
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
        Xc, Yc = a.centred(), b.centred()
        K = bk.host(Xc @ Xc.T).astype(np.float64)
        L = bk.host(Yc @ Yc.T).astype(np.float64)
        return cka_from_grams(K, L, debiased, centred=True)
    a, b, C = _stats(X, Y, dtype, min_rows=2, device=device, backend=backend)
    return linear_cka_value(a, b, C, debiased)


def center_gram(K: np.ndarray) -> np.ndarray:
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


def cka_from_grams(K: np.ndarray, L: np.ndarray, debiased: bool, centred: bool = False
                    ) -> float:
    if debiased:
        xy, xx, yy = _hsic_u(K, L), _hsic_u(K, K), _hsic_u(L, L)
        if xx <= 0 or yy <= 0:
            raise ValueError("debiased HSIC of X or Y with itself is not positive (too few "
                             "stimuli or no variance); use more stimuli or debiased=False")
        return in_range(xy / np.sqrt(xx * yy), -1.0, "debiased CKA")
    if not centred:
        K, L = center_gram(K), center_gram(L)
    den = np.linalg.norm(K) * np.linalg.norm(L)
    if den == 0:
        raise ValueError("X or Y has no variance (all neurons constant); CKA is undefined")
    return in_range(np.sum(K * L) / den, 0.0, "CKA")


def rbf_gram(X: ArrayLike, threshold: float = 1.0) -> np.ndarray:
    """RBF Gram matrix ``exp(-D / (2 s^2))`` of squared distances D, with
    ``s^2 = threshold^2 * median(D)`` (median over all n^2 entries, Kornblith et al.'s
    convention)."""
    A = as_matrix(X, "X", 2).astype(np.float64)
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


def rbf_cka(X: ArrayLike, Y: ArrayLike, threshold: float = 1.0, *, debiased: bool = False) -> float:
    """CKA with RBF kernels (Kornblith et al. 2019), bandwidth ``threshold`` times the square
    root of the median squared distance. Costs O(n^2) memory and O(n^2 d) time. Symmetric;
    invariant to orthogonal transforms, translation and isotropic scaling."""
    X, Y = check_pair(X, Y, 4 if debiased else 2)
    return cka_from_grams(rbf_gram(X, threshold), rbf_gram(Y, threshold), debiased)


def procrustes(X: ArrayLike, Y: ArrayLike, *, dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> float:
    """Normalised orthogonal Procrustes similarity, in [0, 1].

    ``||Xc.T Yc||_* / (||Xc||_F ||Yc||_F)`` (``||.||_*``: the nuclear norm);
    ``2 - 2 * similarity`` is the squared Procrustes distance of the centred,
    unit-Frobenius-norm matrices after the best rotation (zero-padding the narrower side).
    Symmetric; invariant to orthogonal transforms, isotropic scaling and translation."""
    a, b, C = _stats(X, Y, dtype, min_rows=2, device=device, backend=backend)
    return procrustes_value(a, b, C)
