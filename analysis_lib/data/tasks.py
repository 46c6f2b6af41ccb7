"""Supervised tasks with deterministic train / validation / test splits.

* offline: ``tweets-sentiment`` (3 classes) and ``bbc-topic`` (5 classes; sentences, headlines
  or whole articles as inputs);
* online (GLUE through ``datasets``, the registry :data:`analysis_lib.data.corpora.GLUE`):
  ``sst2``, ``mnli``, ``qnli``, ``qqp``, ``rte``, ``mrpc``, ``cola`` and ``stsb`` (regression).
  GLUE's test labels are hidden, so its validation split is cut in two halves for validation
  and test.
* your own: :func:`task_from_corpus`, :func:`task_from_frame`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .corpora import GLUE, Corpus, from_sentences, hub_dataset, load_corpus

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Split:
    """One split: the inputs (a text, or a pair of texts) and their labels.

    A word-level task (tagging) gives ``words``, each example's words, and then ``labels``
    holds one label per word, every example's words in order (``len(labels)`` is the number
    of words; ``len(split)`` is still the number of examples)."""

    texts: list[str]
    labels: np.ndarray
    pairs: list[str] | None = None  # second text of each example (paired tasks)
    words: list[list[str]] | None = None  # each example's words (word-level tasks)

    def __len__(self) -> int:
        return len(self.texts)

    def word_labels(self) -> list[np.ndarray]:
        """Each example's labels, one per word (a word-level split only)."""
        if self.words is None:
            raise ValueError("a sentence-level split has one label per example, not per word")
        ends = np.cumsum([len(w) for w in self.words])
        return np.split(np.asarray(self.labels), ends[:-1]) if len(ends) else []

    def subset(self, idx: Sequence[int] | np.ndarray) -> Split:
        idx = list(idx)
        pairs = None if self.pairs is None else [self.pairs[i] for i in idx]
        if self.words is None:
            return Split([self.texts[i] for i in idx], self.labels[idx], pairs)
        per_example = self.word_labels()
        labels = (np.concatenate([per_example[i] for i in idx]) if idx
                  else np.asarray(self.labels)[:0])
        return Split([self.texts[i] for i in idx], labels, pairs,
                     [self.words[i] for i in idx])


@dataclass
class Task:
    """A supervised task with deterministic splits.

    Attributes
    ----------
    name : str
    train, validation, test : Split
    label_names : list of str (empty for regression)
    regression : bool
    meta : dict
        What identifies the splits (source, sizes, seed); part of the fine-tuning cache key.
    """

    name: str
    train: Split
    validation: Split
    test: Split
    label_names: list[str]
    regression: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_labels(self)

    @property
    def word_level(self) -> bool:
        """Whether the task labels words (tagging) rather than whole examples."""
        return self.train.words is not None

    @property
    def num_labels(self) -> int:
        return 1 if self.regression else len(self.label_names)

    def majority_baseline(self, split: str = "test") -> float:
        """Accuracy of always predicting the training set's most frequent class (per word
        for a word-level task; for regression: NaN, there is no majority class)."""
        if self.regression:
            return float("nan")
        majority = np.bincount(self.train.labels.astype(int)).argmax()
        return float(np.mean(getattr(self, split).labels == majority))

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for split in (self.train, self.validation, self.test):
            digest.update(json.dumps([split.texts, split.pairs], ensure_ascii=False).encode())
            if split.words is not None:
                digest.update(json.dumps(split.words, ensure_ascii=False).encode())
            digest.update(np.asarray(split.labels, dtype=np.float64).tobytes())
        return digest.hexdigest()[:24]


OFFLINE_TASKS = ("tweets-sentiment", "bbc-topic")
TASKS = OFFLINE_TASKS + tuple(GLUE)


def split_corpus(split: Split, name: str = "split") -> Corpus:
    """The inputs of a split as a corpus, one sentence per example (a pair joined by a
    space), for extraction."""
    texts = split.texts if split.pairs is None else [f"{a} {b}" for a, b in
                                                      zip(split.texts, split.pairs)]
    return from_sentences(texts, name=name)


