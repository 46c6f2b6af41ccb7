"""Ren et al. 2023's claims, each beside the function that computes its evidence.

All of them are tested by the seeds chapter, whose results the functions read by name:

``synthetic``              :func:`~analysis_lib.alignment.pairs.synthetic_table` rows (with
                           ``rows`` and ``seed`` columns): Table 3's known maps;
``pretraining_maps``       :func:`~analysis_lib.alignment.pairs.pair_distances` of models that
                           differ only by their *pretraining* seed (the zoo's masked LMs, or
                           the MultiBERTs), under each map the depth claim reads (map ->
                           table; the page's figure map among them);
``pretraining_attention``  the pair distances of those models' word vectors and attention
                           rows on the same sentences (``kind`` says which), with a ``task``
                           column;
``pretraining_finetuned``  :func:`~analysis_lib.alignment.pairs.pair_distances` of the same
                           models, each fine-tuned once with the same data, settings and
                           seed, on sentences of the task they were fine-tuned on;
``finetuned_before``       the same models before fine-tuning, on the same sentences as
                           ``pretraining_finetuned``;
``pretraining_within``     the :func:`~analysis_lib.alignment.pairs.layer_by_layer` matrix of
                           each of those models (Fig. 3);
``methods``                :func:`~analysis_lib.alignment.pairs.method_distances` of the
                           fine-tuning seeds;
``injected``               :func:`~analysis_lib.training.heads.injection`;
``untrained``              the fine-tuning seeds' training problems
                           (:func:`~analysis_lib.claims.training_gate.training_problems`);
``untrained_pretraining``  those of the fine-tuned pretraining seeds;
``adequacy_pretraining``   the adequacy line of each fine-tuned pretraining seed (``"model,
                           task"`` -> :class:`~analysis_lib.claims.claim.Level`, from
                           :func:`~analysis_lib.claims.tables.adequacy`: its test accuracy
                           against the head on its own frozen encoder): the claims read from
                           those runs leave out the pairs of a seed model below its line,
                           naming it (:func:`_trained`);
``adequacy``               the fine-tuning seeds' lines, from the same function (read by the
                           rule on the units that name the model and task their table came
                           from, a ``model`` and a ``task`` column);
``unlearned_pretraining``  the pretraining seed models that did not learn their language
                           model (:func:`analysis_lib.models.zoo.learning_problems`; model
                           -> why): every claim read from those models gets no verdict.
``finetuned_attention``    attention and hidden-state distances of the fine-tuned
                           pretraining seeds on the same sentences (as
                           ``pretraining_attention``), of the task they were fine-tuned on;
``initial_attention``      the same distances of the pretraining seeds' initial weights
                           (before any training; the zoo's ``<name>@0``) on the sentences of
                           ``pretraining_attention``: the null of ``ren-attention``;
``finetuned_initial_attention``  the same on the sentences of ``finetuned_attention``: the
                           null of ``ren-finetune-attention``.

Ren et al.'s depth and attention claims are about pretraining seeds (their Figs. 2 and 4),
so they are judged on those only: fine-tuning seeds share their pretrained weights and agree
at the bottom by construction. Pairs of seeds share seeds, so every claim read over pairs
takes the seed as its unit (:meth:`~analysis_lib.claims.claim.Evidence.from_seed_pairs`:
the grouped jackknife over seeds, ``K - 1`` degrees of freedom for ``K`` seeds); a t
interval over the pairs themselves would be too narrow to cover a second draw of the seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np
import pandas as pd

from ...similarity.structure import layer_gradient
from ..claim import ACC, Evidence, Level, NotMeasured, Paper, claim_of, figure, per_value

REN = Paper("Ren")
#: the map Ren et al. propose, fixed before looking at any result: ``ren-inn-real`` and
#: ``ren-injection`` judge it against the claims' controls, never the best of several maps
#: picked after the fact
PROPOSED_MAP = "inn"
#: the best simple map, the baseline ``ren-inn-real`` must beat (linreg over-fits wide
#: layers, so beating it says little)
SIMPLE_MAP = "ridge"
_SHARE = "as for depth: a 1% change of the unexplained share"
#: the gate of every claim read from the pretraining seed models: those that did not learn
#: their language model (model -> why), which leave such a claim without a verdict
_LEARNT = "unlearned_pretraining"


def _by_pair(values: pd.Series) -> dict[tuple[str, str], float]:
    """A series indexed by :func:`~analysis_lib.alignment.pairs.pair_distances`' ``pair``
    labels (``"a / b"``) as seed pairs, for
    :meth:`~analysis_lib.claims.claim.Evidence.from_seed_pairs`."""
    out = {}
    for label, value in values.items():
        a, sep, b = str(label).partition(" / ")
        if not sep:
            raise ValueError(f"{label!r} is not a pair label ('seed a / seed b')")
        out[(a, b)] = float(value)
    return out


def _largest(synthetic: pd.DataFrame | None, g: str) -> tuple[pd.DataFrame, int]:
    """Table 3 at its largest size for the map ``g``: one row per data seed (a table
    without a ``seed`` column is one seed), one column per method; and that size."""
    if synthetic is None or not len(synthetic):
        return pd.DataFrame(), 0
    table = synthetic if "seed" in synthetic else synthetic.assign(seed=0)
    largest = table[table.rows == table.rows.max()] if "rows" in table else table
    rows = int(largest.rows.iloc[0]) if "rows" in largest else len(largest)
    return largest[largest.g == g].pivot_table(index="seed", columns="method",
                                               values="test"), rows


@REN.claim(
    "ren-inn-synthetic", "§4.3, Table 3",
    "an invertible network recovers an invertible nonlinear map far better than linear "
    "methods",
    "yes: INN 0.0059 against more than 0.13",
    "linreg minus INN held-out distance on a known coupling-flow map, over data seeds",
    "greater", 0.01, "a 1% share of unexplained variance", chapter="seeds",
    control=("baseline", "linreg, the exact map's linear part, on the same rows"),
    paper_effect=("Table 3: linreg 1.088 against INN 0.0059 (every linear method above 0.13): "
                  "+1.08"),
    paper_value=1.082)
def inn_synthetic(synthetic: pd.DataFrame | None) -> list[Evidence]:
    """linreg minus INN on the flow at the largest size, one value per data seed (named by
    seed in the note)."""
    flow, rows = _largest(synthetic, "flow")
    if not {"inn", "linreg"} <= set(flow.columns):
        return []
    return [Evidence.from_seeds(f"flow, {rows} rows",
                                (flow["linreg"] - flow["inn"]).to_dict())]


@REN.claim(
    "ren-depth", "§5.1, Figs. 2 and 5",
    "models that differ only by seed are more alike in shallow layers than deep ones",
    "yes",
    "held-out alignment distance (both directions averaged) at the first transformer layer "
    "minus at the top layer, over pairs of pretraining seeds (masked LMs), the seed the "
    "unit; one unit per map (the page's depth_maps and figure_method, by default Procrustes "
    "with its best scale and ridge), so that no choice of map decides the verdict",
    "less", 0.01, "0.01 of the relative distance is a 1% change of the unexplained share",
    chapter="seeds", gates=(_LEARNT,),
    control=("condition", "the top layer of the same seed pairs, under the same map"),
    paper_effect=("Fig. 2: L2 distance about 0.02 in layers 1-6 and over 0.06 at the top: "
                  "about -0.04 (raw L2; this page's distance is relative)"),
    paper_value=-0.04)
def depth(pretraining_maps: Mapping[str, pd.DataFrame] | pd.DataFrame | None,
          label: str = "pretraining seeds") -> list[Evidence]:
    """Per map (one unit each) and pair of seeds: the distance at the first transformer
    layer minus at the top. ``pretraining_maps``: map -> its
    :func:`~analysis_lib.alignment.pairs.pair_distances`; one table is one map's."""
    if pretraining_maps is None:
        return []
    maps = ({"": pretraining_maps} if isinstance(pretraining_maps, pd.DataFrame)
            else dict(pretraining_maps))
    out = []
    for method, frame in maps.items():
        if frame is None or not len(frame):
            continue
        top = int(frame.layer.max())
        wide = frame.pivot_table(index="pair", columns="layer", values="test")
        name = f"{label}, {method}" if method else label
        out.append(Evidence.from_seed_pairs(f"{name} (L1 - L{top}, {len(wide)} pairs)",
                                            _by_pair(wide[1] - wide[top])))
    return out


