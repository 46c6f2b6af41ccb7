"""A collection of models on the same words: every layer of every model side by side
(Wu et al. 2020), and what is computed on it.

A :class:`Collection` holds the per-word arrays of all the layers of several models on the
same word rows, with a :class:`~analysis_lib.layers.LayerTable` saying which layer is
which (:func:`analysis_lib.collect.word_collection` extracts one). :func:`matrices`
computes its layer x layer matrix for any measures; :func:`surface_covariates` and
:func:`regress_out` remove what sentence length, word position and word frequency explain
from every layer before any measure. A collection is narrowed to some models
(:func:`subset`, :func:`focus`) or some rows (:func:`keep_rows`); its layers are read for
what dominates them (:func:`first_word_share`, :func:`outlier_neurons`,
:func:`drop_neurons` and :func:`rematch`); its matrices give localization
(:func:`localization_frame`), the similarity between random models (:func:`random_across`)
and the agreement of two corpora (:func:`agreement`). :func:`from_sweep` reads the same
matrices from a sweep's table.

What a matrix says is read on groups of its cells: :func:`summary` averages the cells
within one model, across models, per pair of models and per family, and
:func:`summary_jackknives` gives every such number its grouped-jackknife replicates
(:class:`Jackknife`: standard errors and intervals over folds of sentences);
:func:`pair_table` and :func:`factor_table` lay them out per pair of models and per factor
that a pair differs in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .data.corpora import Corpus
from .families import causal_family
from .layers import LayerCollection, LayerTable
from .runtime.profile import profiled
from .similarity import SYMMETRIC, pairwise_suite, ranked_localization
from .similarity import localization as _localization
from .similarity.leave_out import leave_out_suite
from .similarity.registry import canonical
from .similarity.structure import rank_overlap


@dataclass
class Collection(LayerCollection):
    """Every layer of several models on the same word rows.

    Attributes
    ----------
    table : LayerTable
        One row per layer: model, family, pretrained, layer index, depth, kind, label.
    layers : list of arrays (n_rows, hidden)
        All layers, model by model, embeddings first, in the table's order.
    rows : array of int
        Which word rows of the corpus are kept.
    covariates : array (n_rows, 3)
        Sentence length, word position and log word frequency of each kept row.
    sentence : array of int (n_rows,)
        The sentence of each kept row (resample sentences, not words, for intervals).
    """

    table: LayerTable
    layers: list[np.ndarray]
    rows: np.ndarray
    covariates: np.ndarray
    sentence: np.ndarray

    def models_frame(self) -> pd.DataFrame:
        """One row per model: family, pretrained, number of layers and neurons."""
        frame = self.table.frame
        out = frame.groupby("model", sort=False).agg(
            family=("family", "first"), pretrained=("pretrained", "first"),
            layers=("layer", "size")).reset_index()
        out["neurons"] = [self.of(m)[0].shape[1] for m in out["model"]]
        return out

    def layer_labels(self, model: str) -> list[str]:
        return [self.table.labels[k] for k in self.table.rows_of(model)]

    def per_model(self, matrices: Mapping[str, np.ndarray]) -> dict[tuple[str, str], np.ndarray]:
        """``{(model, measure): the model's own block}`` of collection-wide matrices."""
        return {(m, name): M[np.ix_(self.table.rows_of(m), self.table.rows_of(m))]
                for m in self.models for name, M in matrices.items()}


def surface_covariates(result: Any, corpus: Corpus) -> np.ndarray:
    """(n_words, 3): sentence length, position in the sentence and log frequency (in this
    corpus sample) of every word row of an extraction (``result``: an
    :class:`~analysis_lib.extract.Extraction`, whose ``word_sentence`` and
    ``word_position`` say where each row's word is)."""
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


def matrices(collection: Collection, measures: Sequence[str], *, controlled: bool = False,
             progress: bool = True, **options: Any) -> dict[str, np.ndarray]:
    """The collection's layer x layer matrix for each measure (after regressing out the
    surface covariates when ``controlled``)."""
    layers = regress_out(collection.layers, collection.covariates) if controlled else \
        collection.layers
    return pairwise_suite(layers, measures=list(measures), progress=progress, **options)


def focus(collection: Collection) -> list[str]:
    """The models the paper's observations are about: the pretrained ones when there are at
    least two (Wu et al. compare trained models; random ones are their own section), else
    all of them."""
    frame = collection.table.frame.drop_duplicates("model")
    trained = frame.loc[frame["pretrained"], "model"].tolist()
    return trained if len(trained) >= 2 else collection.models


def subset(collection: Collection, models: Sequence[str]) -> Collection:
    """The same collection restricted to the layers of ``models`` (in the collection's
    order)."""
    rows = np.flatnonzero(np.isin(collection.table.owners, list(models)))
    if not rows.size:
        raise ValueError(f"none of {list(models)} is in this collection")
    table = LayerTable(collection.table.frame.iloc[rows].reset_index(drop=True))
    layers = [collection.layers[k] for k in rows] if collection.layers else []
    return Collection(table, layers, collection.rows, collection.covariates,
                      collection.sentence)


def keep_rows(collection: Collection, keep: np.ndarray) -> Collection:
    """The same collection on a subset of its word rows (``keep``: a boolean mask or row
    positions), e.g. without the first word of every sentence."""
    keep = np.asarray(keep)
    index = np.flatnonzero(keep) if keep.dtype == bool else keep.astype(int)
    if keep.dtype == bool and len(keep) != len(collection.rows):
        raise ValueError(f"the mask has {len(keep)} entries for {len(collection.rows)} rows")
    if index.size < 2:
        raise ValueError("keep at least two word rows")
    return Collection(collection.table, [x[index] for x in collection.layers],
                      collection.rows[index], collection.covariates[index],
                      collection.sentence[index])


def first_word_share(collection: Collection, top: int = 3) -> pd.DataFrame:
    """Per layer (the layer table's columns, plus): ``top_share``, the share of the layer's
    variance in its ``top`` highest-variance neurons; ``first_word_norm`` and
    ``other_words_norm``, the mean distance from the layer's mean of the first word of each
    sentence and of the other words.

    Decoders such as GPT-2 and SmolLM2 give the first token of a text a few huge activations
    (an "attention sink"; Sun et al. 2024, *Massive activations in large language models*).
    Those rows can then carry most of a layer's variance, and a measure that weighs
    directions by their variance, linear CKA above all, sees little else.
    """
    first = collection.covariates[:, 1] == 0
    if first.all() or not first.any():
        raise ValueError("the rows need both first words and later words of sentences")
    shares, first_norm, other_norm = [], [], []
    for X in collection.layers:
        X = np.asarray(X, dtype=np.float64)
        var = np.sort(X.var(axis=0))[::-1]
        shares.append(float(var[:top].sum() / var.sum()) if var.sum() > 0 else float("nan"))
        norms = np.linalg.norm(X - X.mean(axis=0), axis=1)
        first_norm.append(float(norms[first].mean()))
        other_norm.append(float(norms[~first].mean()))
    return collection.table.attach(shares, "top_share").assign(
        first_word_norm=first_norm, other_words_norm=other_norm)


#: a neuron is an outlier (a "massive activation") in a layer when its standard deviation
#: over the word rows is more than this many times the layer's median neuron's
OUTLIER_RATIO = 10.0


def outlier_neurons(collection: Collection, ratio: float = OUTLIER_RATIO) -> pd.DataFrame:
    """The outlier neurons of every model: one row per (model, neuron) that is an outlier in
    at least one of the model's layers, with ``layers`` (how many), ``largest_share`` (the
    largest share of a layer's variance it holds) and ``largest_ratio`` (its largest
    standard deviation over the layer's median neuron's).

    A few neurons of some models take values orders of magnitude above the rest (Kovaleva
    et al. 2021, *BERT busters*; Sun et al. 2024, *Massive activations*): in SmolLM2's middle
    layers three neurons hold nearly all the variance. A measure that weighs directions by
    their variance (linear CKA) or keeps the top singular directions (SVCCA) then reads
    those neurons and little else, so the book reports the measures with and without them
    (:func:`drop_neurons`). The rule is relative to the layer's own median neuron, so it
    does not depend on the model's width or scale."""
    if ratio <= 1:
        raise ValueError(f"ratio must be above 1 (a neuron's spread over the median's), "
                         f"got {ratio}")
    rows = []
    for model in collection.models:
        found: dict[int, dict[str, float]] = {}
        for X in collection.of(model):
            spread = np.asarray(X, dtype=np.float64).std(axis=0)
            median = float(np.median(spread))
            if median <= 0:
                continue
            share = spread ** 2 / float(np.sum(spread ** 2))
            for neuron in np.flatnonzero(spread > ratio * median):
                entry = found.setdefault(int(neuron), {"layers": 0, "largest_share": 0.0,
                                                       "largest_ratio": 0.0})
                entry["layers"] += 1
                entry["largest_share"] = max(entry["largest_share"], float(share[neuron]))
                entry["largest_ratio"] = max(entry["largest_ratio"],
                                             float(spread[neuron] / median))
        rows += [{"model": model, "neuron": n, **v} for n, v in sorted(found.items())]
    return pd.DataFrame(rows, columns=["model", "neuron", "layers", "largest_share",
                                       "largest_ratio"])


def drop_neurons(collection: Collection, outliers: pd.DataFrame) -> Collection:
    """The same collection with each model's ``outliers`` (:func:`outlier_neurons`) removed
    from every one of its layers (a neuron is one model's coordinate in all its layers)."""
    by_model = {m: set(group.neuron) for m, group in outliers.groupby("model")}
    layers = []
    for model, X in zip(collection.table.owners, collection.layers):
        drop = sorted(by_model.get(model, ()))
        if len(drop) >= X.shape[1]:
            raise ValueError(f"every neuron of {model} is an outlier; nothing is left")
        layers.append(np.delete(X, drop, axis=1) if drop else X)
    return Collection(collection.table, layers, collection.rows, collection.covariates,
                      collection.sentence)


def rematch(matrices: Mapping[str, np.ndarray], collection: Collection,
            models: Sequence[str], *, progress: bool = False) -> dict[str, np.ndarray]:
    """``matrices`` (the collection's layer x layer matrices, one per measure) after the
    layers of ``models`` changed in ``collection`` (their outlier neurons dropped,
    :func:`drop_neurons`): only the rows and columns of those layers are computed again,
    every other cell is kept."""
    changed = np.flatnonzero(np.isin(collection.table.owners, list(models)))
    out = {name: np.array(M, dtype=np.float64, copy=True) for name, M in matrices.items()}
    if not changed.size:
        return out
    layers = [collection.layers[i] for i in changed]
    rows = pairwise_suite(layers, collection.layers, measures=list(matrices),
                          progress=progress)
    one_way = [m for m in matrices if m not in SYMMETRIC]
    cols = pairwise_suite(collection.layers, layers, measures=one_way,
                          progress=progress) if one_way else {}
    for name in out:
        out[name][changed, :] = rows[name]
        out[name][:, changed] = cols[name] if name in cols else rows[name].T
    return out


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
        same = collection.table.same_model()
        masks.update(within_model=off & same, across_models=~same)

    def corr(mask):
        if mask.sum() < 3 or A[mask].std() == 0 or B[mask].std() == 0:
            return float("nan")
        return float(np.corrcoef(A[mask], B[mask])[0, 1])

    return {k: corr(m) for k, m in masks.items()}


#: the localization variant read on ranks among the pretrained layers (:func:`localization_frame`)
RANKED = "ranks, pretrained layers"


def localization_frame(matrices: Mapping[str, np.ndarray], collection: Collection
                       ) -> pd.DataFrame:
    """Localization of every layer (Wu et al. Fig. 3) in three variants, as a long table with
    the layer table's columns: ``variant`` is ``"paper (plain)"``, ``"released code
    (z-scored)"`` or :data:`RANKED` (:func:`~analysis_lib.similarity.ranked_localization`
    over the pretrained layers alone: a reference set of trained layers, on a scale neither
    measure sets; NaN for the random models' layers, and for every layer when fewer than
    three are pretrained)."""
    N, S = matrices["neuronsim"], matrices["svcca"]
    frames = []
    for variant, standardize in (("paper (plain)", False), ("released code (z-scored)", True)):
        frame = collection.table.attach(_localization(N, S, standardize=standardize))
        frame["variant"] = variant
        frames.append(frame)
    trained = collection.table.frame["pretrained"].to_numpy(dtype=bool)
    ranked = np.full(len(trained), np.nan)
    if trained.sum() >= 3:
        inside = np.ix_(trained, trained)
        ranked[trained] = ranked_localization(np.asarray(N)[inside], np.asarray(S)[inside])
    frame = collection.table.attach(ranked)
    frame["variant"] = RANKED
    frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def random_across(M: np.ndarray, collection: Collection) -> float:
    """Mean of ``M`` over pairs of layers of *different* randomly initialised models."""
    frame = collection.table.frame
    random = ~frame["pretrained"].to_numpy()
    mask = random[:, None] & random[None, :] & ~collection.table.same_model()
    return float(M[mask].mean()) if mask.any() else float("nan")


def from_sweep(table: pd.DataFrame, measures: Sequence[str]
               ) -> tuple[dict[str, np.ndarray], Collection]:
    """The collection matrices of a finished sweep's table (see :mod:`analysis_lib.sweep`;
    run it with ``self_pairs: true``), and a :class:`Collection` holding its layer table
    only (no arrays: the sections that need them run on this machine's models).

    Each model variant of the sweep (model, task, seed) is one "model" of the collection,
    named ``"model / task / seed s"``.
    """
    table = table.copy()
    for side in ("a", "b"):
        parts = [table[f"model_{side}"].astype(str)]
        task, seed = table[f"task_{side}"], table[f"seed_{side}"]
        names = parts[0].where(task.isna(), parts[0] + " / " + task.astype(str))
        table[f"variant_{side}"] = names.where(seed.isna(), names + " / seed "
                                               + seed.astype("Int64").astype(str))
    order = list(dict.fromkeys(list(table["variant_a"]) + list(table["variant_b"])))
    tables = []
    for name in order:
        own = table[table.variant_a == name]
        own_layers = sorted(set(own.layer_a.astype(int)))
        if not len(own):
            own = table[table.variant_b == name].rename(
                columns=lambda c: c[:-2] + "_a" if c.endswith("_b") else c)
            own_layers = sorted(set(own.layer_a.astype(int)))
        first = own.iloc[0]
        tables.append(LayerTable.for_model(name, str(first["family_a"]),
                                           bool(first["pretrained_a"]),
                                           int(first["n_layers_a"]), layers=own_layers))
    layer_table = LayerTable.concat(tables)
    index = {(m, int(x)): k for k, (m, x) in enumerate(zip(layer_table.frame.model,
                                                           layer_table.frame.layer))}
    mats = {}
    for measure in measures:
        rows = table[table.measure == canonical(measure)]
        if rows.empty:
            raise ValueError(f"the sweep table has no {measure!r} rows; its measures are "
                             f"{sorted(set(table.measure))}")
        M = np.full((len(layer_table), len(layer_table)), np.nan)
        i = [index[(m, int(x))] for m, x in zip(rows.variant_a, rows.layer_a)]
        j = [index[(m, int(x))] for m, x in zip(rows.variant_b, rows.layer_b)]
        M[i, j] = rows["value"].to_numpy()
        if canonical(measure) in SYMMETRIC:
            M = np.where(np.isnan(M), M.T, M)
        same = layer_table.same_model()
        if np.isnan(M[same]).any():
            raise ValueError("the sweep table lacks the comparisons of a model with itself; "
                             "run the sweep with self_pairs: true")
        mats[canonical(measure)] = M
    return mats, Collection(layer_table, [], np.arange(0), np.zeros((0, 3)), np.arange(0))


# --------------------------------------- what a matrix says about groups of its cells


class PairKey(NamedTuple):
    """A :func:`summary` entry about two models: ``kind`` is ``"pair"`` (every cell across
    them) or ``"matched"`` (their layers at matching relative depth). Prints as
    ``pair: a - b``."""

    kind: str
    a: str
    b: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.a} - {self.b}"


