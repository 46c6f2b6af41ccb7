"""Representation similarity measures of Wu et al. 2020, Kornblith et al. 2019 and Merchant et al.

Conventions: ``X`` is (n, d1), ``Y`` is (n, d2), rows are the same n stimuli in the same order.
Every function returns a similarity (higher = more similar). Asymmetric measures average over
the neurons (or canonical directions) of ``X``, the *first* argument.

A measure on activations reads its number in three steps, each in one file: the two
layers are prepared (:func:`~.core.prepare`: checked, centred, their statistics computed on
first use) and put in a fixed order (:class:`~.core.Pair`); the measure's kernel
(:mod:`.kernels`) computes its value from them. The all-pairs engine (:mod:`.pairwise`) runs
the same preparation and the same kernels, so a single-pair value and the entry of a matrix
over the same layers are the same number to the last bit. The functions that return
per-neuron or per-direction values read the same pair.

The measures on activations take ``device`` (default CUDA when available, else the CPU) and
``backend`` (``"auto"``, the default: the faster path where the call computes, see
:func:`._backend.get`; ``"torch"``; or ``"numpy"``, the reference path). Inputs and results
are NumPy.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from ..runtime import checks
from ..runtime.device import DeviceLike
from . import _backend
from . import kernels as k
from .attention import METHODS, AttentionInput
from .core import Pair, is_wide, prepare_given, principal, reduced, same_rows
from .kernels import full_canonical_values, mixed_values, neuron_best_both
from .kernels import rbf_gram as rbf_gram
from .pairwise import one_pair, timing_engine
from .rsa import WeightedRSA, check_kernel_compare

# --------------------------------------------------------------------------- public measures


def _pair(X, Y, dtype, device, backend, *, measure: str, row_space: bool = False,
          standardize: bool = False) -> tuple[Pair, bool]:
    """X and Y prepared as the all-pairs engine prepares them, in its fixed order, and
    whether the measure still has to z-score them. ``measure``: the canonical name the
    backend's ``"auto"`` rule times. ``row_space``: the measure reads a
    wide layer as its rotation into its row space (:func:`~.core.reduced`; then both
    layers are z-scored there when ``standardize`` asks)."""
    bk = _backend.get(device, backend, _backend.Work.of([measure], [X, Y], dtype),
                      timing_engine)
    wide = (is_wide(X), is_wide(Y)) if row_space else (False, False)
    if any(wide):
        X, Y = (reduced(x, name, standardize, w) for x, name, w in zip((X, Y), "XY", wide))
        standardize = False
    a, b = prepare_given(X, "X", dtype, bk), prepare_given(Y, "Y", dtype, bk)
    same_rows({"X": a.n, "Y": b.n})
    return Pair.of(a, b), standardize


def neuron_correlations(X: ArrayLike, Y: ArrayLike, *, dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> np.ndarray:
    """For each non-constant neuron of X, its largest absolute correlation with any neuron of
    Y (the values :func:`neuronsim` averages), in X's column order."""
    p, _ = _pair(X, Y, dtype, device, backend, measure="neuronsim")
    return p.a.bk.host(p.first(neuron_best_both(p.a, p.b, p.cross())))


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
    p, _ = _pair(X, Y, dtype, device, backend, measure="neuronsim")
    if p.alike:
        return 1.0
    return p.first(k.neuronsim_pair(p.a, p.b, p, {"top_k": top_k}, p.directions()))


