"""Several models on one corpus: each model loaded by name, its layers extracted, and the
layers of all of them gathered in one labelled collection.

:func:`load_model` loads a model by name (a ``random:`` model with the sizes asked for, a
zoo model trained first if its weights are not cached); :func:`each` loads and extracts
every model in turn; :func:`attention` gathers every model's word-level attention maps in
an :class:`AttentionCollection`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .data.corpora import Corpus
from .extract import NO_SENTENCES, SENTENCES_ONLY, Extraction, extract
from .layers import LayerCollection, LayerTable, spread_layers
from .models import LoadedModel, load, random_options
from .similarity import AttentionLayer
from .training import zoo as zoo_training


def load_model(name: str, model_options: Mapping[str, Any] | None = None) -> LoadedModel:
    """The model ``name``, with ``model_options`` applied when it is a ``random:`` model
    (:func:`~analysis_lib.models.random_options`), a zoo model trained first if needed."""
    zoo_training.ensure([name])
    return load(name, **random_options(name, model_options))


def each(models: Sequence[str], corpus: Corpus, *,
         model_options: Mapping[str, Any] | None = None, progress: bool = True,
         **extract_options: Any) -> Iterator[tuple[str, LoadedModel, Extraction]]:
    """Load and extract every model on ``corpus`` in turn (``model_options`` apply to
    ``random:`` models only): ``(name, loaded, extraction)``."""
    if not models:
        raise ValueError("the collection needs at least one model")
    for name in models:
        loaded = load_model(name, model_options)
        yield name, loaded, extract(loaded, corpus, progress=progress, **extract_options)


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


def attention(models: Sequence[str], corpus: Corpus, *,
              model_options: Mapping[str, Any] | None = None, special_tokens: str = "drop",
              layers_per_model: int | None = None, progress: bool = True
              ) -> AttentionCollection:
    """Word-level attention of every layer of every model (special-token columns dropped and
    rows renormalised by default, so every model's maps have the same shape). With
    ``layers_per_model`` a deep model keeps that many attention layers spread evenly from
    its first to its last (:func:`~analysis_lib.layers.spread_layers`)."""
    layers, tables = [], []
    for name, loaded, result in each(models, corpus, model_options=model_options,
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
