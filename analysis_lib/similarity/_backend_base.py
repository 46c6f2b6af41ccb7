"""What every backend of the measures shares (:class:`Backend`): the array namespace, the
device, and the operations written once on the host with NumPy's BLAS and LAPACK. The NumPy
backend (:mod:`._backend`) and the torch backend (:mod:`._torch_backend`) build on it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

import numpy as np


class Backend:
    """Where the kernels' arrays live: an array namespace ``xp``, a device, and the few
    operations whose best form differs between NumPy and torch. The two implementations are
    :class:`NumpyBackend` (the reference) and :class:`TorchBackend`; everything here is
    written once on top of them."""

    name: str
    xp: Any
    device: Any
    #: whether the arrays live in host memory (NumPy, or torch on the CPU)
    on_host: bool = True

    def dtype(self, dt) -> Any:
        """The backend's float32/float64 for a NumPy dtype."""
        return self.xp.float32 if np.dtype(dt) == np.float32 else self.xp.float64

    # each implementation's own forms
    def asarray(self, x, dtype=None):
        """``x`` (NumPy or backend array) on this backend's device, optionally cast."""
        raise NotImplementedError

    def host(self, x) -> np.ndarray:
        """A NumPy copy (or view, on the CPU) of ``x``."""
        raise NotImplementedError

    def empty(self, shape, dt):
        raise NotImplementedError

    def subtract_into(self, X, mean, out) -> None:
        """``out[...] = X - mean`` (broadcast over rows) without a temporary."""
        raise NotImplementedError

    def qr_r(self, A):
        """The triangular factor ``R`` of the reduced QR factorisation ``A = Q R`` (``Q`` is
        not formed)."""
        raise NotImplementedError

    def contiguous(self, x):
        """``x`` with its rows laid out one after another in memory (a copy when needed)."""
        raise NotImplementedError

    def col_sq_norms(self, X):
        """Sum of squares of every column, accumulated in float64 without a float64 copy."""
        raise NotImplementedError

    def row_sq_norms(self, X):
        """Sum of squares of every row, accumulated in float64."""
        raise NotImplementedError

    def threads(self) -> int:
        """CPU threads this backend computes with."""
        raise NotImplementedError

    # written once, on the host (NumPy's BLAS and LAPACK) whenever the arrays live there
    def grams(self, mats: list) -> list:
        """``X' X`` of several matrices, computed in float64 whatever their dtype: the
        layers' spectra, and so every rank decision, are read in float64, so that a float32
        copy of a layer keeps the directions that its float64 original has.

        On the CPU through NumPy, one after another: its matmul recognises the product of a
        matrix with its own transpose and computes one triangle (BLAS ``syrk``), about 0.6x
        the time of torch's general product. No torch operation runs between them: torch's
        OpenMP threads keep spinning for a while after each operation, and a BLAS call in
        that window shares the cores with them (at 2 threads, 28 ms instead of 20 for a
        5,000 x 768 layer)."""
        found = []
        for X in mats:
            host = self.host(X).astype(np.float64, copy=False)
            found.append(host.T @ host)
        return [self.asarray(G) for G in found]

    def eighs(self, mats: list, vectors: list | None = None) -> list[tuple[Any, Any]]:
        """``eigh`` (ascending eigenvalues, eigenvectors) of several symmetric matrices.

        On the CPU they run side by side, each on one LAPACK thread of NumPy's library (as
        many at once as this backend has threads), and come back on this backend: LAPACK's
        symmetric eigensolver gains little from more threads (its reduction to tridiagonal
        form is memory-bound), so whole decompositions in parallel use the cores better (at 2
        threads, 25 of 768 x 768: 1.13 s against 1.56 s one after another). On a GPU they run
        one after another on the device.

        ``vectors`` (one entry per matrix, optional): a function of the descending
        eigenvalues giving how many leading eigenvectors are needed, or None for all. On
        the CPU only those are kept; every eigenvalue is still returned, and the
        eigenvectors are the last columns, as ``eigh`` orders them."""
        if not mats:
            return []
        vectors = vectors or [None] * len(mats)
        work = [(self.host(G), want) for G, want in zip(mats, vectors)]
        found = self._side_by_side(_host_eigh, work)
        return [(self.asarray(lam), self.asarray(V)) for lam, V in found]

    def certified_inverse_choleskys(self, mats: list, shifts: list[float]) -> list:
        """For each symmetric float64 ``G`` and shift ``t``: ``L^-1`` for the Cholesky
        factor ``G = L L'`` when both ``G`` and ``G - t I`` are numerically positive definite
        (have Cholesky factors), else None.

        On the CPU they run side by side, one LAPACK thread each, as :meth:`eighs` does
        (NumPy's Cholesky factorisation releases the interpreter lock); on a GPU one after
        another on the device."""
        if not mats:
            return []
        work = list(zip([self.host(G) for G in mats], shifts))
        found = self._side_by_side(_host_inverse_cholesky, work)
        return [None if Linv is None else self.asarray(Linv) for Linv in found]

    def _side_by_side(self, fn, items: list) -> list:
        """``[fn(x) for x in items]`` in a pool of as many workers as this backend has
        threads (at most one per item), each item on one BLAS thread: a factorisation then
        gives the same bits however many run beside it, so a layer's numbers do not depend
        on the other layers of a call."""
        workers = min(len(items), self.threads())
        with blas().limit(limits=1, user_api="blas"):
            if workers == 1:
                return [fn(x) for x in items]
            with ThreadPoolExecutor(workers) as pool:
                return list(pool.map(fn, items))


@lru_cache(maxsize=1)
def blas() -> Any:
    """The threadpoolctl controller of the BLAS libraries loaded in this process."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _host_eigh(item) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Backend.eighs` of one NumPy matrix and its eigenvector count function: NumPy's
    ``eigh`` (LAPACK's ``syevd``, which releases the interpreter lock, so several run side
    by side), keeping the leading eigenvectors that ``want(descending eigenvalues)`` asks
    for, laid out as ``eigh`` orders them (the last columns)."""
    G, want = item
    lam, V = np.linalg.eigh(G)
    if want is None:
        return lam, V
    k = int(want(np.clip(lam[::-1], 0.0, None)))
    return lam, np.ascontiguousarray(V[:, G.shape[0] - k:])


def _host_inverse_cholesky(item) -> np.ndarray | None:
    """:meth:`Backend.certified_inverse_choleskys` of one NumPy matrix and shift."""
    from scipy.linalg import solve_triangular

    G, shift = item
    d = G.shape[0]
    try:
        np.linalg.cholesky(G - shift * np.eye(d))
        L = np.linalg.cholesky(G)
    except np.linalg.LinAlgError:
        return None
    Linv = solve_triangular(L, np.eye(d), lower=True)
    return Linv if np.isfinite(Linv).all() else None
