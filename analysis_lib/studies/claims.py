"""The papers' claims that this book tests, as data.

One :class:`Claim` per claim: which paper makes it and where, what it says, the number this
book computes to test it, the direction the claim predicts for that number, the smallest
effect that would matter (with the reason), and the control the number is read against
(:data:`CONTROL_KINDS`: the best simple baseline, the measure's floor, or a control
condition), which the statistic subtracts or compares with, and the papers' own effect
size beside the smallest effect (``paper_effect``, quoted; ``paper_value``, the same on the
statistic's scale where the paper states a number): a smallest effect larger than the
papers' own effect would reject the papers' data. Every study's findings table
is keyed by these ids, and every verdict is drawn by one rule,
:func:`analysis_lib.studies.verdicts.decide`.

A statistic is always oriented so that the claim reads as one of three statements:

``"greater"``  the statistic exceeds ``+smallest_effect``;
``"less"``     the statistic is below ``-smallest_effect``;
``"none"``     the statistic lies within ``+-smallest_effect`` (a claim of no difference).

Smallest effects are on the statistic's own scale: CKA-like similarities in [0, 1], test
accuracies, held-out alignment distances, Pearson correlations.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType

from . import ren
from .claim import ACC, CHAPTERS, PAPERS, SIM, Claim, figure

_CLAIMS = [
    # --------------------------------------------------------------- Wu et al. 2020
    Claim("wu-within-model", "Wu", "§5.1, Fig. 1",
          "layers of one model are more similar to each other than to other models' layers",
          "yes, under every measure",
          "mean linear CKA within a model minus across models (pretrained models)",
          "greater", 0.02, SIM,
          control=("condition", "layers of the other models: across-model CKA"),
          paper_effect=figure("Fig. 1")),
    Claim("wu-neurons-differ", "Wu", "§5.1, Fig. 1-2",
          "across models, representations are similar while single neurons are not",
          "representation-level measures high across models, neuronsim low",
          "each measure's own contrast above its own floor: (across - floor) / (within - "
          "floor) for linear CKA minus the same for neuronsim (a ratio of one measure with "
          "itself, so the two scales never meet)",
          "greater", 0.05,
          "a 0.05 difference of ratios is a 5% shift of the across-model level relative to "
          "the within-model level; less is within the spread of either ratio",
          control=("floor", "each measure's word-identity floor on the compared rows "
                           "(two unrelated random codes of the word forms), subtracted "
                           "from both levels"),
          paper_effect=figure("Figs. 1-2")),
    Claim("wu-lower-layers", "Wu", "§5.1, Fig. 1",
          "lower layers are more similar across models than higher layers",
          "yes", "mean linear CKA across models, lower half of each model's layers minus "
                 "upper half", "greater", 0.02, SIM,
          control=("condition", "the upper half of the same models' layers"),
          paper_effect=figure("Fig. 1")),
    Claim("wu-adjacent", "Wu", "§5.1, Fig. 1",
          "adjacent layers of a model are the most similar",
          "yes", "mean linear CKA of neighbouring layers minus that of layers further apart",
          "greater", 0.02, SIM,
          control=("condition", "layers of the same model further apart"),
          paper_effect=figure("Fig. 1")),
    Claim("wu-relative-depth", "Wu", "§5.1, Fig. 1",
          "across models, layers at the same relative depth are the most alike",
          "yes: a bright band along each across-model block's diagonal",
          "per pair of models: mean linear CKA of their layers at matching relative depth "
          "minus over all their cross-model cells; t interval over the pairs of models",
          "greater", 0.02, SIM,
          control=("condition", "every cross-model cell of the same pair of models"),
          paper_effect=figure("Fig. 1")),
    Claim("wu-localization-depth", "Wu", "§5.1, Fig. 3",
          "higher layers have more localized representations than lower layers",
          "yes: the localization score mostly increases with depth in every model",
          "per pretrained model: mean localization (neuronsim minus SVCCA means, the paper's "
          "plain score) of its upper half of layers minus its lower half; t interval over "
          "the models",
          "greater", 0.02, SIM,
          control=("condition", "the lower half of the same model's layers"),
          paper_effect=figure("Fig. 3")),
    Claim("wu-family", "Wu", "§5.1, Fig. 2",
          "models of one family (architecture and objective) are more similar",
          "yes: within-family more similar; the objective matters",
          "mean linear CKA across two bidirectional encoders minus across an encoder and a "
          "left-to-right decoder", "greater", 0.02, SIM,
          control=("condition", "an encoder against a left-to-right decoder (architecture and "
                               "objective differ at once)"),
          paper_effect=figure("Fig. 2")),
    Claim("wu-objective", "Wu", "§5.1, Fig. 2",
          "the objective alone matters: models of one architecture trained with another "
          "objective are less alike than models that differ only by seed",
          "yes: within-family more similar; the objective matters",
          "per masked-LM seed model of the zoo: mean linear CKA at matching depth to the "
          "other seeds minus to the causal LM of the same architecture and training length, "
          "over the seed models", "greater", 0.02, SIM,
          control=("condition", "pairs that differ only by the pretraining seed (one factor: "
                                "the objective)"),
          paper_effect=figure("Fig. 2")),
    Claim("wu-other-corpus", "Wu", "App. B.1",
          "the similarity patterns hold on another corpus",
          "yes: the same patterns on other corpora",
          "Pearson r of the across-model cells computed on two corpora, as Fisher z with "
          "the number of layers as the sample size (cells share layers)",
          "greater", 0.5,
          "r = 0.5 (z = 0.55) means the second corpus reproduces a quarter of the "
          "pattern's variance; less would not be 'the same pattern'",
          control=("baseline", "no agreement between the corpora (r = 0)"), fisher_z=True,
          paper_effect=("App. B.1 calls the two corpora's heatmaps 'highly similar' (Figs. 8 and "
                        "9); no correlation is reported")),
    Claim("wu-attention-heads", "Wu", "§5.2, Fig. 4",
          "attention is more similar across models head by head than as a whole "
          "(localized above distributed)",
          "yes: head-level similarity across models higher than distributed",
          "each measure's own contrast above its own floor: (across - floor) / (within - "
          "floor) of the head-level measures minus that of the distributed ones, one value "
          "per pair of models",
          "greater", 0.05,
          "as for neurons against representations: a 5% shift of relative level",
          control=("floor", "each method's value between two unrelated random attention "
                           "layers on the same sentences, subtracted from both levels"),
          paper_effect=figure("Fig. 4")),
    Claim("wu-ft-top-change", "Wu", "§6, Fig. 5-6",
          "fine-tuning changes the top layers more than the lower ones",
          "yes: similarity to the pretrained model drops in the top layers",
          "per measure: similarity of base and fine-tuned model at the first transformer "
          "layer minus at the top layer (linear CKA, neuronsim, head-level JS), mean over "
          "fine-tuning seeds", "greater", 0.02, SIM,
          control=("condition", "the first transformer layer of the same runs"),
          paper_effect=figure("Figs. 5-6")),
    Claim("wu-localization-ft", "Wu", "§6, Fig. 7",
          "fine-tuning makes the top layers less localized",
          "yes: lower localization at the top layers after fine-tuning",
          "per model and task: localization of the pretrained model's top layer minus that "
          "of the fine-tuned model's, over fine-tuning seeds",
          "greater", 0.02, SIM,
          control=("condition", "the pretrained model's own top layer, on the same words"),
          paper_effect=figure("Fig. 7")),
    Claim("wu-cross-task", "Wu", "§6, Fig. 5–6; Phang App. B, Fig. 7",
          "models fine-tuned on different tasks from one base stay alike in their bottom "
          "layers and diverge in their top layers",
          "yes: bottom layers similar across tasks, top layers not",
          "per model and pair of tasks: linear CKA between the two tasks' models (same seed, "
          "the same words of one task's stimuli) at the first transformer layer minus at "
          "the top layer, over seeds",
          "greater", 0.02, SIM,
          control=("condition", "the top layers of the same two models on the same words"),
          paper_effect=figure("Wu Figs. 5-6, Phang Fig. 7")),
    # --------------------------------------------------------------- Phang et al. 2021
    Claim("phang-blocks", "Phang", "§3, Fig. 1-2",
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
          paper_effect=figure("Figs. 1-2")),
    Claim("phang-ft-orig", "Phang", "§3, Fig. 5",
          "fine-tuned and pretrained layers agree at the bottom and part at the top",
          "yes: FT-ORIG similarity falls with depth",
          "FT-ORIG diagonal linear CKA (CLS) at the first transformer layer minus at the top "
          "layer, over seeds", "greater", 0.02, SIM,
          control=("condition", "the first transformer layer of the same runs"),
          paper_effect=figure("Fig. 5")),
    Claim("phang-untuned", "Phang", "§4, Fig. 3",
          "the top layers can be dropped with no retraining (UNTUNED close to the full "
          "model a few layers below the top)",
          "yes for RoBERTa and ALBERT, no for ELECTRA",
          "full model's test accuracy minus UNTUNED's two layers below the top, over seeds",
          "none", 0.02, ACC,
          control=("baseline", "the full model's own accuracy, same seed"),
          paper_effect=("§4: RoBERTa on Yelp Polarity with its top 4 of 12 layers dropped, UNTUNED "
                        "95.5 against the full model's 96.1: a gap of 0.006"),
          paper_value=0.006),
    Claim("phang-tuned", "Phang", "§4, Fig. 3",
          "a head retrained on a lower layer does as well as the full model",
          "yes: TUNED plateaus well below the top",
          "full model's test accuracy minus TUNED's two layers below the top, over seeds",
          "none", 0.02, ACC,
          control=("baseline", "the full model's own accuracy, same seed"),
          paper_effect=figure("Fig. 3")),
    Claim("phang-tuned-orig", "Phang", "§4, Fig. 3",
          "fine-tuned layers are better features than pretrained ones",
          "yes: TUNED above TUNEDORIG",
          "TUNED minus TUNEDORIG accuracy, mean over transformer layers, over seeds",
          "greater", 0.02, ACC,
          control=("baseline", "a head on the pretrained model's layer (TUNEDORIG), same seed"),
          paper_effect=("§4: TUNEDORIG 'performs very poorly' against TUNED at every layer; "
                        + figure("Fig. 3"))),
    Claim("phang-cka-predicts", "Phang", "§4",
          "layers whose CLS resembles the last layer's lose little when the top is cut",
          "implied by the block structure",
          "within each task: Pearson r of CKA-to-last-layer with accuracy lost (UNTUNED), as "
          "Fisher z over layers", "less", 0.3,
          "|r| = 0.3 is the conventional 'moderate' correlation; a weaker link would not "
          "let a reader predict anything from CKA",
          control=("baseline", "no relation (r = 0)"), fisher_z=True,
          paper_effect=("not reported: the paper implies the link from its block structure and "
                        "computes no correlation")),
    Claim("phang-skip-bottom", "Phang", "§4, Fig. 4",
          "skipping a single lower layer costs more than skipping a single upper one",
          "yes: the first layers matter most; single upper layers can be skipped",
          "test accuracy with the top transformer layer skipped minus with the first one "
          "skipped, per fine-tuning seed (t interval over seeds)",
          "greater", 0.02, ACC,
          control=("condition", "the first transformer layer skipped, same seed"),
          paper_effect=figure("Fig. 4")),
    # --------------------------------------------------------------- Merchant et al. 2020
    Claim("merchant-depth", "Merchant", "§4, Fig. 2",
          "fine-tuning changes mostly the top layers",
          "yes: RSA to the pretrained model stays high in the lower layers, falls at the top",
          "in-domain RSA (base vs fine-tuned, word tokens) at the first transformer layer "
          "minus at the top layer, over seeds", "greater", 0.02, SIM,
          control=("condition", "the first transformer layer of the same runs"),
          paper_effect=("§5.1: MNLI's RSA to the base model is still 0.84 +- 0.02 at the "
                        "second-to-last layer and drops at the last; the first layer's is "
                        + figure("Fig. 2"))),
    Claim("merchant-domain", "Merchant", "§6, Fig. 5",
          "fine-tuning changes in-domain inputs more than out-of-domain ones",
          "yes: RSA to the base model lower in-domain",
          "out-of-domain minus in-domain RSA at the top layer, averaged over tasks whose "
          "corpora cross (each corpus once in-domain, once out-of-domain), bootstrap over "
          "sentences and seeds", "greater", 0.02, SIM,
          control=("condition", "the other task's model on the same corpus: the tasks' corpora "
                               "cross, so the stimuli's own effect cancels"),
          paper_effect="a 'significantly larger' change in-domain, " + figure("Fig. 5")),
    Claim("merchant-no-forgetting", "Merchant", "§4, Table 1",
          "fine-tuning keeps what the base model encodes: no catastrophic forgetting",
          "yes: edge-probing F1 drops of 0.5-2 points after fine-tuning",
          "per model and task: held-out R^2 of linear probes for word properties (sentence "
          "length, log frequency, subword pieces) from the base model's best layer minus "
          "from the fine-tuned model's best layer, mean over the properties, over seeds (an "
          "offline stand-in for the paper's linguistic probes)",
          "none", 0.02,
          "the paper's own drops are up to 2 points of F1; a loss of 0.02 of explained "
          "variance is of that size",
          control=("condition", "the pretrained model's own layers, on the same words and "
                                "the same probe"),
          paper_effect=("Table 1: mean F1 drop over the eight edge-probing tasks of 0.7 (MNLI), "
                        "1.2 (SQuAD) and 0.2 (Dep) points, within the +-0.7 of fine-tuning seeds; "
                        "at most 0.012 as a fraction (F1, not this page's R^2)"),
          paper_value=0.012),
    Claim("merchant-freeze-bottom", "Merchant", "§5.1, Fig. 3",
          "freezing the bottom layers costs little accuracy",
          "yes: few top layers need to change",
          "unfrozen test accuracy minus accuracy with the bottom k layers frozen, for each "
          "k, paired by fine-tuning seed (t interval over seeds)", "none", 0.02, ACC,
          control=("condition", "the unfrozen run of the same seed"),
          paper_effect=("Wu Table 1 (BERT): unfrozen minus bottom 4 or 6 frozen, -0.006 to +0.003 "
                        "accuracy on SST-2, MNLI, QNLI and QQP; Merchant Fig. 3: no significant "
                        "drop unless the last two layers are frozen"),
          paper_value=-0.006),
    Claim("merchant-freeze-order", "Merchant", "§5.1, Fig. 3; Wu App. D",
          "freezing the bottom layers costs less than freezing the top ones",
          "yes", "accuracy with the bottom k layers frozen minus with the top k frozen, for "
                 "each k, paired by fine-tuning seed (t interval over seeds)",
          "greater", 0.005,
          "half a point of accuracy: below Wu et al.'s own bottom-minus-top gaps on three of "
          "their four tasks (0.006-0.017), so their data would pass; the book's usual 0.02 "
          "would reject most of them",
          control=("condition", "the top-k frozen run of the same seed"),
          paper_effect=("Wu Table 1 (BERT): bottom minus top k frozen, +0.006 to +0.017 on SST-2, "
                        "MNLI and QNLI at k = 4 and 6, -0.001 and +0.001 on QQP; median of the "
                        "eight 0.009"),
          paper_value=0.009),
    Claim("merchant-truncate", "Merchant", "§5.2, Fig. 4",
          "a model cut to its lower layers and fine-tuned reaches the full score",
          "yes: 3 layers for MNLI, 5 for SQuAD",
          "accuracy of the full fine-tuned model minus that of the model cut to half its "
          "layers and fine-tuned, paired by fine-tuning seed (t interval over seeds)",
          "none", 0.02, ACC,
          control=("baseline", "the full fine-tuned model of the same seed; cut models that "
                               "did not train give no verdict"),
          paper_effect=("§5.2: 'comparable performance' with 3 of 12 layers for MNLI and 5 for "
                        "SQuAD; the gap is " + figure("Fig. 4"))),
]

_CLAIMS += ren.REN.claims
#: every claim the book tests, by id
CLAIMS: Mapping[str, Claim] = MappingProxyType({c.id: c for c in _CLAIMS})
if len(CLAIMS) != len(_CLAIMS):
    raise RuntimeError("two claims share an id")


def get(claim_id: str) -> Claim:
    """The claim with this id; an unknown id is an error that names the closest ones."""
    if claim_id in CLAIMS:
        return CLAIMS[claim_id]
    close = difflib.get_close_matches(str(claim_id), list(CLAIMS), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; ids: {', '.join(CLAIMS)}"
    raise KeyError(f"no claim {claim_id!r}{hint}")


def of_paper(paper: str) -> list[Claim]:
    """The claims of one paper (``"Wu"``, ``"Phang"``, ``"Merchant"``, ``"Ren"``)."""
    if paper not in PAPERS:
        raise ValueError(f"paper must be one of {sorted(PAPERS)}, got {paper!r}")
    return [c for c in CLAIMS.values() if c.paper == paper]


def of_chapter(chapter: str) -> list[Claim]:
    """The claims one chapter's results test (one of :data:`~.claim.CHAPTERS`), in the order
    of the papers' modules; pass them with the results to
    :func:`analysis_lib.studies.verdicts.judge`."""
    if chapter not in CHAPTERS:
        raise ValueError(f"chapter must be one of {CHAPTERS}, got {chapter!r}")
    return [c for c in CLAIMS.values() if c.chapter == chapter]