#: what the attention claims' statistic is read against, and why
_NULL = ("null", "the same layers, seed pairs and sentences at the seeds' initial weights "
                 "(step 0, before any training): the gap that the architecture and the two "
                 "objects (attention rows against word vectors) give two seeds without "
                 "learning")


@REN.claim(
    "ren-attention", "§5.2, Fig. 4",
    "attention is more alike across seeds than hidden states",
    "yes, by two orders of magnitude",
    "per matched transformer layer: attention distance minus hidden-state distance (the "
    "page's figure_method map, held out), minus the same gap at the two seeds' initial "
    "weights; median over layers, over pairs of pretraining seeds (masked LMs), all read on "
    "the same sentences",
    "less", 0.01, _SHARE, chapter="seeds", gates=(_LEARNT,), control=_NULL,
    paper_effect=("Fig. 4: attention 0.0002-0.0004 against hidden states 0.02 to over 0.06 "
                  "(raw L2; at least -0.02), with no untrained seeds beside them"))
def attention(pretraining_attention: pd.DataFrame | None,
              initial_attention: pd.DataFrame | None) -> list[Evidence]:
    """Per task and pair: the median over matched transformer layers (the embedding layer,
    with no attention, left out) of the attention distance minus the hidden-state distance,
    each layer's gap less the same pair's gap at the seeds' initial weights
    (``initial_attention``, the same table for the untrained seeds). Attention rows and
    word vectors are different objects: two untrained seeds already align their
    near-uniform attention more closely than their word vectors, so the raw gap is not
    what training made alike."""
    if pretraining_attention is None:
        return []
    if initial_attention is None:
        raise NotMeasured("not measured: no untrained weights of these seeds to read the "
                          "null from (the zoo keeps each seed's initial weights as "
                          "<name>@0; seed models from elsewhere come without theirs)")
    out = []
    starts = _attention_gaps(initial_attention)
    for task, gap in _attention_gaps(pretraining_attention).items():
        start = starts.get(task)
        if start is None:
            continue
        pairs = gap.index.intersection(start.index)
        layers = [k for k in gap.columns if k in start.columns]
        if not len(pairs) or not layers:
            continue
        raw = gap.loc[pairs, layers].median(axis=1)
        initial = start.loc[pairs, layers].median(axis=1)
        values = (gap.loc[pairs, layers] - start.loc[pairs, layers]).median(axis=1)
        out.append(Evidence.from_seed_pairs(
            f"{task}, layers {layers[0]}-{layers[-1]}, trained - initial", _by_pair(values),
            note=f"the raw gap {raw.mean():+.3f}, at the initial weights "
                 f"{initial.mean():+.3f}, over the pairs"))
    return out


