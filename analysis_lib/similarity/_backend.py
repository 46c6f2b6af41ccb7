"""Where the cross-product measures compute: NumPy on the CPU, or PyTorch on any device.

The kernels in :mod:`.core` and :mod:`.kernels` are written once against the array API
(through ``array_api_compat``), so the same lines run on NumPy arrays and on torch tensors.
A :class:`Backend` holds the array namespace, the device and the few operations whose best
form differs between the two: :class:`NumpyBackend` (the reference, and all there is when
PyTorch is not installed: the library's core does not need it) and :class:`TorchBackend`
(tensors on a GPU, or on the CPU with torch's threads; torch is imported only when one is
made). Inputs are NumPy arrays (or anything :func:`numpy.asarray` reads) and results come
back as NumPy arrays and floats: the device only matters inside.

:func:`get` picks the backend of a call. Its ``"auto"`` rule, the default, takes the path
that is fastest on the machine that runs it, by measurement rather than by the CPU's vendor:
torch on a GPU; on the CPU, whichever of NumPy and torch computes the call's measures faster
on layers of the call's shape class (:class:`Work`), timed once on a small synthetic pair
(:func:`calibrate`) and kept on disk under a key that holds the kind of CPU (model name and
vector arithmetic), the thread counts and the NumPy, PyTorch and library versions, so a
choice never outlives a change of any of them. Without PyTorch, or for a call whose shape is
not known, it is NumPy. The two paths agree to float32 rounding (the tests hold both to
:mod:`.reference`), so the choice moves speed, and results only in their last bits: two
calls of different shape classes (a suite of measures, and one of them alone) may be timed
to different paths and then agree to rounding, not to the bit; one path (``backend=`` or
the environment variable) makes them agree exactly. :func:`backend_info` shows what
was chosen and why; ``backend="numpy"`` or ``"torch"`` (or the environment variable
``ANALYSIS_LIB_BACKEND``) overrides it. On the CPUs measured so far NumPy won nearly
everywhere (at 2 threads: all-pairs linear CKA of 9 float32 layers of 2,000 x 768 in 3.2 s
against 4.4 s on torch on an Intel Xeon with AMX, 0.74 s against 1.34 s on an AMD EPYC with
AVX-512), but not on every shape: ``benchmarks/bench_similarity.py`` prints the default
against both paths per measure.

Small host-side decisions (how many principal directions to keep, which canonical
correlations tie) read short vectors copied to the host, so a GPU run never stalls on
element-by-element reads.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import array_api_compat.numpy as xnp
import numpy as np

from ..runtime import device as devices

if TYPE_CHECKING:
    import pandas as pd

#: the backends a measure call can ask for (see :func:`get` for ``"auto"``)
BACKENDS = ("auto", "torch", "numpy")
#: the environment variable that sets what ``backend="auto"`` means in this process (and in the
#: processes it starts): ``"numpy"`` or ``"torch"`` to fix it, ``"auto"`` (or unset) to measure
ENV = "ANALYSIS_LIB_BACKEND"


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


@dataclass(frozen=True)
class Work:
    """The shape class of a measure call, which the ``"auto"`` rule times: the measures'
    canonical names, the rows and the widest layer's columns (each rounded up to a power of
    two) and the float type the call computes in."""

    measures: tuple[str, ...]
    rows: int
    columns: int
    dtype: str

    @classmethod
    def of(cls, measures, layers, dtype=None) -> Work | None:
        """The shape class of ``measures`` over ``layers`` (arrays, or anything with a 2-D
        ``shape``); None where a layer has no such shape (attention maps, nested inputs)."""
        shapes = [tuple(getattr(X, "shape", ()))[-3:] for X in layers]
        shapes = [s[1:] if len(s) == 3 and s[0] == 1 else s for s in shapes]
        if not shapes or any(len(s) != 2 for s in shapes):
            return None
        single = all(str(getattr(X, "dtype", "")).endswith("float32") for X in layers)
        try:
            floating = np.dtype(dtype if dtype is not None else
                                np.float32 if single else np.float64)
        except TypeError:
            return None
        return cls(tuple(sorted(measures)), _power_of_two(max(s[0] for s in shapes)),
                   _power_of_two(max(s[1] for s in shapes)), floating.name)


def _power_of_two(k: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, int(k)))))


#: the largest synthetic layer a calibration times (rows, columns): larger shape classes are
#: timed at this size, which keeps a calibration within about a second
CALIBRATION_SHAPE = (1024, 512)
#: torch is taken only when it takes at most this share of NumPy's time: a near tie goes to
#: NumPy, the reference path, so that the choice (and with it the last bits of a result)
#: does not flip between two calibrations of one machine, and the default stays within 10%
#: of the faster path either way
CALIBRATION_MARGIN = 0.91

#: what computes a shape class's measures on a backend: ``engine(layers, measures, backend)``
Engine = Callable[[list, list, "Backend"], Any]

_calibrations: dict[str, dict[str, Any]] = {}
_calibration_lock = threading.Lock()


def get(device=None, backend: str = "auto", work: Work | None = None,
        engine: Engine | None = None) -> Backend:
    """The backend for a measure call.

    Parameters
    ----------
    device : str, torch.device or None
        Where torch computes (default: the process default, else CUDA when available, else
        the CPU); see :mod:`analysis_lib.runtime.device`.
    backend : {'auto', 'torch', 'numpy'}
        ``'torch'`` on ``device``; ``'numpy'`` on the CPU only; ``'auto'`` (the default)
        is the faster of the two where the call computes: torch on a GPU; on the CPU, the
        path :func:`calibrate` measured faster for ``work`` on this machine (NumPy when
        ``work`` is None or PyTorch is not installed). ``ANALYSIS_LIB_BACKEND`` set to
        ``'numpy'`` or ``'torch'`` makes ``'auto'`` mean that path.
    work : Work or None
        The call's shape class (measures, rows, columns, float type).
    engine : callable or None
        What computes ``work``'s measures on a backend, ``engine(layers, measures, backend)``,
        for :func:`calibrate` to time (the all-pairs engine passes itself); without it the
        rule takes NumPy on the CPU.

    Raises
    ------
    ValueError
        An unknown backend (argument or ``ANALYSIS_LIB_BACKEND``), a GPU asked of the NumPy
        backend, or MPS (no float64 there).
    ImportError
        ``backend='torch'``, or a device other than the CPU, without PyTorch installed; the
        message says how to install it.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        backend = _process_rule()
    try:
        return _chosen(device, backend, work, engine, devices.process_default,
                       os.environ.get(devices.ENV))
    except TypeError:  # a device that cannot be a cache key: decide it afresh
        return _choose(device, backend, work, engine)


