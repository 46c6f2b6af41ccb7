"""Shared machinery: input checks and the per-layer statistics every measure is derived from.

Every representation measure here is a function of three kinds of quantity:

* per layer: the centred activations ``Xc`` (n x d), their self cross-product
  ``G = Xc.T @ Xc`` and its eigendecomposition ``G = V diag(lam) V.T`` (so ``lam`` are the
  squared singular values of ``Xc`` and ``Xc @ V / sqrt(lam)`` its left singular vectors);
* per pair of layers: the centred cross-product ``C = Xc.T @ Yc`` (d1 x d2).

:class:`LayerStats` holds the per-layer part, computed once and reused for every pair; the
pair kernels in :mod:`.measures` take two ``LayerStats`` and ``C``. Centring is done in
float64 (so inputs with large means lose nothing); the products run in the *work dtype*
(float32 for float32 inputs, float64 otherwise, or as chosen): the n x d cross-products, and
the d x d x k products that map ``C`` onto principal directions (mixedsim, SVCCA, PWCCA); ``G``,
the decompositions and every sum are float64. The arrays live on a
:class:`~._backend.Backend` (NumPy, or torch on any device); the same lines serve both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import UndefinedMeasure
from ._backend import NUMPY, Backend

# ------------------------------------------------------------------ the shared rules
# What counts as zero, as constant and as tied: one rule each, read by the fast paths
# and by the plain definitions in :mod:`.reference` alike.

#: Directions whose variance is below this share of the largest count as zero (float64).
RANK_RTOL = 1e-12
#: Canonical correlations closer than this form one tied group (PWCCA's weights). Far above
#: the rounding of float32 products (about 1e-6), so that float32 and float64 inputs, and any
#: BLAS thread count, find the same groups.
TIE_TOL = 1e-4


def rounding(n: int) -> float:
    """The share of a column's largest magnitude that centring ``n`` values in float64 can
    leave behind as rounding (the mean's summation error grows like ``log2 n``). Far below
    any real spread, even of float32 data (one float32 step is about 6e-8 of a value)."""
    return 4.0 * (1.0 + np.log2(max(n, 2))) * np.finfo(np.float64).eps


def constant_columns(peak: Any, spread: Any, n: int) -> Any:
    """Which columns of a layer of ``n`` rows are constant: their largest centred magnitude
    (``spread``) is within the rounding of their float64 mean (:func:`rounding`) of their
    largest magnitude (``peak``). NumPy or torch arrays."""
    return spread <= rounding(n) * peak


def constant_layer(X: Any) -> bool:
    """Whether a layer (n x d) is constant, every neuron constant by
    :func:`constant_columns` (one row repeated, e.g. the first token's vector at the
    embedding layer): the one rule by which a layer has no variance and no measure is
    defined for it."""
    A = np.asarray(X, dtype=np.float64)
    spread = np.abs(A - A.mean(axis=0)).max(axis=0)
    return bool(np.all(constant_columns(np.abs(A).max(axis=0), spread, len(A))))


#: a centred column whose norm is at most this share of its layer's largest column norm is
#: constant (after the columns that are constant up to :func:`rounding` have been zeroed)
CONSTANT_RTOL = 1e-10


def varying(sq_norms: Any) -> Any:
    """Which columns vary, from their squared centred norms (NumPy or torch): the one rule
    by which every measure leaves a constant neuron out."""
    if not len(sq_norms):
        return sq_norms > 0
    return sq_norms > sq_norms.max() * CONSTANT_RTOL**2


def tied_runs(rho: np.ndarray, tol: float = TIE_TOL) -> list[tuple[int, int]]:
    """``(start, end)`` of every run of two or more consecutive values of the descending
    ``rho`` within ``tol`` of their neighbours."""
    if rho.size < 2:
        return []
    breaks = np.flatnonzero(np.abs(np.diff(rho)) > tol) + 1
    edges = np.concatenate([[0], breaks, [rho.size]])
    return [(int(s), int(e)) for s, e in zip(edges[:-1], edges[1:]) if e - s > 1]


def digest(*arrays) -> bytes:
    """A SHA-1 digest of arrays' shapes, dtypes and bytes."""
    h = hashlib.sha1()
    for x in arrays:
        x = np.ascontiguousarray(x)
        h.update(repr((x.shape, x.dtype.str)).encode())
        h.update(x.data)
    return h.digest()


def real_array(value: Any, name: str) -> np.ndarray:
    """``value`` as a NumPy array of real numbers (or booleans). Refused with the fix: text or
    objects, complex numbers (the imaginary part would be dropped), and masked arrays with
    masked entries (the mask would be ignored and the hidden values compared)."""
    if np.ma.isMaskedArray(value):
        hidden = int(np.ma.count_masked(value))
        if hidden:
            raise ValueError(
                f"{name} is a masked array with {hidden} masked values, which a measure would "
                f"read as numbers; drop those stimuli (X[~X.mask.any(axis=1)]) or fill them "
                f"(X.filled(value)) first")
        value = np.ma.getdata(value)
    if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach"):
        # a tensor on any device, requiring grad or not; bfloat16 (which NumPy lacks) is
        # widened to float32 exactly
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
    try:
        array = np.asarray(value)
    except Exception as error:  # ragged lists and the like
        raise TypeError(f"{name} must be a numeric array: {error}") from error
    if np.iscomplexobj(array):
        raise TypeError(f"{name} has complex values; pass real numbers (e.g. the magnitude "
                        f"np.abs({name}) or the real part {name}.real, whichever you mean)")
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number)
                                     or array.dtype == bool):
        raise TypeError(f"{name} must be a numeric array, got dtype {array.dtype}")
    return array


