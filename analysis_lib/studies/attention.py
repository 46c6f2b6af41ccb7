"""Attention heads of a collection of models on the same sentences (Wu et al. 2020 §3.4-3.5).

:func:`collect` extracts word-level attention maps of every layer of every model;
:func:`distributed` turns each layer into its (word pairs x heads) matrix;
:func:`redundancy` finds, for every head, its best match among the first layer's heads;
:func:`best_matches` and :func:`explorer_frame` feed the attention explorer of
:mod:`analysis_lib.book.plots`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..claims.papers.wu import DISTRIBUTED, HEAD_LEVEL, METHODS, rank_overlap
from ..data.corpora import Corpus
from ..extract import NO_SENTENCES, SENTENCES_ONLY
from ..layers import LayerCollection, LayerTable, spread_layers
from ..similarity import AttentionLayer, attention_representation, pairwise_suite
from ..similarity.attention import head_similarity
from . import extract_each


@dataclass
class AttentionCollection(LayerCollection):
    """Attention of every layer of several models on the same sentences.

    ``layers[k]`` is an :class:`AttentionLayer` (per-sentence heads x words x words maps) and
    row ``k`` of ``table`` (a :class:`~analysis_lib.layers.LayerTable` of kind ``attention``,
    layers ``1..L``) says which model and layer it is.
    """

    table: LayerTable
    layers: list[AttentionLayer]
    sentences: list[list[str]]


def collect(models: Sequence[str], corpus: Corpus, *,
            model_options: Mapping[str, Any] | None = None, special_tokens: str = "drop",
            layers_per_model: int | None = None, progress: bool = True
            ) -> AttentionCollection:
    """Word-level attention of every layer of every model (special-token columns dropped and
    rows renormalised by default, so every model's maps have the same shape). With
    ``layers_per_model`` a deep model keeps that many attention layers spread evenly from
    its first to its last (:func:`~analysis_lib.layers.spread_layers`)."""
    layers, tables = [], []
    for name, loaded, result in extract_each(models, corpus, model_options=model_options,
                                             progress=progress, attention=True,
                                             word_rows=SENTENCES_ONLY,
                                             sentences=NO_SENTENCES,
                                             special_tokens=special_tokens):
        if result.n_truncated:
            raise ValueError(f"{result.n_truncated} sentences were cut for {name}; use shorter "
                             "sentences so that every model sees every word")
        info = loaded.info
        kept = spread_layers(info.n_attention_layers, layers_per_model, first=1)
        tables.append(LayerTable.for_model(name, info.family, info.pretrained,
                                           info.n_attention_layers, kind="attention",
                                           layers=kept))
        layers += [AttentionLayer(result.attention_layer(k)) for k in kept]
    return AttentionCollection(LayerTable.concat(tables), layers,
                               [list(s) for s in corpus.sentences])


def distributed(collection: AttentionCollection) -> list[np.ndarray]:
    """Every layer as its (word pairs x heads) matrix, for the representation measures."""
    return [attention_representation(layer) for layer in collection.layers]


def redundancy(collection: AttentionCollection, *, method: str = "js",
               threshold: float = 0.9) -> pd.DataFrame:
    """For every head of every layer kept (``layer`` = 1..L), its best-matching head in the
    first layer of the same model (the similarity under ``method``) and whether it is a
    near-duplicate of it (similarity >= ``threshold``). Wu et al. (§6) see such heads as
    vertical bands in the head-level heatmaps.

    A head whose attention is itself within ``threshold`` of the uniform distribution over
    each row's words (``to_uniform``) is marked ``near_uniform`` and never counted as a
    near-duplicate: two such heads match each other without sharing any preference for
    particular words (a random model's heads are mostly of this kind)."""
    rows = []
    for model in collection.models:
        layers = collection.of(model)
        numbers = collection.table.frame["layer"].to_numpy()[collection.table.rows_of(model)]
        for k, layer in enumerate(layers):
            S = head_similarity(layer, layers[0], method).copy()
            if k == 0:
                np.fill_diagonal(S, -np.inf)  # a head of layer 1 is not its own match
            flat = head_similarity(layer, uniform_like(layer), method)[:, 0]
            for h, value in enumerate(S.max(axis=1)):
                uniform = bool(flat[h] >= threshold)
                rows.append({"model": model, "layer": int(numbers[k]), "head": h,
                             "best_in_L1": float(value), "to_uniform": float(flat[h]),
                             "near_uniform": uniform,
                             "near_duplicate": bool(value >= threshold) and not uniform})
    return pd.DataFrame(rows)


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


def method_matrices(layers: Sequence[AttentionLayer], *, progress: bool = False
                    ) -> dict[str, np.ndarray]:
    """Every method of :data:`~analysis_lib.claims.papers.wu.METHODS` between every two of
    ``layers``: one matrix each."""
    heads = [METHODS[name][1] for name in HEAD_LEVEL]
    flat = [METHODS[name][1] for name in DISTRIBUTED]
    found = {**pairwise_suite(list(layers), measures=heads, progress=progress),
             **pairwise_suite([attention_representation(layer) for layer in layers],
                              measures=flat, progress=progress)}
    return {name: found[measure] for name, (_, measure) in METHODS.items()}


def best_matches(collection: AttentionCollection, *, method: str = "js") -> pd.DataFrame:
    """For every head, the most similar head in any layer of the *other* models (of other
    layers of the same model when there is one model), with the similarity.

    Columns: ``model``, ``layer`` (the display label), ``head``, ``match_model``,
    ``match_layer`` (label), ``match_head``, ``similarity``.
    """
    records = []
    owners, labels = collection.owners, collection.labels
    for a, layer_a in enumerate(collection.layers):
        best = np.full(layer_a.heads, -np.inf)
        where = [-1] * layer_a.heads
        heads_at = [-1] * layer_a.heads
        for b, layer_b in enumerate(collection.layers):
            other = owners[b] != owners[a] if len(collection.models) > 1 else b != a
            if not other:
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


def explorer_sentences(collection: AttentionCollection, count: int, *, min_words: int = 4,
                       max_words: int = 12) -> list[int]:
    """The ``count`` shortest sentences with ``min_words`` to ``max_words`` words (the
    explorer's page holds every head's map of each, so short sentences keep it small)."""
    lengths = np.array([len(s) for s in collection.sentences])
    fits = np.flatnonzero((lengths >= min_words) & (lengths <= max_words))
    if not fits.size:
        fits = np.arange(len(lengths))
    return [int(i) for i in fits[np.argsort(lengths[fits], kind="stable")][:count]]


def explorer_frame(collection: AttentionCollection, matches: pd.DataFrame,
                   sentences: Sequence[int]) -> pd.DataFrame:
    """Compact table for the attention explorer: one row per chosen sentence, layer, head and
    panel (``"chosen"``, or ``"best match"`` for the head's best match), holding the
    sentence's words and the word x word map flattened row by row (``weights``, rounded to
    3 decimals); the chart unpacks only the map on show."""
    index = {label: k for k, label in enumerate(collection.labels)}
    records = []
    for s in sentences:
        words = [f"{k + 1} {w}" for k, w in enumerate(collection.sentences[s])]
        n = len(words)
        for row in matches.itertuples():
            panels = [("chosen", row.layer, row.head, f"{row.layer} head {row.head}")]
            if row.match_layer:
                panels.append(("best match", row.match_layer, row.match_head,
                               f"{row.match_layer} head {row.match_head} "
                               f"(similarity {row.similarity:.2f})"))
            for panel, layer, head, source in panels:
                weights = collection.layers[index[layer]].maps[s][head][:, :n]
                records.append({"sentence": int(s), "layer": row.layer, "head": int(row.head),
                                "panel": panel, "source": source, "n": n, "words": words,
                                "weights": np.round(weights.ravel(), 3).tolist(),
                                "cell": list(range(n * n))})
    return pd.DataFrame(records)


def localized_vs_distributed(methods: Mapping[str, np.ndarray], collection: AttentionCollection
                             ) -> pd.DataFrame:
    """Mean similarity between layers of different models and between different layers of
    one model, for every method's matrix (a row per method), and ``overlap``: the method's
    :func:`~analysis_lib.claims.papers.wu.rank_overlap` of the first cells with the second."""
    same = collection.table.same_model()
    across, within = ~same, same & ~np.eye(len(same), dtype=bool)
    return pd.DataFrame({name: {"across models": M[across].mean() if across.any() else np.nan,
                                "within a model": M[within].mean() if within.any() else np.nan,
                                "overlap": rank_overlap(M[across], M[within])}
                         for name, M in methods.items()}).T


def duplicate_counts(red: pd.DataFrame, column: str = "near_duplicate") -> pd.DataFrame:
    """Near-duplicates of a first-layer head (or, with ``column="near_uniform"``, near-uniform
    heads), per model (rows) and layer (columns, in order; empty where a model has no such
    layer or the layer was not kept)."""
    later = red[red.layer > 1] if column == "near_duplicate" else red
    counts = later.groupby(["model", "layer"], sort=False)[column].sum()
    table = counts.unstack("layer").astype("Int64")
    return table[sorted(table.columns)]
