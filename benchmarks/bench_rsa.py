"""Benchmark: RSA at Merchant et al.'s scale, the library's path against explicit matrices.

RSA with a cosine kernel and Pearson comparison (Merchant et al. 2020) between two float32
representations of n tokens x d neurons. The library computes it from d x d products and
never builds an n x n matrix; the plain path builds both cosine-similarity matrices and
correlates their upper triangles. Printed for each n: seconds and peak traced memory of both,
and their ratios; the plain path is skipped where its matrices would not fit comfortably
(its memory is then given as the size of one float64 n x n matrix).

Then a bootstrap's work: ``--resamples`` resamples of 500 sentences (the out-of-domain
chapter's sizes), RSA of each through one prepared ``WeightedRSA`` against ``rsa(X, Y,
weights=w)`` called afresh for each (which normalises both sides every time); both give the
same values.

    python benchmarks/bench_rsa.py [--d 384] [--sizes 5000 20000] [--plain-max 8000]
                                   [--resamples 40]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from analysis_lib import similarity as sim


def plain_rsa(X: np.ndarray, Y: np.ndarray) -> float:
    Xh = X / np.linalg.norm(X, axis=1, keepdims=True)
    Yh = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    iu = np.triu_indices(len(X), k=1)
    return float(np.corrcoef((Xh @ Xh.T)[iu], (Yh @ Yh.T)[iu])[0, 1])


def measure(fn, *args) -> tuple[float, float, float]:
    tracemalloc.start()
    start = time.perf_counter()
    value = fn(*args)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return value, seconds, peak / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=384)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--plain-max", type=int, default=8000)
    parser.add_argument("--resamples", type=int, default=40)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"RSA (cosine, Pearson), d = {args.d}, float32 inputs\n")
    print(f"{'n':>7} {'library s':>10} {'library MB':>11} {'plain s':>9} {'plain MB':>9} "
          f"{'time ratio':>11} {'memory ratio':>13}")
    warm = rng.standard_normal((10, args.d))
    sim.rsa(warm, warm + 1.0)  # the first call imports the measures' backend
    for n in args.sizes:
        X = rng.standard_normal((n, args.d), dtype=np.float32) + 1.0
        Y = X + rng.standard_normal((n, args.d), dtype=np.float32)
        value, t_lib, m_lib = measure(sim.rsa, X, Y)
        if n <= args.plain_max:
            plain, t_plain, m_plain = measure(plain_rsa, X, Y)
            assert abs(plain - value) < 1e-6, (plain, value)
            print(f"{n:>7} {t_lib:>10.2f} {m_lib:>11.0f} {t_plain:>9.2f} {m_plain:>9.0f} "
                  f"{t_plain / t_lib:>10.1f}x {m_plain / m_lib:>12.0f}x")
        else:
            dense = n * n * 8 / 1e6
            print(f"{n:>7} {t_lib:>10.2f} {m_lib:>11.0f} {'-':>9} {f'>{dense:.0f}':>9} "
                  f"{'-':>11} {f'>{dense / m_lib:.0f}x':>13}")
    resampling(rng, args.d, min(args.sizes), args.resamples)


def resampling(rng: np.random.Generator, d: int, n: int, count: int) -> None:
    X = rng.standard_normal((n, d), dtype=np.float32) + 1.0
    Y = X + rng.standard_normal((n, d), dtype=np.float32)
    sentence = np.sort(rng.integers(0, 500, n))
    draws = [sim.stats.group_weights(sentence, rng) for _ in range(count)]
    start = time.perf_counter()
    plain = [sim.rsa(X, Y, weights=w) for w in draws]
    t_plain = time.perf_counter() - start
    start = time.perf_counter()
    prepared = sim.WeightedRSA(X, Y)
    fast = [prepared(w) for w in draws]
    t_fast = time.perf_counter() - start
    assert np.allclose(plain, fast, atol=1e-12, rtol=0)
    print(f"\n{count} resamples of 500 sentences, n = {n}: afresh {t_plain:.2f} s, prepared "
          f"{t_fast:.2f} s ({t_plain / t_fast:.1f}x)")


if __name__ == "__main__":
    main()
