"""Benchmark: the five-measure suite against the bare cross-products, at several thread counts.

For 13 synthetic float32 layers of 5,000 x 768 (``bench_similarity.make_layers``) it times, at
each thread count (2 and the most this machine has, or ``--threads``):

* the bare cross-products ``X_i.T @ X_j`` of every unordered pair (centred layers, float32),
  the floor any all-pairs measure pays;
* ``pairwise_suite`` with neuronsim, mixedsim, SVCCA, PWCCA and linear CKA in the paper rule
  (the defaults) and in the released code's variant (``standardize=True, cut="below"``,
  Wu et al.'s numbers);

on the torch path and the NumPy path, best of two runs each, and prints every
time with its ratio to the bare products of the same library. Under each thread count it also
times the work of the paper rule that no implementation shares with the products (the
layers' factorisations, mixedsim's projections, SVCCA/PWCCA's per-pair work), the part of
the ratio above 1 that is not overhead. On a GPU (``--device cuda``) it
also times 25 layers x 100,000 x 1,024 with linear CKA, SVCCA and neuronsim against plain
torch cross-products.

    python benchmarks/bench_suite.py [--threads 2 16] [--n 5000] [--d 768] [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(__file__))
from bench_similarity import make_layers  # noqa: E402

from analysis_lib import similarity as sim  # noqa: E402
from analysis_lib.runtime.device import resolve  # noqa: E402
from analysis_lib.similarity import _backend  # noqa: E402

SUITE = ["neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka"]
VARIANTS = {"paper rule": {}, "released code": {"standardize": True, "cut": "below"}}


def best(f, repeats: int = 2, sync=None) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        if sync:
            sync()
        times.append(time.perf_counter() - start)
    return min(times)


def bare_products(centred, sync=None):
    def run():
        for i in range(len(centred)):
            for j in range(i, len(centred)):
                centred[i].T @ centred[j]
    return run


def cpu_table(layers, threads: list[int]) -> None:
    centred_np = [x - x.mean(0) for x in layers]
    centred_t = [torch.from_numpy(x) for x in centred_np]
    print(f"{'threads':>7} {'path':>6} {'bare s':>7} "
          + " ".join(f"{name + ' s':>16} {'ratio':>6}" for name in VARIANTS))
    for count in threads:
        torch.set_num_threads(count)
        with threadpool_limits(limits=count):
            for path, centred in (("torch", centred_t), ("numpy", centred_np)):
                bare = best(bare_products(centred))
                row = f"{count:>7} {path:>6} {bare:>7.2f} "
                for options in VARIANTS.values():
                    t = best(lambda options=options, path=path: sim.pairwise_suite(
                        layers, measures=SUITE, progress=False, device="cpu", backend=path,
                        **options))
                    row += f"{t:>16.2f} {t / bare:>5.2f}x "
                print(row, flush=True)
            eig, proj, cca = paper_rule_floor(layers)
            print(f"{'':>7} {'':>6} the paper rule's own work beyond the products: "
                  f"factorisations of the layers {eig:.2f} s ({eig / bare:.2f}x), mixedsim's "
                  f"projections {proj:.2f} s ({proj / bare:.2f}x), SVCCA/PWCCA per pair "
                  f"{cca:.2f} s ({cca / bare:.2f}x); with the products "
                  f"{1 + (eig + proj + cca) / bare:.2f}x", flush=True)


def paper_rule_floor(layers) -> tuple[float, float, float]:
    """Seconds for the work the paper-rule suite cannot share with the cross-products, done
    with the library's own pieces on the torch path:

    * the factorisations of the layers: the certificate and Cholesky factor of every
      z-scored ``G`` (mixedsim's span), and the eigendecompositions of every ``G`` (SVCCA's
      and PWCCA's principal directions, only the kept ones formed) and of the z-scored
      ``G`` the certificate refuses, with the QR factorisation that makes its span basis
      triangular;
    * mixedsim's ``C @ W`` for both directions of every pair (d x d times a triangular
      d x r, float32, block by block);
    * SVCCA/PWCCA's per-pair work: ``T = Wa' C Wb``, its SVD (the decompositions of a row
      side by side) and PWCCA's weights for both directions.
    """
    from analysis_lib.similarity import kernels as m
    from analysis_lib.similarity.core import LayerStats, span_sq_norms
    from analysis_lib.similarity.pairwise import LAYER_QUANTITIES

    backend = _backend.get("cpu", "torch")

    def stats():
        out = [LayerStats(x, backend=backend) for x in layers]
        for s in out:
            _ = s.G, s.standardized()
        return out

    def factorise(S):
        for quantity in ("principal", "span"):  # what SVCCA/PWCCA and mixedsim declare
            LAYER_QUANTITIES[quantity](S, S, True, {})
        for s in S:
            s.span_whitener(np.float32)

    eig = min(_timed(factorise, stats()) for _ in range(2))
    S = stats()
    factorise(S)
    n = len(S)
    rows = {i: [(S[i], S[j], S[i].Xc.T @ S[j].Xc) for j in range(i + 1, n)]
            for i in range(n)}
    proj = best(lambda: [(span_sq_norms(C, b), span_sq_norms(C.T, a))
                         for i in rows for a, b, C in rows[i]])

    def cca():
        for i in rows:
            for (a, b, _), (u, rho, vt, ka, kb) in zip(rows[i], m.canonical_svds(
                    rows[i], 0.99, "reach")):
                m.pw_weights(a, ka, u, rho), m.pw_weights(b, kb, vt.T, rho)
    return eig, proj, best(cca)


def _timed(f, *args) -> float:
    start = time.perf_counter()
    f(*args)
    return time.perf_counter() - start


def gpu_table(device: str, n: int, d: int, n_layers: int) -> None:
    dev = resolve(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else None
    rng = np.random.default_rng(0)
    base = rng.standard_normal((n, d), dtype=np.float32)
    layers = [base + 0.5 * rng.standard_normal((n, d), dtype=np.float32)
              for _ in range(n_layers)]
    on_dev = [torch.from_numpy(x).to(dev) for x in layers]
    centred = [x - x.mean(0) for x in on_dev]
    if sync:
        sync()
    bare = best(bare_products(centred), sync=sync)
    measures = ["linear_cka", "svcca", "neuronsim"]
    t = best(lambda: sim.pairwise_suite(layers, measures=measures, progress=False,
                                        device=dev), repeats=2, sync=sync)
    print(f"\n{device}: {n_layers} layers x {n:,} x {d:,} float32, {', '.join(measures)}: "
          f"{t:.2f} s (host arrays in, NumPy out); bare cross-products on the device "
          f"{bare:.2f} s ({t / bare:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--d", type=int, default=768)
    parser.add_argument("--layers", type=int, default=13)
    parser.add_argument("--threads", type=int, nargs="*", default=None)
    parser.add_argument("--device", default=None, help="also run the GPU table on this device")
    parser.add_argument("--gpu-n", type=int, default=100_000)
    parser.add_argument("--gpu-d", type=int, default=1024)
    parser.add_argument("--gpu-layers", type=int, default=25)
    args = parser.parse_args()
    most = os.cpu_count() or 1
    threads = args.threads or sorted({min(2, most), most})
    layers = make_layers(args.n, args.d, args.layers)
    print(f"{args.layers} layers x {args.n} x {args.d} float32; five measures "
          f"({', '.join(SUITE)}); {most} CPU threads on this machine; torch {torch.__version__}")
    cpu_table(layers, threads)
    if args.device:
        gpu_table(args.device, args.gpu_n, args.gpu_d, args.gpu_layers)


if __name__ == "__main__":
    main()
