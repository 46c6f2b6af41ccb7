"""Which device a step runs on, and in which precision.

Every step that runs a model or multiplies large matrices takes ``device``: ``None`` (the
default) picks the process default (:func:`set_default` or the ``ANALYSIS_LIB_DEVICE``
environment variable) or else CUDA when torch sees a GPU and the CPU otherwise; ``"cpu"``,
``"cuda"``, ``"cuda:1"``, ``"mps"`` or a :class:`torch.device` choose one. :func:`resolve`
turns any of these into a :class:`torch.device` and says clearly what is wrong with one that
cannot be used here. :func:`key` is the part of a cache key that names what changes the
numbers: the kind of device (not its index: two GPUs of one kind give the same numbers) and
the precision.

PyTorch is an optional dependency (``pip install "analysis_lib[torch]"``): this module imports
it where a device is used, and :func:`require_torch` says how to install it when it is missing.
The measures run without it, on NumPy (:func:`torch_available`).

Precision (``precision``) is how a model's forward pass computes: ``"float32"`` (the default,
the same numbers on every device up to rounding), or ``"bfloat16"`` / ``"float16"`` autocast on
a GPU, faster there and further from the float32 numbers (``benchmarks/bench_extract.py
--device cuda`` measures both).

Training has its own precision (:data:`TRAINING_PRECISIONS`): ``"float32"``, or
``"bfloat16"`` autocast of the forward pass and loss (weights, gradients and the optimizer
stay in float32), whose products a CPU with native bfloat16 arithmetic (AMX or AVX512-BF16)
and most GPUs compute several times faster. ``"auto"`` picks, per device, the one measured
faster for the library's training loops (:func:`training_precision`); the precision a run
trained in is part of its cache key, so a cache never mixes them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    import torch

#: what a ``device`` argument takes: a name (``"cpu"``, ``"cuda:1"``), a
#: :class:`torch.device`, or None for the process default
DeviceLike = Union[str, "torch.device", None]  # noqa: UP007 - a forward reference to torch

#: how to install the optional PyTorch dependency
INSTALL_TORCH = 'pip install "analysis_lib[torch]"'

#: precisions a forward pass can run in
PRECISIONS = ("float32", "bfloat16", "float16")
#: precisions a training run can compute its forward pass and loss in ("auto": the fastest
#: this machine computes natively, :func:`training_precision`)
TRAINING_PRECISIONS = ("auto", "float32", "bfloat16")
#: the narrowest model (hidden size) that ``"auto"`` trains in bfloat16 on a CPU: on the
#: AMD EPYC with AVX512-BF16, MiniLM (384 wide) fine-tuned 1.8 times as fast in bfloat16
#: and the zoo's 64-wide models 1.3 times as slowly (running page, "Training precision");
#: widths between were not measured
BF16_MIN_WIDTH = 256
#: the CPU flags of native bfloat16 arithmetic (Intel's AMX tiles, AVX512-BF16 on Intel and
#: AMD): where either is present, bfloat16 products run at several times the float32 rate
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


#: the environment variable that sets the default device (a sweep's workers inherit it)
ENV = "ANALYSIS_LIB_DEVICE"
#: the device :func:`set_default` chose (None: none was); read it, change it through
#: :func:`set_default` or :func:`default`
process_default: str | torch.device | None = None


@lru_cache(maxsize=1)
def torch_available() -> bool:
    """Whether PyTorch can be imported here (it is found without importing it)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # an import hook that refuses it, a broken entry
        return False


def require_torch(purpose: str) -> Any:
    """The ``torch`` module, or an :class:`ImportError` that says ``purpose`` needs PyTorch
    and how to install it.

    Parameters
    ----------
    purpose : str
        What needs torch, in words (``"device='cuda'"``, ``"the inn alignment"``).
    """
    if not torch_available():
        raise ImportError(f"{purpose} needs PyTorch, which is not installed here; install it "
                          f"with {INSTALL_TORCH} (the measures also run without it, on NumPy "
                          "on the CPU)")
    import torch

    return torch


