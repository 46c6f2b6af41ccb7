"""Representational similarity analysis (Kriegeskorte et al. 2008; Merchant et al. 2020 §5.1).

Each side's n x n stimulus-similarity matrix is built with a kernel, and the two are compared by
the Pearson (or Spearman) correlation of their upper triangles, diagonal excluded.

For the cosine and correlation kernels with Pearson comparison nothing n x n is ever built: with
row-normalised ``Xh`` the similarity matrix is ``S = Xh Xh.T``, so the sums the Pearson
correlation needs over all ``i < j`` follow from d x d products (``sum S = |Xh.T 1|^2``,
``sum S*S = |Xh.T Xh|_F^2``, ``sum S_x*S_y = |Xh.T Yh|_F^2``) minus the diagonal, halved.
Memory stays O(n d) and time O(n d^2) at n = 5,000 and beyond. Euclidean distances and Spearman
comparison need the n(n-1)/2 entries themselves (about 100 MB each at n = 5,000).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import pdist
from scipy.stats import rankdata

from ._core import as_matrix, check_pair

KERNELS = ("cosine", "correlation", "euclidean")
COMPARES = ("pearson", "spearman")


def normalized_rows(X: np.ndarray, kernel: str, name: str = "X") -> np.ndarray:
    """Rows scaled to unit norm (after centring each row for the correlation kernel), float64.

    Raises ValueError when a row has zero norm: its cosine similarity is undefined.
    """
    A = np.asarray(X, dtype=np.float64)
    if kernel == "correlation":
        A = A - A.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(A, axis=1)
    if (norms == 0).any():
        i = int(np.flatnonzero(norms == 0)[0])
        what = "constant" if kernel == "correlation" else "all zeros"
        raise ValueError(f"row {i} of {name} is {what}: its {kernel} similarity is undefined; "
                         "drop that stimulus")
    A = A / norms[:, None]
    if len(A) > 1 and float(np.ptp(A, axis=0).max()) <= 1e-7:
        raise ValueError(f"every stimulus of {name} points the same way, so its similarity "
                         "matrix is constant (as the first token at the embedding layer); "
                         "RSA is undefined")
    return A


def _upper_moments(Xh: np.ndarray, Yh: np.ndarray | None = None):
    """(sum, sum of squares, sum of products with Y) of the upper triangle of Xh Xh.T."""
    n = Xh.shape[0]
    col = Xh.sum(axis=0)
    s1 = (col @ col - n) / 2.0
    s2 = (np.sum((Xh.T @ Xh) ** 2) - n) / 2.0
    sxy = None if Yh is None else (np.sum((Xh.T @ Yh) ** 2) - n) / 2.0
    return s1, s2, sxy


def _pearson_from_moments(n_pairs, ax, axx, ay, ayy, axy) -> float:
    mx, my = ax / n_pairs, ay / n_pairs
    vx, vy = axx / n_pairs - mx * mx, ayy / n_pairs - my * my
    if vx <= 1e-15 or vy <= 1e-15:
        raise ValueError("a similarity matrix is constant (e.g. every stimulus has the same "
                         "vector, as the first token at the embedding layer); RSA is undefined")
    return float((axy / n_pairs - mx * my) / np.sqrt(vx * vy))


def _weighted_moments(Xh: np.ndarray, Yh: np.ndarray, w: np.ndarray):
    """The moments of :func:`_upper_moments` over a multiset of stimuli (stimulus i taken
    ``w[i]`` times), leaving out the pairs of two copies of one stimulus. The d x d products
    run in the rows' dtype; their sums are taken in float64."""
    w2 = float(w @ w)
    total = float(w.sum())
    wt = w.astype(Xh.dtype)
    Xw = Xh * wt[:, None]
    cx, cy = (Xh.T @ wt).astype(np.float64), (Yh.T @ wt).astype(np.float64)
    ax, ay = (cx @ cx - w2) / 2.0, (cy @ cy - w2) / 2.0

    def sq(M: np.ndarray) -> float:
        return float(np.sum(np.square(M, dtype=np.float64)))

    axx = (sq(Xw.T @ Xh) - w2) / 2.0
    ayy = (sq((Yh * wt[:, None]).T @ Yh) - w2) / 2.0
    axy = (sq(Xw.T @ Yh) - w2) / 2.0
    return (total * total - w2) / 2.0, ax, axx, ay, ayy, axy


