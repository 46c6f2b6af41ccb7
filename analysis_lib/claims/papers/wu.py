"""Wu et al. 2020's claims, each beside the function that computes its evidence from the
statistics of a collection matrix (:func:`~analysis_lib.collection.summary` and its
jackknife, in :mod:`analysis_lib.collection`).

Three chapters test them, and the functions read their results by name:

* the representation chapter: ``summaries`` (per measure,
  :func:`~analysis_lib.collection.summary` of the collection matrix on the pretrained
  models), ``jackknives`` (per measure, a :class:`~analysis_lib.collection.Jackknife` of
  those numbers), ``measures``, ``matrices``, ``collection`` and ``models`` (for a second
  unit over models), ``localization``
  (:func:`~analysis_lib.collection.localization_frame`), ``agreements`` and
  ``n_layers`` (the second corpus), and the zoo's ``zoo_summary``, ``zoo_seeds``,
  ``zoo_controls``, ``zoo_draws`` and ``not_learned``;
* the attention chapter: ``methods`` (per method of
  :data:`~analysis_lib.similarity.attention.COMPARISONS`, its collection matrix) and
  ``collection`` (:class:`analysis_lib.collect.AttentionCollection`);
* the fine-tuning chapter: ``change``
  (:func:`~analysis_lib.collect.change_frame`, one row per model, task, seed and
  layer) and ``frozen`` (:func:`~analysis_lib.training.freezing.freezing_runs`, App. D's
  freezing of the bottom or top layers); the domains chapter: ``cross`` and its control
  ``same`` (two seeds of one task, :func:`~analysis_lib.similarity.curves.cka_by_layer`).
  Claims read from runs that failed the training gate get no verdict (``untrained``:
  :func:`~analysis_lib.claims.training_gate.training_problems`).

Each observation is a contrast of one measure with itself (linear CKA, or the last measure
given); "similar representations, different neurons" compares how each measure ranks its
across-model cells among its own within-model cells, never the raw values of two measures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from ...collection import (
    RANKED,
    Jackknife,
    PairKey,
    SummaryKey,
    matched_key,
    pair_entries,
    pair_overlap,
    per_model,
)
from ...data.corpora import SAME_TEXT
from ...layers import LayerCollection
from ...similarity.attention import DISTRIBUTED, HEAD_LEVEL
from ..claim import SIM, Evidence, NotMeasured, Paper, figure, per_value
from .merchant import depth_drop, frozen_by_seed

WU = Paper("Wu")


Summaries = Mapping[str, Mapping[SummaryKey, float]]


def _rep(measures: Sequence[str]) -> str:
    """The representation-level measure the observations are read on: linear CKA, or the
    last measure given."""
    return "linear_cka" if "linear_cka" in measures else measures[-1]


def _contrast(summaries: Summaries, jackknives: Mapping[str, Jackknife], measure: str,
              high: str, low: str) -> Evidence:
    """``high`` minus ``low`` cells of one measure, with its jackknife interval over folds
    of sentences."""
    values = summaries.get(measure, {})
    estimate = values.get(high, np.nan) - values.get(low, np.nan)
    if measure not in jackknives:
        return Evidence(measure, estimate, np.nan, note="no jackknife (n_folds < 2)")
    reps = jackknives[measure].replicates
    return Evidence.from_jackknife(measure, estimate, reps[high] - reps[low])


def _contrast_units(high: str, low: str, summaries: Summaries | None,
                    jackknives: Mapping[str, Jackknife] | None, measures: Sequence[str] | None,
                    matrices: Mapping[str, np.ndarray] | None = None,
                    collection: LayerCollection | None = None,
                    models: Sequence[str] | None = None) -> list[Evidence]:
    """The contrast over sentences (:func:`_contrast`) and, given the collection's
    ``matrices`` and at least three ``models``, a second unit: the contrast per model
    (:func:`~analysis_lib.collection.per_model`) with its t interval over the models, the
    sample the observations are about."""
    if summaries is None or not measures:
        return []
    rep = _rep(measures)
    units = [_contrast(summaries, jackknives or {}, rep, high, low)]
    if matrices is not None and collection is not None and models is not None \
            and len(models) >= 3 and rep in matrices:
        values = per_model(matrices[rep], collection, models, high, low)
        units.append(Evidence.from_named(
            f"{rep}, over {len(values)} models", values,
            note="the models' cells against each other are shared"))
    return units


def _trimmed(without_outliers: Mapping[str, Any] | None, key: str) -> Any:
    """One result computed without the outlier neurons (``without_outliers``: the
    representation chapter's results on
    :func:`~analysis_lib.collection.drop_neurons`' collection: ``outliers``,
    ``summaries``, ``jackknives``, ``localization``), or None when there is none or no
    model has an outlier neuron (then the unit would repeat the plain one)."""
    if not without_outliers or not len(without_outliers.get("outliers", ())):
        return None
    return without_outliers.get(key)


def _relabel(units: list[Evidence], suffix: str) -> list[Evidence]:
    return [replace(unit, unit=f"{unit.unit}, {suffix}") for unit in units]


#: how a unit read without the outlier neurons is labelled
WITHOUT = "without outlier neurons"


@WU.claim("wu-within-model", "§5.1, Fig. 1",
    "layers of one model are more similar to each other than to other models' layers",
    "yes, under every measure",
    "mean linear CKA within a model minus across models (pretrained models)",
    "greater", 0.02, SIM,
    control=("condition", "layers of the other models: across-model CKA"),
    paper_effect=figure("Fig. 1"),
    chapter="representation")
def within_model(summaries: Summaries | None, jackknives: Mapping[str, Jackknife] | None,
                 measures: Sequence[str] | None, matrices: Mapping[str, np.ndarray] | None,
                 collection: LayerCollection | None, models: Sequence[str] | None
                 ) -> list[Evidence]:
    """Within-model minus across-model cells, over sentences and over models."""
    return _contrast_units("within_model", "across_models", summaries, jackknives, measures,
                           matrices, collection, models)


@WU.claim("wu-neurons-differ", "§5.1, Fig. 1-2",
    "across models, representations are similar while single neurons are not",
    "representation-level measures high across models, neuronsim low",
    "rank overlap of the across-model cells with the within-model cells (the "
    "probability that a cell across two models is at least as similar as a cell within "
    "one) under linear CKA minus under neuronsim: each measure ranked against itself, so "
    "the two scales never meet",
    "greater", 0.05,
    "a 0.05 difference of overlaps is 5 in 100 pairs of cells changing order; less is "
    "within the spread of either overlap",
    control=("condition", "each measure's own within-model cells (different layers of "
                         "one model), against which its across-model cells are ranked"),
    paper_effect=figure("Figs. 1-2"),
    chapter="representation")
def neurons_differ(summaries: Summaries | None, jackknives: Mapping[str, Jackknife] | None,
                   measures: Sequence[str] | None, matrices: Mapping[str, np.ndarray] | None,
                   collection: LayerCollection | None, models: Sequence[str] | None
                   ) -> list[Evidence]:
    """The representation-level measure's ``overlap``
    (:func:`~analysis_lib.similarity.structure.rank_overlap` of the across-model cells with
    the within-model ones) minus neuronsim's: how much closer the models' layers come to
    each other's than to their own under the one measure than under the other. Read through
    ranks only, so neither measure's scale nor its chance level can set the sign; with
    replicates when both measures were jackknifed on the same folds. Given both measures'
    ``matrices``, the note gives the same difference per pair of models
    (:func:`~analysis_lib.collection.pair_overlap`), so that a reader sees whether one pair
    carries it."""
    if summaries is None or not measures:
        return []
    rep = _rep(measures)
    neuron = "neuronsim" if "neuronsim" in measures else measures[0]
    jackknives = jackknives or {}
    unit = f"{rep} vs {neuron}, rank overlap across/within"
    if rep not in summaries or neuron not in summaries or rep == neuron \
            or "overlap" not in summaries[rep] or "overlap" not in summaries[neuron]:
        return [Evidence(unit, np.nan, np.nan)]
    if _at_bound(summaries[rep]["overlap"], summaries[neuron]["overlap"]):
        raise NotMeasured(_AT_BOUND)
    estimate = summaries[rep]["overlap"] - summaries[neuron]["overlap"]
    note = ""
    if matrices is not None and collection is not None and models is not None \
            and len(models) >= 3 and rep in matrices and neuron in matrices:
        note = per_value({f"{a} - {b}": pair_overlap(matrices[rep], collection.table, a, b)
                          - pair_overlap(matrices[neuron], collection.table, a, b)
                          for i, a in enumerate(models) for b in models[i + 1:]},
                         "per pair of models")
    if rep not in jackknives or neuron not in jackknives or \
            len(jackknives[rep].replicates) != len(jackknives[neuron].replicates):
        return [Evidence(unit, estimate, np.nan,
                         note="; ".join(filter(None, ["no jackknife of both measures", note])))]
    reps = (jackknives[rep].replicates["overlap"].to_numpy()
            - jackknives[neuron].replicates["overlap"].to_numpy())
    return [Evidence.from_jackknife(unit, estimate, reps, note)]


@WU.claim("wu-lower-layers", "§5.1, Fig. 1",
    "lower layers are more similar across models than higher layers",
    "yes", "mean linear CKA across models, lower half of each model's layers minus "
           "upper half", "greater", 0.02, SIM,
    control=("condition", "the upper half of the same models' layers"),
    paper_effect=figure("Fig. 1"),
    chapter="representation")
def lower_layers(summaries: Summaries | None, jackknives: Mapping[str, Jackknife] | None,
                 measures: Sequence[str] | None, matrices: Mapping[str, np.ndarray] | None,
                 collection: LayerCollection | None, models: Sequence[str] | None
                 ) -> list[Evidence]:
    """Lower-half minus upper-half cells across models, over sentences and over models."""
    return _contrast_units("lower_across", "higher_across", summaries, jackknives, measures,
                           matrices, collection, models)


@WU.claim("wu-adjacent", "§5.1, Fig. 1",
    "adjacent layers of a model are the most similar",
    "yes", "mean linear CKA of neighbouring layers minus that of layers further apart",
    "greater", 0.02, SIM,
    control=("condition", "layers of the same model further apart"),
    paper_effect=figure("Fig. 1"),
    chapter="representation")
def adjacent(summaries: Summaries | None, jackknives: Mapping[str, Jackknife] | None,
             measures: Sequence[str] | None, matrices: Mapping[str, np.ndarray] | None,
             collection: LayerCollection | None, models: Sequence[str] | None
             ) -> list[Evidence]:
    """Neighbouring minus other layers of one model, over sentences and over models."""
    return _contrast_units("adjacent", "non_adjacent", summaries, jackknives, measures,
                           matrices, collection, models)


@WU.claim("wu-relative-depth", "§5.1, Fig. 1",
    "across models, layers at the same relative depth are the most alike",
    "yes: a bright band along each across-model block's diagonal",
    "per pair of models: mean linear CKA of their layers at matching relative depth "
    "minus over all their cross-model cells; t interval over the pairs of models; again "
    "without the models' outlier neurons (massive activations), where some have them",
    "greater", 0.02, SIM,
    control=("condition", "every cross-model cell of the same pair of models"),
    paper_effect=figure("Fig. 1"),
    chapter="representation")
def relative_depth(summaries: Summaries | None, measures: Sequence[str] | None,
                   without_outliers: Mapping[str, Any] | None) -> list[Evidence]:
    """Per pair of models, their similarity at matching relative depth minus over all their
    cross-model cells: one value per pair, a t interval over the pairs (the models are the
    sample; pairs share models, so the spread understates the error a little). A second
    unit reads the same without the models' outlier neurons, when some have them."""
    if summaries is None or not measures:
        return []
    rep = _rep(measures)
    units = _depth_gaps(summaries.get(rep, {}), rep)
    trimmed = _trimmed(without_outliers, "summaries")
    if trimmed is not None:
        units += _relabel(_depth_gaps(trimmed.get(rep, {}), rep), WITHOUT)
    return units