def is_cpu(device: str | torch.device | None) -> bool:
    """Whether ``device`` names the CPU (``"cpu"`` or a CPU :class:`torch.device`), decided
    without importing torch. ``None`` is not the CPU here: it means the process default."""
    if device is None:
        return False
    if isinstance(device, str):
        return device.strip().lower() == "cpu"
    return getattr(device, "type", None) == "cpu"


def set_default(device: str | torch.device | None) -> None:
    """Make ``device`` what ``device=None`` means everywhere in this process (``None``
    restores the automatic choice). Also settable before start-up with the
    ``ANALYSIS_LIB_DEVICE`` environment variable; this call takes precedence."""
    global process_default
    if device is not None and not is_cpu(device):
        resolve(device)  # refuse a bad device now, not at first use
    process_default = device


@contextlib.contextmanager
def default(device: str | torch.device | None) -> Iterator[None]:
    """Run a block with ``device`` as the default (see :func:`set_default`)."""
    global process_default
    before = process_default
    set_default(device)
    try:
        yield
    finally:
        process_default = before


def resolve(device: str | torch.device | None = None) -> torch.device:
    """The :class:`torch.device` for ``device``. ``None`` is the process default
    (:func:`set_default`, else the ``ANALYSIS_LIB_DEVICE`` environment variable, else CUDA
    when available and the CPU otherwise).

    Raises
    ------
    ValueError
        An unknown device string, a GPU index this machine does not have, or a device type
        that torch here cannot use (CUDA without a CUDA build or GPU, MPS off Apple silicon);
        the message names the devices that are available.
    """
    if device is None:
        device = process_default if process_default is not None else (os.environ.get(ENV) or None)
    torch = require_torch("a device" if device is None else f"device={device!r}")
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = _parse(device)
    if dev.type == "cpu":
        return torch.device("cpu")
    if dev.type == "cuda":
        return _check_cuda(dev, device)
    if dev.type == "mps":
        if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise ValueError(f"device {device!r}: MPS (Apple silicon) is not available here; "
                             f"use one of {', '.join(available())}")
        return dev
    raise ValueError(f"device type {dev.type!r} is not supported; use 'cpu', 'cuda', "
                     f"'cuda:<index>' or 'mps' (available here: {', '.join(available())})")


def _parse(device: str | torch.device) -> torch.device:
    """A device string or :class:`torch.device` as a :class:`torch.device`."""
    import torch

    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise TypeError(f"device must be a string, a torch.device or None, got "
                        f"{type(device).__name__}")
    try:
        return torch.device(device.strip().lower())
    except RuntimeError as error:
        raise ValueError(f"unknown device {device!r}; use 'cpu', 'cuda', 'cuda:<index>' or "
                         f"'mps' (available here: {', '.join(available())})") from error


def _check_cuda(dev: torch.device, asked) -> torch.device:
    """``dev`` when this machine has that CUDA device; else an error naming what it has."""
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"device {asked!r}: this torch build or machine has no CUDA GPU "
                         f"(torch {torch.__version__}); use device='cpu' or None, or "
                         "install a CUDA build of torch on a machine with a GPU")
    count = torch.cuda.device_count()
    if dev.index is not None and dev.index >= count:
        raise ValueError(f"device {asked!r}: this machine has {count} CUDA device(s), "
                         f"cuda:0 to cuda:{count - 1}")
    return dev


def available() -> list[str]:
    """The devices torch can use on this machine, CPU first (only the CPU without torch)."""
    names = ["cpu"]
    if not torch_available():
        return names
    import torch

    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if hasattr(torch.backends, "mps") and torch.backends.mps.is_available():
        names.append("mps")
    return names


