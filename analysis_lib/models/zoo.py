"""The model zoo: small language models pretrained here, one factor changed at a time.

Wu et al. compare models that differ in architecture, objective, data and size at once, so no
finding can be pinned on one factor; Ren et al. need models that differ only by their seed.
The zoo's models all descend from one base configuration (:data:`BASE`: a 4-layer, 64-wide
BERT-architecture model with a 4,000-token WordPiece vocabulary, trained as a causal language
model on tweets and BBC sentences for 1,600 steps of 8 blocks, seed 0) and each changes
exactly one setting of it:

=================  =========================================================================
factor             models
=================  =========================================================================
seed               ``mlm``, ``mlm-seed-1`` ... ``mlm-seed-5``: six masked LMs, as Ren et
                   al.'s MultiBERTs; the causal ``base``, ``seed-1`` and ``seed-2``
                   (``zoo`` set: up to ``seed-5``)
objective          ``base`` (causal LM, reads left to right) and ``mlm`` (masked LM, both
                   directions), the same architecture; over seeds, the masked-LM seeds
                   against the causal ones
depth              ``base`` (4 layers) and ``depth-2`` (``zoo`` set: also ``depth-6``)
data               ``tweets`` and ``bbc`` (``zoo`` set): trained on one domain only
training length    ``base@<step>``: the base model's weights at earlier steps of its run
size               ``wide-0``, ``wide-1``, ``wide-2`` (``zoo`` set): masked-LM seed models at
                   twice the width (128), so that the seeds chapter can ask whether the
                   difference between seeds changes with the size of the model
=================  =========================================================================

The ``replica`` set holds the ``default`` set's models each drawn again from a seed no
other zoo model uses (``replica-mlm``, ``replica-mlm-seed-1``, ..., seeds 100 and up): the
``replica`` profile builds the book on them, and a verdict that the second draw contradicts
is a defect of its interval, not a finding. :func:`role` names the ``default`` model a
replica model stands for.

The seed models keep the base's checkpoints too (``mlm-seed-1@100``, ...), so the seeds
chapter can ask how the difference between seeds changes with training. Every model keeps
its initial weights as step 0 (``mlm-seed-1@0``): the untrained model of its seed, the null
against which the seeds chapter reads what training made alike between seeds.

The models are trained one step up the data flow, by
:func:`analysis_lib.training.zoo.train` (minutes; the models of a set side by side
on the CPU's cores) or ``python -m analysis_lib zoo --train``, and cached.
``models.load("zoo:<name>")`` reads a trained model from the cache and never trains one; when
the model is not trained yet, it says how to train it. ``python -m analysis_lib zoo`` lists
the zoo and what is trained.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .zoo_store import LEARNED_RATIO, PretrainConfig, Pretrained, cached

if TYPE_CHECKING:
    import pandas as pd

#: the configuration every zoo model varies one setting of
#: (many small steps: for the same tokens, 1,600 steps of 8 blocks take the masked models to
#: held-out perplexity ratios of 0.51-0.53 where 400 steps of 32 left them at 0.65-0.91, in
#: about the same time)
BASE = PretrainConfig(objective="clm", layers=4, hidden=64, heads=2, data="both", seed=0,
                      steps=1600, batch_size=8, learning_rate=2e-3, warmup_steps=30,
                      dropout=0.0, mask_rate=0.4, vocab_size=4000, checkpoints=(400, 1000))

#: the masked-LM model, seed 0: the first of the seed models (Ren et al.'s MultiBERTs are
#: masked LMs)
MLM = replace(BASE, objective="mlm")
#: how many masked-LM seed models the zoo holds (``mlm`` and ``mlm-seed-1`` ...): Ren et
#: al.'s claims want five or more, and the seeds chapter leaves out a seed model that did
#: not learn, so the set holds one more
SEEDS = 6

_ZOO: dict[str, PretrainConfig] = {
    "base": BASE,
    "mlm": MLM,
    **{f"mlm-seed-{s}": replace(MLM, seed=s) for s in range(1, SEEDS)},
    "depth-2": replace(BASE, layers=2, checkpoints=()),
    "tweets": replace(BASE, data="tweets", checkpoints=()),
    "bbc": replace(BASE, data="bbc", checkpoints=()),
    **{f"seed-{s}": replace(BASE, seed=s) for s in range(1, SEEDS)},
    "depth-6": replace(BASE, layers=6, checkpoints=()),
    **{f"wide-{s}": replace(MLM, hidden=2 * MLM.hidden, seed=s, checkpoints=())
       for s in range(3)},
}

#: how many causal LMs of the base configuration the offline book trains (``base``,
#: ``seed-1``, ...): the other objective's draws, against which the representation chapter
#: compares the masked-LM seeds (one causal model would be one draw, its seed and its
#: objective not told apart)
CAUSAL_SEEDS = 3

#: the models the offline book trains
DEFAULT_SET = ("base", "mlm", *(f"mlm-seed-{s}" for s in range(1, SEEDS)), "depth-2",
               *(f"seed-{s}" for s in range(1, CAUSAL_SEEDS)))
#: a replica model's name: the ``default`` set model it draws again, after this prefix
REPLICA = "replica-"
#: how far a replica model's seed lies from its ``default`` model's: seeds 100 and up, which
#: no other zoo model uses, so that the replica shares no draw with any of them
REPLICA_OFFSET = 100

ZOO: dict[str, PretrainConfig] = {
    **_ZOO,
    **{f"{REPLICA}{name}": replace(_ZOO[name], seed=_ZOO[name].seed + REPLICA_OFFSET)
       for name in DEFAULT_SET},
}

#: which models each set holds; ``default`` is what the offline book trains, ``replica``
#: the same models each drawn again from another seed (the ``replica`` profile: a verdict
#: that a second draw of the seeds contradicts is a defect of its interval)
SETS = {
    "default": DEFAULT_SET,
    "replica": tuple(f"{REPLICA}{name}" for name in DEFAULT_SET),
    "zoo": tuple(_ZOO),
}


def role(name: str) -> str:
    """The ``default`` set's name of a zoo model: ``"replica-mlm-seed-1"`` ->
    ``"mlm-seed-1"``, any other name as it is (``"zoo:"`` prefix and checkpoint allowed)."""
    return name.removeprefix("zoo:").removeprefix(REPLICA)


def causal_base(set_name: str = "default") -> str:
    """The ``zoo:`` name of a set's causal language model of the base configuration (the
    control the masked-LM seeds are compared with): ``"zoo:base"``, ``"zoo:replica-base"``."""
    if set_name not in SETS:
        raise ValueError(f"no zoo set {set_name!r}; sets: {', '.join(SETS)}")
    found = [n for n in SETS[set_name] if role(n) == "base"]
    if not found:
        raise ValueError(f"zoo set {set_name!r} holds no base model")
    return f"zoo:{found[0]}"

#: the pairs of models that differ in one factor only
FACTORS = {
    "seed": (("mlm", "mlm-seed-1"), ("mlm", "mlm-seed-2"), ("mlm-seed-1", "mlm-seed-2")),
    "objective": (("base", "mlm"), ("seed-1", "mlm-seed-1"), ("seed-2", "mlm-seed-2")),
    "depth": (("base", "depth-2"),),
    "data": (("tweets", "bbc"),),
    "training length": tuple((f"base@{s}", "base") for s in BASE.checkpoints),
}


def parse(name: str) -> tuple[str, int | None]:
    """``"base@60"`` -> ``("base", 60)``; a ``ValueError`` naming the zoo's models and the
    model's checkpoints for anything else. Step 0 is every model's initial weights (the
    untrained model of its seed)."""
    model, _, step = name.partition("@")
    if model not in ZOO:
        raise ValueError(f"no zoo model {model!r}; the zoo holds {', '.join(ZOO)} (as "
                         f"'zoo:<name>', checkpoints as 'zoo:base@<step>', the initial "
                         "weights as 'zoo:<name>@0')")
    if not step:
        return model, None
    kept = (0, *ZOO[model].checkpoints)
    if not step.isdigit() or int(step) not in kept:
        raise ValueError(f"zoo model {model!r} has no checkpoint {step!r}; it keeps steps "
                         f"{list(kept)} (0: its initial weights)")
    return model, int(step)


def names(set_name: str = "default", *, checkpoints: bool = True) -> list[str]:
    """The ``zoo:`` model names of a set, with the base model's checkpoints."""
    if set_name not in SETS:
        raise ValueError(f"no zoo set {set_name!r}; sets: {', '.join(SETS)}")
    out = [f"zoo:{n}" for n in SETS[set_name]]
    if checkpoints:
        out += [f"zoo:{n}@{s}" for n in SETS[set_name] if role(n) == "base"
                for s in ZOO[n].checkpoints]
    return out