def _depth_gaps(values: Mapping[SummaryKey, float], rep: str) -> list[Evidence]:
    gaps = {f"{key.a} - {key.b}": values[key] - values[PairKey("pair", key.a, key.b)]
            for key in values if isinstance(key, PairKey) and key.kind == "matched"
            and PairKey("pair", key.a, key.b) in values}
    if not gaps:
        return []
    return [Evidence.from_named(f"{rep}, {len(gaps)} pairs of models", gaps,
                                note="pairs share models")]


@WU.claim("wu-localization-depth", "§5.1, Fig. 3",
    "higher layers have more localized representations than lower layers",
    "yes: the localization score mostly increases with depth in every model",
    "per pretrained model: mean localization (neuronsim minus SVCCA means, the paper's "
    "plain score) of its upper half of layers minus its lower half; t interval over "
    "the models; again on ranks among the pretrained layers (each measure's layer means "
    "ranked, so that neither measure's scale nor the random models move the score), and "
    "without the models' outlier neurons, where some have them",
    "greater", 0.02, SIM,
    control=("condition", "the lower half of the same model's layers"),
    paper_effect=figure("Fig. 3"),
    chapter="representation")
def localization_depth(localization: pd.DataFrame | None, models: Sequence[str] | None,
                       without_outliers: Mapping[str, Any] | None
                       ) -> list[Evidence]:
    """Per model of ``models`` (the pretrained ones), the mean localization (the paper's
    plain score, :func:`~analysis_lib.collection.localization_frame`) of its
    upper half of layers minus its lower half, with a t interval over the models; a second
    unit reads the same without the models' outlier neurons, when some have them."""
    if localization is None:
        raise NotMeasured("not measured: localization needs neuronsim and svcca among the "
                          "measures")
    units = _localization_gaps(localization, models)
    trimmed = _trimmed(without_outliers, "localization")
    if trimmed is not None:
        units += _relabel(_localization_gaps(trimmed, models), WITHOUT)
    return units


