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

from . import merchant, phang, ren, wu
from .claim import CHAPTERS, PAPERS, SIM, Claim, figure

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
]

_CLAIMS += wu.WU.claims + phang.PHANG.claims + merchant.MERCHANT.claims + ren.REN.claims
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
