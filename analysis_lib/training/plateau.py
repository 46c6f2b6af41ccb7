"""When has a run stopped learning? The plateau of a learning curve, one rule for training
and for the book's training gate.

A run's learning curve is its validation score after each epoch. The curve has reached a
plateau when its last :data:`PATIENCE` epochs raised the best score by no more than the
validation set can resolve: two standard errors of their best score (a binomial share's
``sqrt(p (1 - p) / n)`` for an accuracy on ``n`` examples). A smaller rise is within what
another draw of the same number of validation examples would move the score by, so more
epochs are not shown to help. Scores that fell are on the plateau (or past it). Two epochs
of patience, not one, so that one noisy dip does not end a run that is still learning. Nor
does a rise too small for that window end one: a last epoch that sets a new best by more
than :data:`RISING_SE` standard error shows the run still climbing (:func:`rising`; a curve
of 0.754, 0.730, 0.776 on 500 examples rose 0.022 in two epochs, inside the 0.037 that two
errors resolve, but its last epoch is its best by more than one error), so it goes on. A run
stopped on its plateau keeps the weights of its best epoch (:func:`best_epoch`), as early
stopping does: the epochs after it are the patience, spent to show that no rise followed,
and a dip is never kept.
``n`` counts validation *examples*: for a tagging task, whose accuracy is over words, the
words of one sentence are not independent, so its sentences are the sample.

:func:`~analysis_lib.training.finetune.finetune` stops a run there when asked
(``FinetuneConfig.until_plateau``), and the book's gate
(:func:`~analysis_lib.claims.training_gate.training_problem`) asks the same question of a
finished run. Needs NumPy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: how many standard errors of a score the last epochs must add to count as a rise
RESOLVED_SE = 2.0
#: how many epochs without a resolved rise make a plateau
PATIENCE = 2
#: a last epoch that beats every earlier one by more than this many standard errors shows a
#: run still rising, whatever its window's rise
RISING_SE = 1.0


def resolution(score: float, n: int) -> float:
    """What a validation set of ``n`` examples resolves of an accuracy ``score``:
    :data:`RESOLVED_SE` binomial standard errors, ``2 sqrt(p (1 - p) / n)``, never below
    one example's share ``1 / n``."""
    if n < 1:
        raise ValueError(f"a validation set needs at least one example, got n={n}")
    if not 0 <= score <= 1:
        raise ValueError(f"an accuracy is a share in [0, 1], got {score}")
    return max(RESOLVED_SE * float(np.sqrt(score * (1 - score) / n)), 1 / n)


def last_rise(scores: Sequence[float], patience: int = PATIENCE) -> float:
    """How far the best of the last ``patience`` scores lies above the best score before
    them (negative when below); NaN for a curve of ``patience`` points or fewer."""
    values = [float(s) for s in scores]
    if patience < 1:
        raise ValueError(f"patience must be at least 1 epoch, got {patience}")
    if len(values) <= patience:
        return float("nan")
    return max(values[-patience:]) - max(values[:-patience])


def plateaued(scores: Sequence[float], n: int, patience: int = PATIENCE) -> bool:
    """Whether a learning curve (validation accuracy after each epoch, on ``n`` examples)
    has reached its plateau: more than ``patience`` points, the last ``patience`` rose above
    the best before them by no more than :func:`resolution` of their best, and the last one
    is not still rising (:func:`rising`). A curve with a NaN has not."""
    values = [float(s) for s in scores]
    if len(values) <= patience or not np.isfinite(values).all():
        return False
    return (last_rise(values, patience) <= resolution(max(values[-patience:]), n)
            and not rising(values, n))


def rising(scores: Sequence[float], n: int) -> bool:
    """Whether a learning curve's last epoch beat every earlier one by more than
    :data:`RISING_SE` binomial standard errors of its score (at two errors' resolution, half
    of :func:`resolution`): the run was still climbing when it ended. False for a curve of
    one point."""
    values = [float(s) for s in scores]
    if len(values) < 2:
        return False
    return last_rise(values, 1) > resolution(values[-1], n) * RISING_SE / RESOLVED_SE


def best_epoch(scores: Sequence[float]) -> int:
    """The epoch (counted from 1) of a learning curve's highest score, the first of equal
    ones: the weights a run that stops on its plateau keeps. NaN scores are passed over; a
    curve without a number gives its last epoch."""
    values = np.asarray([float(s) for s in scores], dtype=float)
    if not len(values):
        raise ValueError("a learning curve needs at least one epoch's score")
    if not np.isfinite(values).any():
        return len(values)
    return int(np.argmax(np.where(np.isfinite(values), values, -np.inf))) + 1
