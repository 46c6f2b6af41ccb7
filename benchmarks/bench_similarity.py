"""Benchmark: all-pairs layer matrices against a plain per-pair loop, in one run.

Input: 13 synthetic float32 "layers" of n stimuli x d neurons (default n=5000, d=768), each a
noisy random mixing of the previous one with a power-law spectrum, like the layers of a
transformer (neighbours similar, far layers less so).

Printed for each measure: seconds (best of two runs) for the full 13 x 13 matrix with
``similarity.pairwise``, seconds for a plain per-pair loop written here (textbook formulas that
redo all per-layer work for every pair), and their ratio. Plain loops that take minutes are
timed on a few pairs and scaled to the whole matrix (marked "est."). Also: the bare matrix
products linear CKA needs, the five-measure suite, the backends (per measure family, the
all-pairs matrix on NumPy and on torch against the default ``backend="auto"``, which times
both on this machine; and single small pairs), and peak memory.

    python benchmarks/bench_similarity.py [--n 5000] [--d 768] [--layers 13] [--pairs 4]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from scipy.spatial.distance import pdist

from analysis_lib import similarity as sim


def make_layers(n: int, d: int, n_layers: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    spectrum = (np.arange(1, d + 1) ** -0.8).astype(np.float32)
    X = rng.standard_normal((n, d), dtype=np.float32) * spectrum
    layers = [X + 3.0]
    for _ in range(n_layers - 1):
        mix = np.eye(d, dtype=np.float32) + 0.35 / d ** 0.5 * rng.standard_normal(
            (d, d), dtype=np.float32)
        X = np.tanh(X @ mix) + 0.05 * rng.standard_normal((n, d), dtype=np.float32) * spectrum
        layers.append(X + rng.standard_normal(d, dtype=np.float32))
    return [x.astype(np.float32, copy=False) for x in layers]


# --------------------------------------------------------------------------- plain per-pair code


def plain_cka(X, Y):
    X = X - X.mean(0)
    Y = Y - Y.mean(0)
    return np.linalg.norm(X.T @ Y) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))


def _plain_basis(A, variance=0.99):
    A = (A - A.mean(0)).astype(np.float64)
    U, s, _ = np.linalg.svd(A, full_matrices=False)
    frac = np.cumsum(s ** 2) / np.sum(s ** 2)
    return U[:, : int(np.searchsorted(frac, variance) + 1)], A


def plain_svcca(X, Y):
    Ux, _ = _plain_basis(X)
    Uy, _ = _plain_basis(Y)
    return np.linalg.svd(Ux.T @ Uy, compute_uv=False).mean()


def plain_pwcca(X, Y):
    Ux, Xc = _plain_basis(X)
    Uy, _ = _plain_basis(Y)
    u, rho, _ = np.linalg.svd(Ux.T @ Uy, full_matrices=False)
    alpha = np.abs((Ux @ u).T @ Xc).sum(axis=1)
    return (alpha / alpha.sum()) @ rho


def plain_neuronsim(X, Y):
    d = X.shape[1]
    R = np.corrcoef(X.T, Y.T)[:d, d:]
    return np.abs(R).max(axis=1).mean()


def plain_mixedsim(X, Y):
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    coef, *_ = np.linalg.lstsq(Yc, Xc, rcond=None)
    return np.mean(np.linalg.norm(Yc @ coef, axis=0) / np.linalg.norm(Xc, axis=0))


def plain_rsa(X, Y):
    a = 1 - pdist(X, "cosine")
    b = 1 - pdist(Y, "cosine")
    return np.corrcoef(a, b)[0, 1]


PLAIN = {"linear_cka": plain_cka, "svcca": plain_svcca, "pwcca": plain_pwcca,
         "neuronsim": plain_neuronsim, "mixedsim": plain_mixedsim, "rsa": plain_rsa}


def timed(f, *args, repeats: int = 2, **kwargs):
    """Best wall time of ``repeats`` calls (the first call also pays for fresh memory pages)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        value = f(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--d", type=int, default=768)
    parser.add_argument("--layers", type=int, default=13)
    parser.add_argument("--pairs", type=int, default=4,
                        help="pairs timed for plain loops that are too slow to run in full")
    parser.add_argument("--backends-only", action="store_true",
                        help="only compare the default backend with the explicit paths")
    parser.add_argument("--full-cka-loop", action="store_true",
                        help="run the plain CKA loop over every pair instead of estimating")
    args = parser.parse_args()
    layers = make_layers(args.n, args.d, args.layers)
    L = len(layers)
    n_pairs = L * L
    print(f"{L} layers, n={args.n}, d={args.d}, float32; {n_pairs} ordered pairs, "
          f"{L * (L + 1) // 2} unordered (with the diagonal)")
    if args.backends_only:
        backends(layers)
        return

    # bare products linear CKA needs: every X_i.T X_j once (symmetry), float32
    centred = [x - x.mean(0) for x in layers]

    def bare_products():
        for i in range(L):
            for j in range(i, L):
                centred[i].T @ centred[j]

    bare, _ = timed(bare_products)
    print(f"\nbare cross-products X_i.T X_j (i <= j), float32: {bare:.2f} s")

    rows = []
    for name in ("linear_cka", "svcca", "pwcca", "neuronsim", "mixedsim", "rsa"):
        t_lib, M = timed(sim.pairwise, layers, measure=name, progress=False)
        plain = PLAIN[name]
        full = name == "linear_cka" and args.full_cka_loop
        sample = [(i, j) for i in range(L) for j in range(L)]
        if not full:
            rng = np.random.default_rng(1)
            sample = [sample[k] for k in rng.choice(len(sample), args.pairs, replace=False)]
        start = time.perf_counter()
        for i, j in sample:
            value = plain(layers[i], layers[j])
            if name != "rsa" and abs(value - M[i, j]) > 1e-3:
                raise AssertionError(f"{name}[{i},{j}]: library {M[i, j]:.6f}, plain {value:.6f}")
        t_plain = (time.perf_counter() - start) * (n_pairs / len(sample))
        rows.append((name, t_lib, t_plain, "" if full else "est."))
    print(f"\n{'measure':<12}{'library s':>11}{'plain loop s':>15}{'':>6}{'ratio':>9}")
    for name, t_lib, t_plain, mark in rows:
        print(f"{name:<12}{t_lib:>11.2f}{t_plain:>15.1f}{mark:>6}{t_plain / t_lib:>8.1f}x")
    cka_time = rows[0][1]
    print(f"\nlinear CKA all-pairs / bare products: {cka_time / bare:.2f}x")

    suite = ["neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka"]
    t_suite, out = timed(sim.pairwise_suite, layers, measures=suite, progress=False)
    singles = sum(t for name, t, _, _ in rows if name in suite)
    print(f"five-measure suite (one pass): {t_suite:.2f} s; the five single-measure calls "
          f"together: {singles:.2f} s; plain loops together: "
          f"{sum(t for name, _, t, _ in rows if name in suite):.0f} s")
    for name in suite:
        single = sim.pairwise(layers[:3], measure=name, progress=False)
        gap = np.abs(sim.pairwise_suite(layers[:3], measures=suite, progress=False)[name] - single)
        assert gap.max() <= 1e-6, name
    backends(layers)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS): {peak:.0f} MB")


