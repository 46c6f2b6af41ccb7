"""What several studies share: the book's fine-tuning grid and its splits, the stimuli drawn
from a task, samples of word rows, per-word layers, and means with intervals over seeds.

Every fine-tuned model is trained once per (model, task, seed, settings) and found in the
cache by the next study that asks (:class:`FinetuneGrid`, :func:`run_grid`); every study
that samples word rows samples them with :func:`word_rows`, so the same seed gives the same
rows everywhere.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from ..claims.claim import Evidence
from ..claims.training_gate import training_problem
from ..data.corpora import Corpus
from ..data.labels import silver_task
from ..data.tasks import Task, load_task, split_corpus
from ..extract import NO_SENTENCES, SENTENCES_ONLY, Extraction, extract, over_limit
from ..layers import layer_label
from ..models import LoadedModel, load, random_options, zoo
from ..training import zoo as zoo_training
from ..training.finetune import FinetuneConfig, FineTuned, finetune, lookup
from ..training.finetune import preset as preset_config
from .rules import Parameter, ParameterError, validate


def load_model(name: str, model_options: Mapping[str, Any] | None = None) -> LoadedModel:
    """The model ``name``, with ``model_options`` applied when it is a ``random:`` model
    (:func:`~analysis_lib.models.random_options`), a zoo model trained first if needed."""
    zoo_training.ensure([name])
    return load(name, **random_options(name, model_options))


#: what :func:`fit_to_models` does with a sentence longer than a model's token limit
LONG_SENTENCES = ("refuse", "drop")


def fit_to_models(corpus: Corpus, models: Sequence[str], *, long_sentences: str = "refuse",
                  model_options: Mapping[str, Any] | None = None) -> Corpus:
    """``corpus`` checked against every model's token limit before any extraction: a
    model would cut a sentence longer than its limit, and its word rows would then name
    other words than another model's. ``long_sentences="refuse"`` (the default) stops with
    an error that names each model, how many sentences it would cut and the parameter that
    fixes it; ``"drop"`` leaves those sentences out for every model (the corpus's other
    sentences, in their order)."""
    if long_sentences not in LONG_SENTENCES:
        raise ParameterError(f"long_sentences={long_sentences!r}: choose from "
                             f"{list(LONG_SENTENCES)}")
    cut: dict[str, tuple[np.ndarray, int]] = {}
    for name in models:
        loaded = load_model(name, model_options)
        found = over_limit(loaded, corpus)
        if len(found):
            cut[name] = (found, loaded.info.max_length)
    if not cut:
        return corpus
    if long_sentences == "refuse":
        told = "; ".join(f"{name} would cut {len(found)} of the {len(corpus)} sentences at its "
                         f"limit of {limit} tokens (the first: sentence {found[0]})"
                         for name, (found, limit) in cut.items())
        raise ParameterError(
            f"{told}. Set long_sentences='drop' to leave those sentences out for every model "
            "(papermill -p long_sentences drop; in a profile, long_sentences: drop), or pass "
            "shorter sentences")
    drop = set().union(*(found.tolist() for found, _ in cut.values()))
    keep = [i for i in range(len(corpus)) if i not in drop]
    if not keep:
        raise ValueError(f"every sentence of the corpus is longer than a model's token limit "
                         f"({', '.join(cut)}); pass shorter sentences")
    return corpus.subset(keep)


#: validation and test examples per task unless a study asks for other sizes
HELD_OUT = 500


def task_for(name: str, n_train: int, n_heldout: int = HELD_OUT) -> Task:
    """The book's split of a task: ``n_train`` training examples, and ``n_heldout``
    validation (the stimuli of the similarity analyses) and ``n_heldout`` test examples,
    drawn with seed 0 so that every study and every fine-tuning seed sees the same
    examples. ``"<task>:pos"`` (or ``":dep"``) is the word-level task that tags the words of
    the same inputs with silver labels (:func:`~analysis_lib.data.labels.silver_task`).
    Drawn once per process (a page asks for it many times); each call gets its own copy."""
    return copy.deepcopy(_drawn_task(name, n_train, n_heldout))


@lru_cache(maxsize=16)
def _drawn_task(name: str, n_train: int, n_heldout: int) -> Task:
    if ":" in name:  # "<task>:<labels>": the task's own inputs, tagged with silver labels
        base, label_set = name.rsplit(":", 1)
        return silver_task(_drawn_task(base, n_train, n_heldout), label_set)
    kwargs: dict[str, Any] = dict(n_train=n_train, n_val=n_heldout, n_test=n_heldout, seed=0)
    if name == "bbc-topic":
        kwargs["unit"] = "sentence"
    return load_task(name, **kwargs)


def _setting(default: Any, kind: str, help: str, **rules: Any) -> Any:
    """A field of :class:`FinetuneGrid`: its default, its parameter type, what it means and
    the rules (:mod:`analysis_lib.studies.rules`) its values obey."""
    return field(default=default, metadata={"type": kind, "help": help, "rules": rules})


def _presets() -> tuple[str, ...]:
    from ..training.finetune import PRESETS

    return tuple(PRESETS)


@dataclass(frozen=True)
class FinetuneGrid:
    """The fine-tuning grid: every (model, task, seed) fine-tuned with one recipe.

    Every chapter that reads fine-tuned models takes the same grid, so each model is trained
    once and found in the cache by the next chapter. A notebook declares it as one
    parameter, ``finetune`` (a mapping of the fields that differ from these defaults; a
    profile's ``finetune:``), and builds it with :meth:`of`, which checks the values against
    the rules declared here once (:meth:`parameters`, :mod:`analysis_lib.studies.rules`).
    ``model_options`` is the notebook's own parameter of that name: the sizes of ``random:``
    models.
    """

    models: tuple[str, ...] = _setting(
        ("minilm",), "list", "base models to fine-tune: 'minilm', 'random:<family>', "
        "'zoo:<name>', hub ids or folders", model=True, min=1)
    tasks: tuple[str, ...] = _setting(
        ("tweets-sentiment", "bbc-topic"), "list", "tasks to fine-tune on (see the data page)",
        task=True, min=1)
    seeds: tuple[int, ...] = _setting(
        (0, 1, 2), "list", "fine-tuning seeds (at least two: pairs of seeds and intervals "
        "over seeds need them)", items=int, item_min=0, min=2)
    n_train: int = _setting(600, "int", "training examples per task", min=16, max=500_000)
    n_heldout: int = _setting(
        HELD_OUT, "int", "validation and test examples per task: the stimuli and the "
        "held-out scores of every fine-tuning study", min=20, max=5000)
    epochs: float = _setting(8.0, "float", "training epochs (with until_plateau: the most "
                             "a run trains)", min=0.05, max=100)
    until_plateau: bool = _setting(True, "bool", "stop each run once its validation accuracy "
                                   "reaches a plateau (analysis_lib.training.plateau)")
    preset: str = _setting("cpu", "str", "fine-tuning recipe: the book's own ('cpu') or a "
                           "paper's (see the fine-tuning page, section 1)", choices=_presets())
    model_options: Mapping[str, Any] | None = field(default=None, compare=False)

    @classmethod
    def parameters(cls) -> dict[str, Parameter]:
        """The grid's settings with their rules (:class:`~analysis_lib.studies.rules.
        Parameter`), which a notebook's ``finetune`` mapping is checked against (its
        ``grid`` rule)."""
        out = {}
        for f in fields(cls):
            if "type" in f.metadata:
                default = list(f.default) if isinstance(f.default, tuple) else f.default
                out[f.name] = Parameter(f.name, f.metadata["type"], default,
                                        f.metadata["help"], dict(f.metadata["rules"]))
        return out

    @classmethod
    def of(cls, values: Mapping[str, Any] | None = None,
           model_options: Mapping[str, Any] | None = None) -> FinetuneGrid:
        """The grid whose settings ``values`` changes from the defaults (a notebook's
        ``finetune`` parameter), checked against the declared rules: one error lists every
        problem."""
        values = dict(values or {})
        declared = Parameter("finetune", "dict", {}, rules={"fields": cls.parameters()})
        validate({"finetune": values}, {"finetune": declared}, source="fine-tuning grid")
        plain: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                 for k, v in values.items()}
        return cls(**plain, model_options=model_options)

    @classmethod
    def from_profile(cls, profile: Mapping[str, Any]) -> FinetuneGrid:
        """The grid a profile's values name (its ``finetune`` and ``model_options``)."""
        return cls.of(profile.get("finetune"), profile.get("model_options"))

    def pairs(self) -> list[tuple[str, str]]:
        """Every (model, task) of the grid, model by model, then task by task."""
        return list(itertools.product(self.models, self.tasks))

    def runs(self) -> list[tuple[str, str, int]]:
        """Every run of the grid, ``(model, task, seed)``: the seeds of each of
        :meth:`pairs` in turn. The one walk of the grid: :func:`run_grid`,
        :func:`cached_grid`, :meth:`Runs.each` and a sweep's fine-tuning units take it."""
        return [(model, task, seed) for model, task in self.pairs() for seed in self.seeds]

    def train(self, model: str, task: str, seed: int, *, progress: bool = True,
              store: str = "full", cache_dir: str | None = None,
              load_options: Mapping[str, Any] | None = None, **changes: Any) -> FineTuned:
        """One run of the grid: ``model`` fine-tuned on the grid's split of ``task`` with
        the grid's recipe and ``seed`` (read from the cache when it was trained before).

        ``changes`` apply to the settings (freezing); ``load_options`` replace the model's
        (:meth:`options`; a sweep varies a ``random:`` model's initialisation with them);
        ``store`` is what the cache keeps (:func:`~analysis_lib.training.finetune.finetune`).
        """
        options = self.options(model) if load_options is None else dict(load_options)
        return finetune(model, self.task(task), self.settings(seed, **changes),
                        progress=progress, store=store, cache_dir=cache_dir, **options)

    def cached(self, model: str, task: str, seed: int, **changes: Any) -> FineTuned | None:
        """The run :meth:`train` would give, when the cache holds it; None otherwise
        (nothing is trained)."""
        return lookup(model, self.task(task), self.settings(seed, **changes),
                      **self.options(model))

    def task(self, name: str) -> Task:
        """The book's split of task ``name`` at this grid's sizes (:func:`task_for`)."""
        return task_for(name, self.n_train, self.n_heldout)

    def settings(self, seed: int, **changes: Any) -> FinetuneConfig:
        """The fine-tuning settings of one run of the grid, with ``changes`` (freezing)."""
        return preset_config(self.preset, epochs=float(self.epochs), seed=int(seed),
                             until_plateau=bool(self.until_plateau), **changes)

    def options(self, model: str) -> dict[str, Any]:
        """The loading options of ``model`` (``model_options`` for a ``random:`` model)."""
        return random_options(model, self.model_options)

    def only(self, **changes: Any) -> FinetuneGrid:
        """This grid with some fields replaced (one model, one task, one seed, a cut model's
        folder...), as the studies derive their own runs from it; unlike :meth:`of`, the
        values are not checked against the notebook rules (one seed is allowed here)."""
        plain: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                 for k, v in changes.items()}
        return replace(self, **plain)


@dataclass
class Runs:
    """Fine-tuned models of a grid and one row per run in :attr:`frame`."""

    frame: pd.DataFrame
    models: dict[tuple[str, str, int], FineTuned] = field(repr=False)
    grid: FinetuneGrid = field(default_factory=FinetuneGrid)

    @classmethod
    def of(cls, found: Mapping[tuple[str, str, int], FineTuned], grid: FinetuneGrid) -> Runs:
        """The runs ``found`` (by ``(model, task, seed)``) of ``grid``, in the grid's order."""
        order = [run for run in grid.runs() if run in found]
        return cls(pd.DataFrame([_run_row(*run, found[run]) for run in order],
                                columns=RUN_COLUMNS),
                   {run: found[run] for run in order}, grid)

    def get(self, model: str, task: str, seed: int) -> FineTuned:
        return self.models[(model, task, seed)]

    def task(self, name: str) -> Task:
        """The task's split these models were trained on."""
        return self.grid.task(name)

    def seeds(self, model: str, task: str) -> list[int]:
        return sorted(s for m, t, s in self.models if m == model and t == task)

    def each(self, models: Sequence[str] | None = None, tasks: Sequence[str] | None = None
             ) -> Iterator[tuple[str, str, int, FineTuned]]:
        """``(model, task, seed, run)`` for every run (of ``models`` on ``tasks`` when
        given), in the grid's order (:meth:`FinetuneGrid.runs`, which :meth:`of` keeps)."""
        for (model, task, seed), run in self.models.items():
            if (models is None or model in models) and (tasks is None or task in tasks):
                yield model, task, seed, run

    def groups(self, models: Sequence[str] | None = None, tasks: Sequence[str] | None = None
               ) -> Iterator[tuple[str, str, dict[int, FineTuned]]]:
        """``(model, task, {seed: run})`` for each (model, task) of :meth:`each`: a study that
        reads a base model or a split once for all the seeds of a pair walks these."""
        found: dict[tuple[str, str], dict[int, FineTuned]] = {}
        for model, task, seed, run in self.each(models, tasks):
            found.setdefault((model, task), {})[seed] = run
        for (model, task), by_seed in found.items():
            yield model, task, by_seed


def run_grid(grid: FinetuneGrid, *, progress: bool = True, store: str = "full",
             **changes: Any) -> Runs:
    """Fine-tune every model of ``grid`` on every task with every seed (or load each from
    the cache), in the grid's order (:meth:`FinetuneGrid.runs`).

    ``changes`` apply to the settings (freezing); ``store`` is what the cache keeps of each
    run (:func:`~analysis_lib.training.finetune.finetune`).
    """
    if not grid.models or not grid.tasks or not grid.seeds:
        raise ValueError("run_grid needs at least one model, one task and one seed")
    zoo_training.ensure(grid.models)
    return Runs.of({run: grid.train(*run, progress=progress, store=store, **changes)
                    for run in grid.runs()}, grid)


def cached_grid(grid: FinetuneGrid, *, min_seeds: int = 2, **changes: Any) -> Runs | None:
    """The runs of a :func:`run_grid` that the cache already holds; nothing is trained.

    A page reads with it the runs of a longer schedule that another profile trains (the
    ``larger`` profile's), at no cost when they are absent: None unless every (model, task)
    has at least ``min_seeds`` cached seeds (one seed gives no spread to judge by). The
    rows of :attr:`Runs.frame` are those of :func:`run_grid`, for the cached seeds only.
    """
    if min_seeds < 1:
        raise ValueError(f"min_seeds must be at least 1, got {min_seeds}")
    if any(m.startswith("zoo:") and not zoo.is_trained(m) for m in grid.models):
        return None
    found: dict[tuple[str, str, int], FineTuned] = {}
    for model, task in grid.pairs():
        here = 0
        for k, seed in enumerate(grid.seeds):
            if here + len(grid.seeds) - k < min_seeds:
                return None  # too few seeds left to look up to reach min_seeds
            result = grid.cached(model, task, seed, **changes)
            if result is not None:
                found[(model, task, seed)] = result
                here += 1
        if here < min_seeds:
            return None
    return Runs.of(found, grid)


def training_problems(runs: Runs) -> dict[str, str]:
    """The runs of a grid that failed the book's training gate
    (:func:`~analysis_lib.claims.training_gate.training_problem`), by run
    (``"model, task, seed s"``), with the reason: the claims read from them get no verdict
    (:func:`~analysis_lib.claims.verdicts.gate`)."""
    return problems_of({f"{m}, {t}, seed {s}": result
                        for (m, t, s), result in runs.models.items()})


def problems_of(results: Mapping[str, FineTuned]) -> dict[str, str]:
    """:func:`training_problems` of any fine-tuned runs, by the names given."""
    found = {name: training_problem(result.record) for name, result in results.items()}
    return {name: problem for name, problem in found.items() if problem}


#: the columns of :attr:`Runs.frame`, one row per run
RUN_COLUMNS = ("model", "task", "seed", "accuracy", "macro_f1", "majority", "train_seconds",
               "from_cache")


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


#: the sentence vectors every sentence-level extraction of the pages keeps, whichever one it
#: reads: the first token (what BERT's head reads) and the mean over the tokens (what MiniLM
#: and MPNet were pretrained to feed a sentence objective). Asking for the same set
#: everywhere, a page's model reads a set of sentences once, and the cache keeps one entry.
SENTENCE_POOLINGS = ("first", "mean")


def sentence_extraction(model: LoadedModel, corpus: Corpus, *poolings: str,
                        **extract_options: Any) -> Extraction:
    """Sentence vectors only (no word rows) of every layer: :data:`SENTENCE_POOLINGS`, and
    ``poolings`` besides (``"last"`` for a left-to-right decoder); read one with
    ``.layers(pooling)``."""
    kept = list(dict.fromkeys((*SENTENCE_POOLINGS, *poolings)))
    return extract(model, corpus, word_rows=SENTENCES_ONLY, sentences=kept, progress=False,
                   **extract_options)


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
    """Mean and the t interval over seeds (:meth:`~.verdicts.Evidence.interval` of
    :meth:`~.verdicts.Evidence.from_values`): ``(mean, low, high)``; NaN values are left
    out, and one value has no interval (NaN bounds: no spread to estimate)."""
    evidence = Evidence.from_values("seeds", values)
    low, high = evidence.interval(1 - level)
    return evidence.estimate, float(low), float(high)


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


#: the learning rates the ``cpu`` preset was chosen from (its own, 2e-4, and the usual
#: rates for BERT-sized models over thousands of steps)
RATES = (5e-5, 1e-4, 2e-4)


def rate_table(grid: FinetuneGrid, rates: Sequence[float] = RATES, *, seed: int | None = None,
               train: bool = False) -> pd.DataFrame:
    """The grid's first model fine-tuned at each learning rate of ``rates`` on each task,
    with everything else the grid's (``seed``: default its first): validation and test
    accuracy, one row per rate and task. With ``train`` the missing runs are trained;
    without, they are read from the cache only (``cached`` False and no numbers where it
    does not hold them)."""
    model, seed = grid.models[0], grid.seeds[0] if seed is None else seed
    rows = []
    for rate in rates:
        for task_name in grid.tasks:
            result = (grid.train(model, task_name, seed, progress=False, learning_rate=rate)
                      if train else grid.cached(model, task_name, seed, learning_rate=rate))
            metrics = result.metrics if result is not None else {}
            rows.append({"learning rate": rate, "task": task_name,
                         "validation": metrics.get("validation", {}).get("accuracy"),
                         "test": metrics.get("test", {}).get("accuracy"),
                         "cached": result is not None})
    return pd.DataFrame(rows)
