"""Benchmark: the grouped jackknife's leave-out matrices, from per-group moments against
recomputing the matrix on each subset.

For synthetic float32 layers shaped like the representation chapter's (3,000 word rows, six
models of seven layers each, widths 384 and 768; ``--layers`` and ``--n`` change it), it times
``leave_out_matrices`` (one pass over the rows, the per-fold moments) and
``leave_out_matrices_plain`` (the matrix recomputed without each fold, the definition) for
linear CKA and neuronsim with 10 folds, and prints each time, their ratio and the largest
difference between the two.

    python benchmarks/bench_jackknife.py [--n 3000] [--layers 42] [--folds 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from analysis_lib.similarity.leave_out import leave_out_matrices, leave_out_matrices_plain


def make_layers(n: int, count: int, seed: int = 0) -> list[np.ndarray]:
    """``count`` float32 layers over ``n`` rows sharing 20 signals, widths alternating 384
    and 768 like a mix of small and base models, each with its own offset."""
    rng = np.random.default_rng(seed)
    signals = rng.standard_normal((n, 20))
    layers = []
    for i in range(count):
        d = 384 if i % 2 == 0 else 768
        X = signals @ rng.standard_normal((20, d)) + rng.standard_normal((n, d))
        layers.append((X + 3 * rng.standard_normal(d)).astype(np.float32))
    return layers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--layers", type=int, default=42)
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    layers = make_layers(args.n, args.layers)
    groups = np.random.default_rng(1).integers(0, args.folds, args.n)
    print(f"{args.layers} layers x {args.n} rows, {args.folds} folds, "
          f"{args.threads} threads")
    print(f"{'measure':<12}{'moments s':>11}{'recompute s':>13}{'ratio':>8}{'max diff':>11}")
    with threadpool_limits(args.threads):
        for measure in ("linear_cka", "neuronsim"):
            start = time.perf_counter()
            fast = leave_out_matrices(layers, groups, measure)
            t_fast = time.perf_counter() - start
            start = time.perf_counter()
            plain = leave_out_matrices_plain(layers, groups, measure)
            t_plain = time.perf_counter() - start
            diff = max(float(np.abs(a - b).max()) for a, b in zip(fast, plain))
            print(f"{measure:<12}{t_fast:>11.1f}{t_plain:>13.1f}{t_plain / t_fast:>7.1f}x"
                  f"{diff:>11.1e}")


if __name__ == "__main__":
    main()