def _attention_gaps(same: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per task: attention distance minus hidden-state distance, one row per pair and one
    column per transformer layer the two share."""
    hidden, attended = same[same.kind == "hidden states"], same[same.kind == "attention"]
    out = {}
    for task, h in hidden.groupby("task", sort=False):
        a = attended[attended.task == task]
        if not len(a):
            continue
        hw = h.pivot_table(index="pair", columns="layer", values="test")
        aw = a.pivot_table(index="pair", columns="layer", values="test")
        shared = [k for k in aw.columns if k in hw.columns and k >= 1]
        out[str(task)] = aw[shared] - hw[shared]
    return out


@REN.claim(
    "ren-finetune-apart", "§5.3, Fig. 5a against Fig. 2",
    "fine-tuning pushes the deep layers of models pretrained from different seeds further "
    "apart than they were before it",
    "yes: deep-layer L2 distance up to 0.12 after fine-tuning, against at most 0.06 before",
    "held-out alignment distance (the page's figure_method map) at the top layer, each "
    "pretraining seed fine-tuned once on the same data, minus the same pair's distance "
    "before fine-tuning, over pairs of pretraining seeds (masked LMs)",
    "greater", 0.01, _SHARE, chapter="seeds", gates=(_LEARNT, "untrained_pretraining"),
    control=("condition", "the same pairs of seeds before fine-tuning, on the same "
                          "sentences"),
    paper_effect=("Figs. 5a and 2: the deep layers' largest distance doubles, 0.06 to 0.12: "
                  "+0.06 (raw L2)"),
    paper_value=0.06)
def finetune_apart(finetuned_before: pd.DataFrame | None,
                   pretraining_finetuned: pd.DataFrame | None,
                   adequacy_pretraining: Mapping[str, Level] | None) -> list[Evidence]:
    """Per pair of pretraining seeds: the top layer's distance after fine-tuning minus
    before (the same models on the same sentences, of the task they were fine-tuned on),
    over the seeds whose fine-tuning cleared their frozen-encoder head (:func:`_trained`)."""
    before, after = finetuned_before, pretraining_finetuned
    if before is None or after is None or not len(before) or not len(after):
        return []
    after, left_out = _trained(after, adequacy_pretraining)
    top = int(min(before.layer.max(), after.layer.max()))
    was = before[before.layer == top].set_index("pair").test
    now = after[after.layer == top].set_index("pair").test
    shared_pairs = was.index.intersection(now.index)
    return [Evidence.from_seed_pairs(
        f"L{top}, fine-tuned - pretrained, {len(shared_pairs)} pairs",
        _by_pair(now[shared_pairs] - was[shared_pairs]), note=left_out)]


#: the fewest seeds a claim over pairs of seeds is read on: the grouped jackknife over
#: seeds needs three
MIN_SEEDS = 3


def _trained(frame: pd.DataFrame, lines: Mapping[str, Level] | None
             ) -> tuple[pd.DataFrame, str]:
    """``frame``, a table of pairs of fine-tuned pretraining seeds, without the pairs of a
    seed whose fine-tuning did not clear the head on its own frozen encoder (its adequacy
    line in ``lines``, ``adequacy_pretraining``, by ``"model, task"``), and a note naming
    those seeds with their figures ("" when none is left out). A seed model that
    fine-tuning did not take beyond what its pretrained layers already give is not an
    instance of a fine-tuned model, so its pairs say nothing about what fine-tuning does;
    the claim is read on the others, as on a grid whose failed runs are set aside. Fewer
    than :data:`MIN_SEEDS` seeds left: :class:`~analysis_lib.claims.claim.NotMeasured`,
    with the reason."""
    seeds = _seeds_in(frame)
    short = {model: level for key, level in (lines or {}).items()
             if level.stuck and (model := key.split(", ", 1)[0]) in seeds}
    if not short:
        return frame, ""
    figures = "; ".join(level.describe() for level in short.values())
    kept = len(seeds) - len(short)
    if kept < MIN_SEEDS:
        raise NotMeasured(f"not measured: {kept} of {len(seeds)} fine-tuned seed models "
                          "cleared the head on their frozen encoder, fewer than the "
                          f"{MIN_SEEDS} an interval over seeds needs ({figures})")
    return frame[~_holds_any(frame, set(short))], (
        f"{', '.join(short)} left out, fine-tuned no better than the head on the frozen "
        f"encoder ({figures}): {kept} of {len(seeds)} seeds read")


def _row_seeds(frame: pd.DataFrame) -> pd.Series:
    """The two seeds of each row of a table of seed pairs: both sides of its ``pair`` label
    (``"a / b"``), or its ``from`` and ``to`` columns."""
    if "pair" in frame:
        return frame["pair"].astype(str).map(lambda label: frozenset(label.split(" / ")))
    return pd.Series([frozenset({str(a), str(b)}) for a, b in zip(frame["from"], frame["to"])],
                     index=frame.index, dtype=object)


def _holds_any(frame: pd.DataFrame, seeds: set[str]) -> pd.Series:
    """Whether each row of a table of seed pairs holds one of ``seeds``."""
    return _row_seeds(frame).map(lambda pair: bool(pair & seeds))


def _seeds_in(frame: pd.DataFrame) -> set[str]:
    """The seeds a table of seed pairs holds (:func:`_row_seeds`)."""
    return set().union(*_row_seeds(frame))


@REN.claim(
    "ren-finetune-attention", "§5.3, Fig. 5b",
    "after fine-tuning, attention stays more alike across seeds than hidden states",
    "yes: attention distances stay around 0.0002-0.0004 after fine-tuning, while the deep "
    "hidden states reach 0.12",
    "as ren-attention, on the pretraining seeds each fine-tuned once on the same data: per "
    "matched transformer layer, attention distance minus hidden-state distance, minus the "
    "same gap at the seeds' initial weights; median over layers, over pairs of seeds",
    "less", 0.01, _SHARE, chapter="seeds", gates=(_LEARNT, "untrained_pretraining"),
    control=_NULL,
    paper_effect=("Fig. 5: attention 0.0002-0.0004 against hidden states 0.02 to 0.12 (raw "
                  "L2; at least -0.02), with no untrained seeds beside them"))
def finetune_attention(finetuned_attention: pd.DataFrame | None,
                       finetuned_initial_attention: pd.DataFrame | None,
                       adequacy_pretraining: Mapping[str, Level] | None) -> list[Evidence]:
    """:func:`attention`'s statistic on the fine-tuned pretraining seeds, against the same
    seeds' initial weights on the same sentences, over the seeds whose fine-tuning cleared
    their frozen-encoder head (:func:`_trained`)."""
    if finetuned_attention is None:
        return attention(None, finetuned_initial_attention)
    trained, left_out = _trained(finetuned_attention, adequacy_pretraining)
    return [replace(unit, note="; ".join(filter(None, (unit.note, left_out))))
            for unit in attention(trained, finetuned_initial_attention)]


@REN.claim(
    "ren-layer-gradient", "§5.1, Fig. 3",
    "within one model, neighbouring layers are alike and layers far apart differ",
    "yes: the distance grows away from the diagonal, gradually, with no abrupt change",
    "per pretraining seed model (masked LMs): mean held-out distance (the page's "
    "figure_method map, layer i aligned to layer j, both directions) between transformer "
    "layers two or more apart minus between adjacent ones, over the seed models",
    "greater", 0.01, _SHARE, chapter="seeds", gates=(_LEARNT,),
    control=("condition", "adjacent layers of the same model"),
    paper_effect=figure("Fig. 3"))
def layer_distance_gradient(pretraining_within: Mapping[str, np.ndarray] | None
                            ) -> list[Evidence]:
    """One :func:`~analysis_lib.similarity.structure.layer_gradient` per model (models that
    differ only by their pretraining seed: independent units)."""
    if not pretraining_within:
        return []
    top = len(next(iter(pretraining_within.values()))) - 1
    gradients = {name: layer_gradient(M) for name, M in pretraining_within.items()}
    return [Evidence.from_values(f"layers 1-{top}, {len(pretraining_within)} seed models",
                                 list(gradients.values()), note=per_value(gradients))]


def _seed_units(found: Mapping[str, pd.DataFrame | None], problems: Mapping[str, str] | None,
                units: Callable[[pd.DataFrame, str], list[Evidence]],
                unlearned: Mapping[str, str] | None = None,
                adequate: Mapping[str, Level] | None = None) -> list[Evidence]:
    """``units(frame, kind)`` of each kind of seed pair that was measured (``found``: kind
    -> its table): the Table 4 and 5 claims read seeds of fine-tuning one pretrained model,
    and pretraining seed models each fine-tuned once (Ren et al.'s MultiBERTs, fine-tuned).
    The pretraining seeds' units are left out when one of the seed models did not learn its
    language model (``unlearned``) or one of their fine-tuned runs failed the training gate
    (``problems``), and the other units' notes say which; their pairs of a seed whose
    fine-tuning did not clear its frozen head are left out (``adequate``, the fine-tuned
    seeds' adequacy lines: :func:`_trained`), the whole unit where fewer than
    :data:`MIN_SEEDS` seeds are left. A fine-tuning seeds' table with a ``model`` and a
    ``task`` column names them in its units' labels, where the grid's adequacy rule finds
    them (:func:`_kind_label`)."""
    out: list[Evidence] = []
    left_out = ""
    for kind, frame in found.items():
        if frame is None or not len(frame):
            continue
        if kind == "pretraining seeds" and (unlearned or problems):
            why = (f"{', '.join(unlearned)} did not learn, by the zoo's perplexity target"
                   if unlearned else
                   f"{len(problems or {})} of their fine-tuned runs failed the training gate")
            left_out = f"pretraining seeds left out: {why}"
            continue
        note = ""
        if kind == "pretraining seeds":
            try:
                frame, note = _trained(frame, adequate)
            except NotMeasured as why:
                left_out = ("pretraining seeds left out: "
                            + str(why).removeprefix("not measured: "))
                continue
        out += [replace(unit, note="; ".join(filter(None, (unit.note, note))))
                for unit in units(frame, kind)]
    if left_out:
        out = [replace(e, note="; ".join(filter(None, (e.note, left_out)))) for e in out]
    return out


def _kind_label(frame: pd.DataFrame, kind: str) -> str:
    """A unit's kind of seed pair, with the fine-tuned model and task its table was read
    from where the table has one of each (``model`` and ``task`` columns): ``"fine-tuning
    seeds of minilm on tweets-sentiment"``. The label is where the grid's adequacy rule
    (:func:`~analysis_lib.claims.verdicts.with_adequacy`) finds the runs a unit reads."""
    if {"model", "task"} <= set(frame.columns) and frame.model.nunique() == 1 \
            and frame.task.nunique() == 1:
        return f"{kind} of {frame.model.iloc[0]} on {frame.task.iloc[0]}"
    return kind


@REN.claim(
    "ren-inn-real", "§4.4, Table 4",
    "the INN aligns real seed pairs best on held-out rows",
    "yes", f"{SIMPLE_MAP} minus INN held-out distance, each pair mapped both ways and the "
    "two directions averaged (no seed the privileged target), over seed pairs and layers: "
    "one unit for fine-tuning seeds, one for pretraining seed models fine-tuned once each",
    "greater", 0.01, "a 1% share of unexplained variance", chapter="seeds",
    gates=("untrained",),
    control=("baseline", "ridge, the best simple linear map (penalty chosen on the fitted "
                         "rows), on the same rows"),
    paper_effect=("Table 4, test rows: INN ahead of linear regression by 0.056 (MNLI), 0.037 "
                  "(SST-2) and 0.033 (MRPC) (raw L2, against linreg; the paper has no ridge)"),
    paper_value=0.033)
def inn_real(methods: pd.DataFrame | None, pretraining_methods: pd.DataFrame | None,
             untrained_pretraining: Mapping[str, str] | None,
             unlearned_pretraining: Mapping[str, str] | None,
             adequacy_pretraining: Mapping[str, Level] | None) -> list[Evidence]:
    """:data:`SIMPLE_MAP` minus :data:`PROPOSED_MAP`, per seed pair and layer, for each kind
    of seed pair (:func:`_seed_units`; Ren et al.'s Table 4 reads fine-tuned MultiBERTs,
    which differ in their pretraining seed)."""
    def units(frame: pd.DataFrame, kind: str) -> list[Evidence]:
        if not {PROPOSED_MAP, SIMPLE_MAP} <= set(frame.dropna(subset=["test"]).method):
            return []
        wide = frame.pivot_table(index=["pair", "layer"], columns="method", values="test")
        per_pair = (wide[SIMPLE_MAP] - wide[PROPOSED_MAP]).groupby(level="pair").mean()
        return [Evidence.from_seed_pairs(
            f"{_kind_label(frame, kind)}, {SIMPLE_MAP} - {PROPOSED_MAP} over {len(wide)} "
            "pair-layers", _by_pair(per_pair), note="each pair's mean over its layers")]
    return _seed_units({"fine-tuning seeds": methods,
                        "pretraining seeds": pretraining_methods},
                       untrained_pretraining, units, unlearned_pretraining,
                       adequacy_pretraining)


@REN.claim(
    "ren-injection", "§4.5, Table 5",
    "a layer mapped into another seed's space works with that seed's head",
    "yes, the INN best",
    "accuracy of the INN map (fixed before looking) minus that of no map (identity), and "
    "minus that of ridge, over ordered seed pairs: for fine-tuning seeds and for "
    "pretraining seed models fine-tuned once each",
    "greater", 0.02, ACC, chapter="seeds", gates=("untrained",),
    control=("baseline", "no map (identity) and ridge, with the INN fixed as the map before "
                         "looking"),
    paper_effect=("Table 5: INN ahead of the best other map by 0.36 (MNLI), 0.10 (SST-2) and "
                  "0.33 (MRPC) accuracy (the paper has no identity control)"),
    paper_value=0.098)
def injection(injected: pd.DataFrame | None, pretraining_injected: pd.DataFrame | None,
              untrained_pretraining: Mapping[str, str] | None,
              unlearned_pretraining: Mapping[str, str] | None,
              adequacy_pretraining: Mapping[str, Level] | None) -> list[Evidence]:
    """The proposed map's accuracy minus each control's (no map at all, and the best simple
    map), one difference per ordered pair of seeds: two units per kind of seed pair
    (:func:`_seed_units`)."""
    def units(frame: pd.DataFrame, kind: str) -> list[Evidence]:
        wide = frame.pivot_table(index=["from", "to"], columns="method", values="accuracy")
        if PROPOSED_MAP not in wide:
            return []
        out = []
        for control in ("identity", SIMPLE_MAP):
            if control not in wide:
                continue
            gaps = (wide[PROPOSED_MAP] - wide[control]).dropna()
            evidence = Evidence.from_seed_pairs(
                f"{_kind_label(frame, kind)}, {PROPOSED_MAP} - {control}, {len(wide)} "
                "ordered pairs",
                {(str(a), str(b)): float(v) for (a, b), v in gaps.items()})
            both = wide[[control, "own"]].dropna() if "own" in wide else wide.iloc[:0]
            if len(both):  # the target seed on its own vectors: no map can do better
                evidence = evidence.reading(Level(
                    f"{control}'s accuracy against the target seed's own ({kind})",
                    both[control], both["own"], claim_of(injection).smallest_effect,
                    "ceiling", needed=len(both) // 2 + 1))
            out.append(evidence)
        return out
    return _seed_units({"fine-tuning seeds": injected,
                        "pretraining seeds": pretraining_injected},
                       untrained_pretraining, units, unlearned_pretraining,
                       adequacy_pretraining)


#: the paper's claims, in the order above
CLAIMS = REN.claims
