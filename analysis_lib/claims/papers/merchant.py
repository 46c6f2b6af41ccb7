"""Merchant et al. 2020's claims, each beside the function that computes its evidence.

Three chapters test them, and the functions read their results by name:

* the fine-tuning chapter: ``change``
  (:func:`~analysis_lib.collect.change_frame`, one row per model, task, seed and
  layer) and ``frozen`` (:func:`~analysis_lib.training.freezing.freezing_runs`);
* the truncation chapter: ``truncated`` and
  ``full`` (:func:`~analysis_lib.readout.truncated_runs` and the uncut model's
  accuracy per fine-tuning seed) beside ``scores``, whose layers give the model's depth;
* the domains chapter: ``curves``
  (:func:`~analysis_lib.similarity.curves.bootstrap_rsa` curves of every model, task and
  domain), ``sources`` (task -> domain -> corpus), ``probes`` (per (model, task),
  :func:`~analysis_lib.training.probes.label_probes` of the base model and of each
  fine-tuned seed) and ``structural`` (the same with
  :func:`~analysis_lib.training.probes.structural_probes`).

Depth claims compare the first transformer layer with the top one (the embedding layer,
shared by construction when it is frozen, is never the baseline), per seed; settings of
fine-tuning (frozen or not, cut or not) are compared seed by seed, with their spread over
seeds. Claims read from runs that failed the training gate get no verdict.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ...data.corpora import SAME_TEXT
from ...similarity.curves import DOMAINS
from ..claim import (
    ACC,
    SIM,
    DidNotTrain,
    Evidence,
    Level,
    NotMeasured,
    Paper,
    Uncontrolled,
    figure,
)

MERCHANT = Paper("Merchant")
#: the two domains of a task's stimuli


def depth_drop(change: pd.DataFrame | None, measure: str) -> list[Evidence]:
    """Per (model, task): ``measure`` at the first transformer layer minus at the top layer,
    one value per seed (no units when ``change`` lacks the measure)."""
    if change is None or measure not in change:
        return []
    out = []
    for (model, task), group in change.groupby(["model", "task"], sort=False):
        top = int(group.layer.max())
        by_seed = group.set_index(["seed", "layer"])[measure]
        values = {seed: by_seed.get((seed, 1), np.nan) - by_seed.get((seed, top), np.nan)
                  for seed in group.seed.unique()}
        out.append(Evidence.from_seeds(f"{model}, {task}, {measure} (L1 - L{top})",
                                       values))
    return out


@MERCHANT.claim("merchant-depth", "§5.1, Fig. 2",
    "fine-tuning changes mostly the top layers",
    "yes: RSA to the pretrained model stays high in the lower layers, falls at the top",
    "in-domain RSA (base vs fine-tuned, word tokens) at the first transformer layer "
    "minus at the top layer, over seeds", "greater", 0.02, SIM,
    control=("condition", "the first transformer layer of the same runs"),
    paper_effect=("§5.1: MNLI's RSA to the base model is still 0.84 +- 0.02 at the "
                  "second-to-last layer and drops at the last; the first layer's is "
                  + figure("Fig. 2")),
    chapter="finetuning", gates=("untrained",))
def depth(change: pd.DataFrame | None) -> list[Evidence]:
    """RSA to the base model at the first transformer layer minus at the top, per seed."""
    return depth_drop(change, "rsa")


def _rsa_below(change: pd.DataFrame, top: int) -> pd.DataFrame:
    """RSA to the base model at layers ``1..top-1``, one column per seed."""
    inside = change[(change.layer >= 1) & (change.layer < top)]
    return inside.pivot(index="layer", columns="seed", values="rsa")


#: the task suffix of a word-level (tagging) task on a sentence task's own inputs
#: (:func:`~analysis_lib.data.labels.silver_task`)
TAGGING = ":pos"
#: the task suffix of the tagging task's control: a tag per word fixed by the word's type
#: (:func:`~analysis_lib.data.labels.control_labels`), token-level supervision without syntax
CONTROL = ":control"


@MERCHANT.claim("merchant-task-depth", "§5.1, Fig. 2; abstract",
    "a syntactic task changes the model deeper than a sentence-level task",
    "yes: the dependency-parsing model departs from the base from layers 4-5 of 12, MNLI "
    "and SQuAD only in the top layers",
    "RSA to the base model (word tokens) averaged over the transformer layers below the "
    "top: the sentence-level model's minus the tagging model's (silver parts of speech of "
    "the same training inputs), paired by fine-tuning seed (t interval over seeds); where "
    "the control task was trained (a random tag per word type), a second unit: the "
    "control model's minus the tagging model's, both tagging every word",
    "greater", 0.02, SIM,
    control=("condition", "the sentence-level model fine-tuned on the same inputs with the "
                          "same seed: the two differ by their objective alone; the control "
                          "task's model, which tags every word too, but by its type"),
    paper_effect=figure("Fig. 2"),
    chapter="finetuning", gates=("untrained", "untrained_tagging"))
def task_depth(change: pd.DataFrame | None, tagging: pd.DataFrame | None,
               tagging_control: pd.DataFrame | None,
               untrained_control: Mapping[str, str] | None) -> list[Evidence]:
    """Per model: for each seed, the mean over layers ``1..L-1`` of the sentence-level
    model's RSA to the base minus the tagging model's (``tagging``: the rows of
    :func:`~analysis_lib.collect.change_frame` for tasks ``"<task>:pos"``; the
    sentence-level rows of ``<task>`` are in ``change``). The note names the layer where the
    two part most. A build without tagging runs reads not measured, naming the profile that
    trains them.

    The two models differ in two ways: the tagging task is syntactic, and it labels every
    token where the sentence-level task labels the input. ``tagging_control`` (the rows of
    the control task ``"<task>:control"``, every word tagged by its type) separates them: a
    second unit, the control model's RSA minus the tagging model's, asks whether the syntax
    reaches deeper than token-level supervision alone. Without trained control runs
    (none, or ``untrained_control`` names why they did not train) the claim's factor, the
    syntax, is not told apart from the supervision of every token: it reads not measured
    (:class:`~analysis_lib.claims.claim.Uncontrolled`), naming the confound and what the
    sentence-level units alone would read."""
    if change is None or "rsa" not in change:
        return []
    if tagging is None or not len(tagging):
        raise NotMeasured("not measured: this build trained no tagging runs (its tagging is "
                          "none, as in the default profile, whose 30-minute budget leaves "
                          "out the tagging task and its control); the larger profile trains "
                          "both (tagging: controlled)")
    out, uncontrolled = [], []
    for (model, tag_task), tagged in tagging.groupby(["model", "task"], sort=False):
        task = tag_task.removesuffix(TAGGING)
        own = change[(change.model == model) & (change.task == task)]
        if not len(own):
            raise NotMeasured(f"not measured: the tagging runs of {task} have no "
                              f"sentence-level runs of {task} beside them")
        top = int(own.layer.max())
        units = [_parted(own, tagged, top, f"{model}, {task} against {tag_task}")]
        control = (None if tagging_control is None or not len(tagging_control) else
                   tagging_control[(tagging_control.model == model)
                                   & (tagging_control.task == task + CONTROL)])
        if untrained_control or control is None or not len(control):
            why = ("its control runs did not train: " + "; ".join(untrained_control.values())
                   if untrained_control else "none was trained here (its tagging is task; "
                                             "the larger profile trains it: tagging: "
                                             "controlled)")
            uncontrolled.append(why)
        else:
            units.append(_parted(control, tagged, top,
                                 f"{model}, {task + CONTROL} against {tag_task}"))
        out += units
    if uncontrolled:
        raise Uncontrolled(confound("; ".join(dict.fromkeys(uncontrolled))), out)
    return out


def _parted(shallow: pd.DataFrame, deep: pd.DataFrame, top: int, name: str) -> Evidence:
    """The mean over layers ``1..top-1`` of ``shallow``'s RSA to the base minus ``deep``'s,
    per seed (paired), noting the layer where the two part most."""
    gap = (_rsa_below(shallow, top) - _rsa_below(deep, top)).dropna(axis=1, how="all")
    widest = int(gap.mean(axis=1).idxmax())
    return Evidence.from_seeds(f"{name}, L1-L{top - 1}", gap.mean(axis=0).to_dict(),
                               note=f"the two part most at L{widest} "
                                    f"({gap.mean(axis=1).max():+.3f})")


def confound(why: str) -> str:
    """Why a tagging-against-sentence unit cannot judge the claim without the control
    task."""
    return ("not measured: the tagging model differs from the sentence-level one twice over "
            "(its task is syntactic, and it labels every token), so the depth may come from "
            "token-level supervision as much as from syntax; the control task (a random tag "
            f"per word type) tells them apart, and {why}")


def crossed(sources: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether the tasks' stimuli cross: every corpus is in-domain for one task exactly as
    often as it is out-of-domain for another (``sources``: task -> domain -> corpus, from
    :attr:`~analysis_lib.data.stimuli.DomainSample.source`). Then the mean over the
    tasks of out- minus in-domain RSA is a difference in differences: each corpus's own
    effect on RSA (some stimuli keep RSA higher under any model) enters once with each sign
    and cancels, and what is left is whether a model changes its own task's inputs more."""
    inside = sorted(pair["in-domain"] for pair in sources.values())
    outside = sorted(pair["out-of-domain"] for pair in sources.values())
    return len(sources) >= 2 and inside == outside