def rsa(X, Y, kernel: str = "cosine", compare: str = "pearson", *, weights=None) -> float:
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
        (similarity 1 and 1), so keeping them would raise RSA for no reason. With float32
        inputs the products then run in float32 (about 1e-6 relative; resampling loops are
        where speed matters).

    Notes
    -----
    Invariant to orthogonal transforms and isotropic scaling of either side (all kernels), and
    with the correlation kernel also to adding a constant to every neuron of a stimulus.
    Needs at least 3 stimuli. A constant similarity matrix raises ValueError.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if compare not in COMPARES:
        raise ValueError(f"compare must be one of {COMPARES}, got {compare!r}")
    X, Y = check_pair(X, Y, 3)
    n = X.shape[0]
    if weights is not None:
        return _rsa_weighted(X, Y, kernel, compare, weights)
    if kernel != "euclidean" and compare == "pearson":
        Xh, Yh = normalized_rows(X, kernel, "X"), normalized_rows(Y, kernel, "Y")
        ax, axx, axy = _upper_moments(Xh, Yh)
        ay, ayy, _ = _upper_moments(Yh)
        return _pearson_from_moments(n * (n - 1) / 2.0, ax, axx, ay, ayy, axy)
    a, b = upper_triangle(X, kernel), upper_triangle(Y, kernel)
    if compare == "spearman":
        a, b = rankdata(a), rankdata(b)
    return _pearson_vectors(a, b)


def _rsa_weighted(X, Y, kernel, compare, weights) -> float:
    if kernel == "euclidean" or compare != "pearson":
        raise ValueError("weights need the cosine or correlation kernel with Pearson "
                         "comparison (the fast path); resample the rows instead")
    w = np.asarray(weights)
    if w.shape != (X.shape[0],) or not np.issubdtype(w.dtype, np.integer) or (w < 0).any():
        raise ValueError(f"weights must be {X.shape[0]} non-negative integers (one count per "
                         f"stimulus), got shape {w.shape} and dtype {w.dtype}")
    if int((w > 0).sum()) < 3:
        raise ValueError("weights select fewer than 3 distinct stimuli; RSA needs 3")
    keep = w > 0
    Xh = normalized_rows(X[keep], kernel, "X")
    Yh = normalized_rows(Y[keep], kernel, "Y")
    if X.dtype == np.float32 and Y.dtype == np.float32:  # resampling: speed over the last bits
        Xh, Yh = Xh.astype(np.float32), Yh.astype(np.float32)
    return _pearson_from_moments(*_weighted_moments(Xh, Yh, w[keep].astype(np.float64)))


def upper_triangle(X, kernel: str = "cosine") -> np.ndarray:
    """The n(n-1)/2 upper-triangle entries (row-major, i < j) of X's similarity matrix."""
    X = as_matrix(X, "X", 2)
    if kernel in ("cosine", "correlation"):
        Xh = normalized_rows(X, kernel)
        return 1.0 - pdist(Xh, "sqeuclidean") / 2.0  # cos = 1 - |a - b|^2 / 2 for unit rows
    if kernel == "euclidean":
        return -pdist(np.asarray(X, dtype=np.float64), "euclidean")
    raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")


def _pearson_vectors(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    den = np.sqrt((a @ a) * (b @ b))
    if den <= 1e-300:
        raise ValueError("a similarity matrix is constant (every stimulus alike); RSA is "
                         "undefined")
    return float((a @ b) / den)