def as_matrix(X, name: str = "X", min_rows: int = 2) -> np.ndarray:
    """Validate a stimuli x features matrix and return it as a float32/float64 array
    (float16 becomes float32, other numbers float64).

    Raises
    ------
    TypeError
        Not numeric.
    ValueError
        Not 2-D, no columns, fewer than ``min_rows`` rows, or NaN/inf values (the message gives
        their count and the fix).
    """
    A = real_array(X, name)
    if A.ndim == 3 and A.shape[0] == 1:  # one sequence with its batch axis (Hugging Face)
        A = A[0]
    if A.ndim == 3:
        raise ValueError(
            f"{name} has shape {A.shape}: a batch of {A.shape[0]} sequences, not one layer; "
            f"pass one sequence ({name}[0]), or the tokens of all of them without padding "
            f"({name}[attention_mask.bool()], which is 2-D)")
    if A.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (stimuli x neurons), got shape {A.shape}"
            + ("; reshape a single neuron with X[:, None]" if A.ndim == 1 else ""))
    if A.shape[1] == 0:
        raise ValueError(f"{name} has no columns (neurons)")
    if A.shape[0] < min_rows:
        raise ValueError(f"{name} has {A.shape[0]} rows (stimuli); this measure needs at least "
                         f"{min_rows} (after centring, two rows span a single direction, so "
                         "every two-row layer is the same up to scale); pass more stimuli")
    if A.dtype == np.float16:
        A = A.astype(np.float32)  # half-precision storage: computed as float32
    elif A.dtype not in (np.float32, np.float64):
        A = A.astype(np.float64)
    if np.isfinite(A.sum(dtype=np.float64)):  # cheap test first: no NaN, no inf
        return _moderate_scale(A)
    bad = ~np.isfinite(A)
    if bad.any():
        raise ValueError(
            f"{name} has {int(bad.sum())} NaN or infinite values (first at row "
            f"{int(np.argwhere(bad)[0][0])}); remove or impute those stimuli before comparing")
    return A


#: the fewest rows a centred layer may have: after centring, two rows span one direction,
#: so any two layers of two rows are the same up to scale (CKA 1, every canonical
#: correlation 1) whatever they hold
MIN_ROWS = 3


def row_space(X: np.ndarray, standardize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A wide layer (more neurons than rows) as its rotation into its row space:
    ``(R, Q)`` with ``R`` (n x r, r <= n) and ``Q`` (d x r, orthonormal columns) such that
    ``Xc = R Q'`` for the centred ``Xc`` (z-scored neurons with ``standardize``; a
    constant neuron stays zero). Every measure that is unchanged by an orthogonal map of
    the neurons gives the same value on ``R``, with memory and time that grow with the rows
    instead of the neurons; PWCCA's weights over the original neurons come back through
    ``Q`` (:meth:`LayerStats.loadings`). From the QR factorisation of ``Xc'`` in float64:
    ``Xc' = Q T``, so ``R = T'``."""
    A = np.asarray(X, dtype=np.float64)
    A = A - A.mean(axis=0)
    if standardize:
        norms = np.sqrt(np.einsum("ij,ij->j", A, A))
        A = A * np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
    Q, T = np.linalg.qr(A.T)
    return np.ascontiguousarray(T.T), Q


def _moderate_scale(A: np.ndarray) -> np.ndarray:
    """``A`` times a power of two that brings its largest magnitude near 1 when it is extreme
    (above 2**40 or below 2**-40), so that products neither overflow nor underflow in float32.
    Exact (a power of two only changes exponents), and every measure here is invariant to
    scaling a layer by one number."""
    peak = max(float(A.max()), -float(A.min())) if A.size else 0.0  # no |A| copy
    if peak == 0.0 or 2.0 ** -40 <= peak <= 2.0 ** 40:
        return A
    return A * A.dtype.type(2.0 ** -np.floor(np.log2(peak)))


def same_rows(counts: Mapping[str, int]) -> None:
    """Refuse layers that do not describe the same stimuli: ``counts`` maps each layer's
    name to its number of rows; the error names the counts and the fix."""
    if len(set(counts.values())) > 1:
        shown = ", ".join(f"{name} has {n}" for name, n in counts.items())
        if len(counts) > 4:
            shown = f"row counts {sorted(set(counts.values()))}"
        raise ValueError(f"every layer must have the same rows (stimuli): {shown}; pass the "
                         "same words or sentences, in the same order, for every layer")


def check_pair(X, Y, min_rows: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Validate two matrices that must describe the same stimuli (same number of rows)."""
    X = as_matrix(X, "X", min_rows)
    Y = as_matrix(Y, "Y", min_rows)
    same_rows({"X": X.shape[0], "Y": Y.shape[0]})
    return X, Y


