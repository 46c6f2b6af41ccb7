"""How many threads torch uses for a block of work."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block. For small networks (a task head, an
    alignment flow) every product is tiny, and waking the other threads for each of them
    costs more than it saves; on a busy machine, twenty times more."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
