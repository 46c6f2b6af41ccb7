"""What fine-tuning changes, layer by layer (Phang et al. 2021 §3; Wu et al. 2020 §6, App. D;
Merchant et al. 2020 §5).

What the fine-tuning chapter still keeps for itself. Phang et al.'s four views and their
block structure are general (:func:`analysis_lib.collect.view_matrices`,
:mod:`analysis_lib.similarity.structure`); the fine-tuning grid and its runs are
:mod:`analysis_lib.training.grid`'s. Here:

* :func:`structure_summary`: the views' block and band fits over seeds;
* :func:`layer_change`: per layer, base against fine-tuned under CKA, neuronsim and RSA on
  word tokens (Wu et al. Fig. 5; Merchant et al. Fig. 2), head-level JS attention similarity
  (Wu et al. Fig. 6) and localization (Wu et al. Fig. 7);
* :func:`freezing_runs`: fine-tuning with the bottom or top k layers frozen (Wu et al. App. D;
  Merchant et al. Fig. 3);
and the results these give, by name, for the claims they test (their evidence functions
are in :mod:`analysis_lib.claims.papers`; the notebook judges them with
:func:`~analysis_lib.claims.verdicts.judge`).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import claims
from ..claims import training_gate, verdicts
from ..claims.tables import seed_interval, summarize
from ..claims.training_gate import training_problems
from ..collect import WordLayers, load_model, view_matrices, word_layers
from ..data.stimuli import attention_stimuli, stimuli, word_rows
from ..similarity import (
    attention_similarity,
    linear_cka,
    localization,
    neuronsim,
    pairwise_suite,
    rsa,
    structure,
)
from ..training.finetune import FineTuned
from ..training.grid import FinetuneGrid, Runs, cached_grid, run_grid
from ..training.probes import linear_probe

# --------------------------------------------------------------------------- CLS matrices


# --------------------------------------------------------------------------- intervals


# --------------------------------------------------------------------------- per layer


def _localization(layers: Sequence[np.ndarray]) -> np.ndarray:
    mats = pairwise_suite(list(layers), measures=["neuronsim", "svcca"], progress=False)
    return localization(mats["neuronsim"], mats["svcca"])


def layer_change(base: WordLayers, tuned: WordLayers) -> pd.DataFrame:
    """Per layer ``0..L``: base against fine-tuned on the same words, under linear CKA,
    neuronsim (fine-tuned neurons matched in the base layer), RSA (cosine kernel, Pearson);
    head-level JS attention similarity (layers ``1..L``; fine-tuned heads matched among the
    base layer's); and each model's localization within its own layers."""
    n_layers = len(base.words)
    if len(tuned.words) != n_layers:
        raise ValueError(f"the models have {n_layers} and {len(tuned.words)} layers")
    loc_base, loc_tuned = _localization(base.words), _localization(tuned.words)
    rows = []
    for layer in range(n_layers):
        X, Y = base.words[layer], tuned.words[layer]
        row = {"layer": layer, "linear_cka": linear_cka(X, Y), "neuronsim": neuronsim(Y, X),
               "rsa": rsa(X, Y, "cosine", "pearson"), "attention_js": np.nan,
               "localization_base": loc_base[layer], "localization_ft": loc_tuned[layer]}
        if layer and base.attention is not None and tuned.attention is not None:
            row["attention_js"] = attention_similarity(tuned.attention.attention_layer(layer),
                                                       base.attention.attention_layer(layer),
                                                       "js")
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- freezing


def freezing_runs(grid: FinetuneGrid, ks: Sequence[int], *, progress: bool = True
                  ) -> tuple[pd.DataFrame, dict[tuple[str, int, int], FineTuned]]:
    """Fine-tune the grid's first model on its first task with the bottom k layers (and the
    embeddings, as Merchant et al.) or the top k layers frozen, for each k and each of the
    grid's seeds; ``k = 0`` is the unfrozen run (the grid's own model, from the cache). One
    row per run; the models are keyed ``(mode, k, seed)``."""
    one = grid.only(models=grid.models[:1], tasks=grid.tasks[:1])
    model, task = one.models[0], one.tasks[0]
    rows, found = [], {}
    configs = [("none", 0)] + [(m, k) for m in ("bottom", "top") for k in ks if k > 0]
    for (mode, k), seed in itertools.product(configs, one.seeds):
        changes: dict[str, Any] = {}
        if mode == "bottom":
            changes = _bottom_frozen(k)
        elif mode == "top":
            changes = dict(freeze_top=k)
        # a frozen run keeps only what it trained (its frozen weights are the base's)
        runs = run_grid(one.only(seeds=(seed,)), progress=progress,
                        store="full" if mode == "none" else "trainable", **changes)
        result = runs.get(model, task, seed)
        found[(mode, k, seed)] = result
        test = result.metrics["test"]
        rows.append({"frozen": mode, "k": k, "seed": seed, "accuracy": test["accuracy"],
                     "macro_f1": test["macro_f1"], "majority": test["majority_baseline"],
                     "n_test": len(runs.task(task).test),
                     "did_not_train": training_gate.training_problem(result.record)})
    return pd.DataFrame(rows), found


def _bottom_frozen(k: int) -> dict[str, Any]:
    """The settings that freeze the bottom ``k`` transformer layers and, as Merchant et al.
    do, the embeddings below them."""
    return dict(freeze_bottom=k, freeze_embeddings=True)


def backward_cost(grid: FinetuneGrid, ks: Sequence[int] | None = None, *,
                  n_batches: int = 4, repeats: int = 3, seed: int = 0) -> pd.DataFrame:
    """What backpropagation costs with the bottom k transformer layers and the embeddings
    frozen, as :func:`freezing_runs` trains them, against the unfrozen model (Wu et al.
    App. D's saving), on ``n_batches`` training batches of the grid's first task: the
    grid's first model with a new task head, each batch one optimizer step's worth at the
    grid's settings.

    Per batch and setting, ``flops``: the backward pass's floating-point operations in
    matrix products and attention, counted by :class:`torch.utils.flop_counter.FlopCounterMode`
    (the same on any machine); ``seconds``: its wall time on this machine, the median of
    ``repeats`` timed passes with the settings interleaved (after the counted pass).
    ``ks`` defaults to half the model's transformer layers (Wu et al. froze six of
    twelve). One row per (k, batch), with the unfrozen model's numbers beside the frozen
    one's and ``saved``, the share of the backward operations that freezing saves."""
    import torch

    from ..runtime.threads import torch_threads
    from ..training import finetune as ft
    from ..training.surgery import frozen_parameters, n_transformer_layers

    if n_batches < 1 or repeats < 1:
        raise ValueError(f"n_batches and repeats must be at least 1, got {n_batches} and "
                         f"{repeats}")
    task = grid.task(grid.tasks[0])
    if task.word_level:
        raise ValueError(f"backward_cost reads a sentence-level task; {task.name!r} tags "
                         "words: put a sentence-level task first in the grid")
    base = load_model(grid.models[0], grid.model_options)
    net = ft.task_model(base, task.num_labels, task.regression, seed, task.word_level)
    n = n_transformer_layers(net)
    ks = [n // 2] if ks is None else [int(k) for k in ks]
    if not ks or not all(1 <= k <= n for k in ks):
        raise ValueError(f"ks must name layers to freeze, each 1..{n} (the model has {n} "
                         f"transformer layers), got {ks}")
    frozen: dict[int, set[str]] = {0: set()} | {k: frozen_parameters(net, ft.frozen_layers(
        grid.settings(seed, **_bottom_frozen(k)), n)) for k in ks}
    rows = []
    net.train()
    with torch_threads(ft.CPU_THREADS), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout
        for b, batch in enumerate(_training_batches(base.tokenizer, task,
                                                    grid.settings(seed), n_batches, seed)):
            flops, seconds = _backward_pass_cost(net, batch, frozen, repeats)
            rows += [{"k": k, "batch": b, "examples": len(batch["labels"]),
                      "flops_full": flops[0], "flops_frozen": flops[k],
                      "seconds_full": seconds[0], "seconds_frozen": seconds[k],
                      "saved": 1 - flops[k] / flops[0]} for k in ks]
    return pd.DataFrame(rows)


def _training_batches(tokenizer, task, config, n_batches: int, seed: int) -> list[dict]:
    """``n_batches`` batches of ``config.batch_size`` training examples of a sentence-level
    task, drawn without replacement by ``seed``, padded as the training loop pads them."""
    import torch

    from ..models.batching import pad_batch, pad_token_id
    from ..training.finetune import encode_split

    ids = encode_split(tokenizer, task.train, config.max_length)
    labels = torch.tensor(task.train.labels,
                          dtype=torch.float32 if task.regression else torch.long)
    order = np.random.default_rng(seed).permutation(len(ids))
    out = []
    for i in range(min(n_batches, len(ids) // config.batch_size)):
        rows = order[i * config.batch_size:(i + 1) * config.batch_size]
        input_ids, mask = pad_batch(ids, rows, pad_token_id(tokenizer))
        out.append({"input_ids": input_ids, "attention_mask": mask, "labels": labels[rows]})
    return out


def _backward_pass_cost(net, batch: dict, frozen: Mapping[int, set[str]], repeats: int
                        ) -> tuple[dict[int, int], dict[int, float]]:
    """Per setting of ``frozen`` (a key -> the names of the parameters it freezes): the
    backward pass's counted operations on ``batch``, and its median wall time over
    ``repeats`` passes, the settings interleaved."""
    from torch.utils.flop_counter import FlopCounterMode

    def backward(setting: int, counter=None) -> float:
        for name, p in net.named_parameters():
            p.requires_grad_(name not in frozen[setting])
        loss = net(**batch).loss
        start = time.perf_counter()
        with counter or contextlib.nullcontext():
            loss.backward()
        seconds = time.perf_counter() - start
        net.zero_grad(set_to_none=True)
        return seconds

    flops: dict[int, int] = {}
    times: dict[int, list[float]] = {s: [] for s in frozen}
    for setting in frozen:
        counter = FlopCounterMode(display=False)
        backward(setting, counter)
        flops[setting] = int(counter.get_total_flops())
    for _ in range(repeats):
        for setting in frozen:
            times[setting].append(backward(setting))
    return flops, {s: float(np.median(t)) for s, t in times.items()}


def freezing_change(found: Mapping[tuple[str, int, int], FineTuned], grid: FinetuneGrid, *,
                    n_words: int, n_stimuli: int, seed: int | None = None,
                    storage: str = "float32") -> pd.DataFrame:
    """Per layer, linear CKA between the grid's first pretrained model and each of
    :func:`freezing_runs`' partially frozen runs (``run`` is ``"none"``, ``"bottom 2"``,
    ...) of one fine-tuning ``seed`` (default: the smallest in ``found``), on the same words
    of the first task's stimuli (kept in ``storage``, as :func:`word_layers`)."""
    seed = min(s for _, _, s in found) if seed is None else seed
    corpus = stimuli(grid.task(grid.tasks[0]), n_stimuli)
    rows = word_rows(corpus, n_words)
    base = word_layers(load_model(grid.models[0], grid.model_options), corpus, rows,
                       storage=storage)
    frames = []
    for (mode, k, run_seed), result in found.items():
        if run_seed != seed:
            continue
        tuned = word_layers(result.load(), corpus, rows, storage=storage)
        frames.append(pd.DataFrame({
            "run": "none" if mode == "none" else f"{mode} {k}", "frozen": mode, "k": k,
            "seed": seed, "layer": np.arange(len(base.words)),
            "linear_cka": [linear_cka(X, Y) for X, Y in zip(base.words, tuned.words)]}))
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------- notebook tables


def frozen_head(runs: Runs, models: Sequence[str], tasks: Sequence[str], *,
                model_options: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Per (model, task): the test accuracy of a logistic-regression head trained on the
    pretrained model's top layer (mean over the tokens; the encoder frozen), on the same
    training examples and test split as the fine-tuned runs. It is what the task gets
    without changing the encoder: fine-tuning that does not beat it has not trained the
    encoder enough for the comparisons of this chapter to say much about fine-tuning."""
    rows = []
    for model in models:
        loaded = load_model(model, model_options)
        for task in tasks:
            found = linear_probe(loaded, runs.task(task), loaded.info.n_attention_layers,
                                 pooling="mean")
            rows.append({"model": model, "task": task, "frozen_head": found["accuracy"]})
    return pd.DataFrame(rows)


def accuracy_table(runs: Runs, *, model_options: Mapping[str, Any] | None = None
                   ) -> pd.DataFrame:
    """Per (model, task) of a grid: test accuracy, mean over seeds with a 95% t interval
    (``mean``, ``low``, ``high``, ``n``), the optimizer steps of each run (``steps``), the
    majority baseline and the frozen head (:func:`frozen_head`), and ``against_frozen``:
    "above" when the whole interval lies above the frozen head, "below" when it lies below
    it, "overlaps" otherwise. Fine-tuning is trained enough for this chapter's comparisons
    only where it is "above"."""
    table = summarize(runs.frame, ["model", "task"], "accuracy")
    first = runs.frame.groupby(["model", "task"], sort=False).first()
    keys = list(zip(table.model, table.task))
    table["steps"] = [runs.get(m, t, int(first.loc[(m, t), "seed"])
                               ).record["history"][-1]["steps"] for m, t in keys]
    table["majority"] = [float(first.loc[key, "majority"]) for key in keys]
    models, tasks = list(dict.fromkeys(table.model)), list(dict.fromkeys(table.task))
    table = table.merge(frozen_head(runs, models, tasks, model_options=model_options),
                        on=["model", "task"])
    table["against_frozen"] = np.select(
        [table["low"] > table["frozen_head"], table["high"] < table["frozen_head"]],
        ["above", "below"], "overlaps")
    return table


def learning_curves(runs: Runs, *, still_rising: float = 0.01) -> pd.DataFrame:
    """One row per (model, task, seed, epoch) of the grid: the training loss and the
    validation scores after that epoch, from each run's record (the learning curve), and
    ``rising``: whether validation accuracy rose by more than ``still_rising`` over the
    run's last epoch, a sign that the schedule stopped before the model had learnt the task.
    Records made without a curve give no rows."""
    rows = []
    for (model, task, seed), result in runs.models.items():
        curve = [e for e in result.record["history"] if "validation_accuracy" in e]
        accuracy = [e["validation_accuracy"] for e in curve]
        rising = len(curve) >= 2 and accuracy[-1] - accuracy[-2] > still_rising
        rows += [{"model": model, "task": task, "seed": seed, **entry, "rising": rising}
                 for entry in curve]
    return pd.DataFrame(rows)


def loss_curves(runs: Runs) -> pd.DataFrame:
    """One row per (model, task, seed) of the grid and point of its loss curve: the training
    loss at evenly spaced steps (:func:`~analysis_lib.training.loop.loss_curve`; records
    made without one give their per-epoch losses), and ``did_not_train``: why the run failed
    the book's training gate (:func:`~analysis_lib.claims.training_gate.training_problem`), or
    "" when it passed."""
    rows = []
    for (model, task, seed), result in runs.models.items():
        record = result.record
        curve = record.get("loss_curve") or record["history"]
        problem = training_gate.training_problem(record)
        rows += [{"model": model, "task": task, "seed": seed, "step": point["step"],
                  "train_loss": point["train_loss"], "did_not_train": problem}
                 for point in curve]
    return pd.DataFrame(rows)


def structure_summary(views: Mapping[tuple[str, str, str], Mapping[str, Sequence[np.ndarray]]]
                      ) -> pd.DataFrame:
    """Block and band R^2 of every view: means with t intervals over its matrices (seeds or
    seed pairs), one row per (model, task, pooling, view)."""
    rows = []
    for (model, task, pooling), view in views.items():
        table = structure.structure_table(view)
        for name, group in table.groupby("view", sort=False):
            row: dict[str, Any] = {"model": model, "task": task, "pooling": pooling,
                                   "view": name, "matrices": len(group)}
            for column in ("block2_r2", "band_r2", "block3_r2", "within", "between"):
                mean, low, high = seed_interval(group[column])
                row[column] = mean
                if column in ("block2_r2", "band_r2"):  # an R^2 is at most 1
                    row[f"{column}_low"], row[f"{column}_high"] = low, min(high, 1.0)
            row["block2_starts"] = group["block2_starts"].iloc[0]
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


CHANGE_MEASURES = ("linear_cka", "neuronsim", "rsa", "attention_js")


def change_summary(change: pd.DataFrame) -> pd.DataFrame:
    """Per (model, task, measure, layer): mean and t interval over seeds, long format."""
    long = change.melt(id_vars=["model", "task", "seed", "layer"],
                       value_vars=list(CHANGE_MEASURES), var_name="measure")
    long = long.dropna(subset=["value"])
    return summarize(long, ["model", "task", "measure", "layer"], "value")


def localization_summary(change: pd.DataFrame) -> pd.DataFrame:
    """Per (model, layer): the pretrained model's localization and the fine-tuned models'
    (mean and t interval over tasks and seeds); ``model`` says which."""
    base = change.groupby(["model", "layer"], as_index=False, sort=False
                          ).localization_base.first()
    base = base.rename(columns={"localization_base": "mean"}).assign(
        low=lambda f: f["mean"], high=lambda f: f["mean"])
    base["model"] = base["model"] + " (pretrained)"
    tuned = summarize(change, ["model", "layer"], "localization_ft")
    tuned["model"] = tuned["model"] + " (fine-tuned)"
    return pd.concat([base, tuned.drop(columns="n")], ignore_index=True)


@dataclass
class Schedule:
    """The runs of a longer schedule (another profile's) that the cache holds, read as
    sections 1 and 2 read this page's own: accuracy against the frozen head, the learning
    curves, Phang et al.'s views on the first token, and the findings of the chapter's
    claims that those answer (:func:`~analysis_lib.claims.answerable`)."""

    profile: str
    runs: Runs
    accuracy: pd.DataFrame
    curves: pd.DataFrame
    views: dict[tuple[str, str, str], dict[str, list[np.ndarray]]]
    findings: pd.DataFrame


def longer_schedule(grid: FinetuneGrid, profile: str = "larger", *,
                    n_stimuli: int | None = None) -> Schedule | None:
    """The training-length ablation of this chapter: the fine-tuned runs of another
    profile's ``grid`` (:meth:`FinetuneGrid.from_profile`), read from the cache and never
    trained; None when the cache does not hold two seeds of every run (the profile has not
    been built). ``n_stimuli``: validation sentences for the views."""
    runs = cached_grid(grid)
    if runs is None:
        return None
    options = grid.model_options
    views = {(model, task, "first"): view_matrices(runs, model, task,
                                                   stimuli(runs.task(task), n_stimuli),
                                                   "first", model_options=options)
             for model, task in grid.pairs()}
    results = {"views": views, "untrained": training_problems(runs)}
    found = verdicts.judge(claims.answerable(claims.of_chapter("finetuning"), results),
                           results)
    return Schedule(profile, runs, accuracy_table(runs, model_options=options),
                    learning_curves(runs), views, found)
