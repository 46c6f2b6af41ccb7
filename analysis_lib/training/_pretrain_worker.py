"""Worker process of :func:`~analysis_lib.training.pretrain.pretrain_many`: trains models into
the cache, one after another, as its parent sends them.

    python -m analysis_lib.training._pretrain_worker CACHE_ROOT

Each line the worker reads on its standard input is one model's settings as JSON (data,
never code): ``{"name": ..., "config": {...}}`` with the fields of
:class:`~analysis_lib.training.pretrain.PretrainConfig`. When the model is in the cache, the
worker writes its name on a line of its standard output and reads the next line; it ends at
the end of its input. A model that fails ends the worker with its error on standard error.

One worker trains many models so that it imports the library and tokenizes the training text
once, not once per model (about 7 s a model on a 2-core AMD EPYC): the weights are the same,
since each model is trained from its own seeds (:func:`~analysis_lib.training.pretrain.pretrain`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import TextIO

from .pretrain import WORKER_PARENT_ENV, PretrainConfig, check_config, pretrain


def _end_with_parent(parent: int, every: float = 0.5) -> None:
    """End this process when its parent is gone (killed, or ended by a signal that gave it no
    time to stop its workers): the parent of an orphan becomes another process."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)  # the model being trained is left unpublished (atomic writes)

    threading.Thread(target=watch, daemon=True, name="end-with-parent").start()


def _replies() -> TextIO:
    """The channel of the replies: this process's standard output, kept for them alone.
    Whatever else writes to standard output (a library's message, from Python or from C)
    goes to standard error instead, so it can never be read as a reply."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return replies


def main(argv: list[str]) -> None:
    _end_with_parent(int(os.environ.get(WORKER_PARENT_ENV) or os.getppid()))
    if len(argv) != 1:
        raise SystemExit("usage: python -m analysis_lib.training._pretrain_worker ROOT "
                         "(one model's settings per line of standard input)")
    replies = _replies()
    for line in sys.stdin:
        spec = json.loads(line)
        settings = dict(spec["config"])
        settings["checkpoints"] = tuple(settings.get("checkpoints", ()))
        config = check_config(PretrainConfig(**settings))
        pretrain(config, cache_dir=argv[0], progress=False, name=str(spec["name"]),
                 device="cpu")
        print(spec["name"], file=replies)


if __name__ == "__main__":
    main(sys.argv[1:])