def check_labels(task: Task) -> None:
    """Refuse labels a model cannot be trained or scored on, naming the split and the fix:
    a classification task needs at least two label names and integer labels ``0..k-1``,
    with at least two classes in training; a regression task needs finite numbers."""
    splits = {"train": task.train, "validation": task.validation, "test": task.test}
    if len({split.words is None for split in splits.values()}) > 1:
        raise ValueError(f"task {task.name!r}: some splits give words and some do not; a "
                         "word-level task gives words in every split")
    for name, split in splits.items():
        labels = np.asarray(split.labels)
        _check_count(task.name, name, split)
        if not np.issubdtype(labels.dtype, np.number) or not np.isfinite(
                labels.astype(np.float64)).all():
            raise ValueError(f"task {task.name!r}: the {name} labels must be finite numbers "
                             "(missing labels are not allowed: drop those examples)")
        if task.regression:
            continue
        k = len(task.label_names)
        bad = labels[(labels != np.round(labels)) | (labels < 0) | (labels >= k)]
        if bad.size:
            shown = [int(v) if float(v).is_integer() else v for v in sorted(set(bad.tolist()))]
            raise ValueError(f"task {task.name!r}: {name} labels {shown[:5]} are not class "
                             f"indices 0..{k - 1} of the label names {task.label_names}")
    if not task.regression:
        if len(task.label_names) < 2:
            raise ValueError(f"task {task.name!r} has {len(task.label_names)} label name(s); "
                             "a classification task needs at least two")
        if len(np.unique(task.train.labels)) < 2:
            raise ValueError(f"task {task.name!r}: the training split holds a single class; "
                             "draw the splits with another seed or add examples")


def _check_count(task: str, name: str, split: Split) -> None:
    """One label per input, or per word of a word-level split."""
    if split.words is not None and len(split.words) != len(split.texts):
        raise ValueError(f"task {task!r}: the {name} split has {len(split.texts)} inputs and "
                         f"words for {len(split.words)}")
    expected, unit = ((len(split.texts), "inputs") if split.words is None
                      else (sum(len(w) for w in split.words), "words"))
    if len(split.labels) != expected:
        raise ValueError(f"task {task!r}: the {name} split has {expected} {unit} and "
                         f"{len(split.labels)} labels")


