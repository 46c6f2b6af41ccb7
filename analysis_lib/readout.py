"""Reading a fine-tuned model's task from its lower layers (Phang et al. 2021 §4, §4.1;
Merchant et al. 2020 §5.2).

Phang et al.'s three readings of a truncated model, per layer ``l = 1..L`` (layer 0, the
embedding layer, gives the same first-token vector for every input and is left out):

* **UNTUNED**: the fine-tuned encoder cut after layer ``l``, its own task head, nothing
  retrained;
* **TUNED**: the fine-tuned encoder cut after layer ``l``, the head re-trained on that layer;
* **TUNEDORIG**: the *pretrained* encoder cut after layer ``l``, a head trained on that layer.

The head is the model's own architecture (:class:`~analysis_lib.training.heads.FirstTokenHead`:
for BERT the pooler and the classifier), re-fitted on cached first-token vectors
(``head="model"``), or a logistic-regression probe on the same vectors (``head="probe"``, the
cheaper stand-in): :func:`layer_scores` for one run, :func:`score_grid` for a grid,
:func:`untuned_scores` for UNTUNED alone. Also: Merchant et al.'s models truncated *before*
fine-tuning (:func:`truncated_runs`, their learning curves :func:`cut_curves`), Phang et
al.'s contiguous spans of skipped layers with no retraining (:func:`skip_scores`), and
UNTUNED with a probe on each pooling of the tokens (:func:`pooling_scores`: is the first
token the reason a head does not carry down?), and each layer's CKA to the last layer beside
the accuracy UNTUNED loses there (:func:`cka_and_loss`: does a layer that resembles the top
lose little?).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .collect import first_token_features, pooled_features
from .data.tasks import Task
from .models import LoadedModel
from .runtime.profile import profiled
from .training import finetune as ft
from .training.grid import FinetuneGrid, Runs, cached_grid, run_grid
from .training.heads import FirstTokenHead, fit_heads, head_logits
from .training.probes import logistic_probe
from .training.surgery import truncated_copy
from .training.zoo import load_model

CONFIGS = ("UNTUNED", "TUNED", "TUNEDORIG")
HEADS = ("model", "probe")


def _accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(logits.argmax(axis=1) == labels))


def probe_accuracy(features: Mapping[str, list[np.ndarray]], layer: int, task: Task
                   ) -> float:
    """Test accuracy of the ``head="probe"`` reading of one layer: the book's probe
    (:func:`~analysis_lib.training.probes.logistic_probe`) fitted on the first-token
    vectors of the training split."""
    clf = logistic_probe().fit(features["train"][layer], task.train.labels)
    return float(np.mean(clf.predict(features["test"][layer]) == task.test.labels))


@profiled("heads", lambda result, *a, **k: "heads per layer")
def layer_scores(result: ft.FineTuned, base: LoadedModel, task: Task, *, head: str = "model",
                 seed: int = 0, base_features: Mapping[str, list[np.ndarray]] | None = None,
                 head_epochs: int = 30) -> pd.DataFrame:
    """Test accuracy per layer ``1..L`` for UNTUNED, TUNED and TUNEDORIG (one row each).

    ``base_features`` (the pretrained encoder's
    :func:`~analysis_lib.collect.first_token_features`) can be passed to share them between
    fine-tuning seeds.
    """
    if head not in HEADS:
        raise ValueError(f"head must be one of {HEADS}, got {head!r}")
    tuned = first_token_features(result.load(), task)
    base_features = base_features or first_token_features(base, task)
    n = len(tuned["test"]) - 1
    layers = range(1, n + 1)
    configs = {"TUNED": tuned, "TUNEDORIG": base_features}
    scores: dict[tuple[str, int], float]
    if head == "probe":
        scores = {(config, layer): probe_accuracy(feats, layer, task)
                  for config, feats in configs.items() for layer in layers}
    else:
        # TUNED starts from the fine-tuned head, TUNEDORIG from the pretrained pooler (if
        # any) and a fresh classifier; every layer's two heads are trained side by side
        fresh = ft.task_model(base, task.num_labels, task.regression, seed)
        starts = {"TUNED": result.model, "TUNEDORIG": fresh}
        keys = [(config, layer) for config in configs for layer in layers]
        heads = [FirstTokenHead(starts[config]) for config, _ in keys]
        fit_heads(heads, [configs[c]["train"][k] for c, k in keys], task.train.labels,
                  [configs[c]["validation"][k] for c, k in keys], task.validation.labels,
                  epochs=head_epochs, seed=seed)
        scores = {key: _accuracy(head_logits(fitted, configs[key[0]]["test"][key[1]]),
                                 task.test.labels) for key, fitted in zip(keys, heads)}
    untuned = _untuned(result, tuned["test"], task)
    rows = []
    for layer in layers:
        rows.append(("UNTUNED", layer, untuned[layer - 1]))
        rows += [(config, layer, scores[(config, layer)]) for config in configs]
    return pd.DataFrame(rows, columns=["config", "layer", "accuracy"])


def _untuned(result: ft.FineTuned, test: Sequence[np.ndarray], task: Task) -> list[float]:
    """UNTUNED's test accuracy at layers ``1..L``: the model's own head on each layer."""
    own = FirstTokenHead(result.model)
    return [_accuracy(head_logits(own, test[layer]), task.test.labels)
            for layer in range(1, len(test))]


def untuned_scores(runs: Runs, models: Sequence[str], tasks: Sequence[str]) -> pd.DataFrame:
    """UNTUNED alone for every run of a grid, in :func:`score_grid`'s columns (the full
    score is UNTUNED at the top layer there too). It reads the
    test inputs only and fits nothing, so a grid of longer runs (another profile's, found
    with :func:`~analysis_lib.training.grid.cached_grid`) is scored in seconds."""
    frames = []
    for model, task_name, seed, result in runs.each(models, tasks):
        task = runs.task(task_name)
        test = first_token_features(result.load(), task, ["test"])["test"]
        untuned = _untuned(result, test, task)
        frames.append(pd.DataFrame({
            "config": "UNTUNED", "layer": range(1, len(test)), "accuracy": untuned,
            "model": model, "task": task_name, "seed": seed, "full": untuned[-1],
            "majority": task.majority_baseline("test")}))
    return pd.concat(frames, ignore_index=True)


def score_grid(runs: Runs, models: Sequence[str], tasks: Sequence[str], *, head: str = "model",
               model_options: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """:func:`layer_scores` of every fine-tuned model of the grid, with the full model's own
    score and the majority baseline, in one long table.

    The full score (``full``) is UNTUNED at the top layer: the model's own head on its own
    top layer, read from the same first-token vectors as every lower layer, so a layer's
    cost never mixes two readings of the inputs (the model's ``predict`` reads the raw
    text, the vectors the corpus's words; a few inputs, such as tweets with HTML entities,
    are tokenized differently by the two)."""
    frames = []
    for model, task_name, by_seed in runs.groups(models, tasks):
        base, task = load_model(model, model_options), runs.task(task_name)
        shared = first_token_features(base, task)
        for seed, result in by_seed.items():
            frame = layer_scores(result, base, task, head=head, seed=seed,
                                 base_features=shared)
            top = frame[(frame.config == "UNTUNED") & (frame.layer == frame.layer.max())]
            frames.append(frame.assign(model=model, task=task_name, seed=seed,
                                       full=float(top.accuracy.iloc[0]),
                                       majority=task.majority_baseline("test")))
    return pd.concat(frames, ignore_index=True)


def truncated_runs(grid: FinetuneGrid, layers: Sequence[int], *,
                   epochs: float | None = None,
                   gate: Callable[[Mapping[str, Any]], str] | None = None,
                   progress: bool = True, cached_only: bool = False) -> pd.DataFrame:
    """Merchant et al. Fig. 4: the grid's first pretrained model cut after layer ``k`` and
    then fine-tuned as a whole on the grid's first task, for each ``k`` and each of the
    grid's seeds; test accuracy per ``(k, seed)`` (cached like every fine-tuning), with the
    mean training loss of the first and the last epoch (did it converge?) and the validation
    accuracy after each epoch (``curve``, the learning curve: :func:`cut_curves`).
    ``epochs``: the cut runs' schedule, when it is not the grid's (a cut model learns more
    slowly per epoch, and each epoch costs it less). ``cached_only``: the runs the cache
    holds, nothing trained (another profile's longer schedule). ``gate``, a function of a
    run's record that says why it cannot be read as trained ("" when it can; the book's is
    :func:`analysis_lib.claims.training_gate.training_problem`), fills the column
    ``did_not_train``."""
    model, task = grid.models[0], grid.tasks[0]
    rows = []
    for k in layers:
        folder = truncated_copy(model, k, **grid.options(model))
        cut = grid.only(models=(folder,), tasks=(task,), model_options=None,
                        **({} if epochs is None else {"epochs": float(epochs)}))
        runs = (cached_grid(cut, min_seeds=1) if cached_only
                else run_grid(cut, progress=progress))
        if runs is None:
            continue
        for seed in runs.seeds(folder, task):
            result = runs.get(folder, task, seed)
            history = result.record["history"]
            rows.append({"layers_kept": k, "seed": seed,
                         "accuracy": result.metrics["test"]["accuracy"],
                         "n_test": len(runs.task(task).test),
                         **({"did_not_train": gate(result.record)} if gate else {}),
                         "first_epoch_loss": history[0]["train_loss"],
                         "last_epoch_loss": history[-1]["train_loss"],
                         "curve": [e["validation_accuracy"] for e in history
                                   if "validation_accuracy" in e]})
    return pd.DataFrame(rows)


def cut_curves(truncated: pd.DataFrame, task: str) -> pd.DataFrame:
    """The learning curves of :func:`truncated_runs` in the long form of
    :func:`~analysis_lib.training.grid.learning_curves` (one row per run and epoch),
    each cut model named ``"cut after L<k>"``, for a chart per number of layers kept."""
    rows = [{"model": f"cut after L{run.layers_kept}", "task": task, "seed": run.seed,
             "epoch": epoch, "validation_accuracy": accuracy}
            for run in truncated.itertuples()
            for epoch, accuracy in enumerate(run.curve, start=1)]
    return pd.DataFrame(rows, columns=["model", "task", "seed", "epoch",
                                       "validation_accuracy"])


@profiled("heads", lambda result, *a, **k: "skipped spans")
def skip_scores(result: ft.FineTuned, task: Task, n_test: int | None = None, *,
                single_only: bool = False) -> pd.DataFrame:
    """Phang et al. Fig. 4: test accuracy with every contiguous span ``first..last`` of
    transformer layers skipped (no retraining); every span but the one removing all layers.
    ``single`` marks the single-layer skips (the diagonal); ``single_only`` scores those
    alone (what the claims read, in a fraction of the time). ``n_test``: score on the first
    ``n_test`` test examples only (each span is a forward pass over them). ``majority``:
    the majority baseline on the examples scored, the floor a skipped model's accuracy is
    read beside."""
    config: Any = result.model.config  # a transformers configuration
    n = config.num_hidden_layers
    if n_test is not None:
        task = Task(task.name, task.train, task.validation,
                    task.test.subset(range(min(n_test, len(task.test)))), task.label_names,
                    task.regression, task.meta)
    rows = []
    majority = task.majority_baseline("test")
    for first in range(1, n + 1):
        for last in range(first, n + 1):
            if (first == 1 and last == n) or (single_only and first != last):
                continue
            logits = ft.predict(result.model, result.tokenizer, task.test,
                                max_length=result.record["config"]["max_length"],
                                skip=(first, last))
            rows.append({"first": first, "last": last, "single": first == last,
                         "accuracy": _accuracy(logits, task.test.labels),
                         "n_test": len(task.test), "majority": majority})
    return pd.DataFrame(rows)


@profiled("heads", lambda runs, *a, **k: "pooled probes per layer")
def pooling_scores(runs: Runs, models: Sequence[str], tasks: Sequence[str]) -> pd.DataFrame:
    """UNTUNED with one factor changed, the vector the head reads: per fine-tuned run and
    pooling (:data:`~analysis_lib.collect.SENTENCE_POOLINGS`), a probe
    (:func:`probe_accuracy`'s) fitted on the top layer's training vectors of the fine-tuned
    encoder, then applied unchanged, scaling included, to every layer's test vectors. The
    top layer's accuracy is the probe's full score. One row per run, pooling and layer
    ``1..L``: model, task, seed, pooling, layer, accuracy, and, as in :func:`score_grid`'s
    table, ``config`` (``"UNTUNED"``: a head fitted at the top, read unchanged below) and
    ``full`` (that run and pooling's top-layer accuracy), so that one pooling's rows are
    read as UNTUNED's scores are."""
    rows = []
    for model, task_name, run_seed, result in runs.each(models, tasks):
        task = runs.task(task_name)
        feats = pooled_features(result.load(), task, ("train", "test"))
        for pooling, by_part in feats.items():
            top = len(by_part["test"]) - 1
            clf = logistic_probe().fit(by_part["train"][top], task.train.labels)
            scores = [float(np.mean(clf.predict(by_part["test"][layer]) == task.test.labels))
                      for layer in range(1, top + 1)]
            rows += [{"model": model, "task": task_name, "seed": run_seed, "pooling": pooling,
                      "config": "UNTUNED", "layer": layer, "accuracy": accuracy,
                      "full": scores[-1]}
                     for layer, accuracy in enumerate(scores, start=1)]
    return pd.DataFrame(rows)


def cka_and_loss(ft_ft: Mapping[str, np.ndarray], summary: pd.DataFrame, model: str,
                 config: str = "UNTUNED") -> pd.DataFrame:
    """Per task and layer ``1..L-1``: linear CKA between the layer's first-token vectors and
    the last layer's (the FT-FT matrix, mean over seeds) beside the accuracy lost by reading
    the task head from that layer (full model minus ``config``), ``config``'s accuracy
    (``untuned``) and, where ``summary`` holds it, the majority baseline (``majority``): the
    floor the claim reads UNTUNED beside."""
    rows = []
    for task, M in ft_ft.items():
        top = len(M) - 1
        at = summary[(summary.model == model) & (summary.task == task) &
                     (summary.config == config)]
        for row in at.itertuples():
            if row.layer < top and np.isfinite(M[row.layer, top]):
                rows.append({"task": task, "layer": int(row.layer),
                             "cka_to_last": float(M[row.layer, top]),
                             "accuracy_lost": float(row.full - row.mean),
                             "untuned": float(row.mean),
                             "majority": float(getattr(row, "majority", np.nan))})
    frame = pd.DataFrame(rows)
    return frame.drop(columns="majority") if len(frame) and frame.majority.isna().any() \
        else frame
