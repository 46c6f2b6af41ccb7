"""Fine-tuning with layers frozen: the runs (Wu et al. 2020 App. D; Merchant et al. 2020
Fig. 3) and what freezing saves in backpropagation.

:func:`freezing_runs` fine-tunes a grid's first model and task with the bottom or the top k
layers frozen, or both (:func:`bottom_frozen` says what "the bottom k" freezes);
:func:`backward_cost` counts the backward pass's operations, and times it, with and without
the bottom k frozen.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .finetune import FineTuned
from .grid import FinetuneGrid, Job, run_grid, train_side_by_side
from .zoo import load_model

#: the ends of the model :func:`freezing_runs` can freeze
ENDS = ("bottom", "top")


def freezing_runs(grid: FinetuneGrid, ks: Sequence[int], *, ends: Sequence[str] = ENDS,
                  gate: Callable[[Mapping[str, Any]], str] | None = None,
                  progress: bool = True
                  ) -> tuple[pd.DataFrame, dict[tuple[str, int, int], FineTuned]]:
    """Fine-tune the grid's first model on its first task with the bottom k layers (and the
    embeddings, as Merchant et al.) or the top k layers frozen, for each k, each of
    ``ends`` (default both) and each of the grid's seeds; ``k = 0`` is the unfrozen run (the
    grid's own model, from the cache). One row per run; the models are keyed
    ``(mode, k, seed)``. ``gate``, a function of a run's record that says why it cannot be
    read as trained ("" when it can; the book's is
    :func:`analysis_lib.claims.training_gate.training_problem`), fills the column
    ``did_not_train``."""
    unknown = [end for end in ends if end not in ENDS]
    if unknown or not ends:
        raise ValueError(f"ends must name one or both of {ENDS}, got {list(ends)!r}")
    one = grid.only(models=grid.models[:1], tasks=grid.tasks[:1])
    model, task = one.models[0], one.tasks[0]
    rows, found = [], {}
    configs = [("none", 0)] + [(m, k) for m in ENDS if m in ends for k in ks if k > 0]
    # a frozen run keeps only what it trained (its frozen weights are the base's)
    jobs = {(mode, k, seed): Job(one.only(seeds=(seed,)), (model, task, seed),
                                 "full" if mode == "none" else "trainable",
                                 _frozen_changes(mode, k))
            for (mode, k), seed in itertools.product(configs, one.seeds)}
    train_side_by_side(list(jobs.values()))  # the runs not cached yet, side by side
    for (mode, k, seed), job in jobs.items():
        runs = run_grid(job.grid, progress=progress, store=job.store, **job.changes)
        result = runs.get(model, task, seed)
        found[(mode, k, seed)] = result
        test = result.metrics["test"]
        rows.append({"frozen": mode, "k": k, "seed": seed, "accuracy": test["accuracy"],
                     "macro_f1": test["macro_f1"], "majority": test["majority_baseline"],
                     "n_test": len(runs.task(task).test),
                     **({"did_not_train": gate(result.record)} if gate else {})})
    return pd.DataFrame(rows), found


def _frozen_changes(mode: str, k: int) -> dict[str, Any]:
    """The settings that freeze ``k`` layers at ``mode``'s end (none for ``"none"``)."""
    return bottom_frozen(k) if mode == "bottom" else dict(freeze_top=k) if mode == "top" else {}


def bottom_frozen(k: int) -> dict[str, Any]:
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
    from . import finetune as ft
    from .surgery import frozen_parameters, n_transformer_layers

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
        grid.settings(seed, **bottom_frozen(k)), n)) for k in ks}
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
    from .finetune import encode_split

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