def _sizes(n: int, n_train, n_val, n_test) -> tuple[int, int, int]:
    if n_train is None and n_val is None and n_test is None:
        n_val = n_test = max(1, n // 10)
        n_train = n - n_val - n_test
    n_train = n_train if n_train is not None else n - (n_val or 0) - (n_test or 0)
    n_val = n_val if n_val is not None else min(1000, max(1, n_train // 8))
    n_test = n_test if n_test is not None else min(2000, max(1, n_train // 4))
    for label, value in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if n_train + n_val + n_test > n:
        raise ValueError(f"the task has {n} examples; n_train + n_val + n_test = "
                         f"{n_train + n_val + n_test} is too many")
    return n_train, n_val, n_test


def task_from_corpus(corpus: Corpus, *, name: str | None = None, n_train: int | None = None,
                     n_val: int | None = None, n_test: int | None = None, seed: int = 0
                     ) -> Task:
    """A classification task from a labelled :class:`Corpus`: the examples are shuffled with
    ``seed`` and cut into train, validation and test (by default 80/10/10)."""
    if corpus.labels is None:
        raise ValueError(f"corpus {corpus.name!r} has no labels; a task needs one label per "
                         "sentence (corpora.from_sentences(texts, labels=...))")
    labels = np.asarray(corpus.labels)
    if len(np.unique(labels)) < 2:
        raise ValueError(f"corpus {corpus.name!r} has a single class; a classification task "
                         "needs at least two")
    n_train, n_val, n_test = _sizes(len(corpus), n_train, n_val, n_test)
    order = np.random.default_rng(seed).permutation(len(corpus))
    texts = corpus.texts
    pairs = corpus.text_pairs
    if pairs is not None:
        texts = [a for a, _ in pairs]
    whole = Split(list(texts), labels, None if pairs is None else [b for _, b in pairs])
    cuts = np.cumsum([n_train, n_val, n_test])
    train, val, test = (whole.subset(order[a:b]) for a, b in zip([0, *cuts[:2]], cuts))
    names = corpus.label_names or [str(i) for i in range(int(labels.max()) + 1)]
    return Task(name or corpus.name, train, val, test, list(names),
                meta={"corpus": corpus.meta, "corpus_fingerprint": corpus.fingerprint(),
                      "sizes": [n_train, n_val, n_test], "seed": seed})


def task_from_frame(frame: pd.DataFrame, *, text: str = "text", label: str = "label",
                    pair: str | None = None,
                    name: str = "custom", **sizes: Any) -> Task:
    """A task from a pandas DataFrame with a text column (and optionally a second text column
    for pairs) and a label column."""
    missing = [c for c in (text, label, pair) if c is not None and c not in frame.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the table; its columns are "
                         f"{list(frame.columns)} (pass text=..., label=... to name them)")
    corpus = from_sentences([str(t) for t in frame[text]], labels=list(frame[label]), name=name)
    if pair is not None:
        corpus.text_pairs = list(zip(corpus.texts, [str(t) for t in frame[pair]]))
    return task_from_corpus(corpus, name=name, **sizes)


def load_task(name: str, *, n_train: int | None = None, n_val: int | None = None,
              n_test: int | None = None, seed: int = 0, unit: str = "sentence") -> Task:
    """A named task with deterministic splits.

    Parameters
    ----------
    name : str
        One of :data:`TASKS`.
    n_train, n_val, n_test : int, optional
        Split sizes (defaults: offline tasks 80/10/10 of everything; GLUE: the whole train
        split, and the validation split cut in halves for validation and test).
    seed : int
        Seed of the shuffle that draws the splits.
    unit : {'sentence', 'headline', 'article'}
        ``bbc-topic`` only: what one input is.
    """
    if name == "tweets-sentiment":
        return task_from_corpus(load_corpus("tweets"), name=name, n_train=n_train, n_val=n_val,
                                n_test=n_test, seed=seed)
    if name == "bbc-topic":
        task = task_from_corpus(load_corpus("bbc-news", unit=unit), name=name, n_train=n_train,
                                n_val=n_val, n_test=n_test, seed=seed)
        task.meta["unit"] = unit
        return task
    if name in GLUE:
        return _glue_task(name, n_train, n_val, n_test, seed)
    raise ValueError(f"unknown task {name!r}; valid: {', '.join(TASKS)}. For your own data "
                     "use analysis_lib.data.tasks.task_from_corpus(...) or task_from_frame(...)")


def _glue_task(name, n_train, n_val, n_test, seed) -> Task:
    source = GLUE[name]
    columns = source.pair or (source.text,)
    label_names = list(source.label_names or ())
    train = hub_dataset(source, f"glue/{name}", "train")
    val = hub_dataset(source, f"glue/{name}")

    def split(data, idx):
        rows = data.select([int(i) for i in idx])
        labels = np.asarray(rows["label"], dtype=np.float32 if not label_names else np.int64)
        pairs = list(rows[columns[1]]) if len(columns) == 2 else None
        return Split(list(rows[columns[0]]), labels, pairs)

    rng = np.random.default_rng(seed)
    train_idx = rng.permutation(len(train))[:n_train]
    val_idx = rng.permutation(len(val))
    half = len(val_idx) // 2
    v, t = val_idx[:half][:n_val], val_idx[half:][:n_test]
    return Task(name, split(train, train_idx), split(val, v), split(val, t), label_names,
                regression=not label_names,
                meta={"glue": source.config, "sizes": [len(train_idx), len(v), len(t)],
                      "seed": seed})
