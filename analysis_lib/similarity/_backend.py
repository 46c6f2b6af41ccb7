"""Where the cross-product measures compute: NumPy on the CPU, or PyTorch on any device.

The kernels in :mod:`.core` and :mod:`.kernels` are written once against the array API
(through ``array_api_compat``), so the same lines run on NumPy arrays and on torch tensors.
A :class:`Backend` holds the array namespace, the device and the few operations whose best
form differs between the two: :class:`NumpyBackend` (the reference, and all there is when
PyTorch is not installed: the library's core does not need it) and :class:`TorchBackend`
(tensors on a GPU, or on the CPU with torch's threads; torch is imported only when one is
made). Inputs are NumPy arrays (or anything :func:`numpy.asarray` reads) and results come
back as NumPy arrays and floats: the device only matters inside.

:func:`get` picks the backend of a call. Its ``"auto"`` rule, the default, is the faster path
of the machine: torch on a GPU; on the CPU, NumPy, except on an Intel processor with a torch
build that computes with Intel's MKL, where torch's matrix products are the faster (on an AMD
EPYC without AVX-512, at 2 threads, NumPy's OpenBLAS computes the all-pairs linear CKA of 13
float32 layers of 5,000 x 768 in 4.4 s against 5.5 s on torch, and 200 single pairs of
300 x 3 in 0.05 s against 0.13 s; ``benchmarks/bench_similarity.py`` measures both).

Small host-side decisions (how many principal directions to keep, which canonical
correlations tie) read short vectors copied to the host, so a GPU run never stalls on
element-by-element reads.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

import array_api_compat.numpy as xnp
import numpy as np

from ..runtime import device as devices

#: the backends a measure call can ask for (see :func:`get` for ``"auto"``)
BACKENDS = ("auto", "torch", "numpy")


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


class NumpyBackend(Backend):
    """NumPy arrays on the CPU: the reference path."""

    name, xp, device = "numpy", xnp, "cpu"

    def __repr__(self) -> str:
        return "NumpyBackend()"

    def __eq__(self, other) -> bool:
        return isinstance(other, NumpyBackend)

    def __hash__(self) -> int:
        return hash("numpy")

    def asarray(self, x, dtype=None):
        out = np.asarray(x)
        return out if dtype is None else out.astype(dtype, copy=False)

    def host(self, x) -> np.ndarray:
        return np.asarray(x)

    def empty(self, shape, dt):
        return np.empty(shape, dtype=dt)

    def subtract_into(self, X, mean, out) -> None:
        np.subtract(X, mean, out=out)

    def qr_r(self, A):
        return np.linalg.qr(A, mode="r")

    def contiguous(self, x):
        return np.ascontiguousarray(x)

    def col_sq_norms(self, X):
        return np.einsum("ij,ij->j", X, X, dtype=np.float64)

    def row_sq_norms(self, X):
        return np.einsum("ij,ij->i", X, X, dtype=np.float64)

    def threads(self) -> int:
        """The most threads the loaded BLAS libraries use."""
        return max([lib["num_threads"] for lib in blas().info()
                    if lib["user_api"] == "blas"] or [1])


NUMPY = NumpyBackend()


class TorchBackend(Backend):
    """Torch tensors on one device (a GPU, or the CPU with torch's threads). PyTorch is
    imported when one is made, so the rest of the library imports and runs without it."""

    name = "torch"

    def __init__(self, device):
        import array_api_compat.torch as xtorch
        import torch

        self.torch, self.xp, self.device = torch, xtorch, device
        self.on_host = device.type == "cpu"

    def __repr__(self) -> str:
        return f"TorchBackend({self.device})"

    def __eq__(self, other) -> bool:
        return isinstance(other, TorchBackend) and other.device == self.device

    def __hash__(self) -> int:
        return hash(("torch", str(self.device)))

    def asarray(self, x, dtype=None):
        t = x if isinstance(x, self.torch.Tensor) else _as_tensor(self.torch, np.asarray(x))
        # one plain copy to the device: pinning a layer first would copy it on the host too
        t = t.to(self.device)
        return t if dtype is None else t.to(self.dtype(dtype))

    def host(self, x) -> np.ndarray:
        return x.detach().cpu().numpy()

    def empty(self, shape, dt):
        return self.torch.empty(shape, dtype=self.dtype(dt), device=self.device)

    def subtract_into(self, X, mean, out) -> None:
        self.torch.sub(X, mean, out=out)

    def qr_r(self, A):
        return self.torch.linalg.qr(A, mode="r")[1]

    def contiguous(self, x):
        return x.contiguous()

    def col_sq_norms(self, X):
        return sum(self.torch.sum(block.double() ** 2, dim=0) for block in _row_blocks(X))

    def row_sq_norms(self, X):
        return self.torch.cat([self.torch.sum(block.double() ** 2, dim=1)
                               for block in _row_blocks(X)])

    def threads(self) -> int:
        """Torch's intra-op threads."""
        return self.torch.get_num_threads()

    def grams(self, mats: list) -> list:
        if self.on_host and not any(X.requires_grad for X in mats):
            return super().grams(mats)
        return [X.double().T @ X.double() for X in mats]

    def eighs(self, mats: list, vectors: list | None = None) -> list[tuple[Any, Any]]:
        if self.on_host:
            return super().eighs(mats, vectors)
        return [self.torch.linalg.eigh(G) for G in mats]

    def certified_inverse_choleskys(self, mats: list, shifts: list[float]) -> list:
        if self.on_host:
            return super().certified_inverse_choleskys(mats, shifts)
        return [_device_inverse_cholesky(G, t) for G, t in zip(mats, shifts)]


def _device_inverse_cholesky(G, shift: float):
    """:meth:`Backend.certified_inverse_choleskys` of one torch matrix on a GPU."""
    import torch

    eye = torch.eye(G.shape[0], dtype=G.dtype, device=G.device)
    if int(torch.linalg.cholesky_ex(G - shift * eye)[1]) != 0:
        return None
    L, info = torch.linalg.cholesky_ex(G)
    if int(info) != 0:
        return None
    Linv = torch.linalg.solve_triangular(L, eye, upper=False)
    return Linv if bool(torch.all(torch.isfinite(Linv))) else None


def _row_blocks(X):
    """Blocks of rows of ``X`` whose float64 copies stay near 4 MB: small enough for the
    allocator to reuse one block's memory for the next (a fresh large array pays a page
    fault per 4 kB page, which costs more than the arithmetic)."""
    step = max(1, (1 << 19) // max(1, X.shape[1]))
    return (X[k:k + step] for k in range(0, X.shape[0], step))


def _as_tensor(torch, a: np.ndarray):
    """A tensor sharing ``a``'s memory. Read-only arrays (memory-mapped files, cached
    extractions) are shared too: the measures only read their inputs. Views with negative
    strides (``Y[:, ::-1]``), which torch cannot share, are copied."""
    if any(stride < 0 for stride in a.strides):
        a = np.ascontiguousarray(a)
    if a.flags.writeable:
        return torch.from_numpy(a)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(a)


def get(device=None, backend: str = "auto") -> Backend:
    """The backend for a measure call.

    Parameters
    ----------
    device : str, torch.device or None
        Where torch computes (default: the process default, else CUDA when available, else
        the CPU); see :mod:`analysis_lib.runtime.device`.
    backend : {'auto', 'torch', 'numpy'}
        ``'torch'`` on ``device``; ``'numpy'`` on the CPU only; ``'auto'`` (the default)
        is the faster of the two where the call computes: torch on a GPU; on the CPU, torch
        when PyTorch computes with Intel's MKL on an Intel processor, NumPy otherwise (and
        always NumPy when PyTorch is not installed).

    The choice is made once for each ``device``, ``backend`` and process default device
    (:func:`~analysis_lib.runtime.device.set_default`, ``ANALYSIS_LIB_DEVICE``) and kept.

    Raises
    ------
    ValueError
        An unknown backend, a GPU asked of the NumPy backend, or MPS (no float64 there).
    ImportError
        ``backend='torch'``, or a device other than the CPU, without PyTorch installed; the
        message says how to install it.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    try:
        return _chosen(device, backend, devices.process_default,
                       os.environ.get(devices.ENV))
    except TypeError:  # a device that cannot be a cache key: decide it afresh
        return _choose(device, backend)


@lru_cache(maxsize=64)
def _chosen(device, backend: str, default, env) -> Backend:
    """:func:`_choose`, kept for each device, backend and process default."""
    return _choose(device, backend)


def _choose(device, backend: str) -> Backend:
    if backend == "auto":
        backend = "torch" if _torch_is_faster(device) else "numpy"
    if backend == "numpy":
        if device is not None and not devices.is_cpu(device) and (
                not devices.torch_available() or devices.resolve(device).type != "cpu"):
            raise ValueError(f"backend='numpy' runs on the CPU only, got device={device!r}; "
                             "use backend='torch' for a GPU")
        return NUMPY
    devices.require_torch("backend='torch'")
    dev = devices.resolve(device)
    if dev.type == "mps":
        raise ValueError("the measures accumulate in float64, which MPS does not support; use "
                         "device='cpu' for the measures (models still run on 'mps')")
    return TorchBackend(dev)


def _torch_is_faster(device) -> bool:
    """The ``"auto"`` rule of :func:`get`: whether torch is the faster path for ``device``."""
    if not devices.torch_available():
        if device is not None and not devices.is_cpu(device):
            devices.require_torch(f"device={device!r}")
        return False
    if devices.resolve(device).type != "cpu":
        return True
    import torch

    return bool(torch.backends.mkl.is_available()) and cpu_vendor() == "GenuineIntel"


@lru_cache(maxsize=1)
def cpu_vendor() -> str:
    """The processor's vendor string (``"GenuineIntel"``, ``"AuthenticAMD"``), read from
    ``/proc/cpuinfo``; empty where that cannot be read (then :func:`get`'s ``"auto"`` takes
    NumPy on the CPU)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""