@MERCHANT.claim("merchant-domain", "§6, Fig. 5",
    "fine-tuning changes in-domain inputs more than out-of-domain ones",
    "yes: RSA to the base model lower in-domain",
    "out-of-domain minus in-domain RSA at the top layer, averaged over tasks whose "
    "corpora cross (each corpus once in-domain, once out-of-domain), bootstrap over "
    "sentences and seeds", "greater", 0.02, SIM,
    control=("condition", "the other task's model on the same corpus: the tasks' corpora "
                         "cross, so the stimuli's own effect cancels"),
    paper_effect="a 'significantly larger' change in-domain, " + figure("Fig. 5"),
    chapter="domains", gates=("untrained",))
def domain(curves: pd.DataFrame | None, sources: Mapping[str, Mapping[str, str]] | None,
           domain_overlap: Mapping[str, float] | None) -> list[Evidence]:
    """One unit per model: out-of-domain minus in-domain RSA at the top layer, averaged over
    the tasks, with the bootstrap standard errors of the curves (sentences and seeds
    resampled; the resamples of each curve are independent) combined. The tasks' stimuli
    must cross (:func:`crossed`); otherwise the contrast mixes the domain with the stimuli's
    own effect, and the claim is not measured. ``domain_overlap``: per task, the share of
    its out-of-domain sentences that are also in its in-domain sample
    (:func:`analysis_lib.data.corpora.overlap`); a task whose two domains share
    :data:`~analysis_lib.data.corpora.SAME_TEXT` of them or more has no out-of-domain
    text, and the claim is not measured."""
    if curves is None or sources is None:
        return []
    repeated = {task: share for task, share in (domain_overlap or {}).items()
                if share >= SAME_TEXT}
    if repeated:
        raise NotMeasured(
            "not measured: " + "; ".join(
                f"{task}'s out-of-domain sample repeats {share:.0%} of its in-domain text"
                for task, share in repeated.items())
            + "; out minus in would compare a corpus with itself: set other_domains to a "
              "corpus of other text")
    if not crossed(sources):
        raise NotMeasured(
            "not measured: the tasks' corpora do not cross (each corpus must be in-domain "
            "for one task and out-of-domain for another), so out minus in would mix the "
            "domain with the stimuli; set other_domains to swap the tasks' corpora")
    evidence = []
    for model, by_model in curves.groupby("model", sort=False):
        gaps, variances = {}, []
        for task, group in by_model.groupby("task", sort=False):
            top = group[group.layer == group.layer.max()].set_index("domain")
            if set(DOMAINS) <= set(top.index):
                inside, outside = top.loc["in-domain"], top.loc["out-of-domain"]
                gaps[task] = float(outside.rsa - inside.rsa)
                variances += [float(inside.se) ** 2, float(outside.se) ** 2]
        if len(gaps) == len(sources):
            per_task = ", ".join(f"{task} {gap:+.3f}" for task, gap in gaps.items())
            evidence.append(Evidence(
                f"{model}, {' and '.join(gaps)} crossed, top layer",
                float(np.mean(list(gaps.values()))),
                float(np.sqrt(np.sum(variances)) / len(gaps)),
                note=f"per task, out minus in: {per_task}; each task's own gap also holds "
                     "the difference of the two corpora, which only the mean cancels"))
    return evidence


