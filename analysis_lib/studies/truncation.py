"""How many layers does a fine-tuned model need? (Phang et al. 2021 §4, §4.1; Merchant et al.
2020 §5.2)

Phang et al.'s three readings of a truncated model, per layer ``l = 1..L`` (layer 0, the
embedding layer, gives the same first-token vector for every input and is left out):

* **UNTUNED**: the fine-tuned encoder cut after layer ``l``, its own task head, nothing
  retrained;
* **TUNED**: the fine-tuned encoder cut after layer ``l``, the head re-trained on that layer;
* **TUNEDORIG**: the *pretrained* encoder cut after layer ``l``, a head trained on that layer.

The head is the model's own architecture (:class:`~analysis_lib.training.heads.FirstTokenHead`:
for BERT the pooler and the classifier), re-fitted on cached first-token vectors
(``head="model"``), or a logistic-regression probe on the same vectors (``head="probe"``, the
cheaper stand-in). Also: Merchant et al.'s models truncated *before* fine-tuning
(:func:`truncated_runs`), Phang et al.'s contiguous spans of skipped layers with no
retraining (:func:`skip_scores`), and the link to the CKA matrices (:func:`cka_and_loss`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..data.tasks import Task, split_corpus
from ..extract import extract
from ..models import LoadedModel, load
from ..training import finetune as ft
from ..training.heads import FirstTokenHead, fit_head, head_logits
from ..training.surgery import truncated_copy
from .finetuning import Runs, run_grid, seed_interval

CONFIGS = ("UNTUNED", "TUNED", "TUNEDORIG")
HEADS = ("model", "probe")


def first_token_features(model: LoadedModel, task: Task) -> dict[str, list[np.ndarray]]:
    """Every layer's first-token vectors on the train, validation and test inputs."""
    return {part: extract(model, split_corpus(getattr(task, part), f"{task.name}-{part}"),
                          progress=False).layers("first")
            for part in ("train", "validation", "test")}


def _accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(logits.argmax(axis=1) == labels))


def _probe(features: Mapping[str, list[np.ndarray]], layer: int, task: Task,
           seed: int) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed))
    clf.fit(features["train"][layer], task.train.labels)
    return float(np.mean(clf.predict(features["test"][layer]) == task.test.labels))


def layer_scores(result: ft.FineTuned, base: LoadedModel, task: Task, *, head: str = "model",
                 seed: int = 0, base_features: Mapping[str, list[np.ndarray]] | None = None,
                 head_epochs: int = 30) -> pd.DataFrame:
    """Test accuracy per layer ``1..L`` for UNTUNED, TUNED and TUNEDORIG (one row each).

    ``base_features`` (the pretrained encoder's :func:`first_token_features`) can be passed
    to share them between fine-tuning seeds.
    """
    if head not in HEADS:
        raise ValueError(f"head must be one of {HEADS}, got {head!r}")
    tuned = first_token_features(result.load(), task)
    base_features = base_features or first_token_features(base, task)
    n = len(tuned["test"]) - 1
    rows = []
    for layer in range(1, n + 1):
        own = FirstTokenHead(result.model)
        rows.append(("UNTUNED", layer, _accuracy(head_logits(own, tuned["test"][layer]),
                                                 task.test.labels)))
        for config, feats, start in (("TUNED", tuned, result.model),
                                     ("TUNEDORIG", base_features, None)):
            if head == "probe":
                rows.append((config, layer, _probe(feats, layer, task, seed)))
                continue
            if start is None:  # the pretrained pooler (if any) and a fresh classifier
                start = ft._task_model(base, task.num_labels, task.regression, seed)
            fresh = FirstTokenHead(start)
            fit_head(fresh, feats["train"][layer], task.train.labels,
                     feats["validation"][layer], task.validation.labels, epochs=head_epochs,
                     seed=seed)
            rows.append((config, layer, _accuracy(head_logits(fresh, feats["test"][layer]),
                                                  task.test.labels)))
    return pd.DataFrame(rows, columns=["config", "layer", "accuracy"])