def seed_models(set_name: str = "default", step: int | None = None) -> list[str]:
    """The ``zoo:`` names of a set's masked LMs that differ only by their pretraining seed
    (``mlm`` first): the zoo's miniature MultiBERTs; with ``step``, their weights at that
    checkpoint (one of ``BASE.checkpoints``, or 0: each seed's initial weights)."""
    if set_name not in SETS:
        raise ValueError(f"no zoo set {set_name!r}; sets: {', '.join(SETS)}")
    names_ = [n for n in SETS[set_name]
              if role(n) == "mlm" or role(n).startswith("mlm-seed-")]
    suffix = "" if step is None else f"@{step}"
    out = [f"zoo:{n}{suffix}" for n in names_]
    for name in out:
        parse(name[len("zoo:"):])  # an unknown step is named with the steps kept
    return out


def causal_seed_models(set_name: str = "default") -> list[str]:
    """The ``zoo:`` names of a set's causal LMs of the base configuration that differ only by
    their pretraining seed (``base`` first): the other objective's draws, beside the
    masked-LM seeds of :func:`seed_models`."""
    if set_name not in SETS:
        raise ValueError(f"no zoo set {set_name!r}; sets: {', '.join(SETS)}")
    return [f"zoo:{n}" for n in SETS[set_name]
            if role(n) == "base" or role(n).startswith("seed-")]