@MERCHANT.claim("merchant-no-forgetting", "§4, Table 1",
    "fine-tuning keeps what the base model encodes: no catastrophic forgetting",
    "yes: edge-probing F1 drops of 0.5-2 points after fine-tuning",
    "per model and task: held-out accuracy of linear probes for silver parts of speech and "
    "dependency relations (spaCy's labels of the in-domain words) at the base model's best "
    "transformer layer minus at the fine-tuned model's best, mean over the two label sets, "
    "over seeds (the embedding layer excluded)",
    "at_most", 0.02,
    "the paper's own drops are up to 2 points of F1; 0.02 of accuracy is of that size",
    control=("condition", "the pretrained model's own layers, on the same words, labels and "
                          "probe"),
    paper_effect=("Table 1: mean F1 drop over the eight edge-probing tasks of 0.7 (MNLI), "
                  "1.2 (SQuAD) and 0.2 (Dep) points, within the +-0.7 of fine-tuning seeds; "
                  "at most 0.012 as a fraction (F1 of gold labels; accuracy of silver ones "
                  "here)"),
    paper_value=0.012,
    chapter="domains", gates=("untrained",))
def no_forgetting(probes: Mapping[tuple[str, str], tuple[pd.DataFrame,
                                                          Mapping[int, pd.DataFrame]]] | None
                  ) -> list[Evidence]:
    """Per (model, task): the base model's best-layer probe accuracy minus each fine-tuned
    seed's, mean over the label sets, one value per seed; the note gives each label set's
    mean drop, the same at the top layer, which the best layers leave out, and the base
    model's best probe and its layer beside the embedding layer's probe and the majority
    class (how much there is to forget).

    Two floors: a probe at the majority class has nothing to forget, and a best layer no
    better than the embedding layer's probe (``lexical``: the word's identity, no context)
    reads what no fine-tuning of the layers above can take away, so "nothing forgotten"
    would be true by construction. A unit whose base probes sit at either is refused."""
    out = []
    for (model, task), (base, tuned) in (probes or {}).items():
        best = base.groupby("labels").accuracy.max()
        drops = pd.DataFrame([best - frame.groupby("labels").accuracy.max()
                              for frame in tuned.values()])
        top = int(base.layer.max())
        at_top = pd.DataFrame([_at_layer(base, top) - _at_layer(frame, top)
                               for frame in tuned.values()]).mean()
        note = ("per label set: " + ", ".join(f"{name} {drop:+.3f}"
                                              for name, drop in drops.mean().items())
                + f"; at the top layer L{top}: "
                + ", ".join(f"{name} {drop:+.3f}" for name, drop in at_top.items())
                + "; " + _headroom(base))
        evidence = Evidence.from_seeds(f"{model}, {task}, best layer (base - tuned)",
                                       dict(zip(tuned, drops.mean(axis=1))), note)
        for level, what in (("majority", "the majority class"),
                            ("lexical", "the embedding layer's probe")):
            if level in base:
                evidence = evidence.reading(Level.accuracy(
                    f"the base model's best probe accuracy ({task}, per label set) against "
                    f"{what}", best, base.groupby("labels")[level].first()[best.index],
                    needed=len(best)))
        out.append(evidence)
    return out