#: a key of :func:`summary`: a named group of cells (``"within_model"``) or a pair of models
SummaryKey = str | PairKey


def summary(M: np.ndarray, collection: LayerCollection, models: Sequence[str] | None = None
            ) -> dict[SummaryKey, float]:
    """Means of one collection matrix over the groups of cells Wu et al.'s observations are
    about, and one comparison of two groups of cells by rank.

    ``within_model``: different layers of one model; ``across_models``: layers of different
    models; ``overlap``: :func:`rank_overlap` of the across-model cells with the within-model
    ones; ``same_family`` / ``other_family``: across models of the same / a different
    family; ``adjacent`` / ``non_adjacent``: neighbouring / other layers of one model (in the
    collection's order: with ``layers_per_model``, neighbours in the sample);
    ``lower_across`` / ``higher_across``: across models, for the lower / upper half of each
    model's layers (by relative depth, both sides in the same half); ``encoders_across`` /
    ``encoder_decoder``: across two models that both read in both directions / of which one
    reads left to right (a decoder such as GPT-2 or SmolLM2). Then, for every pair of models
    ``a``, ``b`` (in the collection's order), two :class:`PairKey` entries:
    ``PairKey("pair", a, b)``, across the two models (both directions), and
    ``PairKey("matched", a, b)``, the same two models at matching relative depth only (each
    layer of the model with fewer layers against the other's nearest layer).

    ``models`` restricts every mean to the cells between layers of those models (default:
    all), e.g. the pretrained ones.
    """
    cells, both = _cells(collection, models)
    out: dict[SummaryKey, float] = {
        k: float(M[mask & both].mean()) if (mask & both).any() else float("nan")
        for k, mask in cells.items()}
    out["overlap"] = rank_overlap(M[cells["across_models"] & both],
                                  M[cells["within_model"] & both])
    return out


