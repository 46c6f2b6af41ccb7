"""The book's training gate: did a fine-tuned run train at all?

A claim read from a run that did not train gets no verdict
(:func:`~analysis_lib.studies.verdicts.untrained`); every chapter asks the question of
every fine-tuned run through :func:`training_problem`, with one pair of thresholds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: the book's training gate (:func:`training_problem`): a fine-tuned run has trained when its
#: validation accuracy lies at least this far above the majority baseline...
TRAINED_ABOVE_MAJORITY = 0.02
#: ...and its training loss fell by at least this share of its first value (the first and
#: the last point of its loss curve, or of its per-epoch losses for an older record)
TRAINED_LOSS_DROP = 0.10


def training_problem(record: Mapping[str, Any]) -> str:
    """Why a fine-tuned run did not train ("" when it did): the book's training gate, one
    rule for every chapter. ``record`` is the run's record
    (:attr:`analysis_lib.training.finetune.FineTuned.record`). A claim read from a run that
    did not train gets no verdict (:func:`~analysis_lib.studies.verdicts.untrained`): its
    statistic compares a model that has not learnt the task. A run passes only on evidence:
    a finite validation accuracy beside its majority baseline and a loss curve of at least
    two finite points; an empty record, a one-point curve or a NaN accuracy is named, never
    read as trained."""
    if not isinstance(record, Mapping) or not record:
        return ("its record is empty: nothing shows that it trained (a run's record holds its "
                "validation metrics and its loss curve; rerun it)")
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
        problems.append(f"validation accuracy {accuracy:.3f} is not "
                        f"{TRAINED_ABOVE_MAJORITY} above the majority baseline "
                        f"{majority:.3f}")
    curve = record.get("loss_curve") or record.get("history") or []
    losses = [float(point.get("train_loss", float("nan"))) for point in curve]
    if len(losses) < 2:
        problems.append(f"its loss curve has {len(losses)} point{'s' * (len(losses) != 1)}: "
                        "no drop to judge by")
    elif not np.isfinite(losses).all():
        problems.append("its training loss is not a number at some point (the run diverged)")
    elif min(losses) < 0:
        problems.append(f"its training loss reads {min(losses):.3g}, and a cross-entropy is "
                        "never negative: the record is not a training run's")
    elif not losses[-1] <= losses[0] * (1 - TRAINED_LOSS_DROP):
        problems.append(f"training loss went from {losses[0]:.3f} to {losses[-1]:.3f}, less "
                        f"than a {TRAINED_LOSS_DROP:.0%} drop")
    return "; ".join(problems)


def describe(problems: Mapping[str, str]) -> str:
    """Runs that failed the training gate, as a reader reads them: ``did not train (run:
    problem; ...)`` (``problems``: run -> :func:`training_problem`)."""
    return "did not train (" + "; ".join(f"{run}: {why}" for run, why in problems.items()) + ")"