def check_precision(precision: str, device: torch.device) -> str:
    """Validate an extraction's forward-pass precision for a device: reduced precisions
    need a GPU (on the CPU the layers are extracted in float32, which the neuron-level
    measures need; training has its own rule, :func:`training_precision`)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "float32" and device.type == "cpu":
        raise ValueError(f"precision={precision!r} runs autocast on a GPU; on the CPU use "
                         "precision='float32' (or pass device='cuda')")
    return precision


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bfloat16 products natively: a CPU with one of
    :data:`NATIVE_BF16_FLAGS`, a GPU torch reports bfloat16 support for."""
    import torch

    if device.type == "cpu":
        from .machine import cpu_flags

        return any(flag in cpu_flags() for flag in NATIVE_BF16_FLAGS)
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return False


def training_precision(precision: str, device: torch.device, width: int | None = None) -> str:
    """The precision a training run on ``device`` computes in: ``precision`` itself when it
    is ``"float32"`` or ``"bfloat16"``; for ``"auto"``, ``"bfloat16"`` on a CPU that
    computes it natively (:func:`native_bf16`; emulated bfloat16 is slower than float32)
    for a model at least :data:`BF16_MIN_WIDTH` wide (``width``, its hidden size; None:
    wide enough), whose products are large enough to gain from it, and ``"float32"``
    elsewhere, a GPU included: the library's presets train 4 to 16
    examples a step, too few to keep a GPU's arithmetic busy, so a step waits on its
    kernel launches, and autocast adds a cast before each product (on an NVIDIA H200,
    float32 trained models of MiniLM's and of BERT-base's shape 1.2 and 1.4 times as fast
    as bfloat16 autocast; ``benchmarks/bench_train.py --device cuda``). Ask for
    ``"bfloat16"`` where larger batches fill the GPU."""
    if precision not in TRAINING_PRECISIONS:
        raise ValueError(f"a training precision is one of {TRAINING_PRECISIONS}, got "
                         f"{precision!r} (float16 training needs loss scaling, which the "
                         "library's loop does not do: use 'bfloat16')")
    if precision != "auto":
        return precision
    wide = width is None or width >= BF16_MIN_WIDTH
    return "bfloat16" if device.type == "cpu" and wide and native_bf16(device) else "float32"


def key(device: torch.device, precision: str = "float32") -> str:
    """The cache-key part for results computed on ``device`` in ``precision``: ``"cpu"``,
    ``"cuda"`` or ``"mps"``, with ``"-bfloat16"``/``"-float16"`` for reduced precision."""
    return device.type + ("" if precision == "float32" else f"-{precision}")


def key_parts(device: torch.device, precision: str = "float32") -> dict[str, str]:
    """The cache-key parts for results computed on ``device``: none for the CPU in float32
    (so those keys stay as they always were), else ``{"device": key(device, precision)}``."""
    where = key(device, precision)
    return {} if where == "cpu" else {"device": where}


@contextlib.contextmanager
def autocast(device: torch.device, precision: str = "float32") -> Iterator[None]:
    """Autocast a block to ``precision`` on ``device``; float32 runs the block unchanged."""
    if precision == "float32":
        yield
        return
    import torch

    with torch.autocast(device_type=device.type, dtype=getattr(torch, precision)):
        yield


def fork_rng(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """``torch.random.fork_rng`` over the CPU generator and, on a GPU, that GPU's: seeding
    inside the block leaves the caller's random state as it was."""
    import torch

    gpus = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    return torch.random.fork_rng(devices=gpus)


def fused_optimizer(device: str | torch.device) -> bool | None:
    """Whether an Adam or AdamW optimizer of parameters on ``device`` takes PyTorch's fused
    kernel: the same update in one pass over each parameter instead of one pass per
    operation (on the CPU several times faster for a model of MiniLM's size, where the
    optimizer step is a large part of a fine-tuning step; ``benchmarks/bench_finetune.py``).
    True on the CPU and CUDA, which have the kernel; None (PyTorch's default) elsewhere."""
    import torch

    return True if torch.device(device).type in ("cpu", "cuda") else None


def model_device(model: torch.nn.Module) -> torch.device:
    """The device a model's parameters are on (the CPU for a model without any)."""
    import torch

    for p in model.parameters():
        return p.device
    return torch.device("cpu")
