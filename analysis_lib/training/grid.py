"""The book's fine-tuning grid: every (model, task, seed) fine-tuned with one recipe, each
run trained once and found in the cache by the next chapter that asks.

:class:`FinetuneGrid` declares the grid's settings with their rules (a notebook's
``finetune`` parameter is checked against them), :func:`task_for` the book's split of a
task, :func:`run_grid` trains (or loads) every run into :class:`Runs` (on the CPU the runs
not cached yet side by side, :func:`train_side_by_side`), :func:`cached_grid` reads the
runs another profile trained without training any, :func:`rate_table`
compares learning rates, and :func:`learning_curves` and :func:`loss_curves` read each
run's curves from its record.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

import pandas as pd

from ..data.labels import silver_task
from ..data.tasks import Task, load_task
from ..models import random_options, zoo
from ..rules import Parameter, validate
from ..runtime import workers as worker_pool
from ..runtime.cache import default_root
from ..runtime.device import BF16_MIN_WIDTH, TRAINING_PRECISIONS, resolve
from ..runtime.profile import profiled
from . import zoo as zoo_training
from .finetune import FinetuneConfig, FineTuned, finetune, lookup
from .finetune import preset as preset_config
from .learning import still_learning

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
    the rules (:mod:`analysis_lib.rules`) its values obey."""
    return field(default=default, metadata={"type": kind, "help": help, "rules": rules})


def _presets() -> tuple[str, ...]:
    from .finetune import PRESETS

    return tuple(PRESETS)


@dataclass(frozen=True)
class FinetuneGrid:
    """The fine-tuning grid: every (model, task, seed) fine-tuned with one recipe.

    Every chapter that reads fine-tuned models takes the same grid, so each model is trained
    once and found in the cache by the next chapter. A notebook declares it as one
    parameter, ``finetune`` (a mapping of the fields that differ from these defaults; a
    profile's ``finetune:``), and builds it with :meth:`of`, which checks the values against
    the rules declared here once (:meth:`parameters`, :mod:`analysis_lib.rules`).
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
    longer_if_rising: float = _setting(
        2.0, "float", "a run whose learning curve still rose when its schedule ended (the "
        "training gate's plateau rule) is trained again from its start, with the same seed, "
        "for this many times its epochs (once; 1 trains none again)", min=1, max=10)
    preset: str = _setting("cpu", "str", "fine-tuning recipe: the book's own ('cpu') or a "
                           "paper's (see the fine-tuning page, section 1)", choices=_presets())
    precision: str = _setting(
        "auto", "str", "what the training steps compute in: 'auto' (bfloat16 autocast where "
        f"the CPU computes it natively and the model is at least {BF16_MIN_WIDTH} wide, "
        "float32 elsewhere, "
        "a GPU included), 'float32' or 'bfloat16'",
        choices=TRAINING_PRECISIONS)
    model_options: Mapping[str, Any] | None = field(default=None, compare=False)

    @classmethod
    def parameters(cls) -> dict[str, Parameter]:
        """The grid's settings with their rules (:class:`~analysis_lib.rules.Parameter`),
        which a notebook's ``finetune`` mapping is checked against (its
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
        split, settings = self.task(task), self.settings(seed, **changes)
        result = finetune(model, split, settings, progress=progress, store=store,
                          cache_dir=cache_dir, **options)
        longer = self.longer(settings, result)
        if longer is None:
            return result
        return finetune(model, split, longer, progress=progress, store=store,
                        cache_dir=cache_dir, **options)

    def cached(self, model: str, task: str, seed: int, *, store: str = "full",
               **changes: Any) -> FineTuned | None:
        """The run :meth:`train` would give, when the cache holds it; None otherwise
        (nothing is trained)."""
        split, settings = self.task(task), self.settings(seed, **changes)
        options = self.options(model)
        result = lookup(model, split, settings, store=store, **options)
        longer = None if result is None else self.longer(settings, result)
        return result if longer is None else lookup(model, split, longer, store=store,
                                                    **options)

    def longer(self, settings: FinetuneConfig, result: FineTuned) -> FinetuneConfig | None:
        """The settings of a run trained again because it was still learning when its
        schedule ended (:func:`~analysis_lib.training.learning.still_learning`): the same
        run on :attr:`longer_if_rising` times the epochs. None for a run that settled, for a
        curve too short to judge, and for a recipe whose step limit (``max_steps``, as in a
        paper's) the schedule already reaches."""
        if self.longer_if_rising <= 1 or not still_learning(result.record):
            return None
        steps = (result.record.get("history") or [{}])[-1].get("steps", 0)
        if settings.max_steps is not None and steps >= settings.max_steps:
            return None
        return replace(settings, epochs=settings.epochs * float(self.longer_if_rising))

    def task(self, name: str) -> Task:
        """The book's split of task ``name`` at this grid's sizes (:func:`task_for`)."""
        return task_for(name, self.n_train, self.n_heldout)

    def settings(self, seed: int, **changes: Any) -> FinetuneConfig:
        """The fine-tuning settings of one run of the grid, with ``changes`` (freezing)."""
        return preset_config(self.preset, epochs=float(self.epochs), seed=int(seed),
                             until_plateau=bool(self.until_plateau),
                             precision=str(self.precision), **changes)

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
    """Fine-tuned models of a grid and one row per run in ``frame``."""

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
             workers: int | None = None, **changes: Any) -> Runs:
    """Fine-tune every model of ``grid`` on every task with every seed (or load each from
    the cache), in the grid's order (:meth:`FinetuneGrid.runs`).

    ``changes`` apply to the settings (freezing); ``store`` is what the cache keeps of each
    run (:func:`~analysis_lib.training.finetune.finetune`). On the CPU the runs the cache
    does not hold yet are first trained side by side in ``workers`` processes
    (:func:`train_side_by_side`; 1: one after another here), with the same weights.
    """
    if not grid.models or not grid.tasks or not grid.seeds:
        raise ValueError("run_grid needs at least one model, one task and one seed")
    zoo_training.ensure(grid.models)
    train_side_by_side([Job(grid, run, store, changes) for run in grid.runs()],
                       workers=workers)
    return Runs.of({run: grid.train(*run, progress=progress, store=store, **changes)
                    for run in grid.runs()}, grid)


