"""Attention heads of a collection of models on the same sentences (Wu et al. 2020 §3.4-3.5).

:func:`collect` extracts word-level attention maps of every layer of every model;
:func:`distributed` turns each layer into its (word pairs x heads) matrix;
:func:`redundancy` finds, for every head, its best match among the first layer's heads;
:func:`best_matches` and :func:`explorer_frame` feed the attention explorer of
:mod:`analysis_lib.plots`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .corpora import Corpus
from .extract import extract
from .models import load
from .similarity import AttentionLayer, attention_representation
from .similarity.attention import head_similarity


@dataclass
class AttentionCollection:
    """Attention of every layer of several models on the same sentences.

    ``layers[k]`` is an :class:`AttentionLayer` (per-sentence heads x words x words maps);
    ``labels[k]`` is ``"model:L3"`` and ``owners[k]`` the model.
    """

    models: list[str]
    layers: list[AttentionLayer]
    labels: list[str]
    owners: list[str]
    sentences: list[list[str]]

    def of(self, model: str) -> list[AttentionLayer]:
        return [x for x, o in zip(self.layers, self.owners) if o == model]


def collect(models: Sequence[str], corpus: Corpus, *,
            model_options: Mapping[str, Any] | None = None, special_tokens: str = "drop",
            progress: bool = True) -> AttentionCollection:
    """Word-level attention of every layer of every model (special-token columns dropped and
    rows renormalised by default, so every model's maps have the same shape)."""
    if not models:
        raise ValueError("the collection needs at least one model")
    options = dict(model_options or {})
    layers, labels, owners = [], [], []
    for name in models:
        loaded = load(name, **(options if name.startswith("random:") else {}))
        result = extract(loaded, corpus, attention=True, special_tokens=special_tokens,
                         progress=progress)
        if result.n_truncated:
            raise ValueError(f"{result.n_truncated} sentences were cut for {name}; use shorter "
                             "sentences so that every model sees every word")
        for k in range(loaded.info.n_attention_layers):
            layers.append(AttentionLayer(result.attention_layer(k)))
            labels.append(f"{name}:L{k + 1}")
            owners.append(name)
    return AttentionCollection(list(models), layers, labels, owners,
                               [list(s) for s in corpus.sentences])


def distributed(collection: AttentionCollection) -> list[np.ndarray]:
    """Every layer as its (word pairs x heads) matrix, for the representation measures."""
    return [attention_representation(layer) for layer in collection.layers]


def redundancy(collection: AttentionCollection, *, method: str = "js",
               threshold: float = 0.9) -> pd.DataFrame:
    """For every head of every layer, its best-matching head in the first layer of the same
    model (the similarity under ``method``) and whether it is a near-duplicate of it
    (similarity >= ``threshold``). Wu et al. (§6) see such heads as vertical bands in the
    head-level heatmaps."""
    rows = []
    for model in collection.models:
        layers = collection.of(model)
        for k, layer in enumerate(layers):
            S = head_similarity(layer, layers[0], method)
            if k == 0:
                np.fill_diagonal(S, -np.inf)  # a head of layer 1 is not its own match
            best = S.max(axis=1)
            for h, value in enumerate(best):
                rows.append({"model": model, "layer": f"L{k + 1}", "head": h,
                             "best_in_L1": float(value),
                             "near_duplicate": bool(value >= threshold)})
    return pd.DataFrame(rows)


def best_matches(collection: AttentionCollection, *, method: str = "js") -> pd.DataFrame:
    """For every head, the most similar head in any layer of the *other* models (of other
    layers of the same model when there is one model), with the similarity."""
    records = []
    for a, (layer_a, owner_a, label_a) in enumerate(zip(collection.layers, collection.owners,
                                                        collection.labels)):
        best = np.full(layer_a.heads, -np.inf)
        where = [("", -1)] * layer_a.heads
        for b, (layer_b, owner_b, label_b) in enumerate(zip(collection.layers,
                                                            collection.owners,
                                                            collection.labels)):
            other = owner_b != owner_a if len(collection.models) > 1 else b != a
            if not other:
                continue
            S = head_similarity(layer_a, layer_b, method)
            for h in range(layer_a.heads):
                g = int(S[h].argmax())
                if S[h, g] > best[h]:
                    best[h], where[h] = S[h, g], (label_b, g)
        for h in range(layer_a.heads):
            records.append({"layer": label_a, "head": h, "match_layer": where[h][0],
                            "match_head": where[h][1], "similarity": float(best[h])})
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
