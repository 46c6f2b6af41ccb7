"""Was a finished run still learning when it ended? The plateau rule
(:mod:`~analysis_lib.training.plateau`) read on a run's record.

A fine-tuned run's record (:attr:`analysis_lib.training.finetune.FineTuned.record`) holds
its learning curve: the validation accuracy after each epoch, on ``n`` examples. Two
readers ask the same question of it with the one rule here: the book's training gate
(:func:`~analysis_lib.claims.training_gate.training_problem`), which refuses a run still
learning, and the fine-tuning grid (:meth:`~analysis_lib.training.grid.FinetuneGrid.train`),
which trains such a run again on a longer schedule before any claim reads it. Needs NumPy
only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import plateau


def curve_problems(history: list[Mapping[str, Any]], n: Any, stopped: bool = True
                   ) -> list[str]:
    """Why the learning curve in ``history`` (validation accuracy after each epoch, on
    ``n`` examples) has not reached its plateau: nothing when it has.

    A run that stopped on its plateau (``stopped``: trained ``until_plateau``, or a record
    that does not say) is read by the rule it stopped by
    (:func:`~analysis_lib.training.plateau.plateaued`). A run that trained its whole
    schedule, the learning rate decaying to zero, is read by the plateau's window alone: its
    last ``PATIENCE`` epochs must not have raised its best by more than the validation set
    resolves. Its last epochs took the schedule's smallest steps, so a last epoch that is
    its best is what the decay gives, not a run cut short; a rise over the window that the
    validation set resolves still fails it. A curve too short or not numbers is named too:
    nothing shows a plateau."""
    curve = _curve(history)
    if len(curve) <= plateau.PATIENCE:
        return [f"its learning curve has {len(curve)} point{'s' * (len(curve) != 1)}: no "
                f"plateau to judge by (train at least {plateau.PATIENCE + 1} epochs, or "
                "until_plateau)"]
    if not _judged(curve, n):
        return ["its learning curve or validation size is missing or not a number"]
    return _rising(curve, n, stopped)


def still_learning(record: Mapping[str, Any]) -> str:
    """Why a finished run's learning curve shows it still learning when it ended ("" when
    it does not, and when its curve is too short or not numbers to judge): the rule of
    :func:`curve_problems`, whatever the run's accuracy. The fine-tuning grid trains such a
    run again (:attr:`~analysis_lib.training.grid.FinetuneGrid.longer_if_rising`)."""
    if not isinstance(record, Mapping):
        return ""
    curve = _curve(record.get("history") or [])
    n = ((record.get("metrics") or {}).get("validation") or {}).get("n")
    if not isinstance(n, int) or not _judged(curve, n):
        return ""
    return "; ".join(_rising(curve, n, trained_until_plateau(record)))


def trained_until_plateau(record: Mapping[str, Any]) -> bool:
    """Whether a run trained ``until_plateau`` (a record that does not say counts as one)."""
    config = record.get("config")
    return bool(config.get("until_plateau", True)) if isinstance(config, Mapping) else True


def _curve(history: list[Mapping[str, Any]]) -> list[float]:
    return [float(point.get("validation_accuracy", float("nan"))) for point in history]


def _judged(curve: list[float], n: Any) -> bool:
    """Whether the plateau rule can read ``curve`` on ``n`` validation examples: more than
    ``PATIENCE`` points, every one a number, and a count of examples."""
    return (len(curve) > plateau.PATIENCE and isinstance(n, int) and n >= 1
            and bool(np.isfinite(curve).all()))


def _rising(curve: list[float], n: int, stopped: bool) -> list[str]:
    """The rule of :func:`curve_problems` on a curve of more than ``PATIENCE`` numbers."""
    best = max(curve[-plateau.PATIENCE:])
    settled = plateau.last_rise(curve) <= plateau.resolution(best, n)
    if plateau.plateaued(curve, n) or (settled and not stopped):
        return []
    if settled:  # the last epoch climbs
        return [f"it was still learning: its last epoch beat every earlier one by "
                f"{plateau.last_rise(curve, 1):.3f}, more than one standard error of its "
                f"{n} validation examples (train longer: more epochs, or until_plateau)"]
    return [f"it was still learning: validation accuracy rose {plateau.last_rise(curve):.3f} "
            f"in its last {plateau.PATIENCE} epochs, more than the "
            f"{plateau.resolution(best, n):.3f} its {n} validation examples resolve (train "
            "longer: more epochs, or until_plateau)"]