def _localization_gaps(localization: pd.DataFrame, models: Sequence[str] | None
                       ) -> list[Evidence]:
    """Per variant the claim reads (the paper's plain score, and the score on ranks among
    the pretrained layers, where the frame has it), one unit over the models."""
    chosen = list(models) if models is not None else list(localization.model.unique())
    out = []
    for variant, label in (("paper (plain)", ""), (RANKED, f" ({RANKED})")):
        scored = localization[(localization.variant == variant)
                              & localization.model.isin(chosen)].dropna(subset=["value"])
        gaps = {model: group.value[group.depth > 0.5].mean()
                - group.value[group.depth <= 0.5].mean()
                for model, group in scored.groupby("model", sort=False)}
        if gaps:
            out.append(Evidence.from_named(f"{len(gaps)} models, upper - lower half{label}",
                                           gaps))
    return out


@WU.claim("wu-family", "§5.1, Fig. 2",
    "models of one family (architecture and objective) are more similar",
    "yes: within-family more similar; the objective matters",
    "mean linear CKA across two bidirectional encoders minus across an encoder and a "
    "left-to-right decoder; again without the models' outlier neurons (massive "
    "activations), where some have them", "greater", 0.02, SIM,
    control=("condition", "an encoder against a left-to-right decoder (architecture and "
                         "objective differ at once)"),
    paper_effect=figure("Fig. 2"),
    chapter="representation")
