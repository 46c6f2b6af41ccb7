"""Trained maps in plain torch: an invertible coupling flow (RealNVP) and a plain MLP.

**Affine coupling layer** (Dinh et al. 2017). The input ``x`` (width D) is split by a fixed
binary mask into a kept part ``x_a`` and a changed part ``x_b``; the output is
``y_a = x_a`` and ``y_b = x_b * exp(s(x_a)) + t(x_a)``, with ``s`` and ``t`` small networks
(one hidden layer, ``tanh``-bounded scales). It is invertible whatever ``s`` and ``t`` are:
``x_b = (y_b - t(y_a)) * exp(-s(y_a))``. Stacking layers whose masks alternate (each a fixed
random half of the dimensions, by the seed) lets every dimension be changed.

Training details that matter (Ren et al. give few): inputs and targets are z-scored per
dimension (fitted on the training rows); the loss is the mean squared error; Adam with weight
decay; mini-batches; early stopping on a validation split of the training rows (the weights
of the best validation loss are kept, training stops after ``patience`` epochs without
improvement). All randomness (masks, initial weights, batches, the validation split) comes
from the seed, without touching the global random state.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from tqdm.auto import tqdm

from ..runtime.device import DeviceLike, fork_rng, fused_optimizer, resolve
from ..runtime.threads import one_thread


class Coupling(torch.nn.Module):
    """One affine coupling layer with a fixed mask (1 = kept)."""

    mask: torch.Tensor

    def __init__(self, mask: torch.Tensor, hidden: int):
        super().__init__()
        d = mask.numel()
        self.register_buffer("mask", mask.float())
        first, last = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, 2 * d)
        torch.nn.init.zeros_(last.weight)  # starts as the identity map
        torch.nn.init.zeros_(last.bias)
        self.net = torch.nn.Sequential(first, torch.nn.GELU(), last)

    def _st(self, kept: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s, t = self.net(kept).chunk(2, dim=-1)
        return torch.tanh(s) * (1 - self.mask), t * (1 - self.mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s, t = self._st(x * self.mask)
        return x * self.mask + (1 - self.mask) * (x * torch.exp(s) + t)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        s, t = self._st(y * self.mask)
        return y * self.mask + (1 - self.mask) * ((y - t) * torch.exp(-s))


class CouplingFlow(torch.nn.Module):
    """A stack of coupling layers with alternating random masks: an invertible map R^D -> R^D.
    """

    def __init__(self, dim: int, layers: int = 4, hidden: int = 128, seed: int = 0):
        super().__init__()
        if dim < 2:
            raise ValueError(f"a coupling flow needs at least 2 dimensions, got {dim}")
        rng = np.random.default_rng(seed)
        blocks: list[Coupling] = []
        for k in range(layers):
            if k % 2 == 0:
                chosen = rng.permutation(dim)[: dim // 2]
                mask = torch.zeros(dim)
                mask[torch.as_tensor(chosen)] = 1.0
            else:
                mask = 1 - blocks[-1].mask
            blocks.append(Coupling(mask, hidden))
        self.blocks = torch.nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.couplings():
            x = block(x)
        return x

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        for block in reversed(self.couplings()):
            y = block.inverse(y)
        return y

    def couplings(self) -> list[Coupling]:
        """The coupling layers, first to last."""
        return [cast(Coupling, block) for block in self.blocks]


def mlp(d_in: int, d_out: int, hidden: int = 256, layers: int = 2) -> torch.nn.Module:
    """A plain ReLU network (not invertible)."""
    parts: list[torch.nn.Module] = []
    width = d_in
    for _ in range(layers):
        parts += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
        width = hidden
    parts.append(torch.nn.Linear(width, d_out))
    return torch.nn.Sequential(*parts)


@dataclass
class TrainSettings:
    """How a trained map is fitted (see the module docs)."""

    epochs: int = 300
    batch_size: int = 128
    learning_rate: float = 2e-3
    weight_decay: float = 1e-5
    validation: float = 0.1
    patience: int = 20


def train_map(net: torch.nn.Module, X: np.ndarray, Y: np.ndarray, settings: TrainSettings,
              *, seed: int, progress: bool = False, desc: str = "fit",
              device: torch.device | str | None = "cpu") -> dict[str, float]:
    """Fit ``net`` in place so that ``net(X) ~ Y`` (both already z-scored), with early
    stopping on a validation split, on ``device`` (None: CUDA when available; on the CPU on
    one thread, fastest for such small networks). Returns the best validation loss and its
    epoch."""
    dev = resolve(device)
    net.to(dev)
    n = len(X)
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    n_val = max(1, int(round(settings.validation * n))) if n >= 10 else 0
    val, train = order[:n_val], order[n_val:]
    x = torch.as_tensor(X, dtype=torch.float32, device=dev)
    y = torch.as_tensor(Y, dtype=torch.float32, device=dev)
    best = (float("inf"), 0, copy.deepcopy(net.state_dict()))
    threads = one_thread() if dev.type == "cpu" else contextlib.nullcontext()
    with fork_rng(dev), threads:
        torch.manual_seed(seed)
        optimizer = torch.optim.Adam(net.parameters(), lr=settings.learning_rate,
                                     weight_decay=settings.weight_decay,
                                     fused=fused_optimizer(dev))
        bar = tqdm(range(1, settings.epochs + 1), desc=desc, unit="epoch", disable=not progress,
                   leave=False)
        for epoch in bar:
            net.train()
            for start in range(0, len(train), settings.batch_size):
                rows = torch.as_tensor(train[start:start + settings.batch_size], device=dev)
                loss = torch.mean((net(x[rows]) - y[rows]) ** 2)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            rng.shuffle(train)
            net.eval()
            with torch.no_grad():
                check = torch.as_tensor(val if n_val else train, device=dev)
                val_loss = float(torch.mean((net(x[check]) - y[check]) ** 2))
            if val_loss < best[0] - 1e-7:
                best = (val_loss, epoch, copy.deepcopy(net.state_dict()))
            elif epoch - best[1] >= settings.patience:
                break
            bar.set_postfix(val=f"{val_loss:.4f}")
    net.load_state_dict(best[2])
    net.eval()
    return {"validation_loss": best[0], "epoch": best[1]}


def _standardizer(M: np.ndarray) -> tuple[Callable, Callable]:
    """Z-scoring by M's columns (a constant column is only centred) and its inverse."""
    mean, sd = M.mean(axis=0), M.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (lambda A: (A - mean) / sd), (lambda Z: Z * sd + mean)


