"""Stimuli drawn from a task or a corpus: a task's validation inputs as a corpus, its short
inputs for attention maps, deterministic samples of word rows, and two domains' tokens
matched on their surface (:func:`token_covariates`, :func:`matched_rows`,
:func:`share_left`).

Every chapter that samples word rows samples them with :func:`word_rows`, so the same seed
gives the same rows everywhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..similarity.curves import DOMAINS
from .corpora import Corpus, load_corpus
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


@dataclass
class DomainSample:
    """One domain's stimuli: the corpus, the sampled word rows, each row's sentence, and the
    corpus the stimuli come from (``source``: a task's own corpus for its in-domain
    stimuli)."""

    name: str
    corpus: Corpus
    rows: np.ndarray
    source: str = ""

    @property
    def sentence(self) -> np.ndarray:
        """The sentence of each sampled word row."""
        of_row = np.repeat(np.arange(len(self.corpus)),
                           [len(s) for s in self.corpus.sentences])
        return of_row[self.rows]


def domain_stimuli(task: Task, other: str, *, n_sentences: int, n_words: int,
                   seed: int = 0, max_words: int = 60) -> dict[str, DomainSample]:
    """The stimuli of :data:`DOMAINS`. In-domain: the first ``n_sentences`` validation
    inputs of ``task`` (never trained on); out-of-domain: a sample of ``n_sentences`` from
    the corpus ``other``; ``n_words`` word rows of each."""
    inside = stimuli(task, n_sentences)
    outside = load_corpus(other, n=n_sentences, seed=seed, max_words=max_words)
    own = task.meta.get("corpus", {}).get("name", task.name)
    return {"in-domain": DomainSample(task.name, inside, word_rows(inside, n_words, seed),
                                      own),
            "out-of-domain": DomainSample(other, outside, word_rows(outside, n_words, seed),
                                          other)}


def token_covariates(samples: Mapping[str, DomainSample], tokenizer: Callable[..., Any]
                     ) -> pd.DataFrame:
    """One row per sampled token of each domain: its sentence's length in words, the log
    frequency of the word in both samples together, and the number of subword pieces the
    model's tokenizer splits it into (more than one: not in the vocabulary as a whole)."""
    counts = Counter(w.lower() for s in samples.values() for w in s.corpus.words)
    frames = []
    for domain, sample in samples.items():
        words = sample.corpus.words
        lengths = np.repeat([len(s) for s in sample.corpus.sentences],
                            [len(s) for s in sample.corpus.sentences])
        chosen = [words[r] for r in sample.rows]
        pieces = tokenizer(chosen, add_special_tokens=False)["input_ids"]
        frames.append(pd.DataFrame({
            "domain": domain, "row": np.arange(len(sample.rows)),
            "sentence_length": lengths[sample.rows],
            "log_frequency": np.log([counts[w.lower()] for w in chosen]),
            "subwords": [max(1, len(p)) for p in pieces]}))
    return pd.concat(frames, ignore_index=True)


def covariate_table(covariates: pd.DataFrame) -> pd.DataFrame:
    """Means per domain: sentence length, log frequency, share of words split into pieces."""
    frame = covariates.assign(split_words=covariates.subwords > 1)
    return frame.groupby("domain", sort=False)[["sentence_length", "log_frequency",
                                                "split_words"]].mean()


def matched_rows(covariates: pd.DataFrame, *, bins: int = 4, seed: int = 0
                 ) -> dict[str, np.ndarray]:
    """Sample positions of each domain matched on the covariates (coarsened exact matching):
    tokens are put in strata by quantile bins of sentence length and log frequency (over both
    domains) and by whether the word is split; each stratum keeps the same number of tokens
    from both domains, drawn at random. Returns the kept ``row`` positions per domain."""
    frame = covariates.copy()
    for column in ("sentence_length", "log_frequency"):
        edges = np.unique(np.quantile(frame[column], np.linspace(0, 1, bins + 1)[1:-1]))
        frame[f"{column}_bin"] = np.searchsorted(edges, frame[column], side="right")
    frame["stratum"] = (frame["sentence_length_bin"].astype(str) + "/" +
                        frame["log_frequency_bin"].astype(str) + "/" +
                        (frame["subwords"] > 1).astype(str))
    rng = np.random.default_rng(seed)
    kept: dict[str, list[int]] = {d: [] for d in DOMAINS}
    for _, group in frame.groupby("stratum"):
        by_domain = {d: group[group.domain == d]["row"].to_numpy() for d in DOMAINS}
        n = min(len(v) for v in by_domain.values())
        for d, rows in by_domain.items():
            kept[d] += list(rng.choice(rows, n, replace=False)) if n else []
    return {d: np.sort(np.array(v, dtype=np.int64)) for d, v in kept.items()}


def share_left(matched: pd.DataFrame, floor: float) -> pd.DataFrame:
    """How much of each gap is left once the domains are matched on length, frequency and
    split words (:func:`matched_rows`): ``matched`` holds one row per gap, its ``raw`` value
    and its ``matched`` value; the copy returned adds ``share_left``, matched / raw (near 1:
    the covariates do not explain the gap; near 0: they explain it). A gap smaller than
    ``floor`` in size (e.g. the smallest effect of the claim the gap is read for) has no
    share to speak of: a ratio of two near-zero numbers swings with rounding, so it is
    NaN."""
    frame = matched.copy()
    big = np.abs(frame.raw.to_numpy(dtype=float)) >= floor
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["share_left"] = np.where(big, frame.matched / frame.raw, np.nan)
    return frame