def mixed_correlations(X: ArrayLike, Y: ArrayLike, *, dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> np.ndarray:
    """For each non-constant neuron of X, the r-value of its regression on all of Y's neurons
    (the values :func:`mixedsim` averages)."""
    p, _ = _pair(X, Y, dtype, device, backend, measure="mixedsim")
    x, y, C = (p.b, p.a, p.cross().T) if p.flipped else (p.a, p.b, p.cross())
    return x.bk.host(mixed_values(x, y, C))


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
    p, _ = _pair(X, Y, dtype, device, backend, measure="mixedsim")
    if p.alike:
        return 1.0
    return p.first(k.mixedsim_pair(p.a, p.b, p, {"top_k": top_k}, p.directions()))


def canonical_correlations(X: ArrayLike, Y: ArrayLike, variance: float | None = 0.99, *,
                           standardize: bool = False,
                           cut: str = "reach", dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> np.ndarray:
    """The canonical correlations (descending) that :func:`svcca` averages, with its
    options."""
    options = {"variance": variance, "standardize": standardize, "cut": cut}
    k.check_canonical_options(options)
    p, _ = _pair(X, Y, dtype, device, backend, measure="cca")
    return p.a.bk.host(k.canonical_of_pairs([p], options)[0][2].rho)


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
    p = _canonical_pair(X, Y, variance, standardize, cut, dtype, device, backend,
                        "svcca")
    if p.alike:
        return 1.0
    return p.first(k.svcca_pair(p.a, p.b, p, {"top_k": top_k}, p.directions()))


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
    p = _canonical_pair(X, Y, variance, standardize, cut, dtype, device, backend,
                        "pwcca")
    if p.alike:
        return 1.0
    return p.first(k.pwcca_pair(p.a, p.b, p, {}, p.directions()))


def _canonical_pair(X, Y, variance, standardize, cut, dtype, device, backend,
                    measure: str) -> Pair:
    """The pair of SVCCA and PWCCA with its canonical decomposition (the leading principal
    directions of each layer first, side by side, as the all-pairs engine computes them)."""
    options = {"variance": variance, "standardize": standardize, "cut": cut}
    k.check_canonical_options(options)
    p, options["standardize"] = _pair(X, Y, dtype, device, backend, measure=measure,
                                      row_space=True, standardize=standardize)
    if not p.alike:
        principal([p.a, p.b], variance, cut, options["standardize"])
        p.provide("canonical", k.canonical_of_pairs([p], options)[0])
    return p


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
    p, _ = _pair(X, Y, dtype, device, backend, measure="cca")
    a, b = p.a, p.b
    if warn and reg == 0 and a.n < 5 * max(a.d, b.d):
        warnings.warn(
            f"CCA with n={a.n} stimuli and {a.d}/{b.d} neurons over-fits (correlations are "
            "biased towards 1); pass reg>0, reduce dimensions with svcca(), or use more stimuli",
            UserWarning, stacklevel=2)
    rho = full_canonical_values(a, b, p.cross(np.float64), reg)
    if rho.shape[0] == 0:
        raise ValueError("X or Y has no variance; CCA is undefined")
    mean = 1.0 if p.alike and not reg else float(a.xp.mean(rho))  # as the registered cca
    rho = a.bk.host(rho)
    return CCAResult(mean, float((rho ** 2).mean()), rho)


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
    options = {"debiased": debiased, "form": form}
    k.check_cka_options(options)
    p, _ = _pair(X, Y, dtype, device, backend, measure="linear_cka")
    if p.alike:
        return 1.0
    return p.first(k.linear_cka_pair(p.a, p.b, p, options, p.directions()))


def rbf_cka(X: ArrayLike, Y: ArrayLike, threshold: float = 1.0, *, debiased: bool = False) -> float:
    """CKA with RBF kernels (Kornblith et al. 2019), bandwidth ``threshold`` times the square
    root of the median squared distance. Costs O(n^2) memory and O(n^2 d) time. Symmetric;
    invariant to orthogonal transforms, translation and isotropic scaling."""
    return one_pair("rbf_cka", X, Y, {"threshold": threshold, "debiased": debiased})


def procrustes(X: ArrayLike, Y: ArrayLike, *, dtype: DTypeLike | None = None,
        device: DeviceLike = None, backend: str = "auto") -> float:
    """Normalised orthogonal Procrustes similarity, in [0, 1].

    ``||Xc.T Yc||_* / (||Xc||_F ||Yc||_F)`` (``||.||_*``: the nuclear norm);
    ``2 - 2 * similarity`` is the squared Procrustes distance of the centred,
    unit-Frobenius-norm matrices after the best rotation (zero-padding the narrower side).
    Symmetric; invariant to orthogonal transforms, isotropic scaling and translation."""
    p, _ = _pair(X, Y, dtype, device, backend, row_space=True, measure="procrustes")
    if p.alike:
        return 1.0
    return p.first(k.procrustes_pair(p.a, p.b, p, {}, p.directions()))


def rsa(X: ArrayLike, Y: ArrayLike, kernel: str = "cosine", compare: str = "pearson", *,
        weights: ArrayLike | None = None) -> float:
    """RSA between X (n, d1) and Y (n, d2). Symmetric.

    Parameters
    ----------
    kernel : {'cosine', 'correlation', 'euclidean'}
        Stimulus similarity within each side: cosine similarity (Merchant et al.), Pearson
        correlation across neurons, or (negated) Euclidean distance.
    compare : {'pearson', 'spearman'}
        Correlation of the two upper triangles (diagonal excluded).
    weights : array of n non-negative integers, optional
        Multiplicities of the stimuli, as a bootstrap resample draws them (cosine or
        correlation kernel with Pearson only). The RSA of the resampled multiset, with the
        pairs of two copies of one stimulus left out: those pairs are identical on both sides
        (similarity 1 and 1), so keeping them would raise RSA for no reason.

    Notes
    -----
    Invariant to orthogonal transforms and isotropic scaling of either side (all kernels), and
    with the correlation kernel also to adding a constant to every neuron of a stimulus.
    Needs at least 3 stimuli. A constant similarity matrix raises ValueError.
    """
    check_kernel_compare(kernel, compare)
    if weights is not None:
        return WeightedRSA(X, Y, kernel, compare)(weights)
    return one_pair("rsa", X, Y, {"kernel": kernel, "compare": compare})


def attention_similarity(A: AttentionInput, B: AttentionInput, method: str = "js", *,
                         base: float = 2.0) -> float:
    """Localized attention similarity of layer A to layer B (Wu et al. §3.4, App. A.4).

    Parameters
    ----------
    A, B : list of arrays (heads, t, c), one per sentence; or :class:`AttentionLayer`
    method : {'js', 'pearson', 'frobenius'}
        See the module docs for each definition and its range.
    base : float
        Logarithm base of the JS divergence: 2 (bits, the paper) or ``np.e`` (nats, the
        released code).

    Returns
    -------
    float
        Mean over A's heads of the best match in B (:func:`head_matches`); 1 for identical
        layers under every method.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return one_pair(f"attention_{method}", A, B, {"base": base} if method == "js" else {},
                    names=("A", "B"))
