"""Worker process of :func:`~analysis_lib.training.pretrain.pretrain_many`: trains one model
into the cache.

    python -m analysis_lib.training._pretrain_worker '{"name": ..., "config": {...}}' CACHE_ROOT

The settings are JSON (data, never code) with the fields of
:class:`~analysis_lib.training.pretrain.PretrainConfig`.
"""

from __future__ import annotations

import json
import sys

from .pretrain import PretrainConfig, check_config, pretrain
from .workers import end_with_parent


def main(argv: list[str]) -> None:
    end_with_parent()
    if len(argv) != 2:
        raise SystemExit("usage: python -m analysis_lib.training._pretrain_worker SPEC ROOT")
    spec = json.loads(argv[0])
    settings = dict(spec["config"])
    settings["checkpoints"] = tuple(settings.get("checkpoints", ()))
    config = check_config(PretrainConfig(**settings))
    pretrain(config, cache_dir=argv[1], progress=False, name=str(spec["name"]), device="cpu")


if __name__ == "__main__":
    main(sys.argv[1:])