@dataclass(frozen=True)
class Job:
    """One run to train side by side: ``run`` (model, task, seed) of ``grid``, what the cache
    keeps of it (``store``) and the changes to its settings (freezing)."""

    grid: FinetuneGrid
    run: tuple[str, str, int]
    store: str = "full"
    changes: Mapping[str, Any] = field(default_factory=dict)

    def cached(self) -> bool:
        """Whether the cache holds the run (and its longer schedule, where it needs one)."""
        return self.grid.cached(*self.run, store=self.store, **self.changes) is not None

    def train(self, cache_dir: str) -> None:
        """Train the run into the cache at ``cache_dir`` (in a worker process, whose
        environment may name another cache: it was started earlier; nothing is sent
        back)."""
        self.grid.train(*self.run, progress=False, store=self.store, cache_dir=cache_dir,
                        **self.changes)


def train_side_by_side(jobs: Sequence[Job], *, workers: int | None = None) -> int:
    """Train the runs of ``jobs`` that the cache does not hold yet into the cache, side by
    side in worker processes (:func:`analysis_lib.runtime.workers.map_jobs`; ``workers``
    default: one per core), and say how many. The caller then reads every run from the
    cache (:meth:`FinetuneGrid.train`) exactly as it was trained here.

    The weights do not change: each run trains at the fine-tuning threads
    (:data:`~analysis_lib.training.finetune.CPU_THREADS`) wherever it runs, with its own
    seed, so a run trained in a worker is the run trained in this process, bit for bit.
    What changes is the use of the cores: a run of a small model keeps two threads busy
    only in its large products, and a second run fills the time between them (on a 2-core
    CPU two runs side by side take about 0.75 of the time of one after the other). Nothing
    runs side by side off the CPU, for one job, or with one worker."""
    count = worker_pool.default_workers() if workers is None else int(workers)
    if count < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if count == 1 or len(jobs) < 2 or resolve(None).type != "cpu":
        return 0
    zoo_training.ensure(sorted({job.run[0] for job in jobs}))
    missing = [job for job in jobs if not job.cached()]
    if len(missing) < 2:
        return 0
    _train_jobs(missing, min(count, len(missing)))
    return len(missing)


@profiled("finetune", lambda jobs, count: f"{len(jobs)} runs side by side")
def _train_jobs(jobs: list[Job], count: int) -> None:
    where = str(default_root())
    worker_pool.map_jobs(Job.train, [(job, where) for job in jobs], workers=count)


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


#: the columns of :attr:`Runs.frame`, one row per run
RUN_COLUMNS = ("model", "task", "seed", "accuracy", "macro_f1", "majority", "precision",
               "epochs", "train_seconds", "from_cache")


def _run_row(model: str, task: str, seed: int, result: FineTuned) -> dict[str, Any]:
    test = result.metrics["test"]
    return {"model": model, "task": task, "seed": seed, "accuracy": test["accuracy"],
            "macro_f1": test["macro_f1"], "majority": test["majority_baseline"],
            "precision": result.record["config"].get("precision", "float32"),
            "epochs": float(result.record["config"].get("epochs", float("nan"))),
            "train_seconds": result.record["train_seconds"], "from_cache": result.from_cache}


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


def loss_curves(runs: Runs, *, gate: Callable[[Mapping[str, Any]], str] | None = None
                ) -> pd.DataFrame:
    """One row per (model, task, seed) of the grid and point of its loss curve: the training
    loss at evenly spaced steps (:func:`~analysis_lib.training.loop.loss_curve`; records
    made without one give their per-epoch losses). ``gate``, a function of a run's record
    that says why it cannot be read as trained ("" when it can; the book's is
    :func:`analysis_lib.claims.training_gate.training_problem`), fills the column
    ``did_not_train``."""
    rows = []
    for (model, task, seed), result in runs.models.items():
        record = result.record
        curve = record.get("loss_curve") or record["history"]
        gated = {"did_not_train": gate(record)} if gate else {}
        rows += [{"model": model, "task": task, "seed": seed, "step": point["step"],
                  "train_loss": point["train_loss"], **gated}
                 for point in curve]
    return pd.DataFrame(rows)