#: A float32 layer is computed in float64 when one neuron's range of values is more than this
#: many times the median neuron's (a decoder's massive activations). A float32 product keeps
#: about seven digits relative to its largest terms: past this ratio the ordinary neurons'
#: share of a cross-product involving the huge one falls to the last few of them, and the
#: measures that whiten (SVCCA, PWCCA, CCA, mixedsim) would read rounding as signal.
WIDE_RANGE = 316.0

def wide_ranging(A: np.ndarray) -> bool:
    """Whether a neuron's range (max - min over stimuli) exceeds :data:`WIDE_RANGE` times the
    median neuron's range. Arrays that are not non-empty numeric matrices answer False: the
    input checks that follow name what is wrong with them."""
    if A.ndim != 2 or A.size == 0 or not np.issubdtype(A.dtype, np.number):
        return False
    spread = A.max(axis=0).astype(np.float64) - A.min(axis=0)
    return bool(spread.max() > WIDE_RANGE * np.median(spread))


def work_dtype(*arrays: np.ndarray, dtype=None) -> np.dtype:
    """The dtype the large products run in: float32 if every input is float32 and none is
    :func:`wide_ranging` (and no dtype is forced), else float64."""
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dt}")
        return dt
    single = all(a.dtype == np.float32 for a in arrays)
    return np.dtype(np.float32 if single and not any(map(wide_ranging, arrays)) else
                    np.float64)


def in_range(value: float, low: float, what: str, high: float = 1.0,
             slack: float = 1e-4) -> float:
    """``value`` of a measure that must lie in [low, high], clipped there when rounding takes
    it past by less than ``slack`` (float32 products round near 1e-6); an error naming the
    measure when it lies clearly outside (accumulated sums that lost their digits, which is a
    defect to report, not a number to show)."""
    value = float(value)
    if not low - slack <= value <= high + slack:
        raise ValueError(f"{what} computed {value}, outside [{low}, {high}]: its sums lost "
                         "their precision (inputs far from the origin or nearly constant); "
                         "compute it in float64 on centred inputs")
    return min(high, max(low, value))


def rank_of(lam: np.ndarray, rtol: float) -> int:
    """How many of the descending eigenvalues ``lam`` exceed ``rtol`` times the largest."""
    if lam.size == 0 or lam[0] <= 0:
        return 0
    return int((lam > lam[0] * rtol).sum())


def components_of(lam: np.ndarray, rtol: float, variance: float | None,
                  cut: str = "reach") -> int:
    """:meth:`LayerStats.n_components` of the descending eigenvalues ``lam``."""
    r = rank_of(lam, rtol)
    if r == 0:
        return 0
    if variance is None:
        return r
    frac = np.cumsum(lam[:r]) / lam[:r].sum()
    if cut == "reach":
        k = int(np.searchsorted(frac, variance - 1e-12) + 1)
    elif cut == "below":
        k = int((frac < variance).sum())
    else:
        raise ValueError(f"cut must be 'reach' or 'below', got {cut!r}")
    return max(1, min(k, r))


def _zero_rounding_columns(X: np.ndarray, Xc, backend: Backend) -> None:
    """Set to zero the centred columns that are constant (:func:`constant_columns`): a
    repeated row or a constant neuron then counts as constant, and no measure compares
    rounding noise."""
    xp = backend.xp
    peak = backend.asarray(np.abs(X).max(axis=0).astype(np.float64))
    spread = xp.astype(xp.max(xp.abs(Xc), axis=0), xp.float64)
    flat = constant_columns(peak, spread, X.shape[0])
    if bool(xp.any(flat)):
        Xc[:, flat] = 0


