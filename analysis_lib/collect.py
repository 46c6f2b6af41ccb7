"""Several models on one corpus: each model loaded by name, its layers extracted, and the
layers of all of them gathered in one labelled collection.

:func:`~analysis_lib.training.zoo.load_model` loads a model by name (a ``random:`` model
with the sizes asked for, a zoo model trained first if its weights are not cached);
:func:`fit_to_models` checks a corpus against every model's token limit before any work.
One model's layers: :func:`sentence_extraction` (sentence vectors), :func:`pooled_features`
and :func:`first_token_features` (on a task's splits), :func:`word_layers` (word rows),
:func:`pooled_layers`. Several models: :func:`word_collection` gathers every layer of every
model on the same word rows (a :class:`~analysis_lib.collection.Collection`); :func:`each`
loads and extracts every model in turn; :func:`attention` gathers every model's word-level
attention maps in an :class:`AttentionCollection`; :func:`sentence_layers` and
:func:`attention_rows` read several models' sentence vectors and attention rows on the same
sentences. A fine-tuned model against its base: Phang et al.'s views
(:func:`view_matrices`), what fine-tuning changed layer by layer on the same words
(:func:`layer_change`, over a grid :func:`change_frame`), and what a head on the frozen
pretrained encoder reaches (:func:`frozen_head`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .collection import Collection, surface_covariates
from .data.corpora import Corpus
from .data.stimuli import attention_stimuli, sample_rows, stimuli, word_rows
from .data.tasks import Task, split_corpus
from .extract import NO_SENTENCES, SENTENCES_ONLY, Extraction, extract, over_limit
from .layers import LayerCollection, LayerTable, spread_layers
from .models import LoadedModel
from .rules import ParameterError
from .similarity import (
    AttentionLayer,
    attention_representation,
    attention_similarity,
    linear_cka,
    localization,
    neuronsim,
    pairwise_suite,
    ranked_localization,
    rsa,
)
from .similarity.structure import phang_views
from .training.grid import Runs
from .training.probes import linear_probe
from .training.zoo import load_model

#: what :func:`fit_to_models` does with a sentence longer than a model's token limit
LONG_SENTENCES = ("refuse", "drop")


def fit_to_models(corpus: Corpus, models: Sequence[str], *, long_sentences: str = "refuse",
                  model_options: Mapping[str, Any] | None = None) -> Corpus:
    """``corpus`` checked against every model's token limit before any extraction: a
    model would cut a sentence longer than its limit, and its word rows would then name
    other words than another model's. ``long_sentences="refuse"`` (the default) stops with
    an error that names each model, how many sentences it would cut and the parameter that
    fixes it; ``"drop"`` leaves those sentences out for every model (the corpus's other
    sentences, in their order)."""
    if long_sentences not in LONG_SENTENCES:
        raise ParameterError(f"long_sentences={long_sentences!r}: choose from "
                             f"{list(LONG_SENTENCES)}")
    cut: dict[str, tuple[np.ndarray, int]] = {}
    for name in models:
        loaded = load_model(name, model_options)
        found = over_limit(loaded, corpus)
        if len(found):
            cut[name] = (found, loaded.info.max_length)
    if not cut:
        return corpus
    if long_sentences == "refuse":
        told = "; ".join(f"{name} would cut {len(found)} of the {len(corpus)} sentences at its "
                         f"limit of {limit} tokens (the first: sentence {found[0]})"
                         for name, (found, limit) in cut.items())
        raise ParameterError(
            f"{told}. Set long_sentences='drop' to leave those sentences out for every model "
            "(papermill -p long_sentences drop; in a profile, long_sentences: drop), or pass "
            "shorter sentences")
    drop = set().union(*(found.tolist() for found, _ in cut.values()))
    keep = [i for i in range(len(corpus)) if i not in drop]
    if not keep:
        raise ValueError(f"every sentence of the corpus is longer than a model's token limit "
                         f"({', '.join(cut)}); pass shorter sentences")
    return corpus.subset(keep)


#: the sentence vectors every sentence-level extraction of the pages keeps, whichever one it
#: reads: the first token (what BERT's head reads) and the mean over the tokens (what MiniLM
#: and MPNet were pretrained to feed a sentence objective). Asking for the same set
#: everywhere, a page's model reads a set of sentences once, and the cache keeps one entry.
SENTENCE_POOLINGS = ("first", "mean")


def sentence_extraction(model: LoadedModel, corpus: Corpus, *poolings: str,
                        **extract_options: Any) -> Extraction:
    """Sentence vectors only (no word rows) of every layer: :data:`SENTENCE_POOLINGS`, and
    ``poolings`` besides (``"last"`` for a left-to-right decoder); read one with
    ``.layers(pooling)``."""
    kept = list(dict.fromkeys((*SENTENCE_POOLINGS, *poolings)))
    return extract(model, corpus, word_rows=SENTENCES_ONLY, sentences=kept, progress=False,
                   **extract_options)


def pooled_features(model: LoadedModel, task: Task,
                    parts: Sequence[str] = ("train", "validation", "test")
                    ) -> dict[str, dict[str, list[np.ndarray]]]:
    """Every layer's sentence vectors on the inputs of each split in ``parts``, for each of
    :data:`SENTENCE_POOLINGS`: ``{pooling: {part: [one array per layer]}}``, from one forward pass
    (and one cache entry) per split."""
    out: dict[str, dict[str, list[np.ndarray]]] = {p: {} for p in SENTENCE_POOLINGS}
    for part in parts:
        found = sentence_extraction(model, split_corpus(getattr(task, part),
                                                        f"{task.name}-{part}"))
        for pooling in SENTENCE_POOLINGS:
            out[pooling][part] = found.layers(pooling)
    return out


def first_token_features(model: LoadedModel, task: Task,
                         parts: Sequence[str] = ("train", "validation", "test")
                         ) -> dict[str, list[np.ndarray]]:
    """Every layer's first-token vectors on the inputs of each split in ``parts``."""
    return pooled_features(model, task, parts)["first"]