def backends(layers: list[np.ndarray], repeats: int = 3) -> None:
    """The default backend against NumPy's and torch's paths, per measure family, in this
    run: all-pairs matrices of the benchmark's layers, and 200 single pairs of 300 x 3 (where
    a call's fixed cost dominates). The paths are timed in turn, best of ``repeats``; the
    default's first call, which calibrates its choice, is timed apart."""
    from analysis_lib.runtime import device as devices
    from analysis_lib.runtime.machine import cpu_kind

    paths = ["auto", "numpy"] + (["torch"] if devices.torch_available() else [])
    print(f"\nbackends on {cpu_kind()} (default 'auto' against each explicit path; "
          f"best of {repeats}):")
    print(f"  {'measure':<11}{'calibrate s':>12}" + "".join(f"{p + ' s':>10}" for p in paths)
          + f"{'default/faster':>16}")
    worst = 0.0
    for name in ("linear_cka", "svcca", "pwcca", "rsa", "neuronsim", "mixedsim"):
        start = time.perf_counter()
        sim.pairwise(layers[:2], measure=name, progress=False)
        calibration = time.perf_counter() - start
        best = {p: float("inf") for p in paths}
        for _ in range(repeats):
            for path in paths:
                start = time.perf_counter()
                sim.pairwise(layers, measure=name, progress=False, backend=path)
                best[path] = min(best[path], time.perf_counter() - start)
        ratio = best["auto"] / min(best[p] for p in paths if p != "auto")
        worst = max(worst, ratio) if name in ("linear_cka", "svcca", "rsa") else worst
        print(f"  {name:<11}{calibration:>12.2f}" + "".join(f"{best[p]:>10.2f}" for p in paths)
              + f"{ratio:>15.2f}x")
    rng = np.random.default_rng(2)
    small = [rng.standard_normal((300, 3)) for _ in range(2)]
    single = {}
    for path in paths:
        single[path], _ = timed(lambda chosen: [sim.linear_cka(*small, backend=chosen)
                                                for _ in range(200)], path, repeats=repeats)
    print("  200 small pairs (linear CKA): " + ", ".join(
        f"{p} {single[p]:.3f} s" for p in paths) + f"; default/faster "
        f"{single['auto'] / min(single[p] for p in paths if p != 'auto'):.2f}x")
    print(f"  linear CKA, SVCCA, RSA: the default is within {100 * (worst - 1):+.0f}% of the "
          f"faster explicit path ({'within' if worst <= 1.10 else 'OUTSIDE'} the 10% goal)")
    print("  choices (similarity.backend_info()):")
    print(sim.backend_info().to_string(index=False))


if __name__ == "__main__":
    main()