class LayerStats:
    """Per-layer quantities, each computed on first use and then reused.

    Every quantity is a cached property of the layer (``G``, ``eig``, ``scales``, ...),
    computed from the centred data the first time it is read. The all-pairs path computes
    some of them for many layers at once (the Gram matrices from one stacked product, the
    eigendecompositions side by side) and hands each result to its layer with
    :meth:`provide`; nothing else writes into a layer.

    Parameters
    ----------
    X : array, shape (n, d)
    dtype : work dtype for the large products (see module docs).
    name : how errors name the layer.
    backend : :class:`~._backend.Backend` the arrays live on (default NumPy).
    """

    #: the quantities another function may compute for several layers at once
    PROVIDED = ("G", "eig", "top_eig", "span_cholesky")
    n: int
    d: int
    dtype: np.dtype
    #: the centred data (a backend array), None for a layer made from a Gram matrix alone
    Xc: Any

    def __init__(self, X: np.ndarray | None, dtype=None, name: str = "X",
                 backend: Backend = NUMPY, *, gram_of: LayerStats | None = None):
        self.name, self.bk = name, backend
        self._whiteners: dict[tuple, Any] = {}
        #: for a layer given as its row-space rotation (:func:`row_space`), the orthonormal
        #: d0 x d basis that maps it back onto its own neurons (None: the neurons are these)
        self.basis: np.ndarray | None = None
        if gram_of is not None:  # the z-scored layer: statistics of a Gram matrix, no data
            scale = gram_of.scales
            self.n, self.d, self.dtype, self.Xc = gram_of.n, gram_of.d, gram_of.dtype, None
            self.provide("G", gram_of.G * (scale[:, None] * scale[None, :]))
            return
        X = as_matrix(X, name, min_rows=MIN_ROWS)
        self.n, self.d = X.shape
        self.dtype = work_dtype(X, dtype=dtype)
        xp = backend.xp
        dev = backend.asarray(X)
        if backend.on_host:  # NumPy's float64 column sums of a float32 array: 2x torch's
            mean = backend.asarray(np.add.reduce(X, axis=0, dtype=np.float64) / self.n)
        else:
            mean = xp.sum(dev, axis=0, dtype=xp.float64) / self.n
        out = backend.empty(X.shape, self.dtype)
        if self.dtype == np.float32 and X.dtype == np.float32:
            # subtracting the float64 mean rounded to float32 is exact for values near the
            # mean, and leaves a column offset of at most half a float32 ulp of the mean
            backend.subtract_into(dev, xp.astype(mean, xp.float32), out)
        else:
            backend.subtract_into(xp.astype(dev, xp.float64), mean, out)
        del dev
        self._summary = digest(np.asarray(self.bk.host(mean), dtype=np.float64),
                               np.array([self.n, self.d, self.dtype.itemsize]))
        _zero_rounding_columns(X, out, backend)
        self.Xc = out

    @property
    def width(self) -> int:
        """How many neurons the layer has: its own, or a row-space layer's before rotation."""
        return self.d if self.basis is None else int(self.basis.shape[0])

    def centred(self) -> Any:
        """The centred data (n, d) on the backend; an error for a layer made from a Gram
        matrix alone (:meth:`standardized`), which has none."""
        if self.Xc is None:
            raise ValueError(f"{self.name} was made from a Gram matrix and has no rows")
        return self.Xc

    def has(self, quantity: str) -> bool:
        """Whether ``quantity`` (a cached property's name) is already known."""
        return quantity in vars(self)

    def provide(self, quantity: str, value) -> None:
        """Hand the layer one of :attr:`PROVIDED`, computed elsewhere for several layers at
        once; a quantity is provided once (a second value would be a bug)."""
        if quantity not in self.PROVIDED:
            raise AttributeError(f"{quantity!r} is not one of {self.PROVIDED}")
        if self.has(quantity):
            raise ValueError(f"{self.name}: {quantity} is already known")
        vars(self)[quantity] = value

    def standardized(self) -> LayerStats:
        """The statistics of the z-scored layer (every neuron scaled to unit norm; constant
        neurons stay zero), derived from this layer's ``G`` without touching the data. It has
        no ``Xc``: it serves the CCA-family kernels, which need only ``G`` and its
        eigendecomposition. Computed once per layer and kept."""
        return self._unit

    @cached_property
    def _unit(self) -> LayerStats:
        return LayerStats(None, name=f"{self.name} (z-scored)", backend=self.bk,
                          gram_of=self)

    @property
    def xp(self):
        return self.bk.xp

    @cached_property
    def scales(self):
        """1 / norm of every centred neuron (0 for constant neurons)."""
        xp = self.xp
        s = xp.sqrt(self.sq_norms)
        return xp.where(s > 0, 1.0 / xp.where(s > 0, s, 1.0), 0.0)

    @cached_property
    def G(self):
        """Self cross-product ``Xc.T @ Xc`` (d x d, float64)."""
        return self.bk.grams([self.Xc])[0]

    @cached_property
    def gram_sq(self) -> float:
        """``||G||_F^2`` (linear CKA's normaliser), computed once per layer."""
        return float(self.xp.sum(self.G ** 2))

    @cached_property
    def sq_norms(self):
        """Sum of squares of each centred neuron (diag of G), float64."""
        if self.Xc is None:
            return self.xp.linalg.diagonal(self.G) * 1.0
        return self.bk.col_sq_norms(self.Xc)

    @cached_property
    def row_sq_norms(self):
        """Sum of squares of each centred row, float64 (debiased CKA's row terms)."""
        return self.bk.row_sq_norms(self.Xc)

    @cached_property
    def total_var(self) -> float:
        return float(self.xp.sum(self.sq_norms))

    @cached_property
    def eig(self):
        """Eigenvalues (descending, clipped at 0) and eigenvectors of G (the same routine
        whether one layer asks or many at once, :func:`fill_eigs`)."""
        return self._ordered(*self.bk.eighs([self.G])[0])

    @cached_property
    def row_gram(self) -> np.ndarray:
        """``Xc Xc'`` (n x n, float64 on the host; the product in the work dtype): linear
        CKA's Gram form."""
        Xc = self.centred()
        return self.bk.host(Xc @ Xc.T).astype(np.float64)

    def summary(self) -> bytes:
        """A digest of the layer's shape, work dtype and column means: cheap, and enough to
        order two different layers (:class:`~.pairwise.Pair`)."""
        return self._summary

    def digest(self) -> bytes:
        """A digest of the centred data itself (every measure reads only it)."""
        return digest(self.bk.host(self.centred()))

    def _ordered(self, lam, V):
        xp = self.xp
        return xp.clip(xp.flip(lam, axis=0), 0.0, None), xp.flip(V, axis=1)

    def _spectrum(self):
        """Every eigenvalue of G (descending) with the eigenvectors computed so far: all of
        them (:attr:`eig`), or only the leading ones when :func:`fill_eigs` was told that
        no more would be read."""
        if self.has("eig") or not self.has("top_eig"):
            return self.eig
        return vars(self)["top_eig"]

    def top_vectors(self, k: int):
        """``(lam, V_k)``: every eigenvalue and the top-k eigenvectors (d x k) of G,
        from the leading ones already computed when they suffice, else from :attr:`eig`."""
        lam, V = self._spectrum()
        if V.shape[1] < k:
            lam, V = self.eig
        return lam, V[:, :k]

    @cached_property
    def lam_host(self) -> np.ndarray:
        """The eigenvalues of G as a NumPy array (for decisions made on the host)."""
        return self.bk.host(self._spectrum()[0])

    @cached_property
    def rank(self) -> int:
        """Number of directions with non-negligible variance."""
        return rank_of(self.lam_host, RANK_RTOL)

    def n_components(self, variance: float | None, cut: str = "reach") -> int:
        """How many principal directions SVCCA keeps.

        ``variance=None`` keeps every non-negligible direction. ``cut="reach"`` (the papers'
        rule) keeps the fewest whose cumulative explained variance reaches ``variance``;
        ``cut="below"`` (Wu et al.'s released code) keeps those whose cumulative variance stays
        below it, which is one fewer unless the threshold is hit exactly; at least one is kept.
        """
        return components_of(self.lam_host, RANK_RTOL, variance, cut)

    def span_whitener(self, dtype=np.float64):
        """A d x r matrix ``W`` with ``W W' = S G_unit^+ S`` (``S`` the neuron scales,
        ``G_unit`` the z-scored layer's ``G``): ``||c' W||^2`` is the squared norm of the
        projection onto span(Xc) of any vector whose cross-products with Xc's neurons are
        ``c``. The span's basis comes from the z-scored neurons (same span; neurons of very
        different scales leave every direction in it). Through a Cholesky factor when the
        z-scored ``G`` is safely full rank (its smallest eigenvalue, bounded below by the
        factor, above ``RANK_RTOL`` of the largest, bounded above: then no eigendirection
        would be cut), else through the eigendirections above the rank cut.

        ``W`` is triangular either way, which :func:`span_sq_norms` uses to skip its zero
        part: upper triangular on the Cholesky route (``S L^-T``); on the eigendirections'
        route the d x r basis ``S V_r diag(lam_r)^-1/2`` is turned into a lower-trapezoidal
        one with the same ``W W'`` (``R'`` from the QR factorisation of its transpose, a
        rotation of its columns). Cached per dtype."""
        key = ("span", np.dtype(dtype))
        cache = self._whiteners
        if key not in cache:
            cache[key] = self.xp.astype(self._span_factor[0], self.bk.dtype(dtype))
        return cache[key]

    @cached_property
    def _span_factor(self):
        """``(W, lower)``: :meth:`span_whitener` in float64 and whether it is lower
        trapezoidal (else upper triangular)."""
        unit = self.standardized()
        W = self.span_cholesky
        if W is not None:
            return self.scales[:, None] * W, False
        if not unit.rank:
            return unit.G[:, :0] * 1.0, True
        basis = self.scales[:, None] * unit.whitener(unit.rank)
        return self.bk.contiguous(self.bk.qr_r(basis.T).T), True

    def span_blocks(self, width: int = 192) -> list[tuple[slice, slice]]:
        """``(rows, cols)`` of the blocks of :meth:`span_whitener` that can be non-zero,
        columns in blocks of about ``width``: for an upper triangular ``W`` a column block
        needs the rows above its end, for a lower trapezoidal one the rows from its
        start."""
        W, lower = self._span_factor
        d, r = W.shape
        parts = max(1, -(-r // width))
        edges = [round(r * k / parts) for k in range(parts + 1)]
        return [(slice(lo, d) if lower else slice(0, min(hi, d)), slice(lo, hi))
                for lo, hi in zip(edges[:-1], edges[1:])]

    def loadings(self, k: int, dtype=np.float64):
        """``diag(sqrt(lam_k)) V_k.T`` (k x d): the cross-products of the top-k principal
        directions' unit scores with every neuron (PWCCA's weights map canonical directions
        through it). Cached per (k, dtype), laid out by rows: with that layout the
        products with it come out the same at any thread count (with the transposed
        layout, MKL's float64 product of a few rows changes in the last bit between one
        thread and two)."""
        key = ("loadings", k, np.dtype(dtype))
        cache = self._whiteners
        if key not in cache:
            lam, V = self.top_vectors(k)
            xp = self.xp
            found = xp.sqrt(lam[:k])[:, None] * V[:, :k].T
            if self.basis is not None:  # a row-space layer: back onto its own neurons
                found = found @ self.bk.asarray(self.basis.T)
            cache[key] = self.bk.contiguous(xp.astype(found, self.bk.dtype(dtype)))
        return cache[key]

    @cached_property
    def span_cholesky(self):
        """The Cholesky route of :meth:`span_whitener` (float64, before the neuron scales),
        or None when the z-scored layer is not safely full rank and the span needs its
        eigendecomposition (several layers at once: :func:`fill_span_choleskys`)."""
        return _cholesky_whitener(self.standardized().G, RANK_RTOL, self.bk)

    def whitener(self, k: int, dtype=np.float64, ridge: float = 0.0):
        """``V_k diag(lam_k + ridge mean(lam))^-1/2`` (d x k): maps the cross-product onto
        the orthonormal basis of the top-k principal directions; with a ``ridge``, the
        regularised form of :func:`.reference.cca` (the mean over every eigenvalue of G).
        The CCA family of the measures and of :mod:`analysis_lib.alignment` whitens with
        it. Cached per (k, dtype, ridge)."""
        key = (k, np.dtype(dtype), float(ridge))
        cache = self._whiteners
        if key not in cache:
            lam, V = self.top_vectors(k)
            xp = self.xp
            # the mean over every eigenvalue of the layer's own G: a row-space layer lacks
            # the zero eigenvalues of its neurons beyond its rows, so divide by its width
            mean = xp.mean(lam) if self.basis is None else xp.sum(lam) / self.width
            shift = ridge * mean if ridge else 0.0
            cache[key] = xp.astype(V / xp.sqrt(lam[:k] + shift), self.bk.dtype(dtype),
                                   copy=False)
        return cache[key]


def fill_eigs(layers, vectors=None) -> None:
    """Compute the eigendecompositions of several layers' ``G`` at once (those not yet
    computed), side by side on the CPU (:meth:`~._backend.Backend.eighs`).

    ``vectors`` (one entry per layer, optional) says how many leading eigenvectors will be
    read: a function of the descending eigenvalues that returns the count, or None for all.
    A layer listed more than once gets the most any entry asks for. With a count, only
    those eigenvectors are formed (:attr:`LayerStats.top_vectors`); a later request for
    more computes the whole decomposition."""
    needs: dict = {}
    for s, want in zip(layers, vectors or [None] * len(layers)):
        if s.has("eig"):
            continue
        if s in needs and (needs[s] is None or want is None):
            needs[s] = None
        else:
            needs[s] = want if s not in needs else _most(needs[s], want)
    todo = [s for s, want in needs.items() if want is None or not s.has("top_eig")]
    if not todo:
        return
    found = todo[0].bk.eighs([s.G for s in todo], [needs[s] for s in todo])
    for s, (lam, V) in zip(todo, found):
        s.provide("eig" if V.shape[1] == s.d else "top_eig", s._ordered(lam, V))


def _most(*counts):
    """A count function giving the largest of several."""
    return lambda lam: max(f(lam) for f in counts)


def fill_span_choleskys(layers) -> None:
    """Compute :attr:`LayerStats.span_cholesky` of several layers at once (those not yet
    computed), side by side on the CPU (:meth:`~._backend.Backend.certified_inverse_choleskys`)."""
    todo = [s for s in dict.fromkeys(layers) if not s.has("span_cholesky")]
    if not todo:
        return
    for s, W in zip(todo, _cholesky_whiteners([s.standardized().G for s in todo],
                                              RANK_RTOL, todo[0].bk)):
        s.provide("span_cholesky", W)


def _cholesky_whitener(G, rtol: float, bk: Backend):
    """``L^-T`` for the Cholesky factor ``G = L L'`` when G is safely full rank, else None.

    Safely full rank means that every eigenvalue exceeds ``rtol`` times the largest, so that
    the eigendecomposition route would keep every direction. The test is exact up to an
    upper bound of the largest eigenvalue: ``G - t I`` has a Cholesky factor (is positive
    definite, so its smallest eigenvalue exceeds ``t``) for ``t = rtol * ||G||_F`` (the
    Frobenius norm bounds the largest eigenvalue from above) plus the factorisation's
    rounding error. One more factorisation, much cheaper than an eigendecomposition."""
    return _cholesky_whiteners([G], rtol, bk)[0]


def _cholesky_whiteners(mats, rtol: float, bk: Backend) -> list:
    """:func:`_cholesky_whitener` of several matrices, factorised side by side."""
    shifts, todo, xp = [], [], bk.xp
    for G in mats:
        d = G.shape[0]
        trace = float(xp.sum(xp.linalg.diagonal(G))) if d else 0.0
        fro = float(xp.sqrt(xp.sum(G * G))) if d else 0.0
        if np.isfinite(fro) and fro > 0:
            shifts.append(rtol * fro + 2 * (d + 1) * np.finfo(np.float64).eps * trace)
            todo.append(G)
        else:
            shifts.append(None)
    found = iter(bk.certified_inverse_choleskys(todo, [t for t in shifts if t is not None]))
    out = []
    for t in shifts:
        Linv = None if t is None else next(found)
        out.append(None if Linv is None else Linv.T)
    return out


def standardize_pair(a: LayerStats, b: LayerStats, C):
    """z-scored versions of two layers and of their cross-product (in C's dtype)."""
    xp = a.xp
    scale = a.scales[:, None] * b.scales[None, :]
    return a.standardized(), b.standardized(), C * xp.astype(scale, C.dtype)


def cross(a: LayerStats, b: LayerStats, dtype=None):
    """Centred cross-product ``a.Xc.T @ b.Xc`` (d1 x d2) in the pair's work dtype (the wider
    of the two layers'), or in ``dtype``."""
    if a.n != b.n:
        raise ValueError(f"layers must have the same rows (stimuli): {a.n} vs {b.n}")
    xp = a.xp
    dt = a.bk.dtype(np.promote_types(a.dtype, b.dtype) if dtype is None else dtype)
    return xp.astype(a.Xc, dt, copy=False).T @ xp.astype(b.Xc, dt, copy=False)


def span_sq_norms(C, b: LayerStats, width: int = 192):
    """The row sums of squares of ``C @ b.span_whitener(C.dtype)``, float64: the squared
    norm of the projection onto ``b``'s span of each vector whose cross-products with
    ``b``'s neurons are a row of ``C``. Block by block (:meth:`LayerStats.span_blocks`,
    columns in blocks of about ``width``), skipping the zero triangle of the whitener: for
    768 neurons, 4 blocks and 62% of the full product's multiply-adds, in 0.75x its time.
    """
    xp = b.xp
    W = b.span_whitener(np.dtype(np.float32) if C.dtype == b.bk.dtype(np.float32)
                        else np.dtype(np.float64))
    out = xp.sum(C[:, :0], axis=1, dtype=xp.float64)  # zeros, on C's device
    for rows, cols in b.span_blocks(width):
        M = C[:, rows] @ W[rows, cols]
        out = out + xp.sum(M * M, axis=1, dtype=xp.float64)
    return out


# ------------------------------------------------------------------ a pair of prepared layers

def prepare(X, name: str, dtype, bk: Backend, basis: np.ndarray | None = None) -> LayerStats:
    """A layer's :class:`LayerStats` (centred once, every statistic on first use), refused
    when it has no variance; ``basis``: of a layer given as its row-space rotation
    (:func:`row_space`), the map back onto its neurons."""
    stats = LayerStats(X, dtype=dtype, name=name, backend=bk)
    stats.basis = basis
    if stats.total_var == 0:
        raise UndefinedMeasure(f"{name} has no variance (every neuron constant, or every row "
                               f"the same), so no measure is defined for it; leave that layer "
                               f"out or check how it was made")
    return stats


class RowSpace:
    """A wide layer given as its rotation into its row space (:func:`row_space`): ``R``
    (n x r) and the basis ``Q`` (d x r) back to its neurons."""

    def __init__(self, R: np.ndarray, Q: np.ndarray):
        self.R, self.Q = R, Q


def is_wide(x) -> bool:
    """Whether ``x`` is a 2-D layer with more neurons than rows."""
    if isinstance(x, (list, tuple, dict)):
        return False
    shape = np.shape(x)
    return len(shape) == 2 and shape[1] > shape[0] >= MIN_ROWS


def reduced(x, name: str, standardize: bool, wide: bool):
    """A layer as the measures that declare ``row_space`` read it when a layer of theirs is
    wide: a wide layer as its :class:`RowSpace`; with ``standardize``, every layer z-scored
    through the same rotation (so that they need not z-score it again); else as given."""
    if not (wide or standardize):
        return x
    R, Q = row_space(as_matrix(x, name, min_rows=MIN_ROWS), standardize)
    return RowSpace(R, Q) if wide else R @ Q.T


def prepare_given(x, name: str, dtype, bk: Backend) -> LayerStats:
    """:func:`prepare` of a layer as given, or of a :class:`RowSpace` (with its basis)."""
    if isinstance(x, RowSpace):
        return prepare(x.R, name, dtype, bk, x.Q)
    return prepare(x, name, dtype, bk)


class Pair:
    """Two prepared layers in a fixed order, and what their measures share.

    The order is decided by the layers' contents (:meth:`LayerStats.summary`, then the whole
    contents), so that the pair of ``(X, Y)`` and of ``(Y, X)`` computes the same products in
    the same orientation and every value is the same number to the last bit whichever way it
    was asked for. ``flipped`` says that ``a`` is the second layer asked for. ``alike``: the
    two layers have the same contents (the diagonal of a symmetric matrix, or a layer
    compared with a copy of itself)."""

    def __init__(self, a, b, flipped: bool, alike: bool):
        self.a, self.b, self.flipped, self.alike = a, b, flipped, alike
        self._found: dict = {}

    @classmethod
    def of(cls, x, y) -> Pair:
        if x is y:
            return cls(x, y, False, True)
        kx, ky = _order_key(x), _order_key(y)
        if kx == ky:  # the same summary: order, and compare, by the whole contents
            kx, ky = _content_key(x), _content_key(y)
        return cls(y, x, True, kx == ky) if ky < kx else cls(x, y, False, kx == ky)

    def cross(self, dtype=None):
        """The centred cross-product ``a.Xc' b.Xc`` in the pair's work dtype (or ``dtype``),
        computed once."""
        key = ("cross", None if dtype is None else np.dtype(dtype))
        if key not in self._found:
            self._found[key] = cross(self.a, self.b, dtype)
        return self._found[key]

    def has_cross(self) -> bool:
        """Whether a cross-product of the pair is already computed (in any dtype)."""
        return any(isinstance(k, tuple) and k[0] == "cross" for k in self._found)

    def provide(self, quantity: str, value) -> None:
        self._found[quantity] = value

    def get(self, quantity: str):
        """A pair quantity its measures declared (``pair_needs`` of a measure's record)."""
        return self._found[quantity]

    def directions(self, wanted: tuple[bool, bool] = (True, False)) -> tuple[bool, bool]:
        """Which of the kernel's values ``(a to b, b to a)`` are needed, for ``wanted``
        given in the order asked (first to second, second to first)."""
        return (wanted[1], wanted[0]) if self.flipped else wanted

    def first(self, values: tuple):
        """Of a kernel's values ``(a to b, b to a)``, the one from the first layer asked
        for to the second."""
        return values[1] if self.flipped else values[0]


def _order_key(layer) -> bytes:
    """A cheap summary of a prepared layer's contents that orders the two layers of a pair."""
    if "order_key" not in vars(layer):
        vars(layer)["order_key"] = layer.summary()
    return vars(layer)["order_key"]


def _content_key(layer) -> bytes:
    if "content_key" not in vars(layer):
        vars(layer)["content_key"] = layer.digest()
    return vars(layer)["content_key"]


# ------------------------------------------------------------------ per-layer quantities,
# computed for several layers at once (side by side on the CPU); a layer computes any of
# them itself on first use too, with the same bits

def grams(layers: list) -> None:
    """Every layer's self cross-product ``G``, one after another
    (:meth:`~._backend.Backend.grams`)."""
    todo = [s for s in dict.fromkeys(layers) if not s.has("G")]
    if todo:
        for s, G in zip(todo, todo[0].bk.grams([s.Xc for s in todo])):
            s.provide("G", G)


def principal(layers: list, variance: float | None, cut: str, standardize: bool) -> None:
    """SVCCA's and PWCCA's eigendecompositions of ``G`` (of the z-scored ``G`` with
    ``standardize``), side by side; only the leading eigenvectors that the variance
    threshold keeps are formed."""
    layers = list(dict.fromkeys(layers))
    if standardize:
        layers = [s.standardized() for s in layers]
    fill_eigs(layers, [lambda lam: components_of(lam, RANK_RTOL, variance, cut)] * len(layers))


def eigs(layers: list) -> None:
    """Every eigenvector of every layer's ``G`` (full-space CCA), side by side."""
    fill_eigs(list(dict.fromkeys(layers)))


def spans(layers: list) -> None:
    """The span of every layer that a neuron is projected onto (mixedsim): the Cholesky
    route where it is certified, else the z-scored ``G``'s eigendecomposition."""
    layers = list(dict.fromkeys(layers))
    fill_span_choleskys(layers)
    fill_eigs([s.standardized() for s in layers if s.span_cholesky is None])