def _headroom(base: pd.DataFrame) -> str:
    """The base model's best probe per label set, its layer, and the levels a probe that
    reads nothing (the majority class) or the word alone (the embedding layer) reaches:
    the room there is to forget."""
    parts = []
    for name, rows in base.groupby("labels", sort=True):
        best = rows.loc[rows.accuracy.idxmax()]
        levels = [f"{what} {float(rows[level].iloc[0]):.3f}"
                  for level, what in (("lexical", "embedding layer"),
                                      ("majority", "majority class")) if level in rows]
        parts.append(f"{name} {best.accuracy:.3f} at L{int(best.layer)}"
                     + (f" ({', '.join(levels)})" if levels else ""))
    return "the base model's best: " + ", ".join(parts)


def _at_layer(frame: pd.DataFrame, layer: int) -> pd.Series:
    """A probe table's accuracy per label set at one layer."""
    return frame[frame.layer == layer].set_index("labels").accuracy.sort_index()


@MERCHANT.claim("merchant-structural", "§4.1, Fig. 1",
    "fine-tuning keeps the syntactic structure a structural probe finds",
    "yes: the depth and distance probes' Spearman correlations stay stable after MNLI and "
    "SQuAD fine-tuning, with small drops in the final layer; the parsing model's rise",
    "per model, task and probe (depth and distance): Spearman correlation of the structural "
    "probe's predicted and silver tree depths or distances (spaCy's parses of the in-domain "
    "words, held-out sentences) at the base model's best transformer layer minus at the "
    "fine-tuned model's best, over seeds (the embedding layer excluded)",
    "at_most", 0.02,
    "the paper calls the changes minimal and states no number; 0.02 is the smallest effect "
    "of the book's other probes (merchant-no-forgetting), here on Spearman's scale",
    control=("condition", "the pretrained model's own layers, on the same words, depths and "
                          "probe"),
    paper_effect=figure("Fig. 1"),
    chapter="domains", gates=("untrained",))
