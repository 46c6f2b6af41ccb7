"""The one training loop, shared by fine-tuning and pretraining.

:func:`run` trains any ``transformers`` model whose forward pass returns a ``loss`` (a task
model given ``labels``, a causal or masked language model given ``labels``): AdamW with no
decay on biases and norms, a linear warmup and decay, frozen parameters excluded from the
optimizer, the forward pass and loss in float32 or under bfloat16 autocast, a progress bar
with the running loss and examples per second. The batches come from a callable, so each
objective decides what a batch is (dynamic padding, masking).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import torch
from tqdm.auto import tqdm

from ..runtime.device import autocast, fused_optimizer


def bucketed_batches(lengths: np.ndarray, batch_size: int, bucket: int,
                     rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches of examples of similar length: shuffle, cut into buckets of
    ``bucket * batch_size`` examples, sort each by length, cut into batches, shuffle the
    batches."""
    order = rng.permutation(len(lengths))
    batches = []
    size = bucket * batch_size
    for start in range(0, len(order), size):
        chunk = order[start:start + size]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def param_groups(model: torch.nn.Module, frozen: set[str], weight_decay: float) -> list[dict]:
    """AdamW groups: weight decay on matrices only; ``frozen`` parameters left out (and their
    ``requires_grad`` turned off)."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for name, p in model.named_parameters():
        if name in frozen:
            p.requires_grad_(False)
            continue
        p.requires_grad_(True)
        (no_decay if p.ndim < 2 or "LayerNorm" in name or "layer_norm" in name or "ln_" in name
         else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


#: how many points :func:`loss_curve` gives a run (fewer when it has fewer steps)
LOSS_POINTS = 20


def loss_curve(losses: list[float], points: int = LOSS_POINTS) -> list[dict[str, float]]:
    """A run's training loss at ``points`` evenly spaced steps: the per-step losses split
    into that many consecutive windows (as equal as the step count allows), each given as
    ``{"step": its last step, "train_loss": its mean}``. One point per step when the run
    has fewer steps. Free to record, and enough to see a plateau, which one mean per epoch
    hides."""
    if points < 1:
        raise ValueError(f"points must be at least 1, got {points}")
    edges = np.linspace(0, len(losses), min(points, len(losses)) + 1).round().astype(int)
    return [{"step": int(end), "train_loss": float(np.mean(losses[start:end]))}
            for start, end in zip(edges[:-1], edges[1:])]


def run(model: torch.nn.Module, epoch_batches: Callable[[], Iterable[Mapping[str, torch.Tensor]]],
        *, total_steps: int, learning_rate: float, warmup_steps: int = 0,
        weight_decay: float = 0.0, frozen: set[str] | frozenset = frozenset(),
        desc: str = "train", progress: bool = True, device: torch.device | str = "cpu",
        on_step: Callable[[int, float], None] | None = None,
        on_epoch: Callable[[], Mapping[str, float]] | None = None,
        stop: Callable[[list[dict[str, float]]], bool] | None = None,
        precision: str = "float32") -> list[dict[str, float]]:
    """Train ``model`` in place for ``total_steps`` optimizer steps.

    Parameters
    ----------
    epoch_batches : callable
        Returns one epoch's batches: mappings of tensors passed to ``model(**batch)``, which
        must return an output with ``.loss``. Called again for each new epoch.
    total_steps, learning_rate, warmup_steps, weight_decay : the schedule and optimizer.
    frozen : set of str
        Parameter names that are not trained.
    on_step : callable, optional
        Called with the step number and that step's loss after each step (loss curves,
        checkpoints).
    on_epoch : callable, optional
        Called after each epoch; the numbers it returns join that epoch's entry (a learning
        curve: held-out accuracy after each epoch). It may switch the model to eval mode;
        training mode is set again before the next step.
    stop : callable, optional
        Called with the history after each epoch; training ends early when it returns True
        (early stopping: the schedule's length is still ``total_steps``).
    precision : {'float32', 'bfloat16'}
        What the forward pass and the loss compute in: ``"bfloat16"`` autocasts them (the
        products run in bfloat16, the weights, gradients and optimizer stay in float32); the
        backward pass follows the forward pass's types. ``on_epoch`` runs outside it, in the
        precision it sets itself (fine-tuning's learning curve autocasts its evaluation to
        the run's precision).

    Returns
    -------
    list of dict
        One entry per (possibly partial) epoch: ``epoch``, ``steps`` so far, ``train_loss``,
        and what ``on_epoch`` returned.
    """
    from transformers import get_linear_schedule_with_warmup

    if precision not in ("float32", "bfloat16"):
        raise ValueError(f"precision must be 'float32' or 'bfloat16', got {precision!r}")
    where = torch.device(device)

    if total_steps < 1:
        raise ValueError(f"total_steps must be at least 1, got {total_steps}; train for at "
                         "least one step (epochs > 0 and a non-empty training set)")
    optimizer = torch.optim.AdamW(param_groups(model, set(frozen), weight_decay),
                                  lr=learning_rate, fused=fused_optimizer(device))
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)
    history: list[dict[str, float]] = []
    step, seen, start = 0, 0, time.perf_counter()
    bar = tqdm(total=total_steps, desc=desc, unit="step", disable=not progress)
    model.train()
    while step < total_steps:
        losses = []
        for batch in epoch_batches():
            if step >= total_steps:
                break
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            with autocast(where, precision):
                loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            step += 1
            seen += len(batch["input_ids"])
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}",
                            ex_per_s=f"{seen / (time.perf_counter() - start):.1f}")
            if on_step is not None:
                on_step(step, losses[-1])
        if not losses:
            raise ValueError("an epoch produced no batches; the training set is empty")
        history.append({"epoch": len(history) + 1, "steps": step,
                        "train_loss": float(np.mean(losses))})
        if on_epoch is not None:
            history[-1].update(on_epoch())
            model.train()
        if stop is not None and stop(history):
            break
    bar.close()
    model.eval()
    return history