def draws(names: Sequence[str]) -> dict[str, int]:
    """Each zoo model's pretraining seed, by its ``zoo:`` name (checkpoints share their
    model's): two models of one seed start from the same draw of the initial weights and
    read the data in the same order."""
    return {name: ZOO[parse(name.removeprefix("zoo:"))[0]].seed for name in names}


def not_learned(names: Sequence[str], *, cache_dir: str | os.PathLike | None = None
                ) -> list[str]:
    """Those of the trained zoo models ``names`` (``"zoo:mlm"``, no checkpoints) that did
    not beat the unigram baseline clearly (:func:`table`'s ``learned``): the chapters leave
    them out of a comparison and say so. A model not trained yet is an error."""
    return list(learning_problems(names, cache_dir=cache_dir))


def learning_problems(names: Sequence[str], *, cache_dir: str | os.PathLike | None = None
                      ) -> dict[str, str]:
    """:func:`not_learned` with the reason, by name: the held-out perplexity as a share of
    the unigram baseline's, against :data:`~.zoo_store.LEARNED_RATIO`. A claim read from
    these models gets no verdict when one of them is here (a claim's ``gates``), as one read
    from a fine-tuned run that failed the training gate does."""
    out = {}
    for name in names:
        model, step = parse(name.removeprefix("zoo:"))
        if step is not None:
            raise ValueError(f"{name}: give the model, not a checkpoint")
        found = trained(model, cache_dir=cache_dir).record["evaluation"]
        if not found["learned"]:
            out[name] = (f"its held-out perplexity, {found['perplexity']:.1f}, is "
                         f"{found['ratio']:.2f} of the unigram baseline's "
                         f"({found['unigram_perplexity']:.1f}), above the {LEARNED_RATIO} a "
                         "zoo model must reach to count as having learnt")
    return out