@dataclass
class WordLayers:
    """The word-level layers of one model on the same sampled rows, and its attention."""

    words: list[np.ndarray]
    attention: Extraction | None


def word_layers(model: str | LoadedModel, corpus: Corpus, rows: np.ndarray,
                attention_corpus: Corpus | None = None, *, storage: str = "float32"
                ) -> WordLayers:
    """Per-word vectors of every layer on ``rows`` of ``corpus`` (and the word attention on
    ``attention_corpus`` when given), the word rows kept in ``storage`` (float16: half the
    disk, refused for a model whose activations exceed its range)."""
    loaded = model if isinstance(model, LoadedModel) else load_model(model)
    rows = np.asarray(rows)
    every = len(rows) == corpus.n_words and np.array_equal(rows, np.arange(corpus.n_words))
    # only the sampled rows are kept and cached
    result = extract(loaded, corpus, word_rows=None if every else rows, sentences=NO_SENTENCES,
                     storage=storage, progress=False)
    att = None
    if attention_corpus is not None:
        att = extract(loaded, attention_corpus, attention=True, word_rows=SENTENCES_ONLY,
                      sentences=NO_SENTENCES, progress=False)
    return WordLayers(list(result.words), att)


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


def sentence_layers(models: Mapping[str, LoadedModel], corpus: Corpus, kind: str = "mean"
                    ) -> dict[str, list[np.ndarray]]:
    """Every layer's sentence vectors (``"mean"`` over real tokens, or ``"first"``) of each
    model, on the same sentences, extracted in eval mode (dropout off):
    :func:`pooled_layers` of each."""
    return {name: pooled_layers(model, corpus, kind) for name, model in models.items()}


def attention_rows(models: Mapping[str, LoadedModel], corpus: Corpus
                   ) -> dict[str, list[np.ndarray]]:
    """Every attention layer ``1..L`` of each model as (word pairs x heads) rows."""
    out = {}
    for name, model in models.items():
        result = extract(model, corpus, attention=True, word_rows=SENTENCES_ONLY,
                         sentences=NO_SENTENCES, progress=False)
        out[name] = [attention_representation(result.attention_layer(layer))
                     for layer in range(1, result.info.n_attention_layers + 1)]
    return out


