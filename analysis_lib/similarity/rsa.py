"""Representational similarity analysis (Kriegeskorte et al. 2008; Merchant et al. 2020 §5.1).

Each side's n x n stimulus-similarity matrix is built with a kernel, and the two are compared by
the Pearson (or Spearman) correlation of their upper triangles, diagonal excluded
(:func:`~.reference.rsa` is the definition, written out).

For the cosine and correlation kernels with Pearson comparison nothing n x n is ever built.
With row-normalised stimuli ``h_i = m + r_i`` (``m`` their mean) the similarity is
``S_ij = 1 - |h_i - h_j|^2 / 2 = 1 + T_ij`` with ``T_ij = -|r_i - r_j|^2 / 2 = r_i . r_j + a_i
+ a_j`` and ``a_i = -|r_i|^2 / 2``. The constant 1 does not change a Pearson correlation, and
``T_ij = z_i . w_j`` for ``z_i = (r_i, a_i, 1)`` and ``w_i = (r_i, 1, a_i)``, so every sum the
correlation needs over ``i < j`` follows from (d + 2) x (d + 2) products of the ``z``: memory
O(n d + d^2), time O(n d^2). A layer with more neurons than rows is first rotated into its row
space (``R Q`` for the QR factorisation ``R' = Q T``: the same dot products, so the same ``T``),
which makes that (n + 2) x (n + 2): memory and time then grow with the rows. Working with
``T`` instead of ``S = Xh Xh'`` matters: contextual
embeddings are anisotropic (mean cosine 0.9 and above), so ``S`` is nearly constant, its
variance from ``E[S^2] - E[S]^2`` would cancel away most digits, and ``h_i . h_j`` carries the
rounding of the row norms; ``T`` is centred and reads only differences of rows, in float64.
Euclidean distances and Spearman comparison need the n(n-1)/2 entries themselves (about
100 MB each at n = 5,000).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial.distance import pdist
from scipy.stats import rankdata

from ..errors import UndefinedMeasure
from .core import as_matrix, digest, in_range, same_rows

KERNELS = ("cosine", "correlation", "euclidean")


class ConstantSimilarity(UndefinedMeasure):
    """A similarity matrix is constant (every stimulus alike, as the first token at the
    embedding layer, or a resample that drew copies of one stimulus only), so RSA is
    undefined. A ValueError: callers that resample may catch this one case by name."""
COMPARES = ("pearson", "spearman")


def normalized_rows(X: np.ndarray, kernel: str, name: str = "X") -> np.ndarray:
    """Rows scaled to unit norm (after centring each row for the correlation kernel), float64.

    Raises ValueError when a row has zero norm: its cosine similarity is undefined; and
    :class:`ConstantSimilarity` when every row points the same way.
    """
    A = _unit_rows(X, kernel, name)
    _check_spread(A, name)
    return A


def _unit_rows(X: np.ndarray, kernel: str, name: str) -> np.ndarray:
    A = np.asarray(X, dtype=np.float64)
    if kernel == "correlation":
        A = A - A.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(A, axis=1)
    if (norms == 0).any():
        i = int(np.flatnonzero(norms == 0)[0])
        what = "constant" if kernel == "correlation" else "all zeros"
        raise ValueError(f"row {i} of {name} is {what}: its {kernel} similarity is undefined; "
                         "drop that stimulus")
    return A / norms[:, None]


def _check_spread(A: np.ndarray, name: str) -> None:
    """ConstantSimilarity when every (unit) row of ``A`` points the same way."""
    if len(A) > 1 and float(np.ptp(A, axis=0).max()) <= 1e-7:
        raise ConstantSimilarity(f"every stimulus of {name} points the same way, so its "
                                 "similarity matrix is constant (as the first token at the "
                                 "embedding layer); RSA is undefined")


class Stimuli:
    """One side's stimuli prepared for the fast path: the rows ``z_i = (r_i, a_i, 1)`` (see
    the module docs) of row-normalised ``Xh`` (n, d), float64."""

    def __init__(self, Xh: np.ndarray):
        R = Xh - Xh.mean(axis=0)
        if R.shape[1] > R.shape[0]:  # wide: the row space holds every dot product
            R = np.asarray(np.linalg.qr(R.T, mode="r")).T
        a = -0.5 * np.einsum("ij,ij->i", R, R)
        self.Z = np.column_stack([R, a, np.ones(len(R))])
        d = R.shape[1]
        self.swap = np.r_[np.arange(d), d + 1, d]  # w_i is z_i with its last two swapped

    @property
    def n(self) -> int:
        return self.Z.shape[0]


def _pair_sum(a: np.ndarray, b: np.ndarray, x: Stimuli, y: Stimuli) -> float:
    """``sum_{i<j} w_i w_j Tx_ij Ty_ij`` over the multiset (``T_ii = 0``), from the rows
    ``a = sqrt(w) z`` of x and ``b`` of y (``a.T @ a`` of one array is half the work)."""
    M = a.T @ b
    return float(np.sum(M * M[np.ix_(x.swap, y.swap)])) / 2.0


def _sum(x: Stimuli, w: np.ndarray) -> float:
    """``sum_{i<j} w_i w_j Tx_ij``."""
    col = x.Z.T @ w
    return float(col @ col[x.swap]) / 2.0


def pearson_of_upper(x: Stimuli, y: Stimuli, weights: np.ndarray | None = None) -> float:
    """The Pearson correlation of the two similarity matrices' upper triangles, stimulus i
    taken ``weights[i]`` times (default once), pairs of two copies of one stimulus left out."""
    w = np.ones(x.n) if weights is None else np.asarray(weights, dtype=np.float64)
    if weights is None:
        a, b = x.Z, y.Z
    else:  # the stimuli drawn, each row scaled by the root of its count
        keep = w > 0
        root = np.sqrt(w[keep])[:, None]
        a, b = (root * s.Z[keep] for s in (x, y))
    pairs = (w.sum() ** 2 - w @ w) / 2.0
    mx, my = _sum(x, w) / pairs, _sum(y, w) / pairs
    vx = _pair_sum(a, a, x, x) / pairs - mx * mx
    vy = _pair_sum(b, b, y, y) / pairs - my * my
    if vx <= 1e-30 or vy <= 1e-30:
        raise ConstantSimilarity("a similarity matrix is constant (e.g. every stimulus has the "
                                 "same vector, as the first token at the embedding layer); RSA "
                                 "is undefined")
    return in_range((_pair_sum(a, b, x, y) / pairs - mx * my) / np.sqrt(vx * vy), -1.0, "RSA",
                    slack=1e-9)


def check_kernel_compare(kernel: str, compare: str) -> None:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if compare not in COMPARES:
        raise ValueError(f"compare must be one of {COMPARES}, got {compare!r}")


def check_rsa_options(options) -> None:
    check_kernel_compare(options.get("kernel", "cosine"), options.get("compare", "pearson"))


class PreparedStimuli:
    """One layer's RSA work, done once: row-normalised stimuli and the upper triangle's
    moments (:class:`Stimuli`; cosine or correlation kernel with Pearson comparison), or
    the upper triangle itself (ranked for Spearman)."""

    def __init__(self, X, name: str, kernel: str, compare: str):
        X = as_matrix(X, name, min_rows=3)
        self.n, self._source = X.shape[0], X
        self.fast = kernel != "euclidean" and compare == "pearson"
        if self.fast:
            self.stimuli = Stimuli(normalized_rows(X, kernel, name))
        else:
            tri = shifted_triangle(X, kernel)
            self.triangle = rankdata(tri) if compare == "spearman" else tri

    def summary(self) -> bytes:
        return digest(self._source)

    digest = summary


def prepare_stimuli(X, name: str, kernel: str = "cosine", compare: str = "pearson"
                    ) -> PreparedStimuli:
    """RSA's per-layer preparation (the ``stimuli`` kind of :mod:`.pairwise`)."""
    check_kernel_compare(kernel, compare)
    return PreparedStimuli(X, name, kernel, compare)


