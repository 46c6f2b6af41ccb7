"""A collection of models on the same words: every layer, side by side (Wu et al. 2020).

:func:`build` extracts every model of a list on one corpus and keeps the per-word arrays of all
their layers, on the same (optionally subsampled) word rows, with labels ``"model:L3"``.
:func:`matrices` computes the layer x layer matrix of the whole collection for any measures;
:func:`summary` turns one matrix into the numbers the paper's observations are about (within
and across models, neuron against representation level, lower against higher layers, adjacent
layers); :func:`surface_covariates` and :func:`regress_out` remove what sentence length, word
position and word frequency explain from every layer before any measure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .corpora import Corpus
from .extract import Extraction, extract
from .models import load
from .similarity import pairwise


@dataclass
class Collection:
    """Every layer of several models on the same word rows.

    Attributes
    ----------
    models : list of str
    families : list of str
        ``ModelInfo.family`` of each model.
    pretrained : list of bool
        False for ``random:`` models.
    layers : list of arrays (n_rows, hidden)
        All layers, model by model, embeddings first.
    labels, owners : list of str
        ``"model:L3"`` for each layer, and the model it belongs to.
    rows : array of int
        Which word rows of the corpus are kept.
    covariates : array (n_rows, 3)
        Sentence length, word position and log word frequency of each kept row.
    sentence : array of int (n_rows,)
        The sentence of each kept row (resample sentences, not words, for intervals).
    """

    models: list[str]
    families: list[str]
    pretrained: list[bool]
    layers: list[np.ndarray]
    labels: list[str]
    owners: list[str]
    rows: np.ndarray
    covariates: np.ndarray
    sentence: np.ndarray

    def of(self, model: str) -> list[np.ndarray]:
        """The layers of one model."""
        return [x for x, o in zip(self.layers, self.owners) if o == model]

    def layer_labels(self, model: str) -> list[str]:
        return [lab.split(":", 1)[1] for lab, o in zip(self.labels, self.owners) if o == model]


def surface_covariates(result: Extraction, corpus: Corpus) -> np.ndarray:
    """(n_words, 3): sentence length, position in the sentence and log frequency (in this
    corpus sample) of every word row of an extraction."""
    lengths = np.array([len(s) for s in corpus.sentences])
    words = corpus.words
    counts = Counter(w.lower() for w in words)
    row_word = [corpus.sentences[s][p] for s, p in zip(result.word_sentence,
                                                      result.word_position)]
    freq = np.log([counts[w.lower()] for w in row_word])
    return np.column_stack([lengths[result.word_sentence], result.word_position, freq]
                           ).astype(np.float64)


def regress_out(layers: Sequence[np.ndarray], covariates: np.ndarray) -> list[np.ndarray]:
    """Residuals of every layer after a least-squares fit on the covariates (with an
    intercept), fitted separately for each neuron. The same rows on both sides of any later
    comparison; what is left is what the covariates cannot linearly explain."""
    C = np.asarray(covariates, dtype=np.float64)
    if C.ndim != 2:
        raise ValueError(f"covariates must be 2-D (rows x covariates), got shape {C.shape}")
    design = np.column_stack([np.ones(len(C)), C])
    Q, _ = np.linalg.qr(design)
    out = []
    for X in layers:
        if len(X) != len(C):
            raise ValueError(f"a layer has {len(X)} rows and the covariates {len(C)}")
        X64 = np.asarray(X, dtype=np.float64)
        out.append((X64 - Q @ (Q.T @ X64)).astype(np.asarray(X).dtype))
    return out


def build(models: Sequence[str], corpus: Corpus, *, model_options: Mapping[str, Any] | None = None,
          max_words: int | None = None, seed: int = 0, progress: bool = True) -> Collection:
    """Extract every model on ``corpus`` and gather their layers on the same word rows.

    ``model_options`` (sizes, seed) apply to ``random:`` models. With ``max_words`` a
    deterministic sample of that many word rows (by ``seed``) is kept for every model.
    """
    if not models:
        raise ValueError("the collection needs at least one model")
    options = dict(model_options or {})
    layers, labels, owners, families, pretrained = [], [], [], [], []
    first = None
    for name in models:
        loaded = load(name, **(options if name.startswith("random:") else {}))
        result = extract(loaded, corpus, progress=progress)
        if first is None:
            first = result
            n = result.words.shape[1]
            rows = np.arange(n)
            if max_words is not None and max_words < n:
                rows = np.sort(np.random.default_rng(seed).choice(n, max_words, replace=False))
        elif result.words.shape[1] != first.words.shape[1]:
            raise ValueError(f"model {name} gives {result.words.shape[1]} word rows, the first "
                             f"model {first.words.shape[1]} (sentences cut at different lengths?)")
        families.append(loaded.info.family)
        pretrained.append(loaded.info.source != "random")
        for k, name_k in enumerate(loaded.info.layer_names()):
            layers.append(np.ascontiguousarray(result.words[k][rows]))
            labels.append(f"{name}:{name_k}")
            owners.append(name)
    cov = surface_covariates(first, corpus)[rows]
    return Collection(list(models), families, pretrained, layers, labels, owners, rows, cov,
                      first.word_sentence[rows])


def matrices(collection: Collection, measures: Sequence[str], *, controlled: bool = False,
             progress: bool = True, **options: Any) -> dict[str, np.ndarray]:
    """The collection's layer x layer matrix for each measure (after regressing out the
    surface covariates when ``controlled``)."""
    layers = regress_out(collection.layers, collection.covariates) if controlled else \
        collection.layers
    return pairwise(layers, measure=list(measures), progress=progress, **options)


def summary(M: np.ndarray, collection: Collection) -> dict[str, float]:
    """Means of one collection matrix over the cells each observation is about.

    ``within_model``: different layers of one model; ``across_models``: layers of different
    models; ``same_family`` / ``other_family``: across models of the same / a different
    family; ``adjacent`` / ``non_adjacent``: neighbouring / other layers of one model;
    ``lower_across`` / ``higher_across``: across models, for the lower / upper half of each
    model's layers (by relative depth, both sides in the same half).
    """
    owners = np.array(collection.owners)
    family = dict(zip(collection.models, collection.families))
    fam = np.array([family[o] for o in owners])
    idx = np.arange(len(owners))
    depth = np.zeros(len(owners))
    for m in collection.models:
        members = idx[owners == m]
        depth[members] = np.arange(len(members)) / max(1, len(members) - 1)
    same = owners[:, None] == owners[None, :]
    off = ~np.eye(len(owners), dtype=bool)
    gap = np.abs(idx[:, None] - idx[None, :])
    low = (depth[:, None] <= 0.5) & (depth[None, :] <= 0.5)
    high = (depth[:, None] > 0.5) & (depth[None, :] > 0.5)
    cells = {
        "within_model": same & off,
        "across_models": ~same,
        "same_family": ~same & (fam[:, None] == fam[None, :]),
        "other_family": ~same & (fam[:, None] != fam[None, :]),
        "adjacent": same & (gap == 1),
        "non_adjacent": same & (gap > 1),
        "lower_across": ~same & low,
        "higher_across": ~same & high,
    }
    return {k: float(M[mask].mean()) if mask.any() else float("nan")
            for k, mask in cells.items()}


def agreement(A: np.ndarray, B: np.ndarray, collection: Collection | None = None
              ) -> dict[str, float]:
    """Pearson correlation of the off-diagonal cells of two matrices over the same layers
    (e.g. the same collection on two corpora): over all of them, and, given the collection,
    over the within-model and the across-model cells separately (the block structure alone
    makes the first one high)."""
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    if A.shape != B.shape:
        raise ValueError(f"matrices of shapes {A.shape} and {B.shape} cannot be compared")
    off = ~np.eye(A.shape[0], dtype=bool)
    masks = {"all": off}
    if collection is not None:
        owners = np.array(collection.owners)
        same = owners[:, None] == owners[None, :]
        masks.update(within_model=off & same, across_models=~same)

    def corr(mask):
        if mask.sum() < 3 or A[mask].std() == 0 or B[mask].std() == 0:
            return float("nan")
        return float(np.corrcoef(A[mask], B[mask])[0, 1])

    return {k: corr(m) for k, m in masks.items()}


def summary_intervals(measure: str, collection: Collection, *, n_folds: int = 10,
                      level: float = 0.95, seed: int = 0, controlled: bool = False
                      ) -> dict[str, tuple[float, float]]:
    """Intervals of every :func:`summary` number of one measure, from a grouped jackknife:
    the sentences are split at random into ``n_folds`` folds, the matrix is recomputed with
    each fold left out, and ``estimate +- z * se`` with the jackknife standard error
    ``se^2 = (K - 1) / K * sum_k (theta_k - mean theta)^2``.

    Why not the bootstrap here: a bootstrap resample repeats sentences, and repeated stimuli
    raise the chance level of CKA-like measures, so the resampled values are shifted
    (upwards, by as much as the spread itself for small samples) and neither the percentile
    nor the basic interval is reliable. Leaving out a fold keeps every stimulus distinct.
    """
    from scipy.stats import norm

    if n_folds < 2:
        raise ValueError(f"n_folds must be at least 2, got {n_folds}")
    layers = regress_out(collection.layers, collection.covariates) if controlled else \
        collection.layers
    sentences = np.unique(collection.sentence)
    if n_folds > len(sentences):
        raise ValueError(f"n_folds={n_folds} is more than the {len(sentences)} sentences")
    fold_of = dict(zip(np.random.default_rng(seed).permutation(sentences),
                       np.arange(len(sentences)) % n_folds))
    fold = np.array([fold_of[s] for s in collection.sentence])
    estimate = summary(pairwise(layers, measure=measure, progress=False), collection)
    leave_out = []
    for k in range(n_folds):
        keep = fold != k
        leave_out.append(summary(pairwise([x[keep] for x in layers], measure=measure,
                                          progress=False), collection))
    z = norm.ppf(0.5 + level / 2)
    out = {}
    for key, value in estimate.items():
        values = np.array([t[key] for t in leave_out])
        se = np.sqrt((n_folds - 1) / n_folds * np.sum((values - values.mean()) ** 2))
        out[key] = (float(value - z * se), float(value + z * se))
    return out