def _process_rule() -> str:
    """What ``"auto"`` means in this process: ``ANALYSIS_LIB_BACKEND``, else ``"auto"``."""
    rule = os.environ.get(ENV, "").strip().lower() or "auto"
    if rule not in BACKENDS:
        raise ValueError(f"the environment variable {ENV} must be one of {BACKENDS}, got "
                         f"{os.environ[ENV]!r}; unset it to let the library measure")
    return rule


@lru_cache(maxsize=256)
def _chosen(device, backend: str, work: Work | None, engine, default, env) -> Backend:
    """:func:`_choose`, kept for each device, backend, shape class and process default."""
    return _choose(device, backend, work, engine)


def _choose(device, backend: str, work: Work | None = None,
            engine: Engine | None = None) -> Backend:
    if backend == "auto":
        backend = "torch" if _torch_is_faster(device, work, engine) else "numpy"
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


def _torch_is_faster(device, work: Work | None, engine: Engine | None) -> bool:
    """The ``"auto"`` rule of :func:`get`: whether torch is the faster path for ``device``
    and ``work``."""
    if not devices.torch_available():
        if device is not None and not devices.is_cpu(device):
            devices.require_torch(f"device={device!r}")
        return False
    dev = devices.resolve(device)
    if dev.type != "cpu":
        return True
    if work is None or engine is None:
        return False
    return calibrate(work, engine)["choice"] == "torch"


def _machine_key(work: Work) -> dict[str, Any]:
    """Everything a calibration's result depends on besides the shape class. PyTorch is not
    imported for it (that takes a second): its version comes from the installed package's
    metadata, and its thread count, until it is imported, is the count it starts with."""
    from importlib.metadata import PackageNotFoundError, version

    from ..runtime.machine import cores, cpu_kind

    torch = sys.modules.get("torch")
    torch_threads = (torch.get_num_threads() if torch is not None
                     else int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or cores())
    try:
        torch_version = version("torch")
    except PackageNotFoundError:  # a build without package metadata
        torch_version = getattr(torch, "__version__", "unknown")
    return {"cpu": cpu_kind(), "numpy": np.__version__, "torch": torch_version,
            "numpy_threads": NUMPY.threads(), "torch_threads": torch_threads,
            "measures": list(work.measures), "rows": work.rows, "columns": work.columns,
            "dtype": work.dtype}