def fit_network(X: np.ndarray, Y: np.ndarray, *, kind: str, seed: int, layers: int = 4,
                hidden: int = 128,
                 epochs: int = 300, batch_size: int = 128, learning_rate: float = 2e-3,
                 patience: int = 20, progress: bool = False, device: DeviceLike = None,
                 **_: Any) -> tuple[Callable, Callable, dict[str, Any]]:
    """Train an ``inn`` (:class:`CouplingFlow`) or ``mlp`` map from X to Y (both z-scored
    per column on these rows) with :func:`train_map`; return the forward map, the identity
    for Y and what the training recorded (``network``: the trained module). Called by
    :func:`analysis_lib.alignment.fit`, which checks the options first."""
    if kind == "inn" and X.shape[1] != Y.shape[1]:
        raise ValueError(f"an invertible map needs equal widths; X has {X.shape[1]} columns "
                         f"and Y {Y.shape[1]} (use linreg, cca or mlp for different widths)")
    zx = _standardizer(X)[0]
    zy, unzy = _standardizer(Y)
    dev = resolve(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = (CouplingFlow(X.shape[1], layers=layers, hidden=hidden, seed=seed)
               if kind == "inn" else mlp(X.shape[1], Y.shape[1], hidden=hidden))
    settings = TrainSettings(epochs=epochs, batch_size=batch_size,
                             learning_rate=learning_rate, patience=patience)
    info = train_map(net, zx(X), zy(Y), settings, seed=seed, progress=progress, desc=kind,
                     device=dev)

    def forward(A: np.ndarray) -> np.ndarray:
        with torch.no_grad(), one_thread():
            x = torch.as_tensor(zx(A), dtype=torch.float32, device=dev)
            out = net(x).double().cpu().numpy()
        return unzy(out)

    return forward, lambda B: B, {**info, "network": net}


def synthetic_pair(n: int, d: int, kind: str, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """X (n, d), Gaussian with a decaying spectrum, and Y = g(X) for a random ``kind`` of g:
    ``"linear"`` (a random well-conditioned matrix) or ``"flow"`` (a random coupling flow of
    four layers, an invertible nonlinear map)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.arange(1, d + 1) ** -0.3
    if kind == "linear":
        A = rng.standard_normal((d, d)) / np.sqrt(d) + np.eye(d)
        return X, X @ A
    if kind != "flow":
        raise ValueError(f"kind must be 'linear' or 'flow', got {kind!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        g = CouplingFlow(d, layers=4, hidden=32, seed=seed + 1)
        for block in g.couplings():  # a clearly nonlinear map: non-zero output layers
            last: Any = block.net[-1]
            torch.nn.init.normal_(last.weight, std=0.5)
        with torch.no_grad():
            Y = g(torch.as_tensor(X, dtype=torch.float32)).double().numpy()
    return X, Y