def family(summaries: Summaries | None, jackknives: Mapping[str, Jackknife] | None,
           measures: Sequence[str] | None, without_outliers: Mapping[str, Any] | None,
           models: Sequence[str] | None) -> list[Evidence]:
    """Across two encoders minus across an encoder and a decoder, over sentences; a second
    unit reads the same without the models' outlier neurons, when some have them. The note
    gives the mean across each pair of models, the groups' members. Where
    two of ``models`` share a training stage besides their architecture and objective
    (:data:`SHARED_STAGES`), every unit names it: the contrast cannot tell the two
    apart."""
    units = _with_pairs(_contrast_units("encoders_across", "encoder_decoder", summaries,
                                        jackknives, measures), summaries, measures)
    trimmed = _trimmed(without_outliers, "summaries")
    if units and trimmed is not None:
        units += _relabel(_with_pairs(
            _contrast_units("encoders_across", "encoder_decoder", trimmed,
                            _trimmed(without_outliers, "jackknives"), measures),
            trimmed, measures), WITHOUT)
    shared = shared_stages(models or ())
    if shared:
        units = [replace(u, note="; ".join(filter(None, [u.note, shared]))) for u in units]
    return units


def _with_pairs(units: list[Evidence], summaries: Summaries | None,
                measures: Sequence[str] | None) -> list[Evidence]:
    """The units with the measure's mean across each pair of models in their note (the
    cells the contrast's two groups are made of), so that a reader sees how many pairs of
    models each side rests on."""
    if not units or summaries is None or not measures:
        return units
    pairs = pair_entries(summaries.get(_rep(measures), {}))
    if not pairs:
        return units
    text = "mean across each pair of models: " + ", ".join(
        f"{key.a} - {key.b} {value:.3f}" for key, value in pairs.items())
    return [replace(u, note="; ".join(filter(None, [u.note, text]))) for u in units]


#: training stages that two of the book's models share beyond their architecture and
#: objective: a contrast between model families that holds both models reads the stage too
SHARED_STAGES = {
    frozenset({"minilm", "mpnet"}): (
        "all-MiniLM-L6-v2 and all-mpnet-base-v2 were both fine-tuned with one contrastive "
        "objective on nearly the same collection of sentence pairs (their model cards list "
        "the same datasets)"),
}


def shared_stages(models: Sequence[str]) -> str:
    """The confound a family contrast over ``models`` carries: each pair of them that
    shares a training stage (:data:`SHARED_STAGES`), in words; "" when none does."""
    found = [why for pair, why in SHARED_STAGES.items() if pair <= set(models)]
    if not found:
        return ""
    return ("confounded: " + "; ".join(found) + ", so the encoders' likeness may come "
            "from that stage as much as from the family; wu-objective changes the "
            "objective alone")