def rsa_pair(a: PreparedStimuli, b: PreparedStimuli, pair, options, directions):
    """RSA's pair kernel: the correlation of the two prepared layers' upper triangles."""
    if a.fast:
        value = pearson_of_upper(a.stimuli, b.stimuli)
    else:
        value = pearson_vectors(a.triangle, b.triangle)
    return value, value


class WeightedSide:
    """One side of :class:`WeightedRSA`, prepared once: the unit rows of X (n, d) and the
    moments the fast path reads from them (``Stimuli``). A curve that compares one base
    model's layer with several fine-tuned ones prepares the base side once and pairs it
    with each (``WeightedRSA(side, Y)``)."""

    def __init__(self, X: ArrayLike, kernel: str = "cosine", name: str = "X"):
        check_kernel_compare(kernel, "pearson")
        if kernel == "euclidean":
            raise ValueError("weights need the cosine or correlation kernel with Pearson "
                             "comparison (the fast path); resample the rows instead")
        self.kernel, self.name = kernel, name
        self.rows = _unit_rows(as_matrix(X, name, 3), kernel, name)
        self.stimuli = Stimuli(self.rows)

    @property
    def n(self) -> int:
        return self.rows.shape[0]


class WeightedRSA:
    """RSA between X and Y ((n, d1) and (n, d2)) on many multisets of their stimuli, as
    a bootstrap or a permutation test draws them: the rows are normalised once, and each call
    takes one multiset's ``weights`` (n non-negative integers, stimulus i taken ``weights[i]``
    times; pairs of two copies of one stimulus left out). Cosine or correlation kernel with
    Pearson comparison (the fast path). A multiset whose similarity matrix is constant
    raises ``ConstantSimilarity`` (a ValueError). X or Y may be a :class:`WeightedSide`
    prepared with the same kernel (a side shared by several pairs)."""

    def __init__(self, X: ArrayLike | WeightedSide, Y: ArrayLike | WeightedSide,
                 kernel: str = "cosine", compare: str = "pearson"):
        check_kernel_compare(kernel, compare)
        if kernel == "euclidean" or compare != "pearson":
            raise ValueError("weights need the cosine or correlation kernel with Pearson "
                             "comparison (the fast path); resample the rows instead")
        sides = [s if isinstance(s, WeightedSide) else WeightedSide(s, kernel, name)
                 for s, name in ((X, "X"), (Y, "Y"))]
        for side in sides:
            if side.kernel != kernel:
                raise ValueError(f"side {side.name} was prepared with the {side.kernel} kernel, "
                                 f"not {kernel}; prepare it again with kernel={kernel!r}")
        same_rows({"X": sides[0].n, "Y": sides[1].n})
        self.n = sides[0].n
        self.rows = [side.rows for side in sides]
        self.x, self.y = (side.stimuli for side in sides)

    def __call__(self, weights: ArrayLike | None = None) -> float:
        """RSA on the multiset ``weights`` (default: every stimulus once, the plain RSA)."""
        if weights is None:
            for A, name in zip(self.rows, "XY"):
                _check_spread(A, name)
            return pearson_of_upper(self.x, self.y)
        w = np.asarray(weights)
        if w.shape != (self.n,) or not np.issubdtype(w.dtype, np.integer) or (w < 0).any():
            raise ValueError(f"weights must be {self.n} non-negative integers (one count per "
                             f"stimulus), got shape {w.shape} and dtype {w.dtype}")
        if int((w > 0).sum()) < 3:
            raise ValueError("weights select fewer than 3 distinct stimuli; RSA needs 3")
        for A, name in zip(self.rows, "XY"):
            _check_spread(A[w > 0], name)
        return pearson_of_upper(self.x, self.y, w)


def upper_triangle(X: ArrayLike, kernel: str = "cosine") -> np.ndarray:
    """The n(n-1)/2 upper-triangle entries (row-major, i < j) of X's similarity matrix."""
    tri = shifted_triangle(X, kernel)
    return tri + 1.0 if kernel in ("cosine", "correlation") else tri


def shifted_triangle(X, kernel: str) -> np.ndarray:
    """:func:`upper_triangle` less the similarity of a stimulus with itself (1 for cosine and
    correlation): the cosine of unit rows is ``1 - |a - b|^2 / 2``, and without the 1 nearly
    parallel rows keep their digits. Correlations of two triangles do not see the shift."""
    X = as_matrix(X, "X", 2)
    if kernel in ("cosine", "correlation"):
        return -pdist(normalized_rows(X, kernel), "sqeuclidean") / 2.0
    if kernel == "euclidean":
        return -pdist(np.asarray(X, dtype=np.float64), "euclidean")
    raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")


def pearson_vectors(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    den = np.sqrt((a @ a) * (b @ b))
    if den <= 1e-300:
        raise ConstantSimilarity("a similarity matrix is constant (every stimulus alike); RSA "
                                 "is undefined")
    return in_range((a @ b) / den, -1.0, "RSA", slack=1e-9)