def score_grid(runs: Runs, models: Sequence[str], tasks: Sequence[str], *, head: str = "model",
               model_options: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """:func:`layer_scores` of every fine-tuned model of the grid, with the full model's own
    score and the majority baseline, in one long table."""
    frames = []
    for model in models:
        base = load(model, **(dict(model_options or {}) if model.startswith("random:") else {}))
        for task_name in tasks:
            task = runs.task(task_name)
            shared = first_token_features(base, task)
            for seed in runs.seeds(model, task_name):
                result = runs.get(model, task_name, seed)
                frame = layer_scores(result, base, task, head=head, seed=seed,
                                     base_features=shared)
                frames.append(frame.assign(model=model, task=task_name, seed=seed,
                                           full=result.metrics["test"]["accuracy"],
                                           majority=task.majority_baseline("test")))
    return pd.concat(frames, ignore_index=True)


def score_summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Mean and t interval over seeds per (model, task, config, layer)."""
    out = []
    for key, group in scores.groupby(["model", "task", "config", "layer"], sort=False):
        mean, low, high = seed_interval(group.accuracy)
        out.append(dict(zip(["model", "task", "config", "layer"], key), mean=mean, low=low,
                        high=high, full=group.full.mean(), majority=group.majority.iloc[0]))
    return pd.DataFrame(out)


def truncated_runs(model: str, task: str, layers: Sequence[int], *, n_train: int,
                   epochs: float, seed: int = 0,
                   model_options: Mapping[str, Any] | None = None,
                   progress: bool = True) -> pd.DataFrame:
    """Merchant et al. Fig. 4: the pretrained model cut after layer ``k`` and then fine-tuned
    as a whole, for each ``k``; test accuracy per ``k`` (cached like every fine-tuning), with
    the mean training loss of the first and the last epoch (did it converge?)."""
    options = dict(model_options or {}) if model.startswith("random:") else {}
    rows = []
    for k in layers:
        folder = truncated_copy(model, k, **options)
        result = run_grid([folder], [task], [seed], n_train=n_train, epochs=epochs,
                          progress=progress).get(folder, task, seed)
        history = result.record["history"]
        rows.append({"layers_kept": k, "accuracy": result.metrics["test"]["accuracy"],
                     "first_epoch_loss": history[0]["train_loss"],
                     "last_epoch_loss": history[-1]["train_loss"]})
    return pd.DataFrame(rows)


def skip_scores(result: ft.FineTuned, task: Task, n_test: int | None = None) -> pd.DataFrame:
    """Phang et al. Fig. 4: test accuracy with every contiguous span ``first..last`` of
    transformer layers skipped (no retraining); every span but the one removing all layers.
    ``single`` marks the single-layer skips (the diagonal). ``n_test``: score on the first
    ``n_test`` test examples only (each span is a forward pass over them)."""
    n = result.model.config.num_hidden_layers
    if n_test is not None:
        task = Task(task.name, task.train, task.validation,
                    task.test.subset(range(min(n_test, len(task.test)))), task.label_names,
                    task.regression, task.meta)
    rows = []
    for first in range(1, n + 1):
        for last in range(first, n + 1):
            if first == 1 and last == n:
                continue
            logits = ft.predict(result.model, result.tokenizer, task.test,
                                max_length=result.record["config"]["max_length"],
                                skip=(first, last))
            rows.append({"first": first, "last": last, "single": first == last,
                         "accuracy": _accuracy(logits, task.test.labels)})
    return pd.DataFrame(rows)


def cka_and_loss(ft_ft: Mapping[str, np.ndarray], summary: pd.DataFrame, model: str,
                 config: str = "UNTUNED") -> pd.DataFrame:
    """Per task and layer ``1..L-1``: linear CKA between the layer's first-token vectors and
    the last layer's (the FT-FT matrix, mean over seeds) beside the accuracy lost by reading
    the task head from that layer (full model minus ``config``)."""
    rows = []
    for task, M in ft_ft.items():
        top = len(M) - 1
        at = summary[(summary.model == model) & (summary.task == task) &
                     (summary.config == config)]
        for row in at.itertuples():
            if row.layer < top and np.isfinite(M[row.layer, top]):
                rows.append({"task": task, "layer": int(row.layer),
                             "cka_to_last": float(M[row.layer, top]),
                             "accuracy_lost": float(row.full - row.mean)})
    return pd.DataFrame(rows)


def findings(summary: pd.DataFrame, truncated: pd.DataFrame | None,
             link: pd.DataFrame) -> pd.DataFrame:
    """The papers' findings beside this run's numbers, with verdicts from the means over
    seeds ("within 0.02 of the full model": the mean accuracy at that layer)."""
    rows = []
    for (model, task), group in summary.groupby(["model", "task"], sort=False):
        top = int(group.layer.max())
        untuned = group[group.config == "UNTUNED"].set_index("layer")
        tuned = group[group.config == "TUNED"].set_index("layer")
        orig = group[group.config == "TUNEDORIG"].set_index("layer")
        full, majority = float(group.full.iloc[0]), float(group.majority.iloc[0])
        near = [k for k in untuned.index if untuned.loc[k, "mean"] >= full - 0.02]
        first_near = min(near) if near else None
        rows.append((f"the top layers can be dropped with no retraining ({model}, {task})",
                     "yes for RoBERTa and ALBERT: UNTUNED close to full a few layers below "
                     "the top (Phang Fig. 3)",
                     f"UNTUNED reaches within 0.02 of the full {full:.3f} from layer "
                     f"{first_near} of {top}; majority {majority:.3f}",
                     "holds" if first_near is not None and first_near <= top - 2 else
                     "does not hold: only the last layer or two work without retuning"))
        plateau = [k for k in tuned.index if tuned.loc[k, "mean"] >= full - 0.02]
        first_plateau = min(plateau) if plateau else None
        rows.append((f"a re-trained head on a lower layer does as well ({model}, {task})",
                     "yes: TUNED plateaus well below the top (Phang Fig. 3)",
                     f"TUNED within 0.02 of the full model from layer {first_plateau}",
                     "holds" if first_plateau is not None and first_plateau < top else
                     "does not hold"))
        gain = float(np.mean(tuned["mean"] - orig["mean"]))
        rows.append((f"fine-tuned layers beat pretrained ones as features ({model}, {task})",
                     "yes: TUNED above TUNEDORIG (Phang Fig. 3)",
                     f"TUNED minus TUNEDORIG, mean over layers {gain:+.3f}",
                     "holds" if gain > 0.01 else "does not hold"))
    if truncated is not None and len(truncated):
        best = truncated.accuracy.max()
        rows.append(("a truncated model fine-tuned as a whole reaches the full score early",
                     "yes: 3 layers for MNLI, 5 for SQuAD (Merchant Fig. 4)",
                     ", ".join(f"{k} layers: {a:.3f}" for k, a in
                               zip(truncated.layers_kept, truncated.accuracy)),
                     f"best {best:.3f}"))
    if len(link) >= 3 and link.cka_to_last.std() > 0 and link.accuracy_lost.std() > 0:
        r = float(np.corrcoef(link.cka_to_last, link.accuracy_lost)[0, 1])
        rows.append(("layers whose CLS is like the last layer's lose little when truncated",
                     "implied by the block structure (Phang §4)",
                     f"correlation of CKA-to-last with accuracy lost, over layers and tasks: "
                     f"{r:.2f} (n = {len(link)})",
                     "holds" if r < -0.5 else "weak or absent"))
    return pd.DataFrame(rows, columns=["finding", "what the papers report",
                                       "what this run shows", "verdict"])