def wide_seed_models() -> list[str]:
    """The ``zoo:`` names of the masked-LM seed models at twice the width (``zoo`` set):
    the model-size ablation of the seeds chapter."""
    return [f"zoo:{n}" for n in ZOO if n.startswith("wide-")]


def is_trained(name: str, *, cache_dir: str | os.PathLike | None = None) -> bool:
    """Whether the cache holds the zoo model ``name`` (``"zoo:"`` prefix allowed)."""
    model, _ = parse(name.removeprefix("zoo:"))
    return cached(ZOO[model], cache_dir) is not None


def factors(prefix: str = "zoo:", set_name: str | None = None
            ) -> dict[str, list[tuple[str, str]]]:
    """:data:`FACTORS` with the model names as loaded (``"zoo:base"``); with ``set_name``,
    only the pairs whose two models the set holds (checkpoints of a held model included),
    each named as the set names it (``"zoo:replica-base"`` in the ``replica`` set), and only
    the factors left with a pair."""
    if set_name is not None and set_name not in SETS:
        raise ValueError(f"no zoo set {set_name!r}; sets: {', '.join(SETS)}")
    members = ({n: n for n in ZOO} if set_name is None
               else {role(n): n for n in SETS[set_name]})

    def named(name: str) -> str | None:
        model, _, step = name.partition("@")
        return None if model not in members else members[model] + (f"@{step}" * bool(step))

    found = {f: [(prefix + str(named(a)), prefix + str(named(b))) for a, b in pairs
                 if named(a) and named(b)]
             for f, pairs in FACTORS.items()}
    return {f: pairs for f, pairs in found.items() if pairs}


class NotTrainedError(LookupError):
    """A zoo model asked for by name is not in the cache yet."""


def trained(name: str, *, cache_dir: str | os.PathLike | None = None) -> Pretrained:
    """The trained zoo model ``name`` (without a checkpoint suffix) from the cache; a
    :class:`NotTrainedError` naming how to train it when the cache does not hold it."""
    model, _ = parse(name)
    saved = cached(ZOO[model], cache_dir)
    if saved is None:
        raise NotTrainedError(
            f"zoo model {model!r} is not trained in this cache (or was trained by other "
            f"training code); train it with `python -m analysis_lib zoo --train` or "
            f"analysis_lib.training.zoo.train([{model!r}])")
    return saved


def folder(name: str, *, cache_dir: str | os.PathLike | None = None) -> tuple[Path, str]:
    """The model folder of ``name`` (``"base"``, ``"base@60"``) and a fingerprint of it."""
    model, step = parse(name)
    result = trained(model, cache_dir=cache_dir)
    path = result.path if step is None else result.checkpoint(step)
    return path, f"zoo-{name}-{result.path.name}"


def table(names: Sequence[str] | None = None, *,
          cache_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per zoo model: its settings and, when trained, its held-out perplexity, the
    unigram baseline's, their ratio and whether it learned (checkpoints of the base included).
    Models not trained yet have empty numbers."""
    import pandas as pd

    chosen = tuple(names or ZOO)
    for name in chosen:
        parse(name)
    rows = []
    for name in chosen:
        config = ZOO[name]
        saved = cached(config, cache_dir)
        evaluations = {name: saved.record["evaluation"]} if saved else {}
        if saved:
            for step, values in saved.record.get("checkpoint_evaluation", {}).items():
                evaluations[f"{name}@{step}"] = values
        for label in [name] + [f"{name}@{s}" for s in config.checkpoints]:
            values = evaluations.get(label, {})
            rows.append({"model": label, "objective": config.objective,
                         "layers": config.layers, "hidden": config.hidden,
                         "data": config.data, "seed": config.seed,
                         "steps": int(label.split("@")[1]) if "@" in label else config.steps,
                         "perplexity": values.get("perplexity"),
                         "unigram perplexity": values.get("unigram_perplexity"),
                         "ratio": values.get("ratio"), "learned": values.get("learned"),
                         "train seconds": saved.record["train_seconds"]
                         if saved and "@" not in label else None})
    return pd.DataFrame(rows)