@WU.claim("wu-objective", "§5.1, Fig. 2",
    "the objective alone matters: models of one architecture trained with another "
    "objective are less alike than models that differ only by seed",
    "yes: within-family more similar; the objective matters",
    "per masked-LM seed model of the zoo: mean linear CKA at matching depth to the "
    "other masked-LM seeds minus to the causal LMs of the same architecture and training "
    "length drawn from other seeds, over the seed models; again against the causal LMs at "
    "each earlier training length they keep (less trained, nearer the masked models' "
    "perplexity ratio)", "greater", 0.02, SIM,
    control=("condition", "pairs that differ only by the pretraining seed (one factor: "
                          "the objective)"),
    paper_effect=figure("Fig. 2"),
    chapter="representation")
def objective(zoo_summary: Mapping[SummaryKey, float] | None, zoo_seeds: Sequence[str] | None,
              zoo_controls: Sequence[str] | Mapping[str, Sequence[str]] | None,
              zoo_draws: Mapping[str, int] | None,
              not_learned: Sequence[str] | None,
              measures: Sequence[str] | None) -> list[Evidence]:
    """Wu et al.'s family observation with one factor changed: for each of ``zoo_seeds``
    (models of one objective that differ only by their seed), its mean similarity at
    matching depth (``zoo_summary``: :func:`~analysis_lib.collection.summary` of a
    collection holding them all, ``PairKey("matched", ...)``) to the other seeds minus its
    mean similarity to the models of ``zoo_controls`` (the same architecture and training
    length, the other objective, each drawn from its own seed). A control drawn from the
    seed model's own seed (``zoo_draws``: each model's pretraining seed; without it every
    pair counts as two draws) is left out of that seed model's mean, so both terms compare
    models of different seeds: the seed cancels and the objective is left. One value per
    seed model, a t interval over them; not measured when a model did not learn, or with
    fewer than two controls (one model of the other objective is one draw: its seed and its
    objective cannot be told apart).

    The two objectives need not learn as much in the same steps (a causal model's perplexity
    falls further below the unigram baseline's than a masked one's). ``zoo_controls`` as a
    mapping, from a training length to the controls at it (``{"at step 400":
    ["zoo:base@400", ...], "at step 1600": ["zoo:base", ...]}``), gives one unit per length: a
    gap that holds only against the most trained controls would be how much they learnt, not
    their objective."""
    if zoo_summary is None or not zoo_controls:
        raise NotMeasured("not measured: no zoo in this run (zoo_set is empty, or the word "
                          "arrays are elsewhere)")
    groups = ({str(k): list(v) for k, v in zoo_controls.items()}
              if isinstance(zoo_controls, Mapping) else {"": list(zoo_controls)})
    seeds = list(zoo_seeds or [])
    everyone = [*seeds, *(m for controls in groups.values() for m in controls)]
    skipped = [m for m in everyone if m in set(not_learned or ())]
    if skipped:
        raise NotMeasured(f"not measured: {', '.join(skipped)} did not learn")
    if len(seeds) < 2:
        raise NotMeasured("not measured: needs two seed models or more that learned (a "
                          "profile with a zoo_set trains them)")
    for controls in groups.values():
        if len(controls) < 2:
            raise NotMeasured(f"not measured: one model of the other objective "
                              f"({', '.join(controls)}) is one draw of it, whose seed and "
                              f"objective cannot be told apart; needs two or more (a zoo "
                              f"set with causal seed models: seed-1, seed-2, ...)")
    rep = _rep(measures) if measures else "linear_cka"
    return [_objective_gap(zoo_summary, seeds, controls, dict(zoo_draws or {}), rep, length)
            for length, controls in groups.items()]


def _objective_gap(zoo_summary: Mapping[SummaryKey, float], seeds: list[str],
                   controls: list[str], draws: dict[str, int], rep: str,
                   length: str) -> Evidence:
    """:func:`objective`'s unit against one set of controls."""

    def matched(a: str, b: str) -> float:
        return zoo_summary[matched_key(zoo_summary, a, b)]

    def other_draws(s: str, models: Sequence[str]) -> list[str]:
        return [t for t in models if t != s and (s not in draws or draws.get(t) != draws[s])]

    gaps = {}
    for s in seeds:
        against = other_draws(s, controls)
        if not against:
            raise NotMeasured(f"not measured: every control shares {s}'s seed")
        gaps[s] = float(np.mean([matched(s, t) for t in other_draws(s, seeds)])
                        - np.mean([matched(s, c) for c in against]))
    return Evidence.from_values(
        f"{rep}, {len(seeds)} seed models against {len(controls)} of the other objective"
        f"{' ' + length if length else ''} ({', '.join(controls)})",
        list(gaps.values()),
        note=f"the seeds' and the controls' pairs are shared; a control of a seed model's "
             f"own seed is left out of its mean; {per_value(gaps)}")


