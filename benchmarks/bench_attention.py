"""Benchmark: the head-level attention measures (JS, Pearson, Frobenius) on each sentence's
own entries against the same formulas on maps padded to the longest sentence.

For synthetic layers shaped like the attention page's (``--sentences`` sentences whose
token counts are drawn like short tweets', 12 heads, every third layer causal), it times
every head pair of every pair of ``--layers`` layers under each method, once through the
library (:func:`analysis_lib.similarity.attention.head_similarity`, which reads the maps
unpadded) and once through a plain padded version of the same formulas (one array of heads
x all words x the longest sentence's columns, zeros beyond each row's own columns), each
preparing its layers once as the pages do, and prints both times, their ratio and the
largest difference between the two (each time the best of ``--repeat`` runs). The library
computes a layer pair's head rows on one thread per core; run it under ``taskset -c 0`` to
see one core's share.

    python benchmarks/bench_attention.py [--sentences 100] [--layers 6] [--heads 12]
                                         [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import xlogy

from analysis_lib.similarity.attention import METHODS, AttentionLayer, check_maps, head_similarity


def make_layers(sentences: int, count: int, heads: int, seed: int = 0) -> list[AttentionLayer]:
    """``count`` layers on the same ``sentences`` sentences of 4 to 45 tokens (most near
    20), every third one causal (exact zeros above the diagonal)."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.gamma(4.0, 5.0, sentences).astype(int) + 3, 4, 45)
    layers = []
    for i in range(count):
        maps = []
        for t in lengths:
            logits = 2.0 * rng.standard_normal((heads, t, t))
            if i % 3 == 2:
                logits[:, np.triu(np.ones((t, t), dtype=bool), 1)] = -np.inf
            P = np.exp(logits - logits.max(axis=-1, keepdims=True))
            maps.append(P / P.sum(axis=-1, keepdims=True))
        layers.append(AttentionLayer(check_maps(maps, f"layer {i}")))
    return layers


class Padded:
    """One layer padded to its longest sentence: (heads, words, longest columns), zeros
    beyond each row's own columns, with the per-layer terms each method reuses."""

    def __init__(self, layer: AttentionLayer) -> None:
        width = max(c for _, c in layer.shapes)
        self.P = np.zeros((layer.heads, sum(t for t, _ in layer.shapes), width))
        real = np.zeros(self.P.shape[1:], dtype=bool)
        row = 0
        for a in layer.maps:
            t, c = a.shape[1:]
            self.P[:, row:row + t, :c], real[row:row + t, :c] = a, True
            row += t
        self.heads = layer.heads
        self.t = np.array([t for t, _ in layer.shapes], dtype=np.float64)
        self.entropy = -xlogy(self.P, self.P).sum(axis=2)
        counts = real.sum(axis=1)
        Z = (self.P - (self.P.sum(axis=2) / counts)[..., None]) * real
        norm = np.sqrt((Z ** 2).sum(axis=2))
        self.ok = (norm > 1e-12) & (counts >= 2)
        self.Z = Z / np.where(self.ok, norm, 1.0)[..., None]


def padded_similarity(a: Padded, b: Padded, method: str) -> np.ndarray:
    """The three methods' formulas on padded maps: the plain baseline."""
    if method == "pearson":
        both = a.ok[:, None] & b.ok[None]
        corr = np.einsum("hwc,gwc->hgw", a.Z, b.Z)
        return np.where(both, corr, 0.0).sum(axis=2) / both.sum(axis=2)
    starts = np.r_[0, np.cumsum(a.t.astype(int))[:-1]]
    out = np.empty((a.heads, b.heads))
    for h in range(a.heads):
        if method == "js":
            M = (a.P[h][None] + b.P) / 2.0
            js = -xlogy(M, M).sum(axis=2) - (a.entropy[h][None] + b.entropy) / 2.0
            out[h] = 1.0 - np.clip(js, 0.0, None).mean(axis=1) / np.log(2.0)
        else:
            per_word = np.sum((a.P[h][None] - b.P) ** 2, axis=2)
            dist = np.sqrt(np.add.reduceat(per_word, starts, axis=1))
            out[h] = 1.0 - (dist / np.sqrt(2.0 * a.t)).mean(axis=1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    layers = make_layers(args.sentences, args.layers, args.heads)
    entries = sum(t * c for t, c in layers[0].shapes)
    longest = max(c for _, c in layers[0].shapes)
    words = sum(t for t, _ in layers[0].shapes)
    print(f"{args.sentences} sentences, {words} words, {args.layers} layers of {args.heads} "
          f"heads: {entries} entries per head, {words * longest} padded")
    pairs = [(i, j) for i in range(len(layers)) for j in range(i, len(layers))]
    print(f"{'method':<10} {'library s':>10} {'padded s':>10} {'ratio':>7} {'largest diff':>13}")
    for method in METHODS:
        library = baseline = np.inf
        for _ in range(args.repeat):  # each layer's own terms once, then every pair
            start = time.perf_counter()
            mine = [AttentionLayer(layer.maps) for layer in layers]
            fast = [head_similarity(mine[i], mine[j], method) for i, j in pairs]
            library = min(library, time.perf_counter() - start)
            start = time.perf_counter()
            flat = [Padded(layer) for layer in layers]
            plain = [padded_similarity(flat[i], flat[j], method) for i, j in pairs]
            baseline = min(baseline, time.perf_counter() - start)
        diff = max(float(np.abs(x - y).max()) for x, y in zip(fast, plain))
        print(f"{method:<10} {library:>10.2f} {baseline:>10.2f} {baseline / library:>6.2f}x "
              f"{diff:>13.1e}")


if __name__ == "__main__":
    main()
