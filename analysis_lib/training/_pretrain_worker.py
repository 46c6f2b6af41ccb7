"""Worker process of :func:`~analysis_lib.training.pretrain.pretrain_many`: trains one model
into the cache.

    python -m analysis_lib.training._pretrain_worker '{"name": ..., "config": {...}}' CACHE_ROOT

The settings are JSON (data, never code) with the fields of
:class:`~analysis_lib.training.pretrain.PretrainConfig`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from .pretrain import WORKER_PARENT_ENV, PretrainConfig, check_config, pretrain


def _end_with_parent(parent: int, every: float = 0.5) -> None:
    """End this process when its parent is gone (killed, or ended by a signal that gave it no
    time to stop its workers): the parent of an orphan becomes another process."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)  # the model being trained is left unpublished (atomic writes)

    threading.Thread(target=watch, daemon=True, name="end-with-parent").start()


def main(argv: list[str]) -> None:
    _end_with_parent(int(os.environ.get(WORKER_PARENT_ENV) or os.getppid()))
    if len(argv) != 2:
        raise SystemExit("usage: python -m analysis_lib.training._pretrain_worker SPEC ROOT")
    spec = json.loads(argv[0])
    settings = dict(spec["config"])
    settings["checkpoints"] = tuple(settings.get("checkpoints", ()))
    config = check_config(PretrainConfig(**settings))
    pretrain(config, cache_dir=argv[1], progress=False, name=str(spec["name"]), device="cpu")


if __name__ == "__main__":
    main(sys.argv[1:])
