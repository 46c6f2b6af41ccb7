"""Layer comparisons accumulated over minibatches of rows, for arrays too large to hold.

Two ways, both fed an iterable of batches (each batch: one array of the same rows per layer):

- ``method="exact"`` streams the sufficient statistics (per layer: row count, column sums,
  ``X.T X``, row squared norms; per pair: ``X.T Y`` and two mixed moments, in float64) and
  gives what :func:`~.pairwise.pairwise` gives on the whole arrays: linear CKA (biased, or
  debiased as in Song et al. 2012) and neuronsim. Memory: a ``d_i x d_j`` matrix per pair of
  layers, none per row. The moments are those of each layer shifted by its first batch's
  column means (the shifted-data algorithm; Chan, Golub & LeVeque 1983): centring raw
  moments of degree 2 and 4 at the end would cancel away every digit for activations far
  from the origin (a decoder's massive activations, thousands of units out), while the
  shifted ones stay near the data's own spread.
- ``method="minibatch"`` is Nguyen, Raghu & Kornblith (2021)'s minibatch CKA: the unbiased
  HSIC of each batch, averaged over batches, then normalised,
  ``mean_b HSIC1(K_b, L_b) / sqrt(mean_b HSIC1(K_b, K_b) mean_b HSIC1(L_b, L_b))``. Memory: one
  batch. It converges to the debiased CKA of the whole data as batches grow; with one batch
  it is that CKA.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..runtime.device import DeviceLike
from . import _backend
from ._backend import NUMPY, Backend
from .core import as_matrix
from .kernels import best_correlations, cka_from_sums, gram_hsic_sums, unbiased_hsic
from .registry import STREAM_MEASURES

__all__ = ["stream_pairwise"]


class _Pair:
    """A pair's streamed moments; accumulated on the backend's device, then read on the host
    (:meth:`host`)."""

    def __init__(self, da: int, db: int, bk: Backend = NUMPY):
        zeros = bk.xp.zeros
        self.C = zeros((da, db), dtype=bk.xp.float64, device=bk.device)  # X.T Y
        self.ab = 0.0                   # sum_i |x_i|^2 |y_i|^2
        self.ay = zeros(db, dtype=bk.xp.float64, device=bk.device)  # sum_i |x_i|^2 y_i
        self.bx = zeros(da, dtype=bk.xp.float64, device=bk.device)  # sum_i |y_i|^2 x_i

    def add(self, X, Y, ra, rb) -> None:
        self.C += X.T @ Y
        self.ab += ra @ rb
        self.ay += ra @ Y
        self.bx += rb @ X

    def host(self, bk: Backend) -> _Pair:
        self.C, self.ay, self.bx = bk.host(self.C), bk.host(self.ay), bk.host(self.bx)
        self.ab = float(self.ab)
        return self


class _Layer:
    def __init__(self, d: int, bk: Backend = NUMPY):
        zeros, f64 = bk.xp.zeros, bk.xp.float64
        self.shift = None                                      # the first batch's means
        self.n = 0
        self.s = zeros(d, dtype=f64, device=bk.device)         # column sums
        self.G = zeros((d, d), dtype=f64, device=bk.device)    # X.T X
        self.sq = 0.0                                          # sum_i |x_i|^2
        self.sq2 = 0.0                                         # sum_i |x_i|^4
        self.sq_x = zeros(d, dtype=f64, device=bk.device)      # sum_i |x_i|^2 x_i

    def add(self, X, bk: Backend = NUMPY):
        """Accumulate a batch; returns it shifted (as every moment sees it) and its rows'
        squared norms, for the pairs."""
        xp = bk.xp
        if self.shift is None:
            self.shift = xp.mean(X, axis=0)
        X = X - self.shift
        self.n += X.shape[0]
        self.s += xp.sum(X, axis=0)
        self.G += X.T @ X
        rows = xp.sum(X * X, axis=1)
        self.sq += xp.sum(rows)
        self.sq2 += rows @ rows
        self.sq_x += rows @ X
        return X, rows

    def host(self, bk: Backend) -> _Layer:
        self.s, self.G, self.sq_x = bk.host(self.s), bk.host(self.G), bk.host(self.sq_x)
        self.sq, self.sq2 = float(self.sq), float(self.sq2)
        return self

    def as_pair(self) -> _Pair:
        """The layer's moments with itself, in the shape of a pair's."""
        p = _Pair(0, 0)
        p.C, p.ab, p.ay, p.bx = self.G, self.sq2, self.sq_x, self.sq_x
        return p

    @property
    def mean(self) -> np.ndarray:
        return self.s / self.n

    @property
    def Gc(self) -> np.ndarray:
        return self.G - self.n * np.outer(self.mean, self.mean)


def _centred_row_product(a: _Layer, b: _Layer, p: _Pair) -> float:
    """sum_i |x_i - mean_x|^2 |y_i - mean_y|^2 from the streamed moments."""
    n, mx, my = a.n, a.mean, b.mean
    cx, cy = mx @ mx, my @ my
    sum_px, sum_py = a.s @ mx, b.s @ my       # sum_i x_i . mean_x, likewise for y
    sum_a_py, sum_b_px = p.ay @ my, p.bx @ mx
    sum_px_py = mx @ p.C @ my
    sum_a, sum_b = a.sq, b.sq
    return float(p.ab + cy * sum_a + cx * sum_b + n * cx * cy
                 - 2 * sum_a_py - 2 * cx * sum_py - 2 * sum_b_px - 2 * cy * sum_px
                 + 4 * sum_px_py)


def _cka(a: _Layer, b: _Layer, p: _Pair | None, debiased: bool) -> float:
    Gx, Gy = a.Gc, b.Gc
    Cc = Gx if p is None else p.C - a.n * np.outer(a.mean, b.mean)
    rows = None
    if debiased:
        rxx = _centred_row_product(a, a, a.as_pair())
        ryy = _centred_row_product(b, b, b.as_pair())
        rxy = rxx if p is None else _centred_row_product(a, b, p)
        rows = (rxy, rxx, ryy, np.trace(Gx), np.trace(Gy))
    return cka_from_sums(a.n, np.sum(Cc ** 2),
                         (float(np.linalg.norm(Gx)), float(np.linalg.norm(Gy))),
                          (np.sum(Gx ** 2), np.sum(Gy ** 2)), rows)


def _neuronsim(a: _Layer, b: _Layer, p: _Pair | None) -> tuple[float, float]:
    Cc = a.Gc if p is None else p.C - a.n * np.outer(a.mean, b.mean)
    ab, ba = best_correlations(Cc, np.diag(a.Gc), np.diag(b.Gc))
    return float(ab.mean()), float(ba.mean())


def stream_pairwise(batches: Iterable[Sequence], measure: str = "linear_cka", *,
                    method: str = "exact", debiased: bool = False, device: DeviceLike = None,
                    backend: str = "auto") -> np.ndarray:
    """Layer x layer matrix of one measure from batches of rows of every layer.

    Parameters
    ----------
    batches : iterable of sequences of arrays
        Each item holds one array (rows, d_l) per layer, the same rows for every layer; the
        layers (and their widths) must be the same in every batch. A generator that reads
        arrays from disk (``np.load(..., mmap_mode="r")``) keeps memory to one batch.
    measure : {'linear_cka', 'neuronsim'}
        neuronsim (``method="exact"`` only) is asymmetric: ``M[i, j]`` averages over the
        neurons of layer ``i``.
    method : {'exact', 'minibatch'}
        See the module docs. 'minibatch' is linear CKA with unbiased HSIC per batch (each
        batch needs at least 4 rows).
    debiased : bool
        'exact' linear CKA only: the debiased estimator (as ``linear_cka(debiased=True)``).
    device, backend
        Where the moments accumulate (in float64): torch on ``device`` (default CUDA when
        available, else the CPU), or NumPy (``backend="numpy"``, and the default when PyTorch
        is not installed); see
        :func:`~.pairwise.pairwise`. Each batch is sent to the device once.

    Returns
    -------
    numpy.ndarray (L, L)
    """
    _check_stream_options(measure, method, debiased)
    bk = _backend.get(device, backend)
    acc = _Minibatch() if method == "minibatch" else _Exact(bk, measure, debiased)
    for b, batch in enumerate(batches):
        acc.add(b, _batch_arrays(bk, b, batch))
    return acc.result()


def _check_stream_options(measure: str, method: str, debiased: bool) -> None:
    if measure not in STREAM_MEASURES:
        raise ValueError(f"measure must be one of {STREAM_MEASURES}, got {measure!r}")
    if method not in ("exact", "minibatch"):
        raise ValueError(f"method must be 'exact' or 'minibatch', got {method!r}")
    if method == "minibatch" and (measure != "linear_cka" or debiased):
        raise ValueError("method='minibatch' is linear CKA with unbiased HSIC per batch; "
                         "it takes neither neuronsim nor debiased=")


def _batch_arrays(bk, b: int, batch: Sequence) -> list:
    """One batch's layers as float64 arrays of the backend, checked: at least one layer,
    the same rows in every layer."""
    arrays = [bk.asarray(as_matrix(x, f"batch {b} layer {k}", min_rows=1), np.float64)
              for k, x in enumerate(batch)]
    if not arrays:
        raise ValueError(f"batch {b} holds no layers")
    if len({x.shape[0] for x in arrays}) != 1:
        raise ValueError(f"batch {b}: the layers hold different numbers of rows "
                         f"{[x.shape[0] for x in arrays]}; every layer needs the same rows")
    return arrays


class _Widths:
    """The layer widths of the first batch, which every later batch must repeat."""

    first: list[int] | None = None

    def check(self, b: int, arrays: list) -> list[int]:
        widths = [x.shape[1] for x in arrays]
        if self.first is None:
            self.first = widths
        elif widths != self.first:
            raise ValueError(f"batch {b} has layer widths {widths}, the first had "
                             f"{self.first}")
        return widths


class _Minibatch(_Widths):
    """Linear CKA from the unbiased HSIC of every batch, summed over batches."""

    def __init__(self):
        self.sums: np.ndarray | None = None

    def add(self, b: int, arrays: list) -> None:
        self.check(b, arrays)
        if arrays[0].shape[0] < 4:
            raise ValueError(f"batch {b} has {arrays[0].shape[0]} rows; minibatch CKA "
                             "needs at least 4 per batch")
        grams = [x @ x.T for x in arrays]
        if self.sums is None:
            self.sums = np.zeros((len(grams), len(grams)))
        for i, j in zip(*np.triu_indices(len(grams))):
            n = grams[i].shape[0]
            self.sums[i, j] += unbiased_hsic(*gram_hsic_sums(grams[i], grams[j]), n) / (
                n * (n - 3))

    def result(self) -> np.ndarray:
        if self.sums is None:
            raise ValueError("no batches: the iterable was empty")
        H = np.triu(self.sums) + np.triu(self.sums, 1).T
        d = np.sqrt(np.diag(H))
        if np.any(d <= 0):
            raise ValueError("a layer's mean unbiased HSIC with itself is not positive; use "
                             "larger batches")
        return H / np.outer(d, d)


class _Exact(_Widths):
    """Shifted moments of every layer and every pair of layers, accumulated batch by
    batch; the measure is computed from them at the end."""

    def __init__(self, bk, measure: str, debiased: bool):
        self.bk, self.measure, self.debiased = bk, measure, debiased
        self.layers: list[_Layer] | None = None
        self.pairs: dict[tuple[int, int], _Pair] = {}

    def add(self, b: int, arrays: list) -> None:
        widths = self.check(b, arrays)
        if self.layers is None:
            self.layers = [_Layer(d, self.bk) for d in widths]
        shifted, rows = zip(*[layer.add(x, self.bk) for layer, x in zip(self.layers, arrays)])
        for i, j in zip(*(ix.tolist() for ix in np.triu_indices(len(arrays), k=1))):
            self.pairs.setdefault((i, j), _Pair(widths[i], widths[j], self.bk)).add(
                shifted[i], shifted[j], rows[i], rows[j])

    def result(self) -> np.ndarray:
        if self.layers is None:
            raise ValueError("no batches: the iterable was empty")
        layers = [layer.host(self.bk) for layer in self.layers]
        pairs = {k: p.host(self.bk) for k, p in self.pairs.items()}
        M = np.full((len(layers), len(layers)), np.nan)
        for i, j in zip(*np.triu_indices(len(layers))):
            p = None if i == j else pairs[(int(i), int(j))]
            if self.measure == "linear_cka":
                M[i, j] = M[j, i] = _cka(layers[i], layers[j], p, self.debiased)
            else:
                M[i, j], M[j, i] = _neuronsim(layers[i], layers[j], p)
        return M