@WU.claim("wu-other-corpus", "App. B.1",
    "the similarity patterns hold on another corpus",
    "yes: the same patterns on other corpora",
    "Pearson r of the across-model cells computed on two corpora, as Fisher z with "
    "the number of layers as the sample size (cells share layers)",
    "greater", 0.5,
    "r = 0.5 (z = 0.55) means the second corpus reproduces a quarter of the "
    "pattern's variance; less would not be 'the same pattern'",
    control=("baseline", "no agreement between the corpora (r = 0)"), fisher_z=True,
    paper_effect=("App. B.1 calls the two corpora's heatmaps 'highly similar' (Figs. 8 and "
                  "9); no correlation is reported"),
    chapter="representation")
def other_corpus(agreements: Mapping[str, float] | None, n_layers: int | None,
                 corpus_overlap: float | None) -> list[Evidence]:
    """Per measure, the correlation of the across-model cells on two corpora
    (``agreements``: :func:`~analysis_lib.collection.agreement`'s
    ``across_models``), as Fisher's z with the number of layers (``n_layers``, of the second
    corpus's collection) as the sample size. ``corpus_overlap``: the share of the second
    corpus's sentences that are also in the first (:func:`analysis_lib.data.corpora.overlap`);
    from :data:`~analysis_lib.data.corpora.SAME_TEXT` on, the second corpus is not another
    corpus and the claim is not measured; below it, any shared sentences are named on the
    row."""
    if agreements is None or n_layers is None:
        raise NotMeasured("not measured: the second corpus needs the word arrays on this "
                          "machine (a run read from a sweep table has none)")
    shared = float(corpus_overlap or 0.0)
    if shared >= SAME_TEXT:
        raise NotMeasured(
            f"not measured: {shared:.0%} of the second corpus's sentences are also in the "
            f"first, so the two agree by construction (r = "
            f"{max(agreements.values(), default=float('nan')):.2f} says nothing about another "
            f"corpus); set second_corpus to a corpus of other text")
    note = f"; the corpora share {shared:.0%} of their sentences" if shared > 0 else ""
    return [Evidence.from_correlation(f"{m} (Fisher z of r = {r:.2f}{note})", r, n_layers)
            for m, r in agreements.items()]



_AT_BOUND = ("not measured: under both measures the cells across models and the cells "
             "within one do not interleave (an overlap of 0, or of 1, on each side), so "
             "their ranks cannot differ; models whose cells interleave can decide it")


def _at_bound(*overlaps: float) -> bool:
    """Whether every overlap is 0, or every one is 1: ranks that cannot tell two measures
    apart, however different their levels."""
    values = np.asarray(overlaps, dtype=float)
    return bool(values.size and (np.all(values == 0.0) or np.all(values == 1.0)))


@WU.claim("wu-attention-heads", "§5.2, Fig. 4",
    "attention is more similar across models head by head than as a whole "
    "(localized above distributed)",
    "yes: head-level similarity across models higher than distributed",
    "rank overlap of the across-model cells with the within-model cells (the "
    "probability that a cell across two models is at least as similar as a cell within "
    "one), mean over the head-level methods minus mean over the distributed ones, one "
    "value per pair of models",
    "greater", 0.05,
    "as for neurons against representations: 5 in 100 pairs of cells changing order",
    control=("condition", "each method's own within-model cells (different layers of "
                         "one model), against which its across-model cells are ranked"),
    paper_effect=figure("Fig. 4"),
    chapter="attention")
def attention_heads(methods: Mapping[str, np.ndarray] | None,
                    collection: LayerCollection | None) -> list[Evidence]:
    """Per pair of models (the pretrained ones when there are two or more), the mean of the
    head-level methods' :func:`~analysis_lib.collection.pair_overlap` minus the mean of the
    distributed ones'; one value per pair, a t interval over pairs. Each method is ranked
    against itself, so near-uniform heads, whose JS similarity is high between any two
    models, do not lift the head-level side: they are as high within a model."""
    if methods is None or collection is None:
        return []
    frame = collection.table.frame
    trained = list(dict.fromkeys(frame.model[frame.pretrained]))
    names = trained if len(trained) >= 2 else list(dict.fromkeys(frame.model))
    head = [m for m in HEAD_LEVEL if m in methods]
    dist = [m for m in DISTRIBUTED if m in methods]
    values: dict[str, float] = {}
    every: list[float] = []
    if head and dist:
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                pair = {m: pair_overlap(methods[m], collection.table, a, b)
                        for m in head + dist}
                every.extend(pair.values())
                values[f"{a} - {b}"] = float(np.mean([pair[m] for m in head])
                                             - np.mean([pair[m] for m in dist]))
    if _at_bound(*every):
        raise NotMeasured(_AT_BOUND.replace("both measures", "every method"))
    return [Evidence.from_named(f"{len(values)} pairs of models, rank overlap", values,
                                note="the pairs share models")] if values else []


