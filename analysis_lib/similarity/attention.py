"""Attention-level similarity (Wu et al. 2020 §3.4-3.5, App. A.4).

A layer's attention is given as a list with one array per sentence, shape
(heads, t, c): row i is the attention distribution of word i over c columns (c = t, or more when
special tokens are kept as columns); rows sum to 1. The two layers compared must cover the same
sentences with the same shapes per sentence (heads may differ in number).

Head-level (localized) similarity, :func:`attention_similarity`: for every head of A, its best
match among the heads of B under a method, averaged over A's heads. Asymmetric.

* ``"js"``: 1 - Jensen-Shannon divergence between the two heads' distributions of each word,
  averaged over all words of all sentences. In bits (``base=2``, the paper) the divergence lies
  in [0, 1]; ``base=np.e`` (nats, as Wu et al.'s released code) lies in [0, ln 2].
* ``"pearson"``: Pearson correlation of the two distributions of each word, averaged over words.
  Rows of fewer than two entries or with no variation (e.g. the first word of a left-to-right
  model, which can only attend to itself) have no correlation and are left out.
* ``"frobenius"``: per sentence, the Frobenius norm of the difference of the two t x c maps,
  divided by its largest possible value ``sqrt(2 t)`` (each row differs by at most sqrt 2),
  averaged over sentences; the similarity is 1 minus that normalised distance, so 1 means
  identical maps and 0 the most different row-stochastic maps.

Distributed view, :func:`attention_representation`: the (word pairs x heads) matrix whose rows
are every (i, j) word pair of every sentence and whose columns are heads; feed it to any
representation measure (SVCCA, PWCCA, CKA). :data:`COMPARISONS` names Wu et al.'s six ways
of comparing two layers' attention, three of each view.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import xlogy

from ..runtime.machine import cores
from .core import digest, real_array

METHODS = ("js", "pearson", "frobenius")


def check_maps(A: Sequence[np.ndarray], name: str) -> list[np.ndarray]:
    if isinstance(A, np.ndarray) and A.ndim == 3:
        A = [A]
    if not isinstance(A, (list, tuple)) or not A:
        raise TypeError(f"{name} must be a non-empty list of per-sentence arrays "
                        "(heads x t x c)")
    out = []
    for s, a in enumerate(A):
        a = real_array(a, f"{name}[{s}]").astype(np.float64)
        if a.ndim != 3 or a.shape[1] > a.shape[2]:
            raise ValueError(f"{name}[{s}] must have shape (heads, t, c) with c >= t, "
                             f"got {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError(f"{name}[{s}] has NaN or infinite values")
        if (a < -1e-6).any() or np.abs(a.sum(axis=-1) - 1).max() > 1e-3:
            raise ValueError(f"{name}[{s}] rows must be probability distributions (non-negative,"
                             " summing to 1)")
        out.append(np.clip(a, 0.0, None))
    heads = {a.shape[0] for a in out}
    if len(heads) != 1:
        raise ValueError(f"{name} has different numbers of heads across sentences: {heads}")
    return out


@dataclass
class AttentionLayer:
    """One layer's attention, padded into (heads, words, columns) with per-layer work cached."""

    maps: list[np.ndarray]
    #: head-similarity matrices already computed against other layers, by (the other's
    #: digest, method, base), as ``head_similarity`` keeps them
    similarities: dict = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def _digest(self) -> bytes:
        return digest(*self.maps)

    def summary(self) -> bytes:
        """A digest of the maps (:class:`~.pairwise.Pair` orders a pair by it)."""
        return self._digest

    digest = summary

    @cached_property
    def shapes(self) -> list[tuple[int, int]]:
        return [a.shape[1:] for a in self.maps]

    @cached_property
    def heads(self) -> int:
        return self.maps[0].shape[0]

    @cached_property
    def packed(self) -> np.ndarray:
        """Every entry of every map, shape (heads, entries), sentence by sentence and row by
        row, with no padding (a short sentence costs its own words times columns, not the
        longest sentence's)."""
        return np.concatenate([a.reshape(a.shape[0], -1) for a in self.maps], axis=1)

    @cached_property
    def widths(self) -> np.ndarray:
        """How many columns each word's row has (one count per word, in order)."""
        return np.repeat([c for _, c in self.shapes], [t for t, _ in self.shapes])

    @cached_property
    def row_starts(self) -> np.ndarray:
        """Where each word's row starts in :attr:`packed`."""
        return np.r_[0, np.cumsum(self.widths)[:-1]]

    @cached_property
    def sentence_starts(self) -> np.ndarray:
        """Where each sentence's map starts in :attr:`packed`."""
        return np.r_[0, np.cumsum([t * c for t, c in self.shapes])[:-1]]

    def per_row(self, values: np.ndarray) -> np.ndarray:
        """Sums of ``values`` (shaped like :attr:`packed`, heads first) over each row."""
        return np.add.reduceat(values, self.row_starts, axis=-1)

    @cached_property
    def entropy(self) -> np.ndarray:
        """The Shannon entropy (in nats) of every row, shape (heads, total words)."""
        P = self.packed
        return -self.per_row(xlogy(P, P))

    @cached_property
    def centred_unit(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows centred over their columns and scaled to unit norm (shaped like
        :attr:`packed`); and which rows vary (heads, total words)."""
        P, widths = self.packed, self.widths
        Z = P - np.repeat(self.per_row(P) / widths, widths, axis=1)
        norm = np.sqrt(self.per_row(Z ** 2))
        ok = (norm > 1e-12) & (widths[None, :] >= 2)
        return Z / np.repeat(np.where(ok, norm, 1.0), widths, axis=1), ok


def _check_alignment(a: AttentionLayer, b: AttentionLayer) -> None:
    if a.shapes != b.shapes:
        raise ValueError("A and B must cover the same sentences with the same words and columns "
                         "per sentence (extract both models on one corpus with the same "
                         "special_tokens option)")


def head_similarity(a: AttentionLayer, b: AttentionLayer, method: str, base: float = 2.0
                    ) -> np.ndarray:
    """(heads_A x heads_B) similarity of every head pair under ``method``.

    Every method is symmetric, so a matrix is computed once per pair of layers and kept on
    the first layer (heads x heads floats): a layer-level measure and a search for each
    head's best match (:func:`best_matches`) share it."""
    _check_alignment(a, b)
    key = (b.digest(), method, float(base))
    if key in a.similarities:
        return a.similarities[key]
    mirrored = b.similarities.get((a.digest(), method, float(base)))
    if mirrored is not None:
        return mirrored.T
    out = _head_similarity(a, b, method, base)
    out.setflags(write=False)
    a.similarities[key] = out
    return out


def _head_similarity(a: AttentionLayer, b: AttentionLayer, method: str, base: float
                     ) -> np.ndarray:
    P, Q = a.packed, b.packed
    if method == "js":
        def row(h: int) -> np.ndarray:
            M = (P[h][None] + Q) / 2.0
            hm = -b.per_row(xlogy(M, M))  # 0 log 0 = 0
            js = hm - (a.entropy[h][None] + b.entropy) / 2.0  # (heads_B, words), nats
            return 1.0 - np.clip(js, 0.0, None).mean(axis=1) / np.log(base)
        return _by_head(row, a.heads)
    if method == "pearson":
        (Za, oka), (Zb, okb) = a.centred_unit, b.centred_unit
        both = oka[:, None, :] & okb[None, :, :]
        counts = both.sum(axis=2)
        if (counts == 0).any():
            raise ValueError("no word has a varying attention row in both heads; Pearson "
                             "similarity is undefined (sentences of one word?)")
        corr = _by_head(lambda h: b.per_row(Za[h][None] * Zb), a.heads)
        return np.where(both, corr, 0.0).sum(axis=2) / counts
    if method == "frobenius":
        # the differences themselves, not |P|^2 + |Q|^2 - 2 P.Q, which rounds identical
        # maps to a distance near 1e-8
        t = np.array([t for t, _ in a.shapes], dtype=np.float64)

        def distance(h: int) -> np.ndarray:
            squares = np.add.reduceat((P[h][None] - Q) ** 2, b.sentence_starts, axis=1)
            return 1.0 - (np.sqrt(squares) / np.sqrt(2.0 * t)).mean(axis=1)
        return _by_head(distance, a.heads)
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def _by_head(row: Callable[[int], np.ndarray], heads: int) -> np.ndarray:
    """``[row(h) for h in range(heads)]`` stacked, on a thread per core: NumPy's
    element-wise work releases the interpreter lock, and each head's row is computed on its
    own, so the result has the same bits however many threads run."""
    workers = min(heads, cores())
    if workers == 1:
        return np.stack([row(h) for h in range(heads)])
    with ThreadPoolExecutor(workers) as pool:
        return np.stack(list(pool.map(row, range(heads))))


#: what the attention measures take for a layer: one (heads, t, c) array per sentence, or an
#: :class:`AttentionLayer` holding them
AttentionInput = Sequence[np.ndarray] | AttentionLayer


def head_matches(A: AttentionInput, B: AttentionInput, method: str = "js", *,
                 base: float = 2.0) -> np.ndarray:
    """For each head of layer A, the similarity of its best-matching head in layer B (the
    values :func:`attention_similarity` averages). Arguments as there."""
    a = A if isinstance(A, AttentionLayer) else AttentionLayer(check_maps(A, "A"))
    b = B if isinstance(B, AttentionLayer) else AttentionLayer(check_maps(B, "B"))
    if base <= 1:
        raise ValueError(f"base must be > 1, got {base}")
    return head_similarity(a, b, method, base).max(axis=1)


def check_base(options) -> None:
    base = options.get("base", 2.0)
    if not base > 1:
        raise ValueError(f"base must be > 1, got {base}")


def attention_kernel(method: str):
    """The pair kernel of the attention measure of ``method``: every head pair's
    similarity, each head's best match averaged, in both directions."""
    def kernel(a: AttentionLayer, b: AttentionLayer, pair, options, directions):
        S = head_similarity(a, b, method, options.get("base", 2.0))
        return (float(S.max(axis=1).mean()) if directions[0] else None,
                float(S.max(axis=0).mean()) if directions[1] else None)
    return kernel


def attention_representation(A: AttentionInput) -> np.ndarray:
    """The distributed view of a layer (Wu et al. §3.5): a (word pairs x heads) matrix.

    Row ``(s, i, j)`` holds the attention of every head from word i to column j of sentence s,
    for all sentences in order, i over words and j over columns.
    """
    maps = A.maps if isinstance(A, AttentionLayer) else check_maps(A, "A")
    return np.concatenate([a.reshape(a.shape[0], -1).T for a in maps]).astype(np.float32)


def _visible(a: np.ndarray) -> np.ndarray:
    """The columns each row of one sentence's maps (heads x words x columns) can see: every
    column, or, where the layer never attends to a later word (a causal decoder), the words
    up to the row's own and the columns after the words."""
    t, c = a.shape[1:]
    later = np.triu(np.ones((t, t), dtype=bool), 1)
    seen = np.ones((t, c))
    if not a[:, :, :t][:, later].any():
        seen[:, :t][later] = 0.0
    return seen


def uniform_like(layer: AttentionLayer) -> AttentionLayer:
    """One head that attends evenly to every column each row can see (:func:`_visible`),
    on ``layer``'s sentences."""
    found = []
    for a in layer.maps:
        seen = _visible(a)
        found.append((seen / seen.sum(axis=1, keepdims=True))[None])
    return AttentionLayer(found)


def first_layer_matches(layers: Sequence[AttentionLayer], owners: Sequence[str],
                        numbers: Sequence[int], *, method: str = "js",
                        threshold: float = 0.9) -> pd.DataFrame:
    """For every head of every layer (``owners[k]`` names the model of ``layers[k]``,
    ``numbers[k]`` its layer number), its best-matching head in the first layer of the same
    model (the similarity under ``method``; a head of that first layer is not its own
    match) and whether it is a near-duplicate of it (similarity >= ``threshold``): a frame,
    one row per head. Wu et al. (§6) see such heads as vertical bands in the head-level
    heatmaps.

    A head whose attention is itself within ``threshold`` of the uniform distribution over
    each row's words (``to_uniform``, :func:`uniform_like`) is marked ``near_uniform`` and
    never counted as a near-duplicate: two such heads match each other without sharing any
    preference for particular words (a random model's heads are mostly of this kind)."""
    rows: list[dict[str, Any]] = []
    for model in dict.fromkeys(owners):
        mine = [k for k, owner in enumerate(owners) if owner == model]
        first = layers[mine[0]]
        for k in mine:
            S = head_similarity(layers[k], first, method).copy()
            if k == mine[0]:
                np.fill_diagonal(S, -np.inf)
            flat = head_similarity(layers[k], uniform_like(layers[k]), method)[:, 0]
            for h, value in enumerate(S.max(axis=1)):
                uniform = bool(flat[h] >= threshold)
                rows.append({"model": model, "layer": int(numbers[k]), "head": h,
                             "best_in_L1": float(value), "to_uniform": float(flat[h]),
                             "near_uniform": uniform,
                             "near_duplicate": bool(value >= threshold) and not uniform})
    return pd.DataFrame(rows)


def head_counts(matches: pd.DataFrame, column: str = "near_duplicate") -> pd.DataFrame:
    """From :func:`first_layer_matches`: the heads that are near-duplicates of a first-layer
    head (or, with ``column="near_uniform"``, near-uniform heads), counted per model (rows)
    and layer (columns, in order; empty where a model has no such layer). A first layer's
    heads are nobody's duplicates, so their column is left out of the duplicate counts."""
    later = matches[matches.layer > 1] if column == "near_duplicate" else matches
    counts = later.groupby(["model", "layer"], sort=False)[column].sum()
    table = counts.unstack("layer").astype("Int64")
    return table[sorted(table.columns)]


def best_matches(layers: Sequence[AttentionLayer], owners: Sequence[str],
                 labels: Sequence[str], *, method: str = "js") -> pd.DataFrame:
    """For every head of every layer, the most similar head in any layer of another model
    (``owners[k]`` names the model of ``layers[k]``; with one model, in any other layer),
    with the similarity: one record per head, with ``model``, ``layer`` (``labels[k]``),
    ``head``, ``match_model``, ``match_layer``, ``match_head`` and ``similarity`` (a
    frame, one row per head)."""
    records = []
    several = len(set(owners)) > 1
    for a, layer_a in enumerate(layers):
        best = np.full(layer_a.heads, -np.inf)
        where = [-1] * layer_a.heads
        heads_at = [-1] * layer_a.heads
        for b, layer_b in enumerate(layers):
            if not (owners[b] != owners[a] if several else b != a):
                continue
            S = head_similarity(layer_a, layer_b, method)
            g = S.argmax(axis=1)
            better = S[np.arange(layer_a.heads), g] > best
            for h in np.flatnonzero(better).tolist():
                best[h], where[h], heads_at[h] = S[h, g[h]], b, int(g[h])
        for h in range(layer_a.heads):
            found = where[h] >= 0
            records.append({"model": owners[a], "layer": labels[a], "head": h,
                            "match_model": owners[where[h]] if found else "",
                            "match_layer": labels[where[h]] if found else "",
                            "match_head": heads_at[h], "similarity": float(best[h])})
    return pd.DataFrame(records)


#: Wu et al.'s six ways to compare two layers' attention (§3.4-3.5), by the name a table
#: shows: a head-level measure on the maps themselves (``"attention"``, each head of one
#: layer matched to its best head in the other), or a representation measure on each
#: layer's (word pairs x heads) matrix of :func:`attention_representation`
#: (``"distributed"``); each maps to ``(kind, measure name)``
COMPARISONS = {"JS (head)": ("attention", "attention_js"),
               "Pearson (head)": ("attention", "attention_pearson"),
               "Frobenius (head)": ("attention", "attention_frobenius"),
               "SVCCA (distributed)": ("distributed", "svcca"),
               "PWCCA (distributed)": ("distributed", "pwcca"),
               "CKA (distributed)": ("distributed", "linear_cka")}
#: the names of :data:`COMPARISONS` that read the head-level maps, and those that read each
#: layer's (word pairs x heads) matrix
HEAD_LEVEL = tuple(name for name, (kind, _) in COMPARISONS.items() if kind == "attention")
DISTRIBUTED = tuple(name for name, (kind, _) in COMPARISONS.items() if kind == "distributed")
