"""Benchmark: the book's linear probe (Newton-CG) against scikit-learn's default solver
(L-BFGS) at the same tolerance.

On synthetic standardised word rows shaped like the domains chapter's (4,000 training rows
of width 384, 17 and 43 classes with Zipfian frequencies, like the silver parts of speech
and dependency relations; ``--n``, ``--d`` change it), it fits
:func:`~analysis_lib.training.probes.logistic_probe` and the same regression by L-BFGS, and
prints each fit's time and iterations, their ratio, and each fit's largest coefficient
distance from the exact optimum (L-BFGS run to a tolerance of 1e-10, not timed).

Then the structural depth probe's fit
(:func:`~analysis_lib.training.probes.depth_probe_fit`, 100 L-BFGS-B iterations of rank
32, on the same rows with planted depths, and on twice as many rows, the size of the
distance probe's word pairs) against the same fit run as it comes, on every BLAS thread
the process has: SciPy's optimizer and NumPy's products then run in two OpenBLAS pools
whose idle threads spin, and each waits for the other's.

    python benchmarks/bench_probe.py [--n 4000] [--d 384] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from analysis_lib.training.probes import depth_loss, depth_probe_fit, logistic_probe


def word_rows(n: int, d: int, classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Standardised float32 rows whose labels a linear map reads in part: Zipfian label
    frequencies, a class signal in 30 directions, correlated noise."""
    rng = np.random.default_rng(seed)
    frequency = 1.0 / np.arange(1, classes + 1)
    y = rng.choice(classes, n, p=frequency / frequency.sum())
    means = rng.standard_normal((classes, 30))
    X = (means[y] + rng.standard_normal((n, 30))) @ rng.standard_normal((30, d))
    X += 2.0 * rng.standard_normal((n, 8)) @ rng.standard_normal((8, d)) \
        + rng.standard_normal((n, d))
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X.astype(np.float32), y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--d", type=int, default=384)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"{args.n} rows x {args.d}, C = 0.1, {args.threads} threads")
    print(f"{'classes':<9}{'newton-cg s':>12}{'iter':>6}{'lbfgs s':>9}{'iter':>6}"
          f"{'ratio':>8}{'newton err':>12}{'lbfgs err':>11}")
    with threadpool_limits(args.threads):
        for classes in (17, 43):
            X, y = word_rows(args.n, args.d, classes)
            exact = LogisticRegression(C=0.1, tol=1e-10, max_iter=20000).fit(X, y).coef_
            start = time.perf_counter()
            newton = logistic_probe(0.1, standardise=False).fit(X, y)
            t_newton = time.perf_counter() - start
            start = time.perf_counter()
            lbfgs = LogisticRegression(C=0.1, max_iter=1000).fit(X, y)
            t_lbfgs = time.perf_counter() - start
            print(f"{classes:<9}{t_newton:>12.2f}{newton.n_iter_[0]:>6}{t_lbfgs:>9.2f}"
                  f"{lbfgs.n_iter_[0]:>6}{t_lbfgs / t_newton:>7.1f}x"
                  f"{np.abs(newton.coef_ - exact).max():>12.1e}"
                  f"{np.abs(lbfgs.coef_ - exact).max():>11.1e}")
    structural(args.n, args.d, args.threads)


def structural(n: int, d: int, threads: int, rank: int = 32) -> None:
    """Time :func:`depth_probe_fit` against the same L-BFGS-B fit on ``threads`` threads
    of both BLAS pools."""
    print(f"\nstructural depth probe, rank {rank}, 100 iterations, {threads} threads")
    print(f"{'rows':<9}{'one thread s':>13}{'as it comes s':>15}{'ratio':>8}")
    for rows in (n, 2 * n):
        X, _ = word_rows(rows, d, 17)
        mapped = X @ np.random.default_rng(1).standard_normal((d, 4)) / np.sqrt(d)
        depth = np.round(np.einsum("ij,ij->i", mapped, mapped))
        depth_probe_fit(X[:200], depth[:200], rank=rank)  # imports and warm-up
        start = time.perf_counter()
        depth_probe_fit(X, depth, rank=rank)
        t_book = time.perf_counter() - start
        rng = np.random.default_rng(0)
        first = rng.standard_normal(rank * d) / np.sqrt(d)
        with threadpool_limits(threads):
            start = time.perf_counter()
            minimize(depth_loss, first, args=(X, depth.astype(np.float32), rank), jac=True,
                     method="L-BFGS-B", options={"maxiter": 100})
            t_plain = time.perf_counter() - start
        print(f"{rows:<9}{t_book:>13.2f}{t_plain:>15.2f}{t_plain / t_book:>7.1f}x")


if __name__ == "__main__":
    main()
