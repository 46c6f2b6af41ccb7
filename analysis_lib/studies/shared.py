"""What several studies share: the book's fine-tuning grid and its splits, the stimuli drawn
from a task, samples of word rows, per-word layers, and means with intervals over seeds.

Every fine-tuned model is trained once per (model, task, seed, settings) and found in the
cache by the next study that asks (:func:`run_grid`); every study that samples word rows
samples them with :func:`word_rows`, so the same seed gives the same rows everywhere.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..data.corpora import Corpus
from ..data.tasks import Task, load_task, split_corpus
from ..extract import NO_SENTENCES, SENTENCES_ONLY, Extraction, extract
from ..layers import layer_label
from ..models import LoadedModel, load, random_options, zoo
from ..training import zoo as zoo_training
from ..training.finetune import FinetuneConfig, FineTuned, finetune, lookup
from ..training.finetune import preset as preset_config


def load_model(name: str, model_options: Mapping[str, Any] | None = None) -> LoadedModel:
    """The model ``name``, with ``model_options`` applied when it is a ``random:`` model
    (:func:`~analysis_lib.models.random_options`), a zoo model trained first if needed."""
    zoo_training.ensure([name])
    return load(name, **random_options(name, model_options))


#: validation and test examples per task unless a study asks for other sizes
HELD_OUT = 500


def task_for(name: str, n_train: int, n_heldout: int = HELD_OUT) -> Task:
    """The book's split of a task: ``n_train`` training examples, and ``n_heldout``
    validation (the stimuli of the similarity analyses) and ``n_heldout`` test examples,
    drawn with seed 0 so that every study and every fine-tuning seed sees the same
    examples."""
    kwargs: dict[str, Any] = dict(n_train=n_train, n_val=n_heldout, n_test=n_heldout, seed=0)
    if name == "bbc-topic":
        kwargs["unit"] = "sentence"
    return load_task(name, **kwargs)


def settings(epochs: float, seed: int, preset: str = "cpu", **changes: Any) -> FinetuneConfig:
    """The fine-tuning settings of ``preset`` (the book's own, ``cpu``: batch 16, learning
    rate 2e-4, 10% warmup, 128 tokens; or a paper's recipe) for ``epochs`` and ``seed``, with
    ``changes`` (freezing)."""
    return preset_config(preset, epochs=float(epochs), seed=int(seed), **changes)


@dataclass
class Runs:
    """Fine-tuned models of a grid and one row per run in :attr:`frame`; ``n_train`` and
    ``n_heldout`` are the sizes the tasks were split with."""

    frame: pd.DataFrame
    models: dict[tuple[str, str, int], FineTuned] = field(repr=False)
    n_train: int = 0
    n_heldout: int = HELD_OUT

    def get(self, model: str, task: str, seed: int) -> FineTuned:
        return self.models[(model, task, seed)]

    def task(self, name: str) -> Task:
        """The task's split these models were trained on."""
        return task_for(name, self.n_train, self.n_heldout)

    def seeds(self, model: str, task: str) -> list[int]:
        return sorted(s for m, t, s in self.models if m == model and t == task)


def run_grid(models: Sequence[str], tasks: Sequence[str], seeds: Sequence[int], *,
             n_train: int, epochs: float, model_options: Mapping[str, Any] | None = None,
             preset: str = "cpu", n_heldout: int = HELD_OUT, progress: bool = True,
             store: str = "full", **changes: Any) -> Runs:
    """Fine-tune every model on every task with every seed (or load each from the cache).

    ``model_options`` apply to ``random:`` models; ``preset`` names the recipe
    (:data:`~analysis_lib.training.finetune.PRESETS`); ``n_heldout`` is the size of each
    task's validation and test splits; ``changes`` apply to the settings (freezing);
    ``store`` is what the cache keeps of each run (:func:`~analysis_lib.training.finetune.
    finetune`).
    """
    if not models or not tasks or not seeds:
        raise ValueError("run_grid needs at least one model, one task and one seed")
    zoo_training.ensure(models)
    rows, found = [], {}
    for task_name in tasks:
        task = task_for(task_name, n_train, n_heldout)
        for model, seed in itertools.product(models, seeds):
            options = random_options(model, model_options)
            result = finetune(model, task, settings(epochs, seed, preset, **changes),
                              progress=progress, store=store, **options)
            found[(model, task_name, seed)] = result
            rows.append(_run_row(model, task_name, seed, result))
    return Runs(pd.DataFrame(rows), found, n_train, n_heldout)


#: the parameters of a profile that name its fine-tuning grid, and :func:`run_grid`'s names
GRID_PARAMETERS = {"ft_models": "models", "ft_tasks": "tasks", "ft_seeds": "seeds",
                   "ft_train": "n_train", "ft_heldout": "n_heldout", "ft_epochs": "epochs",
                   "ft_preset": "preset", "model_options": "model_options"}


def grid_parameters(profile: Mapping[str, Any]) -> dict[str, Any]:
    """The fine-tuning grid a profile's parameters name (:data:`GRID_PARAMETERS`), as
    :func:`run_grid` and :func:`cached_grid` take it."""
    missing = sorted(set(GRID_PARAMETERS) - {"model_options", "ft_preset", "ft_heldout"}
                     - set(profile))
    if missing:
        raise ValueError(f"the profile does not name a fine-tuning grid: {', '.join(missing)} "
                         "missing")
    return {name: profile[key] for key, name in GRID_PARAMETERS.items() if key in profile}


def missing_schedule(profile: str) -> str:
    """What a page says where the cache holds no runs of another profile's schedule (or,
    for ``"none"``, where the page was asked to read none: a build of that profile itself)."""
    if profile == "none":
        return "not read: `longer_profile` is `none`"
    return (f"not measured: the cache holds no runs of the `{profile}` profile's schedule "
            f"(`python -m analysis_lib book --profile {profile}` trains them)")


def cached_grid(models: Sequence[str], tasks: Sequence[str], seeds: Sequence[int], *,
                n_train: int, epochs: float, model_options: Mapping[str, Any] | None = None,
                preset: str = "cpu", n_heldout: int = HELD_OUT, min_seeds: int = 2,
                **changes: Any) -> Runs | None:
    """The runs of a :func:`run_grid` that the cache already holds; nothing is trained.

    A page reads with it the runs of a longer schedule that another profile trains (the
    ``larger`` profile's), at no cost when they are absent: None unless every (model, task)
    has at least ``min_seeds`` cached seeds (one seed gives no spread to judge by). The
    rows of :attr:`Runs.frame` are those of :func:`run_grid`, for the cached seeds only.
    """
    if min_seeds < 1:
        raise ValueError(f"min_seeds must be at least 1, got {min_seeds}")
    rows, found = [], {}
    for task_name in tasks:
        task = task_for(task_name, n_train, n_heldout)
        for model in models:
            if model.startswith("zoo:") and not zoo.is_trained(model):
                return None
            options = random_options(model, model_options)
            here: dict[int, FineTuned] = {}
            for k, seed in enumerate(seeds):
                if len(here) + len(seeds) - k < min_seeds:
                    return None  # too few seeds left to look up to reach min_seeds
                result = lookup(model, task, settings(epochs, seed, preset, **changes),
                                **options)
                if result is not None:
                    here[seed] = result
            if len(here) < min_seeds:
                return None
            for seed, result in here.items():
                found[(model, task_name, seed)] = result
                rows.append(_run_row(model, task_name, seed, result))
    return Runs(pd.DataFrame(rows), found, n_train, n_heldout)


def _run_row(model: str, task: str, seed: int, result: FineTuned) -> dict[str, Any]:
    test = result.metrics["test"]
    return {"model": model, "task": task, "seed": seed, "accuracy": test["accuracy"],
            "macro_f1": test["macro_f1"], "majority": test["majority_baseline"],
            "train_seconds": result.record["train_seconds"], "from_cache": result.from_cache}


def stimuli(task: Task, n: int | None = None) -> Corpus:
    """The validation inputs of a task as a corpus (pairs joined by a space): the stimuli
    Phang et al. compute CKA over."""
    split = task.validation
    if n is not None:
        split = split.subset(range(min(n, len(split))))
    return split_corpus(split, name=f"{task.name}-validation")


def attention_stimuli(task: Task, n: int, max_words: int = 30) -> Corpus:
    """The first ``n`` validation inputs of 2 to ``max_words`` words (attention maps cost
    words squared per head)."""
    corpus = stimuli(task)
    short = [i for i, s in enumerate(corpus.sentences) if 2 <= len(s) <= max_words][:n]
    if not short:
        raise ValueError(f"no validation input of {task.name} has 2 to {max_words} words")
    return corpus.subset(short)


@dataclass
class WordLayers:
    """The word-level layers of one model on the same sampled rows, and its attention."""

    words: list[np.ndarray]
    attention: Extraction | None


def word_layers(model: str | LoadedModel, corpus: Corpus, rows: np.ndarray,
                attention_corpus: Corpus | None = None, *, storage: str = "float32"
                ) -> WordLayers:
    """Per-word vectors of every layer on ``rows`` of ``corpus`` (and the word attention on
    ``attention_corpus`` when given), the word rows kept in ``storage`` (float16: half the
    disk, refused for a model whose activations exceed its range)."""
    loaded = model if isinstance(model, LoadedModel) else load_model(model)
    rows = np.asarray(rows)
    every = len(rows) == corpus.n_words and np.array_equal(rows, np.arange(corpus.n_words))
    # only the sampled rows are kept and cached
    result = extract(loaded, corpus, word_rows=None if every else rows, sentences=NO_SENTENCES,
                     storage=storage, progress=False)
    att = None
    if attention_corpus is not None:
        att = extract(loaded, attention_corpus, attention=True, word_rows=SENTENCES_ONLY,
                      sentences=NO_SENTENCES, progress=False)
    return WordLayers(list(result.words), att)


def word_rows(corpus: Corpus, n: int, seed: int = 0) -> np.ndarray:
    """A deterministic sample of ``n`` word rows (all when the corpus has fewer)."""
    return sample_rows(corpus.n_words, n, seed)


def sample_rows(total: int, n: int, seed: int = 0) -> np.ndarray:
    """``n`` of ``total`` row indices drawn without replacement with ``seed``, in order (all
    of them when ``n >= total``): every study's sample of rows."""
    if n >= total:
        return np.arange(total)
    return np.sort(np.random.default_rng(seed).choice(total, n, replace=False))


def seed_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and a t interval over seeds: ``(mean, low, high)``; with one value the interval
    is that value (no spread to estimate)."""
    from scipy.stats import t

    x = np.asarray([v for v in values if np.isfinite(v)], dtype=np.float64)
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    if x.size == 1:
        return float(x[0]), float(x[0]), float(x[0])
    half = t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    return float(x.mean()), float(x.mean() - half), float(x.mean() + half)


def summarize(frame: pd.DataFrame, by: Sequence[str], value: str) -> pd.DataFrame:
    """``mean``, ``low``, ``high`` (:func:`seed_interval`) of ``value`` for each group."""
    out = []
    for key, group in frame.groupby(list(by), sort=False):
        mean, low, high = seed_interval(group[value])
        key = key if isinstance(key, tuple) else (key,)
        out.append({**dict(zip(by, key)), "mean": mean, "low": low, "high": high,
                    "n": int(group[value].notna().sum())})
    return pd.DataFrame(out)


def layer_labels(n_transformer: int) -> list[str]:
    """``["emb", "L1", ..., "L<n>"]``: axis labels of one model's layers."""
    return [layer_label("", k).strip() for k in range(n_transformer + 1)]
