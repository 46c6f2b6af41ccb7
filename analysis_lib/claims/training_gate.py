"""The book's training gate: did a fine-tuned run learn its task, and finish learning?

A claim read from a run that did not train gets no verdict
(:func:`~analysis_lib.claims.verdicts.untrained`); every chapter asks the question of
every fine-tuned run through :func:`training_problem`, with one rule: the run beat its
majority baseline, and its learning curve reached a plateau
(:func:`~analysis_lib.training.learning.curve_problems`: the rule a run trained
``until_plateau`` stops by, :func:`~analysis_lib.training.plateau.plateaued`; a run that
trained its whole schedule, by the plateau's window alone). A fixed share of loss drop
is no test: a run on a hard task can learn well with a small drop, and one still learning
fast can pass it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from ..training.learning import curve_problems, trained_until_plateau


class _Run(Protocol):
    """A fine-tuned run (:class:`analysis_lib.training.finetune.FineTuned`): its record."""

    @property
    def record(self) -> Mapping[str, Any]: ...


class _Runs(Protocol):
    """Runs of a grid (:class:`analysis_lib.training.grid.Runs`): by (model, task, seed)."""

    @property
    def models(self) -> Mapping[tuple[str, str, int], Any]: ...


#: the book's training gate (:func:`training_problem`): a fine-tuned run has learnt its task
#: when its validation accuracy lies at least this far above the majority baseline
TRAINED_ABOVE_MAJORITY = 0.02
#: the gate's result for a chapter's fine-tuning grid (run -> problem); the claims it gates
#: read the grid's fine-tuned models, and with them the grid's :data:`ADEQUACY`
GRID = "untrained"
#: the result that holds, per (model, task) of the grid, the adequacy line its fine-tuned
#: models must clear (:func:`analysis_lib.claims.tables.adequacy`): the test accuracy of a
#: head on the frozen pretrained encoder, plus :data:`ABOVE_FROZEN_HEAD`
ADEQUACY = "adequacy"
#: how far a fine-tuned model's mean test accuracy must lie above the head on its frozen
#: encoder for a claim about fine-tuning to read it: the smallest accuracy effect of the
#: book's claims (about one binomial standard error on 500 test examples). A model no better
#: than a head on the unchanged encoder shows what the task gets without fine-tuning, so a
#: comparison of its layers with the pretrained ones says little about fine-tuning.
ABOVE_FROZEN_HEAD = 0.02


def training_problem(record: Mapping[str, Any]) -> str:
    """Why a fine-tuned run cannot be read as trained ("" when it can): the book's training
    gate, one rule for every chapter. ``record`` is the run's record
    (:attr:`analysis_lib.training.finetune.FineTuned.record`). The run must

    * beat its majority baseline by :data:`TRAINED_ABOVE_MAJORITY` on validation (else it
      did not learn the task), and
    * have reached a plateau: its learning curve (validation accuracy after each epoch)
      rose in its last epochs by no more than the validation set resolves
      (:func:`~analysis_lib.training.plateau.plateaued`; else it was still learning, and a
      claim about a trained model would read a model half-way).

    A run passes only on evidence: an empty record, a curve of one point, a NaN accuracy, a
    diverged loss, an empty loss curve or points without their loss is named, never read as
    trained."""
    if not isinstance(record, Mapping) or not record:
        return ("its record is empty: nothing shows that it trained (a run's record holds its "
                "validation metrics and its learning curve; rerun it)")
    problems = []
    validation = (record.get("metrics") or {}).get("validation") or {}
    accuracy, majority = validation.get("accuracy"), validation.get("majority_baseline")
    if accuracy is None or majority is None:
        problems.append("its record has no validation accuracy and majority baseline to "
                        "compare")
    elif not (0 <= float(accuracy) <= 1 and 0 <= float(majority) <= 1):
        problems.append(f"its validation accuracy ({accuracy}) or majority baseline "
                        f"({majority}) is not a share in [0, 1]")
    elif accuracy < majority + TRAINED_ABOVE_MAJORITY:
        problems.append(f"it did not learn: validation accuracy {accuracy:.3f} is not "
                        f"{TRAINED_ABOVE_MAJORITY} above the majority baseline "
                        f"{majority:.3f}")
    else:
        problems += curve_problems(record.get("history") or [], validation.get("n"),
                                   trained_until_plateau(record))
    source = "loss_curve" if "loss_curve" in record else "history"
    curve = record.get(source) or []
    if not isinstance(curve, list) or ("loss_curve" in record and not curve):
        return "; ".join([*problems, "its loss curve is empty or not a list: nothing shows the "
                          "training loss it reached (the record is damaged; rerun the run)"])
    lacking = [point for point in curve
               if not isinstance(point, Mapping) or point.get("train_loss") is None]
    if lacking:
        problems.append(f"{len(lacking)} of the {len(curve)} points of its "
                        f"{source.replace('_', ' ')} have no train_loss: the record is "
                        "damaged or not a training run's (rerun the run)")
        return "; ".join(problems)
    try:
        losses = [float(point["train_loss"]) for point in curve]
    except (TypeError, ValueError):
        return "; ".join([*problems, f"its {source.replace('_', ' ')} holds a train_loss "
                          "that is not a number (the record is damaged; rerun the run)"])
    if not np.isfinite(losses).all():
        problems.append("its training loss is not a number at some point (the run diverged)")
    elif losses and min(losses) < 0:
        problems.append(f"its training loss reads {min(losses):.3g}, and a cross-entropy is "
                        "never negative: the record is not a training run's")
    return "; ".join(problems)


def describe(problems: Mapping[str, str]) -> str:
    """Runs that failed the training gate, as a reader reads them: ``did not train (run:
    problem; ...)`` (``problems``: run -> :func:`training_problem`)."""
    return "did not train (" + "; ".join(f"{run}: {why}" for run, why in problems.items()) + ")"


def training_problems(runs: _Runs) -> dict[str, str]:
    """The runs of a grid (:class:`analysis_lib.training.grid.Runs`) that fail the
    training gate (:func:`training_problem`), by run (``"model, task, seed s"``), with the
    reason: the claims read from them get no verdict
    (:func:`~analysis_lib.claims.verdicts.untrained`)."""
    return problems_of({f"{m}, {t}, seed {s}": result
                        for (m, t, s), result in runs.models.items()})


def problems_of(results: Mapping[str, _Run]) -> dict[str, str]:
    """:func:`training_problems` of any fine-tuned runs, by the names given."""
    found = {name: training_problem(result.record) for name, result in results.items()}
    return {name: problem for name, problem in found.items() if problem}