@WU.claim("wu-ft-top-change", "§6, Fig. 5-6",
    "fine-tuning changes the top layers more than the lower ones",
    "yes: similarity to the pretrained model drops in the top layers",
    "per measure: similarity of base and fine-tuned model at the first transformer "
    "layer minus at the top layer (linear CKA, neuronsim, head-level JS), mean over "
    "fine-tuning seeds", "greater", 0.02, SIM,
    control=("condition", "the first transformer layer of the same runs"),
    paper_effect=figure("Figs. 5-6"),
    chapter="finetuning", gates=("untrained",))
def ft_top_change(change: pd.DataFrame | None) -> list[Evidence]:
    """Per (model, task) and measure (linear CKA, neuronsim, attention JS, those
    ``change`` holds): similarity to the base model at the first transformer layer minus at
    the top, one value per seed."""
    return [unit for measure in ("linear_cka", "neuronsim", "attention_js")
            for unit in depth_drop(change, measure)]


@WU.claim("wu-localization-ft", "§6, Fig. 7",
    "fine-tuning makes the top layers less localized",
    "yes: lower localization at the top layers after fine-tuning",
    "per model and task: localization of the pretrained model's top layer minus that "
    "of the fine-tuned model's, over fine-tuning seeds; again on ranks among each model's "
    "own layers (a top layer that becomes unlike every other layer under both measures "
    "loses nothing by that alone)",
    "greater", 0.02, SIM,
    control=("condition", "the pretrained model's own top layer, on the same words"),
    paper_effect=figure("Fig. 7"),
    chapter="finetuning", gates=("untrained",))
def localization_ft(change: pd.DataFrame | None) -> list[Evidence]:
    """Per (model, task): the pretrained model's localization at the top layer minus each
    fine-tuned seed's (Wu et al. Fig. 7), one value per seed; a second unit reads the score
    on ranks among each model's own layers, where ``change`` has it. A rank among L layers
    moves in steps of 1/(L-1), far coarser than the smallest effect: seeds whose top layer
    keeps its place under both measures read exactly 0, which the verdict rule does not
    take for "no change" (:meth:`~analysis_lib.claims.claim.Evidence.in_steps`)."""
    if change is None or "localization_ft" not in change:
        return []
    out = []
    for (model, task), group in change.groupby(["model", "task"], sort=False):
        top = group[group.layer == group.layer.max()]
        where = f"L{int(top.layer.iloc[0])} (base - tuned)"
        out.append(Evidence.from_seeds(
            f"{model}, {task}, localization at {where}",
            dict(zip(top.seed, top.localization_base - top.localization_ft))))
        if "ranked_localization_ft" in top:
            layers = group.layer.nunique()
            step = 1 / (layers - 1)  # one place in a ranking of the model's layers
            out.append(Evidence.from_seeds(
                f"{model}, {task}, localization on ranks at {where}",
                dict(zip(top.seed, top.ranked_localization_base - top.ranked_localization_ft)),
                note=f"ranks among {layers} layers: steps of {step:.3f}",
            ).in_steps(step))
    return out


@WU.claim("wu-freeze-order", "App. D, Table 1",
    "freezing the bottom layers costs less than freezing the top ones",
    "yes", "accuracy with the bottom k layers frozen minus with the top k frozen, for "
           "each k, paired by fine-tuning seed (t interval over seeds)",
    "greater", 0.005,
    "half a point of accuracy: below Wu et al.'s own bottom-minus-top gaps on three of "
    "their four tasks (0.006-0.017), so their data would pass; the book's usual 0.02 "
    "would reject most of them",
    control=("condition", "the top-k frozen run of the same seed"),
    paper_effect=("Table 1 (BERT): bottom minus top k frozen, +0.006 to +0.017 on SST-2, "
                  "MNLI and QNLI at k = 4 and 6, -0.001 and +0.001 on QQP; median of the "
                  "eight 0.009"),
    paper_value=0.009,
    chapter="finetuning")
def freeze_order(frozen: pd.DataFrame | None) -> list[Evidence]:
    """Bottom-k minus top-k frozen accuracy, per k, paired by fine-tuning seed."""
    by_seed = frozen_by_seed(frozen)
    if by_seed and not any(end == "top" for end, _ in by_seed):
        raise NotMeasured("not measured: this build froze only the bottom layers (its "
                          "freeze_ends is [bottom], as in the default profile, whose "
                          "30-minute budget leaves the top-frozen runs out); the larger "
                          "profile trains both (freeze_ends [bottom, top])")
    return [Evidence.from_paired(f"k = {k}", by_seed[("bottom", k)], by_seed[("top", k)])
            for k in sorted({k for _, k in by_seed} - {0})
            if ("bottom", k) in by_seed and ("top", k) in by_seed]