def _cells(collection: LayerCollection, models: Sequence[str] | None
           ) -> tuple[dict[SummaryKey, np.ndarray], np.ndarray]:
    """:func:`summary`'s groups of cells as masks, and the mask of the chosen models'
    cells."""
    frame = collection.table.frame
    owners, fam = frame["model"].to_numpy(), frame["family"].to_numpy()
    chosen = list(dict.fromkeys(owners)) if models is None else list(models)
    missing = [m for m in chosen if m not in set(owners)]
    if missing:
        raise ValueError(f"models {missing} are not in this collection; it holds "
                         f"{list(dict.fromkeys(owners))}")
    keep = np.isin(owners, chosen)
    both = keep[:, None] & keep[None, :]
    depth = frame["depth"].to_numpy()
    idx = np.arange(len(owners))
    same = owners[:, None] == owners[None, :]
    off = ~np.eye(len(owners), dtype=bool)
    gap = np.abs(idx[:, None] - idx[None, :])
    low = (depth[:, None] <= 0.5) & (depth[None, :] <= 0.5)
    high = (depth[:, None] > 0.5) & (depth[None, :] > 0.5)
    causal = np.array([causal_family(str(f)) for f in fam], dtype=bool)
    cells: dict[SummaryKey, np.ndarray] = {
        "within_model": same & off,
        "across_models": ~same,
        "same_family": ~same & (fam[:, None] == fam[None, :]),
        "other_family": ~same & (fam[:, None] != fam[None, :]),
        "adjacent": same & (gap == 1),
        "non_adjacent": same & (gap > 1),
        "lower_across": ~same & low,
        "higher_across": ~same & high,
        "encoders_across": ~same & ~causal[:, None] & ~causal[None, :],
        "encoder_decoder": ~same & (causal[:, None] != causal[None, :]),
    }
    for i, a in enumerate(chosen):
        for b in chosen[i + 1:]:
            is_a, is_b = owners == a, owners == b
            cells[PairKey("pair", a, b)] = (is_a[:, None] & is_b[None, :]) | (
                is_b[:, None] & is_a[None, :])
            cells[PairKey("matched", a, b)] = _matched(depth, is_a, is_b)
    return cells, both