def pooled_layers(model: str | LoadedModel, corpus: Corpus, pooling: str = "first",
                  **extract_options: Any) -> list[np.ndarray]:
    """Every layer's sentence vectors: the first token (``"first"``, [CLS] for BERT-like
    models), the last real token (``"last"``, for left-to-right decoders) or the mean over
    the real tokens (``"mean"``)."""
    if pooling not in ("first", "last", "mean"):
        raise ValueError(f"pooling must be 'first', 'last' or 'mean', got {pooling!r}")
    loaded = model if isinstance(model, LoadedModel) else load_model(model)
    return sentence_extraction(loaded, corpus, pooling, **extract_options).layers(pooling)


def view_matrices(runs: Runs, model: str, task: str, corpus: Corpus, pooling: str = "first",
                  *, model_options: Mapping[str, Any] | None = None
                  ) -> dict[str, list[np.ndarray]]:
    """Phang et al.'s four views (:func:`~analysis_lib.similarity.structure.phang_views`) of
    one model fine-tuned on one task (every seed of ``runs``) against its base model, over
    ``corpus`` (the validation stimuli), on the sentence vectors of ``pooling``."""
    base = pooled_layers(load_model(model, model_options), corpus, pooling)
    tuned = {seed: pooled_layers(runs.get(model, task, seed).load(), corpus, pooling)
             for seed in runs.seeds(model, task)}
    return phang_views(base, tuned)


