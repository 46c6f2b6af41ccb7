"""How many threads torch uses for a block of work."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from .machine import cores


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run torch on ``count`` threads inside the block, and set the caller's count back
    afterwards. Training on the CPU runs at a fixed count: a product's result depends on how
    it is split between threads, so weights trained at a free count would differ between
    machines with different numbers of cores under the same cache key."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def one_thread() -> contextlib.AbstractContextManager[None]:
    """Run torch on one thread inside the block. For small networks (a task head, an
    alignment flow) every product is tiny, and waking the other threads for each of them
    costs more than it saves; on a busy machine, twenty times more."""
    return torch_threads(1)


def usable_cores() -> int:
    """The CPU cores this process may run on (:func:`analysis_lib.runtime.machine.cores`)."""
    return cores()