def _matched(depth: np.ndarray, is_a: np.ndarray, is_b: np.ndarray) -> np.ndarray:
    """Cells pairing each layer of the model with fewer layers (kept) with the other model's
    layer of the nearest relative depth, both ways round (layer k with layer k when the two
    have the same depth)."""
    few, many = (is_a, is_b) if is_a.sum() <= is_b.sum() else (is_b, is_a)
    rows, cols = np.flatnonzero(few), np.flatnonzero(many)
    mask = np.zeros((len(depth), len(depth)), dtype=bool)
    if not rows.size or not cols.size:
        return mask
    nearest = cols[np.abs(depth[cols][None, :] - depth[rows][:, None]).argmin(axis=1)]
    mask[rows, nearest] = True
    mask[nearest, rows] = True
    return mask


def per_model(M: np.ndarray, collection: LayerCollection, models: Sequence[str], high: str,
              low: str) -> dict[str, float]:
    """Per model of ``models``: the mean of :func:`summary`'s ``high`` cells minus its
    ``low`` cells, among the cells that involve that model (its own layers, and its layers
    against the other models'): one value per model, for an interval over models, the
    sample Wu et al.'s observations are about. NaN for a model with no cell of a group."""
    cells, both = _cells(collection, models)
    owners = collection.table.frame["model"].to_numpy()
    out = {}
    for model in models:
        mine = owners == model
        touches = both & (mine[:, None] | mine[None, :])
        values = [M[cells[g] & touches].mean() if (cells[g] & touches).any() else np.nan
                  for g in (high, low)]
        out[model] = float(values[0] - values[1])
    return out


