"""Keeping library chatter out of a notebook's output."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def quiet_transformers():
    """Keep transformers' load report (e.g. unused task-head weights) and progress bars out
    of the output for the duration of the block; the previous settings come back after."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
