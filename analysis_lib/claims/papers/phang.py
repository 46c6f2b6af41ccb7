"""Phang et al. 2021's claims, each beside the function that computes its evidence.

The fine-tuning chapter tests the block claims from its results ``views``
(:func:`~analysis_lib.collect.view_matrices` per ``(model, task, pooling)``); the
truncation chapter tests the others from ``scores`` (:func:`~analysis_lib.readout.score_grid`,
one row per seed), ``link`` (:func:`~analysis_lib.readout.cka_and_loss`) and ``skips``
(:func:`~analysis_lib.readout.skip_scores` per ``(task, seed)``). Every claim takes its
spread over fine-tuning seeds (paired by seed where two settings are compared); one seed
gives no spread to judge by. All of them read the fine-tuning grid's runs, and get no
verdict when one of those failed the training gate (``untrained``:
:func:`~analysis_lib.claims.training_gate.training_problems`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from ...similarity.structure import block_gain
from ..claim import ACC, SIM, Evidence, Level, NotMeasured, Paper, figure

PHANG = Paper("Phang")
#: a chapter's view matrices: per (model, task, pooling), per view ("FT-FT", "ORIG-ORIG",
#: ...), one layer-by-layer matrix per seed
Views = Mapping[tuple[str, str, str], Mapping[str, Sequence[np.ndarray]]]


@PHANG.claim("phang-blocks", "§3, Fig. 1-2",
    "the layers of a fine-tuned model form blocks of similar layers",
    "yes for RoBERTa and ALBERT, less for ELECTRA",
    "block gain (adjusted R^2 of the best 2-block partition minus that of a band "
    "model, in which similarity depends on distance only) of the FT-FT CLS matrix "
    "minus that of the pretrained model's ORIG-ORIG matrix, over seeds; the "
    "adjustment charges each model for its parameters",
    "greater", 0.02,
    "0.02 of explained variance is less than one layer's worth of cells in a 6-layer "
    "model; a smaller gain is no structure",
    control=("condition", "the pretrained model's own ORIG-ORIG matrix: its block gain is"
                         " subtracted from each seed's"),
    paper_effect=figure("Figs. 1-2"),
    chapter="finetuning", gates=("untrained",))
def blocks(views: Views | None) -> list[Evidence]:
    """Per (model, task): each seed's FT-FT block gain minus the pretrained model's own
    (ORIG-ORIG), the control condition: a pretrained model whose layers already form blocks
    says nothing about what fine-tuning does."""
    out = []
    for (model, task, pooling), matrices in (views or {}).items():
        if pooling != "first" or not {"FT-FT", "ORIG-ORIG"} <= set(matrices):
            continue
        control = block_gain(matrices["ORIG-ORIG"][0])
        out.append(_over_seeds(f"{model}, {task}, FT-FT CLS - ORIG-ORIG ({control:+.3f})",
                               matrices, [block_gain(M) - control
                                          for M in matrices["FT-FT"]]))
    return out


def _over_seeds(unit: str, matrices: Mapping[str, Sequence[np.ndarray]],
                values: Sequence[float]) -> Evidence:
    """One value per fine-tuning seed, named by seed where the views carry their seeds
    (:class:`~analysis_lib.similarity.structure.SeedViews`), so that the note shows which
    run carries the mean."""
    seeds = _seeds_of(matrices, len(values))
    if seeds is None:
        return Evidence.from_values(unit, values)
    return Evidence.from_seeds(unit, dict(zip(seeds, values)))


def _seeds_of(matrices: Mapping[str, Sequence[np.ndarray]], count: int
              ) -> tuple[Any, ...] | None:
    """The fine-tuning seeds the views' per-seed lists follow
    (:class:`~analysis_lib.similarity.structure.SeedViews`), or None where the views carry
    none or not ``count`` of them."""
    seeds = getattr(matrices, "seeds", None)
    return tuple(seeds) if seeds is not None and len(seeds) == count else None


@PHANG.claim("phang-ft-orig", "§3, Fig. 5",
    "fine-tuned and pretrained layers agree at the bottom and part at the top",
    "yes: FT-ORIG similarity falls with depth",
    "FT-ORIG diagonal linear CKA (CLS) at the first transformer layer minus at the top "
    "layer, over seeds", "greater", 0.02, SIM,
    control=("condition", "the first transformer layer of the same runs"),
    paper_effect=figure("Fig. 5"),
    chapter="finetuning", gates=("untrained",))
def ft_orig(views: Views | None) -> list[Evidence]:
    """Per (model, task): the FT-ORIG diagonal at the first transformer layer minus at the
    top one, one value per seed."""
    out = []
    for (model, task, pooling), matrices in (views or {}).items():
        if pooling == "first" and "FT-ORIG" in matrices:
            out.append(_over_seeds(f"{model}, {task}, FT-ORIG CLS (L1 - top)", matrices,
                                   [float(M[1, 1] - M[-1, -1])
                                    for M in matrices["FT-ORIG"]]))
    return out


@PHANG.claim("phang-restarts", "§3, Figs. 1 and 6",
    "two random restarts of fine-tuning end with alike top layers, though each has left "
    "the pretrained model's",
    "yes: FT[1]-FT[2] CLS similarity stays high in the later layers, where FT-ORIG is low",
    "linear CKA (CLS) between two fine-tuning seeds at the top layer minus the mean of "
    "their CKA to the pretrained model at that layer (FT-ORIG diagonal), mean over pairs "
    "of seeds (grouped jackknife over seeds: pairs share seeds)",
    "greater", 0.02, SIM,
    control=("condition", "the pretrained model's same layer, which both restarts start "
                          "from: two restarts alike only through it would be no closer to "
                          "each other than to it"),
    paper_effect=figure("Figs. 1, 5 and 6"),
    chapter="finetuning", gates=("untrained",))
def restarts(views: Views | None) -> list[Evidence]:
    """Per (model, task): for each pair of seeds (the order of
    :func:`~analysis_lib.similarity.structure.phang_views`), FT[1]-FT[2] at the top layer
    minus the mean of the two seeds' FT-ORIG there; the estimate is the mean over pairs,
    its standard error a jackknife that leaves out one seed (and every pair with it):
    :meth:`~analysis_lib.claims.claim.Evidence.from_seed_pairs`, whose note names the seeds
    where the views carry them (:class:`~analysis_lib.similarity.structure.SeedViews`)."""
    out = []
    for (model, task, pooling), matrices in (views or {}).items():
        if pooling != "first" or not {"FT[1]-FT[2]", "FT-ORIG"} <= set(matrices):
            continue
        to_base = [float(M[-1, -1]) for M in matrices["FT-ORIG"]]
        # no seeds carried: the runs' places stand for them
        seeds = _seeds_of(matrices, len(to_base)) or tuple(range(len(to_base)))
        pairs = list(itertools.combinations(range(len(to_base)), 2))
        gaps = {(seeds[a], seeds[b]): float(M[-1, -1]) - (to_base[a] + to_base[b]) / 2
                for (a, b), M in zip(pairs, matrices["FT[1]-FT[2]"])}
        out.append(Evidence.from_seed_pairs(
            f"{model}, {task}, FT[1]-FT[2] - FT-ORIG at the top (CLS)", gaps))
    return out


def per_seed(scores: pd.DataFrame | None, statistic: Callable[[pd.DataFrame], float],
             label: str, level: Callable[[pd.DataFrame], Level | None] | None = None
             ) -> list[Evidence]:
    """One :class:`Evidence` per (model, task): ``statistic(rows of one seed)`` over seeds;
    ``level(rows of the unit)``, when given, is a variable the statistic reads beside its
    floor (:class:`~analysis_lib.claims.claim.Level`; None: none to read)."""
    out = []
    for (model, task), group in ([] if scores is None else
                                 scores.groupby(["model", "task"], sort=False)):
        values = {seed: statistic(seed_rows) for seed, seed_rows in group.groupby("seed")}
        evidence = Evidence.from_seeds(f"{model}, {task}, {label}", values)
        found = level(group) if level is not None else None
        out.append(evidence.reading(found) if found is not None else evidence)
    return out


def full_minus(config: str, below: int) -> Callable[[pd.DataFrame], float]:
    """The statistic of one seed's rows: the full model's accuracy minus ``config``'s
    (``"UNTUNED"``, ``"TUNED"``) ``below`` layers under the top."""
    def statistic(rows: pd.DataFrame) -> float:
        layer = int(rows.layer.max()) - below
        at = rows[(rows.config == config) & (rows.layer == layer)]
        return float(rows.full.iloc[0] - at.accuracy.iloc[0]) if len(at) else float("nan")
    return statistic


@PHANG.claim("phang-untuned", "§4, Fig. 3",
    "the top layers can be dropped with no retraining (UNTUNED close to the full "
    "model a few layers below the top)",
    "yes for RoBERTa and ALBERT, no for ELECTRA",
    "full model's test accuracy minus UNTUNED's two layers below the top, over seeds",
    "at_most", 0.02, ACC,
    control=("baseline", "the full model's own accuracy, same seed"),
    paper_effect=("§4: RoBERTa on Yelp Polarity with its top 4 of 12 layers dropped, UNTUNED "
                  "95.5 against the full model's 96.1: a gap of 0.006"),
    paper_value=0.006,
    chapter="truncation", gates=("untrained",), requires="phang-blocks")
def untuned(scores: pd.DataFrame | None, dropped: int = 2) -> list[Evidence]:
    """Per (model, task): the full model minus UNTUNED ``dropped`` layers below the top (the
    claim reads two), per seed. ``dropped`` is a setting: the truncation page judges the
    claim at every depth with it, and at Phang et al.'s share of the depth
    (:data:`PHANG_SHARE`)."""
    return per_seed(scores, full_minus("UNTUNED", dropped), "full - UNTUNED")


@PHANG.claim("phang-tuned", "§4, Fig. 3",
    "a head retrained on a lower layer does as well as the full model",
    "yes: TUNED plateaus well below the top",
    "full model's test accuracy minus TUNED's two layers below the top, over seeds",
    "at_most", 0.02, ACC,
    control=("baseline", "the full model's own accuracy, same seed"),
    paper_effect=figure("Fig. 3"),
    chapter="truncation", gates=("untrained",))
def tuned(scores: pd.DataFrame | None) -> list[Evidence]:
    """Per (model, task): the full model minus TUNED two layers below the top, per seed."""
    return per_seed(scores, full_minus("TUNED", 2), "full - TUNED")


def _tuned_gain(rows: pd.DataFrame) -> float:
    """One seed's TUNED minus TUNEDORIG, mean over the layers whose TUNEDORIG head learnt
    (clear of the majority baseline, :func:`_orig_floor`; every layer without the
    baseline); NaN when none did."""
    tuned = rows[rows.config == "TUNED"].set_index("layer").accuracy
    orig = rows[rows.config == "TUNEDORIG"].set_index("layer").accuracy
    level = _orig_floor(rows)
    if level is not None:
        orig = orig[level.is_clear]
    gaps = (tuned - orig).dropna()
    return float(gaps.mean()) if len(gaps) else float("nan")


@PHANG.claim("phang-tuned-orig", "§4, Fig. 3",
    "fine-tuned layers are better features than pretrained ones",
    "yes: TUNED above TUNEDORIG",
    "TUNED minus TUNEDORIG accuracy, mean over the transformer layers whose TUNEDORIG head "
    "learnt (clear of the majority baseline), over seeds",
    "greater", 0.02, ACC,
    control=("baseline", "a head on the pretrained model's layer (TUNEDORIG), same seed"),
    paper_effect=("§4: TUNEDORIG 'performs very poorly' against TUNED at every layer; "
                  + figure("Fig. 3")),
    chapter="truncation", gates=("untrained",))
def tuned_orig(scores: pd.DataFrame | None) -> list[Evidence]:
    """Per (model, task): TUNED minus TUNEDORIG, mean over layers, per seed. TUNEDORIG's
    accuracy is read beside its floor, the majority baseline: a head on a pretrained layer
    that stayed at the majority class did not learn, and a difference read there measures
    the head's failure, not the features, so such layers are left out of the mean (the
    unit names how many, and reads the level of the heads it keeps, all clear of the floor,
    so that the floor is not named as the cause of an undecided verdict it did not touch)
    and the unit is refused when no head learnt."""
    out = []
    for evidence in per_seed(scores, _tuned_gain, "TUNED - TUNEDORIG", _orig_floor):
        level = evidence.levels[0] if evidence.levels else None
        if level is not None and level.at_level and not level.stuck:
            kept = level.is_clear
            evidence = replace(evidence, note="; ".join(filter(None, (
                evidence.note, f"{level.at_level} of {len(level.values)} TUNEDORIG heads at "
                "the majority class left out of the mean"))), levels=(Level.accuracy(
                    level.variable, np.compress(kept, level.values),
                    np.compress(kept, level.bound)),))
        out.append(evidence)
    return out


def _orig_floor(rows: pd.DataFrame) -> Level | None:
    """TUNEDORIG's accuracies in the rows given (one seed's, or one unit's) beside the
    majority baseline (None without the baseline)."""
    orig = rows[rows.config == "TUNEDORIG"]
    if "majority" not in orig or not len(orig):
        return None
    return Level.accuracy(f"TUNEDORIG's test accuracy ({rows.task.iloc[0]}, per layer and "
                          "seed)", orig.accuracy, orig.majority)


#: the share of depth Phang et al. drop in the example of :func:`untuned`'s claim (§4: the top
#: four of RoBERTa-base's twelve layers on Yelp Polarity, UNTUNED 95.5 against 96.1)
PHANG_SHARE = 4 / 12


@PHANG.claim("phang-cka-predicts", "§4",
    "layers whose CLS resembles the last layer's lose little when the top is cut",
    "implied by the block structure",
    "within each task: Pearson r of CKA-to-last-layer with accuracy lost (UNTUNED), as "
    "Fisher z over layers", "less", 0.3,
    "|r| = 0.3 is the conventional 'moderate' correlation; a weaker link would not "
    "let a reader predict anything from CKA",
    control=("baseline", "no relation (r = 0)"), fisher_z=True,
    paper_effect=("not reported: the paper implies the link from its block structure and "
                  "computes no correlation"),
    chapter="truncation", gates=("untrained",), requires="phang-blocks")
def cka_predicts(link: pd.DataFrame | None) -> list[Evidence]:
    """Within each task (pooling tasks mixes their levels): Pearson r of CKA-to-last with
    accuracy lost, as Fisher z. UNTUNED's accuracy is read beside its floor, the majority
    baseline (when ``link`` holds ``untuned`` and ``majority``): a correlation needs at
    least three layers clear of it, else it reads how many layers sit at the floor."""
    out = []
    for task, group in ([] if link is None else link.groupby("task", sort=False)):
        x, y = group.cka_to_last.to_numpy(), group.accuracy_lost.to_numpy()
        r = float(np.corrcoef(x, y)[0, 1]) if len(x) > 2 and x.std() > 0 and y.std() > 0 \
            else float("nan")
        evidence = Evidence.from_correlation(f"{task} (Fisher z of r = {r:.2f})", r,
                                             len(group))
        if {"untuned", "majority"} <= set(group):
            evidence = evidence.reading(Level.accuracy(
                f"UNTUNED's test accuracy ({task}, per layer)", group.untuned, group.majority,
                needed=3))
        out.append(evidence)
    return out


@PHANG.claim("phang-skip-bottom", "§4, Fig. 4",
    "skipping a single lower layer costs more than skipping a single upper one",
    "yes: the first layers matter most; single upper layers can be skipped",
    "test accuracy with one upper layer skipped (the mean over the upper half's layers "
    "below the top: skipping the top layer is UNTUNED one layer down, phang-untuned's "
    "computation) minus with the first one skipped, per fine-tuning seed (t interval over "
    "seeds)",
    "greater", 0.02, ACC,
    control=("condition", "the first transformer layer skipped, same seed"),
    paper_effect=figure("Fig. 4"),
    chapter="truncation", gates=("untrained",))
def skip_bottom(skips: Mapping[tuple[str, int], pd.DataFrame] | None) -> list[Evidence]:
    """Per task: the mean accuracy with one upper layer skipped minus the accuracy with the
    first transformer layer skipped, one value per fine-tuning seed (``skips`` keyed
    ``(task, seed)``). The upper layers are those of the upper half below the top one:
    skipping the top layer hands the head the layer below it, which is UNTUNED one layer
    down (``phang-untuned``), not a skipped layer inside the model. A model of fewer than
    three transformer layers has no such layer, and the claim is not measured.

    The upper skips' accuracy is read beside its floor, the majority baseline (where the
    frames hold it, :func:`~analysis_lib.readout.skip_scores`' ``majority``): a model that
    falls to the majority class whichever single layer is skipped costs the same at both
    ends, and a difference read there measures that, not which layers matter. The unit
    is refused unless most seeds' upper skips lie clear of it; the first layer's skip may
    sit at the floor, which is the effect the claim predicts."""
    values: dict[str, dict[int, float]] = {}
    labels: dict[str, str] = {}
    upper_means: dict[str, list[tuple[float, float]]] = {}
    for (task, seed), frame in (skips or {}).items():
        single = frame[frame.single].set_index("first").accuracy
        top, bottom = int(single.index.max()), int(single.index.min())
        upper = [k for k in single.index if top / 2 < k < top]
        if not upper or bottom in upper:
            continue
        values.setdefault(task, {})[seed] = float(single[upper].mean() - single[bottom])
        labels[task] = (f"{task}: skip L{min(upper)}" + (f"-L{max(upper)}" if len(upper) > 1
                        else "") + f" (mean) - skip L{bottom}")
        if "majority" in frame and np.isfinite(frame.majority.iloc[0]):  # NaN: regression
            upper_means.setdefault(task, []).append(
                (float(single[upper].mean()), float(frame.majority.iloc[0])))
    if skips and not values:
        raise NotMeasured("no model has an upper layer below its top one to skip (fewer "
                          "than three transformer layers): skipping the top layer is "
                          "UNTUNED one layer down, phang-untuned's computation")
    out = []
    for task, by_seed in values.items():
        evidence = Evidence.from_seeds(labels[task], by_seed)
        read = upper_means.get(task, [])
        if len(read) == len(by_seed):
            accuracies, majorities = zip(*read)
            evidence = evidence.reading(Level.accuracy(
                f"the accuracy with one upper layer skipped ({task}, per seed)", accuracies,
                majorities, needed=len(read) // 2 + 1))
        out.append(evidence)
    return out


#: the paper's claims, in the order above
CLAIMS = PHANG.claims