def named(values: Mapping) -> dict[str, float]:
    """The entries of a :func:`summary` about groups of cells (``within_model``, ...),
    without the per-pair ones."""
    return {k: v for k, v in values.items() if isinstance(k, str)}


def pair_entries(values: Mapping, kind: str = "pair") -> dict[PairKey, float]:
    """The per-pair entries of a :func:`summary` of one kind (``"pair"`` or
    ``"matched"``)."""
    return {k: v for k, v in values.items() if isinstance(k, PairKey) and k.kind == kind}


@dataclass(frozen=True)
class Jackknife:
    """The :func:`summary` numbers of one measure (``estimate``) and their grouped-jackknife
    replicates (``replicates``: one row per left-out fold of sentences, one column per
    summary key), from :func:`summary_jackknife`."""

    estimate: dict[SummaryKey, float]
    replicates: pd.DataFrame

    def se(self, key: SummaryKey) -> float:
        """The jackknife standard error of one summary number."""
        values = self.replicates[key].to_numpy()
        k = len(values)
        return float(np.sqrt((k - 1) / k * np.sum((values - values.mean()) ** 2)))

    def intervals(self, level: float = 0.95) -> dict[SummaryKey, tuple[float, float]]:
        """``estimate +- z * se`` of every summary number."""
        from scipy.stats import norm

        z = norm.ppf(0.5 + level / 2)
        return {key: (value - z * self.se(key), value + z * self.se(key))
                for key, value in self.estimate.items()}