def structural(structural: Mapping[tuple[str, str], tuple[pd.DataFrame,
                                                          Mapping[int, pd.DataFrame]]] | None
               ) -> list[Evidence]:
    """Per (model, task) and probe: the base model's best-layer Spearman correlation minus
    each fine-tuned seed's (:func:`~analysis_lib.training.probes.structural_probes`: a
    ``probe`` column, ``"depth"`` or ``"distance"``; a table without it is the depth
    probe's), one value per seed; the note gives the best layers."""
    if not structural:
        raise NotMeasured("not measured: this build ran no structural probe (its "
                          "structural_rank is 0); the default and larger profiles run it "
                          "(structural_rank 32)")
    out = []
    for (model, task), (base_all, tuned_all) in structural.items():
        for probe, base in _by_probe(base_all):
            tuned = [dict(_by_probe(frame))[probe] for frame in tuned_all.values()]
            best = base.spearman.max()
            drops = dict(zip(tuned_all, (best - frame.spearman.max() for frame in tuned)))
            layers = ", ".join(str(int(frame.layer[frame.spearman.idxmax()]))
                               for frame in tuned)
            note = (f"base {best:.3f} at layer {int(base.layer[base.spearman.idxmax()])}; "
                    f"fine-tuned seeds' best layers {layers}")
            out.append(Evidence.from_seeds(
                f"{model}, {task}, {probe} probe, best layer (base - tuned)", drops, note))
    return out


