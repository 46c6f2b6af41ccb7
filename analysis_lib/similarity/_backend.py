"""Where the cross-product measures compute: PyTorch on any device, or NumPy on the CPU.

The kernels in :mod:`._core` and :mod:`.measures` are written once against the array API
(through ``array_api_compat``), so the same lines run on NumPy arrays and on torch tensors.
The torch backend (:mod:`._torch_backend`, the default when PyTorch is installed) uses every
CPU thread torch has and a GPU when there is one; the NumPy backend is the reference the torch
path is tested against, and what the measures run on when PyTorch is not installed (the
library's core does not need it). Inputs are NumPy arrays
(or anything :func:`numpy.asarray` reads) and results come back as NumPy arrays and floats:
the device only matters inside.

Small host-side decisions (how many principal directions to keep, which canonical
correlations tie) read short vectors copied to the host, so a GPU run never stalls on
element-by-element reads.
"""

from __future__ import annotations

import array_api_compat.numpy as xnp
import numpy as np

from ..runtime import device as devices
from ._backend_base import Backend, blas

#: the backends a measure call can ask for; ``"auto"`` is torch when it is installed, else NumPy
BACKENDS = ("auto", "torch", "numpy")


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


def get(device=None, backend: str = "auto") -> Backend:
    """The backend for a measure call.

    Parameters
    ----------
    device : str, torch.device or None
        Where torch computes (default: the process default, else CUDA when available, else
        the CPU); see :mod:`analysis_lib.runtime.device`.
    backend : {'auto', 'torch', 'numpy'}
        ``'torch'`` on ``device``; ``'numpy'`` on the CPU only; ``'auto'`` (the default) is
        ``'torch'`` when PyTorch is installed and ``'numpy'`` otherwise.

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
    if backend == "auto":
        if devices.torch_available():
            backend = "torch"
        elif device is None or devices.is_cpu(device):
            backend = "numpy"
        else:
            devices.require_torch(f"device={device!r}")
    if backend == "numpy":
        if device is not None and not devices.is_cpu(device) and (
                not devices.torch_available() or devices.resolve(device).type != "cpu"):
            raise ValueError(f"backend='numpy' runs on the CPU only, got device={device!r}; "
                             "use backend='torch' for a GPU")
        return NUMPY
    devices.require_torch("backend='torch'")
    from ._torch_backend import TorchBackend

    dev = devices.resolve(device)
    if dev.type == "mps":
        raise ValueError("the measures accumulate in float64, which MPS does not support; use "
                         "device='cpu' for the measures (models still run on 'mps')")
    return TorchBackend(dev)