def matched_key(summary: Mapping[SummaryKey, float], a: str, b: str) -> PairKey:
    """The key of models ``a`` and ``b`` at matching depth in ``summary`` (:func:`summary`),
    in whichever order it holds them; a ``ValueError`` naming the pair when it holds
    neither."""
    for key in (PairKey("matched", a, b), PairKey("matched", b, a)):
        if key in summary:
            return key
    raise ValueError(f"the collection holds no pair {a} - {b}")


def pair_overlap(M: np.ndarray, table: LayerTable, a: str, b: str) -> float:
    """:func:`rank_overlap` of models ``a`` and ``b``'s cells against each other with their
    cells within (different layers of one of the two)."""
    owners = np.asarray(table.owners)
    is_a, is_b = owners == a, owners == b
    across = (is_a[:, None] & is_b[None, :]) | (is_b[:, None] & is_a[None, :])
    within = ((is_a[:, None] & is_a[None, :]) | (is_b[:, None] & is_b[None, :])) & \
        ~np.eye(len(owners), dtype=bool)
    return rank_overlap(M[across], M[within])



def factor_table(summaries: Mapping[str, Mapping[SummaryKey, float]],
                 intervals: Mapping[str, Mapping[SummaryKey, tuple[float, float]]],
                 factors: Mapping[str, Sequence[tuple[str, str]]], measure: str,
                 not_learned: Sequence[str] = ()) -> pd.DataFrame:
    """One row per pair of models that differ in one factor: the mean similarity of their
    layers at matching relative depth under ``measure`` (the ``matched`` cells of
    :func:`summary`), its interval where computed, and a flag when
    either model did not learn (such a pair is left out of the factor's mean, not compared
    silently).

    ``factors`` maps a factor's name to its pairs of model names as the collection holds
    them (e.g. ``{"seed": [("zoo:base", "zoo:seed-1")]}``).
    """
    values, bounds = summaries[measure], intervals.get(measure, {})
    rows = []
    for factor, pairs in factors.items():
        for a, b in pairs:
            key = matched_key(values, a, b)
            low, high = bounds.get(key, (float("nan"), float("nan")))
            flagged = [m for m in (a, b) if m in set(not_learned)]
            rows.append({"factor": factor, "models": f"{a} vs {b}",
                         measure: values[key], "low": low, "high": high,
                         "note": f"{', '.join(flagged)} did not learn" if flagged else ""})
    frame = pd.DataFrame(rows)
    usable = frame[frame["note"] == ""]
    means = usable.groupby("factor", sort=False)[measure].mean()
    frame["factor mean"] = frame["factor"].map(means)
    return frame