def _by_probe(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """A structural probe table's rows per probe (a table without ``probe``: the depth
    probe's)."""
    if "probe" not in frame:
        return [("depth", frame)]
    return [(probe, rows.reset_index(drop=True))
            for probe, rows in frame.groupby("probe", sort=True)]


def frozen_by_seed(frozen: pd.DataFrame | None) -> dict[tuple[str, int], dict[int, float]]:
    """The freezing runs' accuracy per (frozen, k) and fine-tuning seed; a run that failed
    the training gate stops the freezing claims (:class:`~.claim.DidNotTrain`), this
    paper's and Wu et al.'s, and so does a build with the unfrozen runs alone
    (:class:`~.claim.NotMeasured`)."""
    if frozen is not None and len(frozen) and not (frozen.k > 0).any():
        raise NotMeasured("not measured: this build trained no partly frozen runs (its "
                          "freeze_ks is empty); the default and larger profiles train them "
                          "(freeze_ks [3])")
    if frozen is not None and "did_not_train" in frozen:
        failed = frozen[frozen.did_not_train != ""]
        if len(failed):
            raise DidNotTrain({f"{r.frozen} {r.k}, seed {r.seed}": r.did_not_train
                               for r in failed.itertuples()})
    if frozen is None or len(frozen) < 2:
        return {}
    return {key: dict(zip(group.seed, group.accuracy))
            for key, group in frozen.groupby(["frozen", "k"])}


@MERCHANT.claim("merchant-freeze-bottom", "§5.2, Fig. 3",
    "freezing the bottom layers costs little accuracy",
    "yes: few top layers need to change",
    "unfrozen test accuracy minus accuracy with the bottom k layers frozen, for each "
    "k, paired by fine-tuning seed (t interval over seeds)", "at_most", 0.02, ACC,
    control=("condition", "the unfrozen run of the same seed"),
    paper_effect=("Wu Table 1 (BERT): unfrozen minus bottom 4 or 6 frozen, -0.006 to +0.003 "
                  "accuracy on SST-2, MNLI, QNLI and QQP; Merchant Fig. 3: no significant "
                  "drop unless the last two layers are frozen"),
    paper_value=-0.006,
    chapter="finetuning")
def freeze_bottom(frozen: pd.DataFrame | None) -> list[Evidence]:
    """Unfrozen minus bottom-k frozen accuracy, per k: one difference per fine-tuning seed
    (the runs of a seed share the task head's initialisation and the batch order)."""
    by_seed = frozen_by_seed(frozen)
    return [Evidence.from_paired(f"bottom {k} frozen", by_seed.get(("none", 0), {}),
                                 by_seed[("bottom", k)])
            for k in sorted({k for _, k in by_seed} - {0}) if ("bottom", k) in by_seed]


def half_cut(truncated: pd.DataFrame, n_layers: int) -> int:
    """The number of layers kept that ``merchant-truncate`` reads: the cut closest to half
    the model's layers."""
    kept = truncated.layers_kept.unique()
    return int(kept[int(np.argmin(np.abs(kept - n_layers / 2)))])


@MERCHANT.claim("merchant-truncate", "§5.2, Fig. 4",
    "a model cut to its lower layers and fine-tuned reaches the full score",
    "yes: 3 layers for MNLI, 5 for SQuAD",
    "accuracy of the full fine-tuned model minus that of the model cut to half its "
    "layers and fine-tuned, paired by fine-tuning seed (t interval over seeds)",
    "at_most", 0.02, ACC,
    control=("baseline", "the full fine-tuned model of the same seed; a cut model that "
                         "trains poorly counts against the claim, which is about how well "
                         "a cut model trains"),
    paper_effect=("§5.2: 'comparable performance' with 3 of 12 layers for MNLI and 5 for "
                  "SQuAD; the gap is " + figure("Fig. 4")),
    chapter="truncation")
def truncate(truncated: pd.DataFrame | None, full: Mapping[int, float] | None,
             scores: pd.DataFrame | None) -> list[Evidence]:
    """The full model minus the model cut closest to half the layers and then fine-tuned,
    one difference per fine-tuning seed (``full``: the uncut model's accuracy per seed).
    A cut run that failed the training gate is counted, not set aside: whether a cut model
    trains as well as the full one is the claim itself; the unit's note says how many
    failed."""
    if truncated is None or not len(truncated) or not full:
        return []
    n_layers = int(scores.layer.max()) if scores is not None and len(scores) else 0
    k = half_cut(truncated, n_layers)
    cut = truncated[truncated.layers_kept == k]
    failed = int((cut.did_not_train != "").sum()) if "did_not_train" in cut else 0
    note = (f"{failed} of {len(cut)} cut runs failed the training gate (counted)"
            if failed else "")
    return [Evidence.from_paired(f"{k} of {n_layers} layers kept", full,
                                 dict(zip(cut.seed, cut.accuracy)), note)]


#: the paper's claims, in the order above
CLAIMS = MERCHANT.claims
