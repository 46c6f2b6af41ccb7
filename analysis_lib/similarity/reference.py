"""The measures as their papers define them: one short float64 NumPy function each.

These are the executable definitions that the book's measures page shows. They are written
to be read top to bottom against the paper, not to be fast: every one forms the matrices the
paper writes down (n x n Gram and similarity matrices, SVDs of the data) in float64. The
library's fast paths (:mod:`.measures`, :mod:`.pairwise`, :mod:`.streaming`, :mod:`.rsa`,
:mod:`.attention`) compute the same numbers from shared cross-products, in float32 where the
inputs are float32, and are tested against these functions in the hard regimes: large
offsets, a few huge neurons, rows that nearly point one way, ties, rank deficiency, float32.

Notation: ``X`` is (n, d1), ``Y`` is (n, d2), rows are the same n stimuli. ``Xc`` is X with
every column centred. Asymmetric measures average over X's neurons (or heads).

What counts as zero, as constant and as tied is one rule each, shared with the fast paths
and imported from ``similarity/core.py``: ``RANK_RTOL`` (a direction whose variance is below
this share of the largest is zero), ``constant_columns`` (a column constant up to the rounding
of its float64 mean is constant), ``varying`` (a neuron whose norm is below ``CONSTANT_RTOL``
of the layer's largest is constant) and ``tied_runs`` (canonical correlations within
``TIE_TOL`` of each other tie).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .core import RANK_RTOL, constant_columns, tied_runs, varying


def centred(X: np.ndarray) -> np.ndarray:
    """``X`` in float64 with every column's mean subtracted; a column that is constant up
    to rounding (e.g. one row repeated) becomes exactly zero instead of rounding noise."""
    X = np.asarray(X, dtype=np.float64)
    Xc = X - X.mean(axis=0)
    if Xc.size:
        flat = constant_columns(np.abs(X).max(axis=0), np.abs(Xc).max(axis=0), len(X))
        Xc[:, flat] = 0.0
    return Xc


def _nonconstant(Xc: np.ndarray) -> np.ndarray:
    """Which columns of a centred layer vary (the rule ``similarity.core.varying``)."""
    return varying(np.sum(Xc * Xc, axis=0))


# ----------------------------------------------------------------- neurons (Wu et al. §3.1-3.2)

def neuronsim(X: np.ndarray, Y: np.ndarray, top_k: int | None = None) -> float:
    """Wu et al. 2020 §3.1 (after Bau et al. 2019): for every neuron x_k of X,
    ``max_k' |corr(x_k, y_k')|``, averaged over X's neurons (or its ``top_k`` best).
    Constant neurons of X are left out; constant neurons of Y match nothing."""
    Xc, Yc = centred(X), centred(Y)
    Xc, Yc = Xc[:, _nonconstant(Xc)], Yc[:, _nonconstant(Yc)]
    Xu = Xc / np.linalg.norm(Xc, axis=0)
    Yu = Yc / np.linalg.norm(Yc, axis=0)
    best = np.abs(Xu.T @ Yu).max(axis=1)
    return _mean_of_best(np.minimum(best, 1.0), top_k)


def mixedsim(X: np.ndarray, Y: np.ndarray, top_k: int | None = None) -> float:
    """Wu et al. 2020 §3.2: for every neuron x_k of X, the r-value of its least-squares
    regression on all of Y's neurons, ``||P_Y x_k|| / ||x_k||`` (``P_Y`` the projection onto
    the column space of ``Yc``), averaged over X's neurons. The column space is spanned by the
    left singular vectors of Y's z-scored neurons above the rank cut."""
    Xc, Yc = centred(X), centred(Y)
    Xc = Xc[:, _nonconstant(Xc)]
    Yz = Yc[:, _nonconstant(Yc)]
    Yz = Yz / np.linalg.norm(Yz, axis=0)
    U, s, _ = np.linalg.svd(Yz, full_matrices=False)
    U = U[:, s ** 2 > s[0] ** 2 * RANK_RTOL]
    r = np.linalg.norm(U.T @ Xc, axis=0) / np.linalg.norm(Xc, axis=0)
    return _mean_of_best(np.minimum(r, 1.0), top_k)