def pair_table(summaries: Mapping[str, Mapping[SummaryKey, float]],
               intervals: Mapping[str, Mapping[SummaryKey, tuple[float, float]]]) -> pd.DataFrame:
    """One row per pair of models, one column per measure: the mean across the two models'
    layers (from :func:`summary`), with its interval where one was
    computed."""
    out = {}
    for measure, values in summaries.items():
        column: dict[str, str] = {}
        for key, value in values.items():
            if not (isinstance(key, PairKey) and key.kind == "pair"):
                continue
            text = f"{value:.3f}"
            if measure in intervals and key in intervals[measure]:
                low, high = intervals[measure][key]
                text += f" [{low:.3f}, {high:.3f}]"
            column[f"{key.a} - {key.b}"] = text
        out[measure] = column
    return pd.DataFrame(out).rename_axis("models")


def summary_jackknife(measure: str, collection: Collection, *, n_folds: int = 10,
                      seed: int = 0, controlled: bool = False,
                      models: Sequence[str] | None = None) -> Jackknife:
    """Every :func:`summary` number of one measure with its
    grouped-jackknife replicates: the sentences are split at random into ``n_folds`` folds
    and the matrix is computed with each fold left out
    (:func:`~analysis_lib.similarity.leave_out_matrices`: for CKA and neuronsim
    from per-fold moments in about the time of one matrix). Two measures jackknifed with the
    same ``seed`` and ``n_folds`` on the same collection share their folds, so a contrast of
    the two has replicates too (:func:`summary_jackknives` computes several in one pass).

    Why not the bootstrap here: a bootstrap resample repeats sentences, and repeated stimuli
    raise the chance level of CKA-like measures, so the resampled values are shifted
    (upwards, by as much as the spread itself for small samples) and neither the percentile
    nor the basic interval is reliable. Leaving out a fold keeps every stimulus distinct.

    ``models``: numbers of ``summary(..., models=models)``, computed on those models'
    layers only.
    """
    return summary_jackknives([measure], collection, n_folds=n_folds, seed=seed,
                              controlled=controlled, models=models)[canonical(measure)]


@profiled("resampling", lambda measures, *a, **k:
          f"jackknife {measures if isinstance(measures, str) else ', '.join(measures)}")
def summary_jackknives(measures: Sequence[str], collection: Collection, *, n_folds: int = 10,
                       seed: int = 0, controlled: bool = False,
                       models: Sequence[str] | None = None) -> dict[str, Jackknife]:
    """:func:`summary_jackknife` of several measures on the same folds, ``{canonical name:
    Jackknife}``, from one pass: the estimates from one suite
    (:func:`~analysis_lib.similarity.pairwise_suite`) and the left-out matrices from shared
    per-fold moments (:func:`~analysis_lib.similarity.leave_out.leave_out_suite`). Each
    measure's numbers are exactly those it gets alone on the same path (NumPy or torch;
    the ``auto`` rule may time the set and a measure alone to different paths, which agree
    to rounding)."""
    if models is not None:
        collection = subset(collection, models)
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
    estimates = pairwise_suite(layers, measures=measures, progress=False)
    left_out = leave_out_suite(layers, fold, measures)
    return {name: Jackknife(summary(M, collection),
                            pd.DataFrame([summary(K, collection) for K in left_out[name]]))
            for name, M in estimates.items()}


def summary_intervals(measure: str, collection: Collection, *, n_folds: int = 10,
                      level: float = 0.95, seed: int = 0, controlled: bool = False,
                      models: Sequence[str] | None = None
                      ) -> dict[SummaryKey, tuple[float, float]]:
    """Intervals of every :func:`summary` number of one measure:
    ``estimate +- z * se`` with the grouped-jackknife standard error of :func:`summary_jackknife`
    (``se^2 = (K - 1) / K * sum_k (theta_k - mean theta)^2``)."""
    return summary_jackknife(measure, collection, n_folds=n_folds, seed=seed,
                             controlled=controlled, models=models).intervals(level)