def calibrate(work: Work, engine: Engine, *, refresh: bool = False) -> dict[str, Any]:
    """Time NumPy's and torch's CPU paths on ``work``'s shape class and keep the faster.

    Two synthetic layers of the class's shape (at most :data:`CALIBRATION_SHAPE`), related as
    neighbouring layers of a network are, go through ``engine`` as a real call does, on each
    path in turn: one untimed call each, then the best of two (a single timed call for a
    class whose call takes over 0.2 s). Torch is chosen only when it takes at most
    :data:`CALIBRATION_MARGIN` of NumPy's time. It costs from milliseconds (small layers) to
    about half a second (the largest class), once per machine. The result is kept in this
    process and in the on-disk cache (``<cache>/backend/<key>.json``) under a key holding the
    kind of CPU, both thread counts and the NumPy, PyTorch and library versions; a
    damaged file is measured again, and a cache that cannot be written only costs the next
    process a calibration.

    Returns
    -------
    dict
        ``choice`` ('numpy' or 'torch'), ``numpy_s`` and ``torch_s`` (best seconds),
        ``shape`` (the timed layer shape), ``source`` ('measured' or the file it was read
        from), ``key`` and the machine's parts of it.
    """
    from ..runtime.cache import atomic_write_text, default_root, make_key

    parts = _machine_key(work)
    key = make_key(kind="similarity-backend", **parts)
    with _calibration_lock:
        if not refresh and key in _calibrations:
            return _calibrations[key]
        path = default_root() / "backend" / f"{key}.json"
        found = None if refresh else _read_calibration(path, parts)
        if found is None:
            found = {**parts, **_time_paths(work, engine), "key": key}
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(path, json.dumps(found, indent=1, sort_keys=True))
            except OSError:
                pass
            found = {**found, "source": "measured"}
        else:
            found = {**found, "source": str(path)}
        _calibrations[key] = found
        return found


def _read_calibration(path, parts: dict[str, Any]) -> dict[str, Any] | None:
    """A kept calibration, or None where there is none or it is damaged or not this one."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("choice") not in ("numpy", "torch") or any(
            found.get(name) != value for name, value in parts.items()):
        return None
    return found


def _time_paths(work: Work, engine: Engine) -> dict[str, Any]:
    """Best seconds of each CPU path on a synthetic pair of ``work``'s shape class."""
    rows = min(work.rows, CALIBRATION_SHAPE[0])
    columns = min(work.columns, CALIBRATION_SHAPE[1])
    rng = np.random.default_rng(0)
    spectrum = np.arange(1, columns + 1) ** -0.5
    X = rng.standard_normal((rows, columns)) * spectrum
    mix = np.eye(columns) + rng.standard_normal((columns, columns)) / (3 * columns ** 0.5)
    Y = np.tanh(X @ mix) + 0.1 * rng.standard_normal((rows, columns)) * spectrum
    layers = [X.astype(work.dtype), Y.astype(work.dtype)]
    paths = {"numpy": NUMPY, "torch": _choose("cpu", "torch")}
    best = {name: math.inf for name in paths}
    rounds = 3
    try:
        for round_ in range(rounds):
            for name, bk in paths.items():
                start = time.perf_counter()
                engine(layers, list(work.measures), bk)
                took = time.perf_counter() - start
                if round_:
                    best[name] = min(best[name], took)
                elif took > 0.2:  # a slow class: one timed round keeps it near a second
                    rounds = 2
            if round_ + 1 >= rounds:
                break
    except Exception as error:  # a measure that cannot run on the synthetic pair
        return {"choice": "numpy", "numpy_s": None, "torch_s": None,
                "shape": [rows, columns], "note": f"not timed ({type(error).__name__}: "
                                                   f"{error}); NumPy, the reference path"}
    choice = "torch" if best["torch"] <= CALIBRATION_MARGIN * best["numpy"] else "numpy"
    return {"choice": choice, "numpy_s": best["numpy"], "torch_s": best["torch"],
            "shape": [rows, columns], "note": ""}


def backend_info(device: Any = None, backend: str = "auto") -> pd.DataFrame:
    """What ``backend="auto"`` chooses here, and why: a data frame with one row per
    calibration this process made or read (the shape class, the best seconds of each path,
    the choice, where it came from and the CPU), or one row naming the rule that decides
    without timing (a GPU, no PyTorch, ``ANALYSIS_LIB_BACKEND``, an explicit ``backend``)."""
    import pandas as pd

    rule = backend if backend != "auto" else _process_rule()
    head = {"measures": "", "rows": None, "columns": None, "dtype": "", "numpy_s": None,
            "torch_s": None}
    if rule != "auto":
        reason = ("backend argument" if backend != "auto" else f"{ENV}={rule}")
        return pd.DataFrame([{**head, "choice": rule, "source": reason}])
    if not devices.torch_available():
        return pd.DataFrame([{**head, "choice": "numpy", "source": "PyTorch is not installed"}])
    if devices.resolve(device).type != "cpu":
        return pd.DataFrame([{**head, "choice": "torch",
                              "source": f"device {devices.resolve(device)}"}])
    rows = [{"measures": ", ".join(c["measures"]), "rows": c["rows"],
             "columns": c["columns"], "dtype": c["dtype"], "numpy_s": c["numpy_s"],
             "torch_s": c["torch_s"], "choice": c["choice"], "source": c["source"],
             "cpu": c["cpu"]} for c in _calibrations.values()]
    if not rows:
        rows = [{**head, "choice": "numpy", "source": "no call with a known shape yet "
                 "(calls whose shape is not known take NumPy)"}]
    return pd.DataFrame(rows)