def _mean_of_best(values: np.ndarray, top_k: int | None) -> float:
    if top_k is None:
        return float(values.mean())
    return float(np.sort(values)[::-1][:top_k].mean())


# ----------------------------------------------------------------- the CCA family

def principal_basis(X: np.ndarray, variance: float | None = 0.99, cut: str = "reach",
                    standardize: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SVCCA's first step (Raghu et al. 2017): the SVD ``Xc = U S V'`` and how many of its
    directions to keep: those above the rank cut, and of those the fewest whose share of the
    variance reaches ``variance`` (``cut='reach'``, the papers) or the ones whose cumulative
    share stays below it (``cut='below'``, Wu et al.'s released code; at least one).
    ``standardize`` z-scores every neuron first. Returns ``U_k`` (n, k), ``s_k``, ``V_k``."""
    Xc = centred(X)
    if standardize:
        keep = _nonconstant(Xc)
        Xc = np.where(keep, Xc / np.where(keep, np.linalg.norm(Xc, axis=0), 1.0), 0.0)
    U, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    lam = s ** 2
    rank = int((lam > lam[0] * RANK_RTOL).sum()) if lam.size and lam[0] > 0 else 0
    if rank == 0:
        raise ValueError("no variance: every neuron is constant")
    k = rank
    if variance is not None:
        share = np.cumsum(lam[:rank]) / lam[:rank].sum()
        if cut == "reach":
            k = int(np.searchsorted(share, variance - 1e-12) + 1)
        else:
            k = int((share < variance).sum())
        k = max(1, min(k, rank))
    return U[:, :k], s[:k], Vt[:k].T


def canonical_correlations(X: np.ndarray, Y: np.ndarray, variance: float | None = 0.99,
                           cut: str = "reach",
                           standardize: bool = False) -> np.ndarray:
    """The canonical correlations of SVCCA (Raghu et al. 2017; Wu et al. App. A.3): the
    singular values of ``U_x' U_y`` of the two principal bases, descending. With
    ``variance=None``: plain CCA over every direction above the rank cut."""
    Ux = principal_basis(X, variance, cut, standardize)[0]
    Uy = principal_basis(Y, variance, cut, standardize)[0]
    return np.clip(np.linalg.svd(Ux.T @ Uy, compute_uv=False), 0.0, 1.0)


def svcca(X: np.ndarray, Y: np.ndarray, variance: float | None = 0.99, cut: str = "reach",
          standardize: bool = False,
          top_k: int | None = None) -> float:
    """SVCCA (Raghu et al. 2017; Wu et al.'s svsim): the mean canonical correlation of the
    two principal bases (or of the ``top_k`` largest)."""
    return _mean_of_best(canonical_correlations(X, Y, variance, cut, standardize), top_k)


def pwcca(X: np.ndarray, Y: np.ndarray, variance: float | None = 0.99, cut: str = "reach",
          standardize: bool = False) -> float:
    """Projection-weighted CCA (Morcos et al. 2018; Wu et al.'s pwsim).

    With ``U_x' U_y = u diag(rho) v'``, the canonical variates of X are ``H = U_x u`` and the
    weight of direction i is ``alpha_i ~ sum_k |<h_i, x_k>|`` over X's centred (or z-scored)
    neurons; PWCCA is ``sum_i alpha_i rho_i`` with ``sum alpha = 1``. Directions whose
    correlations tie are defined only up to a rotation among themselves, so within each tied
    group they are first rotated to the right singular vectors of the group's ``H' Xc``.
    """
    Ux, sx, Vx = principal_basis(X, variance, cut, standardize)
    Uy = principal_basis(Y, variance, cut, standardize)[0]
    u, rho, _ = np.linalg.svd(Ux.T @ Uy, full_matrices=False)
    rho = np.clip(rho, 0.0, 1.0)
    M = u.T @ (sx[:, None] * Vx.T)   # H' Xc = u' U_x' U S V' = u' S_k V_k'
    for start, end in tied_runs(rho):
        P = np.linalg.svd(M[start:end], full_matrices=False)[0]
        M[start:end] = P.T @ M[start:end]
    alpha = np.abs(M).sum(axis=1)
    return float(alpha @ rho / alpha.sum())


def cca(X: np.ndarray, Y: np.ndarray, reg: float = 0.0) -> tuple[float, float, np.ndarray]:
    """CCA over the whole spaces (Hotelling 1936; Ren et al. 2023 report R^2_CCA): the
    singular values ``rho`` of ``Gx^-1/2 Xc' Yc Gy^-1/2``, with ``G = Xc' Xc`` taken over the
    directions above the rank cut, or ridge-regularised as ``G + reg mean(eig G) I``.
    Returns ``(mean rho, mean rho^2, rho)``."""
    Xc, Yc = centred(X), centred(Y)
    if reg == 0:
        rho = canonical_correlations(X, Y, None)
    else:
        rho = np.linalg.svd(_inverse_sqrt(Xc.T @ Xc, reg) @ Xc.T @ Yc
                            @ _inverse_sqrt(Yc.T @ Yc, reg), compute_uv=False)
        rho = np.clip(rho, 0.0, 1.0)
    return float(rho.mean()), float((rho ** 2).mean()), rho


def _inverse_sqrt(G: np.ndarray, reg: float) -> np.ndarray:
    lam, V = np.linalg.eigh(G)
    lam = np.clip(lam, 0.0, None)
    return (V / np.sqrt(lam + reg * lam.mean())) @ V.T


# ----------------------------------------------------------------- kernel alignment and rotation

def hsic_unbiased(K: np.ndarray, L: np.ndarray) -> float:
    """Song et al. (2012)'s unbiased HSIC of two n x n kernel matrices, times n(n-3):
    ``tr(K~L~) + 1'K~1 1'L~1 / ((n-1)(n-2)) - 2/(n-2) 1'K~L~1``, ``K~`` with a zero diagonal."""
    n = K.shape[0]
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    return float(np.sum(Kt * Lt) + Kt.sum() * Lt.sum() / ((n - 1) * (n - 2))
                 - 2.0 / (n - 2) * Kt.sum(axis=0) @ Lt.sum(axis=0))


def cka_of_grams(K: np.ndarray, L: np.ndarray, debiased: bool = False) -> float:
    """CKA of two Gram matrices (Kornblith et al. 2019, eq. 3-4):
    ``HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))`` with ``HSIC(K, L) = tr(HKH HLH)`` (the
    constant factors cancel), or with the unbiased HSIC when ``debiased``."""
    if debiased:
        return hsic_unbiased(K, L) / np.sqrt(hsic_unbiased(K, K) * hsic_unbiased(L, L))
    n = K.shape[0]
    H = np.eye(n) - 1.0 / n
    Kc, Lc = H @ K @ H, H @ L @ H
    return float(np.sum(Kc * Lc) / (np.linalg.norm(Kc) * np.linalg.norm(Lc)))


def linear_cka(X: np.ndarray, Y: np.ndarray, debiased: bool = False) -> float:
    """Linear CKA (Kornblith et al. 2019; Wu et al.'s ckasim): CKA of ``K = Xc Xc'`` and
    ``L = Yc Yc'``."""
    Xc, Yc = centred(X), centred(Y)
    return cka_of_grams(Xc @ Xc.T, Yc @ Yc.T, debiased)


def rbf_gram(X: np.ndarray, threshold: float = 1.0) -> np.ndarray:
    """``K_ij = exp(-|x_i - x_j|^2 / (2 s^2))`` with ``s^2 = threshold^2 median_ij |x_i - x_j|^2``
    (Kornblith et al.'s bandwidth: the median over all n^2 entries)."""
    X = np.asarray(X, dtype=np.float64)
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    return np.exp(-D / (2.0 * threshold ** 2 * np.median(D)))


def rbf_cka(X: np.ndarray, Y: np.ndarray, threshold: float = 1.0, debiased: bool = False) -> float:
    """CKA with RBF kernels (Kornblith et al. 2019)."""
    return cka_of_grams(rbf_gram(X, threshold), rbf_gram(Y, threshold), debiased)


def procrustes(X: np.ndarray, Y: np.ndarray) -> float:
    """Normalised orthogonal Procrustes similarity: ``||Xc' Yc||_* / (||Xc||_F ||Yc||_F)``,
    so that ``min_Q ||Xc/|Xc| - Yc/|Yc| Q||_F^2 = 2 - 2 procrustes`` over orthogonal Q
    (Schönemann 1966; Ding et al. 2021)."""
    Xc, Yc = centred(X), centred(Y)
    nuclear = np.linalg.svd(Xc.T @ Yc, compute_uv=False).sum()
    return float(nuclear / (np.linalg.norm(Xc) * np.linalg.norm(Yc)))


# ----------------------------------------------------------------- RSA (Merchant et al. §5.1)

def similarity_matrix(X: np.ndarray, kernel: str = "cosine") -> np.ndarray:
    """The n x n stimulus similarity matrix less its diagonal value: cosine of rows, Pearson
    correlation of rows (cosine after centring each row), or minus the Euclidean distance.
    The cosine of unit rows is written ``1 - |h_i - h_j|^2 / 2`` and returned without the 1:
    a constant shift that no correlation sees, and that keeps nearly parallel rows (mean
    cosine 0.99 and above) exact where ``h_i . h_j`` would round them together."""
    X = np.asarray(X, dtype=np.float64)
    if kernel == "correlation":
        X = X - X.mean(axis=1, keepdims=True)
    if kernel in ("cosine", "correlation"):
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
    return -D if kernel == "euclidean" else -D ** 2 / 2.0


def rsa(X: np.ndarray, Y: np.ndarray, kernel: str = "cosine", compare: str = "pearson",
        weights: np.ndarray | None = None) -> float:
    """RSA (Kriegeskorte et al. 2008; Merchant et al. 2020 §5.1): the Pearson (or Spearman)
    correlation of the upper triangles (i < j) of the two similarity matrices.

    ``weights`` (one non-negative count per stimulus) takes stimulus i ``weights[i]`` times,
    as a bootstrap resample does, and leaves out the pairs of two copies of one stimulus."""
    Sx, Sy = similarity_matrix(X, kernel), similarity_matrix(Y, kernel)
    rows = np.arange(Sx.shape[0])
    if weights is not None:
        rows = np.repeat(rows, np.asarray(weights))
    i, j = np.triu_indices(rows.size, 1)
    keep = rows[i] != rows[j]
    a, b = Sx[rows[i[keep]], rows[j[keep]]], Sy[rows[i[keep]], rows[j[keep]]]
    if compare == "spearman":
        from scipy.stats import rankdata

        a, b = rankdata(a), rankdata(b)
    return float(np.corrcoef(a, b)[0, 1])


# ----------------------------------------------------------------- attention (Wu et al. §3.4)

def attention_head_similarity(P: Sequence[np.ndarray], Q: Sequence[np.ndarray], method: str = "js",
                              base: float = 2.0) -> float:
    """Similarity of two heads' attention over the same sentences: P and Q are lists of
    (t, c) row-stochastic maps, one per sentence.

    - ``'js'``: 1 - the Jensen-Shannon divergence (in log ``base``) of each word's two
      distributions, averaged over every word;
    - ``'pearson'``: the Pearson correlation of each word's two distributions, averaged over
      the words whose rows vary in both;
    - ``'frobenius'``: 1 - ``||P_s - Q_s||_F / sqrt(2 t_s)`` averaged over sentences."""
    values = []
    for p, q in zip(P, Q):
        p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
        if method == "frobenius":
            values.append(1.0 - np.linalg.norm(p - q) / np.sqrt(2.0 * p.shape[0]))
            continue
        for pi, qi in zip(p, q):
            if method == "js":
                values.append(1.0 - _js(pi, qi) / np.log(base))
            elif pi.size >= 2 and pi.std() > 1e-12 and qi.std() > 1e-12:
                values.append(np.corrcoef(pi, qi)[0, 1])
    return float(np.mean(values))


def _js(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence in nats."""
    m = (p + q) / 2.0

    def kl(a):
        nz = a > 0
        return float(np.sum(a[nz] * np.log(a[nz] / m[nz])))

    return max(0.0, (kl(p) + kl(q)) / 2.0)


def attention_similarity(A: Sequence[np.ndarray], B: Sequence[np.ndarray], method: str = "js",
                         base: float = 2.0) -> float:
    """Wu et al. 2020 §3.4: for every head of layer A, the similarity of its best-matching
    head in layer B, averaged over A's heads. ``A``, ``B``: lists of (heads, t, c) maps."""
    heads_a, heads_b = np.asarray(A[0]).shape[0], np.asarray(B[0]).shape[0]
    best = [max(attention_head_similarity([a[h] for a in A], [b[g] for b in B], method, base)
                for g in range(heads_b)) for h in range(heads_a)]
    return float(np.mean(best))


def attention_representation(A: Sequence[np.ndarray]) -> np.ndarray:
    """Wu et al. 2020 §3.5: the (word pairs x heads) matrix, row (s, i, j) the attention of
    every head from word i to column j of sentence s."""
    return np.concatenate([np.asarray(a, dtype=np.float64).reshape(len(a), -1).T for a in A])


# ----------------------------------------------------------------- localization (Wu et al. §5.1)

def localization(neuron_matrix: np.ndarray, svcca_matrix: np.ndarray) -> np.ndarray:
    """Wu et al. 2020 §5.1: for every layer (column), the mean neuronsim to the other layers
    minus the mean SVCCA to them."""
    N, S = np.asarray(neuron_matrix, float), np.asarray(svcca_matrix, float)
    L = N.shape[0]
    off = ~np.eye(L, dtype=bool)
    return np.array([N[off[:, j], j].mean() - S[off[:, j], j].mean() for j in range(L)])


def ranked_localization(neuron_matrix: np.ndarray, svcca_matrix: np.ndarray) -> np.ndarray:
    """Localization on ranks: per layer, its mean neuronsim to the other layers ranked among
    all layers' (scaled to [0, 1], ties averaged) minus its mean SVCCA ranked likewise."""
    N, S = np.asarray(neuron_matrix, float), np.asarray(svcca_matrix, float)
    L = N.shape[0]
    n_mean = [np.mean([N[i, j] for i in range(L) if i != j]) for j in range(L)]
    s_mean = [np.mean([S[i, j] for i in range(L) if i != j]) for j in range(L)]

    def ranks(values: list[float]) -> np.ndarray:
        below = np.array([sum(v < w for v in values) for w in values], float)
        equal = np.array([sum(v == w for v in values) for w in values], float)
        return (below + (equal - 1) / 2) / (L - 1)

    return ranks(n_mean) - ranks(s_mean)


def mean_cca(X: np.ndarray, Y: np.ndarray, reg: float = 0.0) -> float:
    """The registry's ``cca``: the mean canonical correlation of :func:`cca`."""
    return cca(X, Y, reg)[0]


def attention_js(A: Sequence[np.ndarray], B: Sequence[np.ndarray], base: float = 2.0) -> float:
    return attention_similarity(A, B, "js", base)


def attention_pearson(A: Sequence[np.ndarray], B: Sequence[np.ndarray]) -> float:
    return attention_similarity(A, B, "pearson")


def attention_frobenius(A: Sequence[np.ndarray], B: Sequence[np.ndarray]) -> float:
    return attention_similarity(A, B, "frobenius")
