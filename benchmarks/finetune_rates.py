"""The learning rates the ``cpu`` fine-tuning preset was chosen from, measured.

Fine-tunes a profile's first grid model at each rate of
``analysis_lib.studies.RATES`` on each of its tasks (its first seed, everything
else the profile's grid), trains the runs the cache does not hold, and prints validation and
test accuracy per rate beside the tasks' majority baseline. The running page's table reads
the same runs from the cache when the book is built.

    python benchmarks/finetune_rates.py [--profile default]
"""

from __future__ import annotations

import argparse
import time

from analysis_lib.book.builder import load_profile
from analysis_lib.training.grid import FinetuneGrid, rate_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="default")
    args = parser.parse_args()
    grid = FinetuneGrid.from_profile(load_profile(args.profile))
    start = time.perf_counter()
    frame = rate_table(grid, train=True)
    seconds = time.perf_counter() - start
    majority = {t: grid.task(t).majority_baseline("test") for t in grid.tasks}
    print(f"{grid.models[0]}, {grid.n_train} examples, {grid.epochs:g} epochs, seed "
          f"{grid.seeds[0]} ({seconds:.0f} s, runs already cached included)\n")
    print(frame.assign(majority=frame.task.map(majority)).round(3).to_string(index=False))
    mean = frame.groupby("learning rate").validation.mean()
    print(f"\nbest mean validation accuracy over the tasks: {mean.idxmax():g} "
          f"({mean.max():.3f}; the next best {mean.drop(mean.idxmax()).max():.3f})")


if __name__ == "__main__":
    main()
