"""Benchmark: one sweep grid in this process against the same grid on a Dask LocalCluster.

A grid of random models x seeds x measures (default: 2 x 2 x 2, tiny models, the test
suite's grid; ``--big`` for 3 models x 3 seeds at the chapters' model size) runs three times
from empty caches: in this process (one unit after another), on a LocalCluster of
``--workers`` processes (cluster start included), and again on the cluster with the cache
warm. Printed: seconds of each, the ratio to the in-process run, units computed, and whether
the in-process and cluster tables hold identical numbers.

    python benchmarks/bench_sweep.py [--workers 2] [--big]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis_lib import sweep

ORDER = ["model_a", "seed_a", "model_b", "seed_b", "measure", "layer_a", "layer_b"]


def grid(big: bool) -> dict:
    if big:
        return {"name": "bench-big", "corpus": "tweets", "n_sentences": 300,
                "models": ["random:bert", "random:gpt2", "random:roberta"],
                "model_options": {"layers": 6, "hidden": 384, "heads": 12},
                "seeds": [0, 1, 2], "measures": ["linear_cka", "svcca"], "max_words": 2000}
    return {"name": "bench-small", "corpus": "tweets", "n_sentences": 24,
            "models": ["random:bert", "random:gpt2"],
            "model_options": {"layers": 2, "hidden": 32, "heads": 2, "vocab_size": 500},
            "seeds": [0, 1], "measures": ["linear_cka", "neuronsim"], "max_words": 150}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--big", action="store_true")
    args = parser.parse_args()
    spec = sweep.load_spec(grid(args.big))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        here = sweep.run_sweep(spec, cache_dir=tmp / "here", progress=False)
        t_here = time.perf_counter() - start
        start = time.perf_counter()
        dask = sweep.run_sweep(spec, workers=args.workers, cache_dir=tmp / "dask",
                               progress=False)
        t_dask = time.perf_counter() - start
        start = time.perf_counter()
        again = sweep.run_sweep(spec, workers=args.workers, cache_dir=tmp / "dask",
                                progress=False)
        t_again = time.perf_counter() - start
    a = here.table.sort_values(ORDER)["value"].to_numpy()
    b = dask.table.sort_values(ORDER)["value"].to_numpy()
    print(f"grid {spec.name}: {len(here.units)} units, {len(here.table)} result rows")
    print(f"{'run':<34}{'seconds':>9}{'ratio':>8}{'computed':>10}")
    for name, t, r in [("in this process", t_here, here),
                       (f"LocalCluster, {args.workers} workers (cold)", t_dask, dask),
                       (f"LocalCluster, {args.workers} workers (rerun)", t_again, again)]:
        print(f"{name:<34}{t:>9.1f}{t / t_here:>8.2f}{r.n_computed:>10}")
    print(f"identical numbers in-process and on the cluster: {np.array_equal(a, b)}")


if __name__ == "__main__":
    main()
