"""The torch backend of the measures (:class:`TorchBackend`): tensors on one device, a GPU or
the CPU with torch's threads. Imported by :func:`._backend.get` only when torch is used, so the
measures import and run without PyTorch installed (on :class:`._backend.NumpyBackend`)."""

from __future__ import annotations

import warnings
from typing import Any

import array_api_compat.torch as xtorch
import numpy as np
import torch

from ._backend_base import Backend


class TorchBackend(Backend):
    """Torch tensors on one device (a GPU, or the CPU with torch's threads)."""

    name, xp = "torch", xtorch

    def __init__(self, device: torch.device):
        self.device = device
        self.on_host = device.type == "cpu"

    def __repr__(self) -> str:
        return f"TorchBackend({self.device})"

    def __eq__(self, other) -> bool:
        return isinstance(other, TorchBackend) and other.device == self.device

    def __hash__(self) -> int:
        return hash(("torch", str(self.device)))

    def asarray(self, x, dtype=None):
        t = x if isinstance(x, torch.Tensor) else _as_tensor(np.asarray(x))
        # one plain copy to the device: pinning a layer first would copy it on the host too
        t = t.to(self.device)
        return t if dtype is None else t.to(self.dtype(dtype))

    def host(self, x) -> np.ndarray:
        return x.detach().cpu().numpy()

    def empty(self, shape, dt):
        return torch.empty(shape, dtype=self.dtype(dt), device=self.device)

    def subtract_into(self, X, mean, out) -> None:
        torch.sub(X, mean, out=out)

    def qr_r(self, A):
        return torch.linalg.qr(A, mode="r")[1]

    def contiguous(self, x):
        return x.contiguous()

    def col_sq_norms(self, X):
        return sum(torch.sum(block.double() ** 2, dim=0) for block in _row_blocks(X))

    def row_sq_norms(self, X):
        return torch.cat([torch.sum(block.double() ** 2, dim=1) for block in _row_blocks(X)])

    def threads(self) -> int:
        """Torch's intra-op threads."""
        return torch.get_num_threads()

    def grams(self, mats: list) -> list:
        if self.on_host and not any(X.requires_grad for X in mats):
            return super().grams(mats)
        return [X.double().T @ X.double() for X in mats]

    def eighs(self, mats: list, vectors: list | None = None) -> list[tuple[Any, Any]]:
        if self.on_host:
            return super().eighs(mats, vectors)
        return [torch.linalg.eigh(G) for G in mats]

    def certified_inverse_choleskys(self, mats: list, shifts: list[float]) -> list:
        if self.on_host:
            return super().certified_inverse_choleskys(mats, shifts)
        return [_device_inverse_cholesky(G, t) for G, t in zip(mats, shifts)]




def _device_inverse_cholesky(G: torch.Tensor, shift: float) -> torch.Tensor | None:
    """:meth:`Backend.certified_inverse_choleskys` of one matrix on a GPU."""
    eye = torch.eye(G.shape[0], dtype=G.dtype, device=G.device)
    if int(torch.linalg.cholesky_ex(G - shift * eye)[1]) != 0:
        return None
    L, info = torch.linalg.cholesky_ex(G)
    if int(info) != 0:
        return None
    Linv = torch.linalg.solve_triangular(L, eye, upper=False)
    return Linv if bool(torch.all(torch.isfinite(Linv))) else None


def _row_blocks(X: torch.Tensor):
    """Blocks of rows of ``X`` whose float64 copies stay near 4 MB: small enough for the
    allocator to reuse one block's memory for the next (a fresh large array pays a page
    fault per 4 kB page, which costs more than the arithmetic)."""
    step = max(1, (1 << 19) // max(1, X.shape[1]))
    return (X[k:k + step] for k in range(0, X.shape[0], step))


def _as_tensor(a: np.ndarray) -> torch.Tensor:
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
