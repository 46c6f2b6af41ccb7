"""Worker process of :func:`~analysis_lib.training.grid.side_by_side`: trains runs of a
fine-tuning grid into the cache, one after the other.

    python -m analysis_lib.training._finetune_worker '{"grid": ..., "runs": [...], ...}' ROOT

The settings are JSON (data, never code): the grid's fields
(:meth:`~analysis_lib.training.grid.FinetuneGrid.spec`), each run's model, task and seed,
what the cache keeps and the changes to the grid's recipe.
"""

from __future__ import annotations

import json
import sys

from .grid import FinetuneGrid
from .workers import end_with_parent


def main(argv: list[str]) -> None:
    end_with_parent()
    if len(argv) != 2:
        raise SystemExit("usage: python -m analysis_lib.training._finetune_worker SPEC ROOT")
    spec = json.loads(argv[0])
    grid = FinetuneGrid.from_spec(spec["grid"])
    for model, task, seed in spec["runs"]:
        grid.train(str(model), str(task), int(seed), progress=False,
                   store=str(spec["store"]), cache_dir=argv[1], **dict(spec["changes"]))


if __name__ == "__main__":
    main(sys.argv[1:])