def _localization(layers: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A model's localization within its own layers: the paper's plain score and the score on
    ranks (:func:`~analysis_lib.similarity.ranked_localization`)."""
    mats = pairwise_suite(list(layers), measures=["neuronsim", "svcca"], progress=False)
    return (localization(mats["neuronsim"], mats["svcca"]),
            ranked_localization(mats["neuronsim"], mats["svcca"]))


def layer_change(base: WordLayers, tuned: WordLayers) -> pd.DataFrame:
    """Per layer ``0..L``: base against fine-tuned on the same words, under linear CKA,
    neuronsim (fine-tuned neurons matched in the base layer), RSA (cosine kernel, Pearson);
    head-level JS attention similarity (layers ``1..L``; fine-tuned heads matched among the
    base layer's); and each model's localization within its own layers, plain and on ranks
    (``ranked_localization_base``, ``ranked_localization_ft``)."""
    n_layers = len(base.words)
    if len(tuned.words) != n_layers:
        raise ValueError(f"the models have {n_layers} and {len(tuned.words)} layers")
    (loc_base, ranked_base), (loc_tuned, ranked_tuned) = (_localization(base.words),
                                                          _localization(tuned.words))
    rows = []
    for layer in range(n_layers):
        X, Y = base.words[layer], tuned.words[layer]
        row = {"layer": layer, "linear_cka": linear_cka(X, Y), "neuronsim": neuronsim(Y, X),
               "rsa": rsa(X, Y, "cosine", "pearson"), "attention_js": np.nan,
               "localization_base": loc_base[layer], "localization_ft": loc_tuned[layer],
               "ranked_localization_base": ranked_base[layer],
               "ranked_localization_ft": ranked_tuned[layer]}
        if layer and base.attention is not None and tuned.attention is not None:
            row["attention_js"] = attention_similarity(tuned.attention.attention_layer(layer),
                                                       base.attention.attention_layer(layer),
                                                       "js")
        rows.append(row)
    return pd.DataFrame(rows)


def change_frame(runs: Runs, models: Sequence[str], tasks: Sequence[str], *, n_words: int,
                 n_attention: int, n_stimuli: int,
                 model_options: Mapping[str, Any] | None = None, storage: str = "float32"
                 ) -> pd.DataFrame:
    """:func:`layer_change` for every model, task and seed, in one long table with columns
    ``model, task, seed, layer`` and the measures (word rows kept in ``storage``, as
    :func:`word_layers`)."""
    frames = []
    for model, task_name, by_seed in runs.groups(models, tasks):
        task = runs.task(task_name)
        corpus = stimuli(task, n_stimuli)
        rows = word_rows(corpus, n_words)
        att = attention_stimuli(task, n_attention)
        base = word_layers(load_model(model, model_options), corpus, rows, att,
                           storage=storage)
        for seed, result in by_seed.items():
            tuned = word_layers(result.load(), corpus, rows, att, storage=storage)
            frames.append(layer_change(base, tuned).assign(model=model, task=task_name,
                                                           seed=seed))
    return pd.concat(frames, ignore_index=True)


def frozen_head(runs: Runs, models: Sequence[str], tasks: Sequence[str], *,
                model_options: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Per (model, task): the test accuracy of a logistic-regression head trained on the
    pretrained model's top layer (mean over the tokens; the encoder frozen), on the same
    training examples and test split as the fine-tuned runs. It is what the task gets
    without changing the encoder: fine-tuning that does not beat it has not trained the
    encoder enough for a comparison of base and fine-tuned layers to say much about
    fine-tuning (:func:`analysis_lib.claims.tables.accuracy_table` places each run's
    interval against it)."""
    rows = []
    for model in models:
        loaded = load_model(model, model_options)
        for task in tasks:
            found = linear_probe(loaded, runs.task(task), loaded.info.n_attention_layers,
                                 pooling="mean")
            rows.append({"model": model, "task": task, "frozen_head": found["accuracy"]})
    return pd.DataFrame(rows)


def word_collection(models: Sequence[str], corpus: Corpus, *,
                    model_options: Mapping[str, Any] | None = None,
                    max_words: int | None = None, layers_per_model: int | None = None,
                    seed: int = 0, progress: bool = True) -> Collection:
    """Extract every model on ``corpus`` and gather their layers on the same word rows: a
    :class:`~analysis_lib.collection.Collection`.

    ``model_options`` (sizes, seed) apply to ``random:`` models. With ``max_words`` a
    deterministic sample of that many word rows (by ``seed``) is kept for every model. With
    ``layers_per_model`` a deep model keeps that many layers spread evenly over its depth
    (:func:`~analysis_lib.layers.spread_layers`; embeddings and top layer included), so that
    a 30-layer model does not outweigh a 6-layer one in every mean and the all-pairs cost
    stays bounded.
    Every model must give rows for the same words (a model that cuts a long sentence where
    another does not would misalign them): shorten the sentences or raise ``max_length``.
    """
    n = corpus.n_words
    rows = sample_rows(n, max_words, seed) if max_words is not None and max_words < n else None
    layers, tables, first = [], [], None
    for name in models:
        loaded = load_model(name, model_options)
        info = loaded.info
        kept = spread_layers(info.n_attention_layers, layers_per_model)
        # only the sampled words and the kept layers are cached
        result = extract(loaded, corpus, keep_layers=kept, word_rows=rows,
                         sentences=NO_SENTENCES, progress=progress)
        if first is None:
            first = result
        elif not (np.array_equal(result.word_sentence, first.word_sentence)
                  and np.array_equal(result.word_position, first.word_position)):
            raise ValueError(
                f"model {name} gives rows for other words than {models[0]} "
                f"({result.words.shape[1]} vs {first.words.shape[1]} rows): sentences were cut "
                "at different lengths; use shorter sentences (corpora.load_corpus(..., "
                "max_words=...)) so that every model sees every word")
        tables.append(LayerTable.for_model(name, info.family, info.pretrained,
                                           info.n_attention_layers, kind="words", layers=kept))
        layers += [np.ascontiguousarray(result.layer(k)) for k in kept]
    if first is None:
        raise ValueError("the collection needs at least one model")
    rows = np.arange(first.words.shape[1]) if rows is None else rows
    return Collection(LayerTable.concat(tables), layers, rows,
                      surface_covariates(first, corpus), first.word_sentence)
