"""Stimuli drawn from a task or a corpus: a task's validation inputs as a corpus, its short
inputs for attention maps, and deterministic samples of word rows.

Every chapter that samples word rows samples them with :func:`word_rows`, so the same seed
gives the same rows everywhere.
"""

from __future__ import annotations

import numpy as np

from .corpora import Corpus
from .tasks import Task, split_corpus


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


def word_rows(corpus: Corpus, n: int, seed: int = 0) -> np.ndarray:
    """A deterministic sample of ``n`` word rows (all when the corpus has fewer)."""
    return sample_rows(corpus.n_words, n, seed)


def sample_rows(total: int, n: int, seed: int = 0) -> np.ndarray:
    """``n`` of ``total`` row indices drawn without replacement with ``seed``, in order (all
    of them when ``n >= total``): every study's sample of rows."""
    if n >= total:
        return np.arange(total)
    return np.sort(np.random.default_rng(seed).choice(total, n, replace=False))