@WU.claim("wu-freeze-saves", "App. D",
    "freezing the bottom layers saves backpropagation at comparable accuracy",
    "yes: with the bottom six of twelve layers frozen, more than half of backpropagation is "
    "saved, at accuracy within a point of full fine-tuning",
    "share of the backward pass's operations (matrix products and attention) that freezing "
    "the bottom k transformer layers and the embeddings saves, per k, over training batches "
    "of the first task (mean over batches); judged only where freezing the bottom k costs "
    "little accuracy (merchant-freeze-bottom holds)",
    "greater", 0.1,
    "a tenth of the backward pass: a smaller saving would not repay the risk to accuracy "
    "that freezing takes",
    control=("condition", "the unfrozen model's backward pass on the same batches"),
    paper_effect=("App. D: more than 50% of backpropagation saved with the bottom six of "
                  "BERT's twelve layers frozen (a count; no time reported)"),
    paper_value=0.5,
    chapter="finetuning", requires="merchant-freeze-bottom")
def freeze_saves(backward: pd.DataFrame | None) -> list[Evidence]:
    """Per k, the share of the backward operations saved, one value per batch
    (:func:`~analysis_lib.training.freezing.backward_cost`). The wall time it also
    measures is this machine's and moves from run to run, so no verdict reads it."""
    if backward is None or not len(backward):
        raise NotMeasured("not measured: this build timed no backward pass with frozen layers "
                          "(it is measured beside the bottom-frozen runs, and freeze_ks is "
                          "empty, or freeze_ends lacks bottom); the default and larger "
                          "profiles measure it (freeze_ks [3])")
    return [Evidence.from_values(f"bottom {k} frozen, share of backward operations saved",
                                 group.saved) for k, group in backward.groupby("k")]


def _bottom_minus_top(frame: pd.DataFrame, top: int) -> pd.Series:
    """Linear CKA at the first transformer layer minus at layer ``top``, per seed."""
    wide = frame.pivot_table(index="seed", columns="layer", values="linear_cka")
    if 1 not in wide or top not in wide or top <= 1:
        return pd.Series(dtype=float)
    return wide[1] - wide[top]


@WU.claim("wu-cross-task", "§6, Fig. 5–6; Phang App. B, Fig. 7",
    "models fine-tuned on different tasks from one base stay alike in their bottom "
    "layers and diverge in their top layers, more than two seeds of one task do",
    "yes: bottom layers similar across tasks, top layers not",
    "per model and pair of tasks, per seed s: linear CKA between task A's model of seed s "
    "and task B's of the next seed, at the first transformer layer minus at the top layer, "
    "minus the same between task A's models of seeds s and the next (FT[1]-FT[2]), all on "
    "task A's words; t interval over seeds",
    "greater", 0.02, SIM,
    control=("condition", "two fine-tuning seeds of the same task on the same words "
                          "(FT[1]-FT[2]): how far seeds alone part at the top"),
    paper_effect=figure("Wu Figs. 5-6, Phang Fig. 7"),
    chapter="domains", gates=("untrained",))
def cross_task(cross: Mapping[tuple[str, str, str], pd.DataFrame] | None,
               same: Mapping[tuple[str, str], pd.DataFrame] | None) -> list[Evidence]:
    """Per (model, stimuli's task, other task): the two tasks' models' bottom-minus-top CKA
    (``cross``: :func:`~analysis_lib.similarity.curves.cka_by_layer` of task A's seed s against
    task B's next seed, per (model, task whose words, other task)) minus that of two seeds
    of task A (``same``: the same of task A's seed s against its next seed, per (model,
    task)), paired by seed s: only a divergence beyond what a new seed gives counts."""
    if cross and not same:
        raise NotMeasured("not measured: the control needs two fine-tuning seeds of each task "
                          "on the same words (FT[1]-FT[2], how far seeds alone part)")
    out = []
    for (model, task, other), frame in (cross or {}).items():
        control = (same or {}).get((model, task))
        if not len(frame) or control is None or not len(control):
            continue
        top = int(frame.layer.max())
        across, seeds = _bottom_minus_top(frame, top), _bottom_minus_top(control, top)
        paired = across.index.intersection(seeds.index)
        if len(paired):
            out.append(Evidence.from_seeds(
                f"{model}, {task} and {other} models on {task}'s words minus two {task} "
                f"seeds (L1 - L{top})", dict((across[paired] - seeds[paired]).items())))
    return out


#: the paper's claims, in the order above
CLAIMS = WU.claims
