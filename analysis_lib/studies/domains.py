"""Does fine-tuning change in-domain inputs more than out-of-domain ones? (Merchant et al. 2020
§6, Fig. 5)

Per layer, RSA between a pretrained model and its fine-tuned version (cosine kernel, Pearson
over the upper triangles, word tokens as stimuli, the same tokens on both sides), computed on
inputs from the fine-tuning task's own domain and from another domain. The bookkeeping:

* :func:`domain_stimuli`: the in-domain inputs (the task's validation split, never trained on)
  and an out-of-domain sample, each with a fixed sample of word rows;
* :func:`rsa_by_layer`, :func:`bootstrap_rsa`: the curves, and intervals from a bootstrap
  that resamples sentences (not tokens) and fine-tuning seeds together, with the pairs of two
  copies of one token left out (:func:`analysis_lib.similarity.rsa` with ``weights``);
* :func:`permutation_difference`: a permutation test of out-of-domain minus in-domain RSA at
  chosen layers, shuffling whole sentences between the domains;
* :func:`token_covariates`, :func:`matched_rows`: what differs between the domains besides
  topic (sentence length, word frequency, words split into several subwords), and samples of
  the two domains matched on those;
* :func:`mixture_curve`: RSA at one layer on stimuli mixing the two domains in proportions;
* :func:`probe_accuracy`: linear probes of silver linguistic labels on every transformer
  layer, base against fine-tuned (is anything forgotten? Merchant et al. §4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..claims import verdicts
from ..claims.claim import claim_of
from ..claims.papers import merchant
from ..claims.papers.merchant import DOMAINS
from ..collect import load_model, word_layers
from ..data.corpora import Corpus, load_corpus
from ..data.labels import LABEL_SETS
from ..data.stimuli import stimuli, word_rows
from ..layers import check_layer
from ..models import LoadedModel
from ..runtime import checks
from ..runtime.profile import profiled
from ..similarity import rsa, stats
from ..similarity.rsa import ConstantSimilarity, WeightedRSA
from ..training.grid import Runs
from ..training.probes import logistic_probe

#: the corpus of each offline task's own domain, and the other one
OTHER_DOMAIN = {"tweets-sentiment": "bbc-news", "bbc-topic": "tweets"}


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


def domain_stimuli(runs: Runs, task: str, other: str, *, n_sentences: int, n_words: int,
                   seed: int = 0, max_words: int = 60) -> dict[str, DomainSample]:
    """In-domain: the first ``n_sentences`` validation inputs of ``task``; out-of-domain: a
    sample of ``n_sentences`` from the corpus ``other``; ``n_words`` word rows of each."""
    split = runs.task(task)
    inside = stimuli(split, n_sentences)
    outside = load_corpus(other, n=n_sentences, seed=seed, max_words=max_words)
    own = split.meta.get("corpus", {}).get("name", task)
    return {"in-domain": DomainSample(task, inside, word_rows(inside, n_words, seed), own),
            "out-of-domain": DomainSample(other, outside, word_rows(outside, n_words, seed),
                                          other)}


def sources(samples: Mapping[str, Mapping[str, DomainSample]]) -> dict[str, dict[str, str]]:
    """Each task's corpus per domain (task -> domain -> corpus), as :func:`crossed` reads
    it."""
    return {task: {domain: sample.source for domain, sample in pair.items()}
            for task, pair in samples.items()}


def token_layers(model: LoadedModel, sample: DomainSample, storage: str = "float32"
                 ) -> list[np.ndarray]:
    """Every layer's word vectors (last subword) on the sample's rows, kept in ``storage``
    (as :func:`~analysis_lib.collect.word_layers`)."""
    return word_layers(model, sample.corpus, sample.rows, storage=storage).words


def rsa_by_layer(base: Sequence[np.ndarray], tuned: Sequence[np.ndarray],
                 weights: np.ndarray | None = None) -> np.ndarray:
    """RSA (cosine, Pearson) of every layer, base against fine-tuned, on the same rows. With
    ``weights`` (a resample), NaN where the resample's similarity matrix is constant
    (:class:`~analysis_lib.similarity.rsa.ConstantSimilarity`, RSA undefined); every other
    error is raised."""
    if weights is None:
        return np.array([rsa(X, Y, "cosine", "pearson") for X, Y in zip(base, tuned)])
    return resampled_rsa(resamplers(base, tuned), weights)


def resamplers(base: Sequence[np.ndarray], tuned: Sequence[np.ndarray]) -> list[WeightedRSA]:
    """Every layer's pair, base against fine-tuned, prepared once for many resamples."""
    return [WeightedRSA(X, Y) for X, Y in zip(base, tuned)]


def resampled_rsa(layers: Sequence[WeightedRSA], weights: np.ndarray) -> np.ndarray:
    """:func:`rsa_by_layer` of one resample (``weights``) on pairs from :func:`resamplers`."""
    out = np.full(len(layers), np.nan)
    for layer, pair in enumerate(layers):
        try:
            out[layer] = pair(weights)
        except ConstantSimilarity:
            pass
    return out


@profiled("resampling", lambda *a, **k: "bootstrap rsa")
def bootstrap_rsa(base: Sequence[np.ndarray], tuned: Mapping[int, Sequence[np.ndarray]],
                  sentence: np.ndarray, *, n_boot: int = 200, level: float = 0.95,
                  seed: int = 0) -> pd.DataFrame:
    """Per layer: the RSA averaged over fine-tuning seeds, and a percentile interval from a
    bootstrap that draws a fine-tuning seed and a resample of sentences each time.

    A token of a resampled sentence appears as many times as its sentence; pairs of two
    copies of one token are left out of the RSA (they are identical on both sides). The
    column ``dropped`` counts, per layer, the resamples whose RSA was undefined (a constant
    similarity matrix) and are left out of the interval.
    """
    checks.integer(n_boot, "n_boot", low=2)
    checks.integer(seed, "seed", low=0)
    seeds = sorted(tuned)
    if len(np.unique(sentence)) < 2:
        raise ValueError("the stimuli come from a single sentence; a bootstrap over sentences "
                         "needs at least two (use more sentences)")
    estimate = np.mean([rsa_by_layer(base, tuned[s]) for s in seeds], axis=0)
    prepared = {s: resamplers(base, tuned[s]) for s in seeds}

    def resampled(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # a resample of sentences, then a fine-tuning seed: a two-level bootstrap
        return resampled_rsa(prepared[seeds[rng.integers(len(seeds))]], weights)

    samples = stats.group_bootstrap(resampled, sentence, n_boot=n_boot, seed=seed)
    alpha = (1 - level) / 2
    dropped = np.isnan(samples).sum(axis=0)
    if (dropped == n_boot).any():
        raise ValueError(f"every resample of layer {int(np.argmax(dropped == n_boot))} has a "
                         "constant similarity matrix; RSA is undefined there")
    low, high = np.nanquantile(samples, [alpha, 1 - alpha], axis=0)
    se = np.nanstd(samples, axis=0, ddof=1)
    return pd.DataFrame({"layer": np.arange(len(base)), "rsa": estimate, "low": low,
                         "high": high, "se": se, "dropped": dropped})


@profiled("resampling", lambda *a, **k: "permutations rsa")
def permutation_difference(base: Mapping[str, Sequence[np.ndarray]],
                           tuned: Mapping[str, Sequence[np.ndarray]],
                           sentence: Mapping[str, np.ndarray], *, n_perm: int = 100,
                           seed: int = 0, layers: Sequence[int] | None = None
                           ) -> pd.DataFrame:
    """Per layer: out-of-domain minus in-domain RSA, and its permutation p-value.

    The null hypothesis is that the domain label does not matter: whole sentences are
    shuffled between the two domains (each keeps its number of sentences) and both RSAs are
    recomputed. One-sided: ``p = (1 + #{null >= observed}) / (1 + n_perm)``, small when
    fine-tuning changed the in-domain tokens more. ``layers``: the layers tested (default:
    all; each permutation recomputes the RSA of every tested layer); ``p_holm`` adjusts
    over them.
    """
    checks.integer(n_perm, "n_perm", low=1)
    checks.integer(seed, "seed", low=0)
    n_layers = len(base["in-domain"])
    tested = list(range(n_layers)) if layers is None else \
        [check_layer(k, n_layers - 1, "layers item") for k in layers]
    if not tested:
        raise ValueError("layers must name at least one layer (or be None for all)")
    pooled_b = [np.vstack([base["in-domain"][k], base["out-of-domain"][k]]) for k in tested]
    pooled_t = [np.vstack([tuned["in-domain"][k], tuned["out-of-domain"][k]])
                for k in tested]
    # sentence ids made unique across the domains
    offset = int(sentence["in-domain"].max()) + 1
    groups = np.concatenate([sentence["in-domain"], sentence["out-of-domain"] + offset])
    is_in = np.r_[np.ones(len(sentence["in-domain"]), bool),
                  np.zeros(len(sentence["out-of-domain"]), bool)]

    pooled = resamplers(pooled_b, pooled_t)

    def difference(mask: np.ndarray) -> np.ndarray:
        inside = resampled_rsa(pooled, mask.astype(np.int64))
        outside = resampled_rsa(pooled, (~mask).astype(np.int64))
        return outside - inside

    test = stats.two_sample_permutation(difference, groups, is_in, n_perm=n_perm, seed=seed)
    return pd.DataFrame({"layer": tested, "out_minus_in": test.statistic,
                         "p_value": test.p_value, "p_holm": verdicts.holm(test.p_value)})


def permutation_floor(n_perm: int, tests: int, alpha: float = verdicts.ALPHA) -> str:
    """A sentence on what ``n_perm`` permutations can show over ``tests`` Holm-adjusted
    tests (layers, tasks): the smallest p-value, and the permutations needed to reach
    ``alpha``."""
    floor, needed = 1 / (n_perm + 1), verdicts.permutations_for(alpha, tests)
    enough = "enough" if n_perm >= needed else "too few"
    return (f"smallest possible p with {n_perm} permutations: {floor:.4f}; Holm over "
            f"{tests} tests needs at least {needed} to reach {alpha} ({enough} here)")


# --------------------------------------------------------------------------- confounds


def token_covariates(samples: Mapping[str, DomainSample], tokenizer) -> pd.DataFrame:
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


def mixture_curve(base: Mapping[str, Sequence[np.ndarray]],
                  tuned: Mapping[str, Sequence[np.ndarray]], layer: int,
                  proportions: Sequence[float], *, n: int, seed: int = 0) -> pd.DataFrame:
    """RSA at ``layer`` on ``n`` tokens of which a share ``p`` is in-domain (the rest
    out-of-domain), for each ``p`` in ``proportions``."""
    rng = np.random.default_rng(seed)
    sizes = {d: len(base[d][layer]) for d in DOMAINS}
    rows = []
    for p in proportions:
        if not 0 <= p <= 1:
            raise ValueError(f"proportions must lie in [0, 1], got {p}")
        k_in = int(round(p * n))
        if k_in > sizes["in-domain"] or n - k_in > sizes["out-of-domain"]:
            raise ValueError(f"n={n} tokens at proportion {p} need {k_in} in-domain and "
                             f"{n - k_in} out-of-domain tokens; there are {sizes}")
        take = {"in-domain": rng.choice(sizes["in-domain"], k_in, replace=False),
                "out-of-domain": rng.choice(sizes["out-of-domain"], n - k_in, replace=False)}
        X = np.vstack([base[d][layer][take[d]] for d in DOMAINS])
        Y = np.vstack([tuned[d][layer][take[d]] for d in DOMAINS])
        rows.append({"in_domain_share": float(p), "rsa": rsa(X, Y)})
    return pd.DataFrame(rows)


def study_frame(results: Mapping[tuple[str, str, str], pd.DataFrame]) -> pd.DataFrame:
    """The per-layer curves of every (model, task, domain) as one long table."""
    return pd.concat([frame.assign(model=m, task=t, domain=d)
                      for (m, t, d), frame in results.items()], ignore_index=True)


def held_out_words(sentence: np.ndarray, held_out: float, seed: int) -> np.ndarray:
    """The probes' split: which word rows belong to the held-out share ``held_out`` of the
    sentences (``sentence``: each row's sentence), drawn with ``seed``; words of one
    sentence share its context, so they are held out together."""
    ids = np.unique(sentence)
    n_test = max(1, int(round(held_out * len(ids))))
    if len(ids) - n_test < 2:
        raise ValueError(f"{len(ids)} sentences are too few for a held-out probe")
    return np.isin(sentence, np.random.default_rng(seed).choice(ids, n_test, replace=False))


@profiled("probe", lambda layers, *a, **k: f"{len(layers) - 1} layers")
def probe_accuracy(layers: Sequence[np.ndarray], labels: pd.DataFrame, sentence: np.ndarray,
                   *, seed: int = 0, C: float = 0.1, held_out: float = 0.2,
                   label_sets: Sequence[str] = LABEL_SETS) -> pd.DataFrame:
    """Per transformer layer and label set (silver parts of speech and dependency relations,
    :func:`~analysis_lib.data.labels.silver_labels`' columns): the held-out accuracy of the
    book's linear probe (:func:`~analysis_lib.training.probes.logistic_probe`, a standardised
    multinomial logistic regression, L2 strength ``1 / C``).

    ``layers`` are every layer's word rows, embedding layer first; the embedding layer is
    left out (it holds the word's identity, which a probe of a word's tag reads directly, and
    fine-tuning with a frozen embedding shares it by construction), so the rows are layers
    ``1..L``. The words of a held-out share of the *sentences* are scored and the others fit
    (words of one sentence share its context). ``majority`` is the accuracy of the most
    frequent training label on the held-out words: the level a probe that reads nothing
    reaches. One row per (layer, labels).

    Each probe is fitted to scikit-learn's default tolerance (1e-4), not stopped early: a
    looser one (1e-3) moved the accuracies by up to 0.006 on MiniLM's layers, which was enough
    to move the claim of ``merchant.no_forgetting``'s interval across its smallest effect."""
    from sklearn.preprocessing import StandardScaler

    sentence = np.asarray(sentence)
    test = held_out_words(sentence, held_out, seed)
    missing = [name for name in label_sets if name not in labels]
    if missing:
        raise ValueError(f"the labels have no column {missing}; silver_labels gives "
                         f"{LABEL_SETS}")
    rows = []
    for layer, X in enumerate(layers[1:], start=1):
        X = np.asarray(X, dtype=np.float64)
        if len(X) != len(labels) or len(X) != len(sentence):
            raise ValueError(f"layer {layer} has {len(X)} rows, the labels {len(labels)} and "
                             f"the sentence index {len(sentence)}: give one per word row")
        # standardised in float64 (a layer's outlier neurons reach the thousands), fitted in
        # float32: the scaled features are of order one
        Z = StandardScaler().fit(X[~test]).transform(X).astype(np.float32)
        for name in label_sets:
            y = labels[name].to_numpy()
            values, counts = np.unique(y[~test], return_counts=True)
            probe = logistic_probe(C, standardise=False).fit(Z[~test], y[~test])
            rows.append({"layer": layer, "labels": name,
                         "accuracy": float(np.mean(probe.predict(Z[test]) == y[test])),
                         "majority": float(np.mean(y[test] == values[np.argmax(counts)]))})
    return pd.DataFrame(rows)


def depth_loss(b: np.ndarray, Z: np.ndarray, depth: np.ndarray, rank: int
               ) -> tuple[float, np.ndarray]:
    """The depth probe's loss and its gradient at ``b`` (the probe ``B``, ``rank`` x
    ``d``, flattened): the mean over rows of ``(||B z||^2 - depth)^2``, as
    :func:`scipy.optimize.minimize` takes them (``jac=True``), computed in ``Z``'s dtype
    and returned in float64."""
    B = b.reshape(rank, Z.shape[1]).astype(Z.dtype)
    P = Z @ B.T
    residual = np.einsum("ij,ij->i", P, P) - depth
    gradient = (4.0 / len(Z)) * (P * residual[:, None]).T @ Z
    return float(np.mean(residual.astype(np.float64) ** 2)), gradient.astype(np.float64).ravel()


def depth_probe_fit(X: np.ndarray, depth: np.ndarray, *, rank: int = 32, seed: int = 0,
                    max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Hewitt and Manning's (2019) structural depth probe on the rows ``X``: a linear map
    ``B`` (``rank`` x ``d``) whose squared norm ``||B x||^2`` predicts each word's tree
    depth, fitted by least squares with L-BFGS (they minimise the absolute error of the
    same function). Returns ``B`` on the features divided by their standard deviation (no
    centring: the probe stays linear, as theirs) and that scale; predict with
    ``||(x / scale) @ B.T||^2``. The scaled features are of order one and the fit runs in
    float32, a third of float64's time; ``max_iter`` stops it early (on MiniLM's third
    layer and 4,000 tweet words, the held-out correlation after 100 iterations, 0.499,
    is that after 300, 0.501)."""
    from scipy.optimize import minimize

    X = np.asarray(X, dtype=np.float64)
    depth = np.asarray(depth, dtype=np.float64)
    scale = X.std(axis=0)
    scale[scale == 0] = 1.0
    Z = (X / scale).astype(np.float32)
    rng = np.random.default_rng(seed)
    start = rng.standard_normal((rank, Z.shape[1])) / np.sqrt(Z.shape[1])
    typical = np.mean(np.einsum("ij,ij->i", Z @ start.T, Z @ start.T))
    start *= np.sqrt(max(np.mean(depth), 1.0) / typical)  # start at the depths' size
    found = minimize(depth_loss, start.ravel(), args=(Z, depth, rank), jac=True,
                     method="L-BFGS-B", options={"maxiter": max_iter})
    return found.x.reshape(rank, Z.shape[1]), scale


@profiled("probe", lambda layers, *a, **k: f"depth, {len(layers) - 1} layers")
def depth_probe(layers: Sequence[np.ndarray], depth: np.ndarray, sentence: np.ndarray, *,
                seed: int = 0, rank: int = 32, held_out: float = 0.2, min_words: int = 5
                ) -> pd.DataFrame:
    """Per transformer layer: how well a structural depth probe
    (:func:`depth_probe_fit`) fitted on the words of most sentences predicts the order of
    the tree depths (:func:`~analysis_lib.data.labels.tree_depths`) of the words of the
    others. ``spearman`` is the Spearman correlation of predicted and silver depths within
    each held-out sentence with at least ``min_words`` rows and more than one depth, mean
    over those sentences (Hewitt and Manning's "NSpr.", who average over sentence lengths 5
    to 50); ``n_sentences`` counts them. The held-out sentences are
    :func:`probe_accuracy`'s for the same ``seed`` and ``held_out``; the embedding layer is
    left out, as there."""
    from scipy.stats import spearmanr

    sentence = np.asarray(sentence)
    depth = np.asarray(depth, dtype=np.float64)
    test = held_out_words(sentence, held_out, seed)
    scored = [rows for rows in pd.Series(np.flatnonzero(test)).groupby(sentence[test])
              .apply(np.asarray) if len(rows) >= min_words and np.ptp(depth[rows]) > 0]
    if not scored:
        raise ValueError(f"no held-out sentence has {min_words} or more word rows of more "
                         "than one depth: give more rows per sentence or a smaller min_words")
    rows = []
    for layer, X in enumerate(layers[1:], start=1):
        X = np.asarray(X, dtype=np.float64)
        if len(X) != len(depth) or len(X) != len(sentence):
            raise ValueError(f"layer {layer} has {len(X)} rows, the depths {len(depth)} and "
                             f"the sentence index {len(sentence)}: give one per word row")
        B, scale = depth_probe_fit(X[~test], depth[~test], rank=rank, seed=seed)
        P = (X / scale) @ B.T
        predicted = np.einsum("ij,ij->i", P, P)
        rho = [spearmanr(predicted[r], depth[r]).statistic for r in scored]
        rows.append({"layer": layer, "spearman": float(np.mean(rho)),
                     "n_sentences": len(scored)})
    return pd.DataFrame(rows)


@profiled("probe", lambda layers, *a, **k: f"distance, {len(layers) - 1} layers")
def distance_probe(layers: Sequence[np.ndarray], distances: pd.DataFrame, sentence: np.ndarray,
                   *, seed: int = 0, rank: int = 32, held_out: float = 0.2,
                   min_words: int = 5, max_pairs: int = 8000) -> pd.DataFrame:
    """Per transformer layer: Hewitt and Manning's (2019) distance probe, a linear map ``B``
    under which the squared distance of two words' vectors, ``||B (x_i - x_j)||^2``,
    predicts their distance in the tree (``distances``:
    :func:`~analysis_lib.data.labels.tree_distances` of the word rows). It is
    :func:`depth_probe_fit` on the differences of at most ``max_pairs`` pairs of words of
    the training sentences (drawn with ``seed``). ``spearman``: within each held-out
    sentence with at least ``min_words`` rows, each word's Spearman correlation between its
    predicted and silver distances to the sentence's other words, mean over its words and
    then over the sentences (their "DSpr."); ``n_sentences`` counts them. The held-out
    sentences are :func:`depth_probe`'s; the embedding layer is left out, as there."""
    from scipy.stats import spearmanr

    sentence = np.asarray(sentence)
    test = held_out_words(sentence, held_out, seed)
    first, second, gold = (distances[c].to_numpy() for c in ("first", "second", "distance"))
    if len(first) and (first.max() >= len(sentence) or
                       (sentence[first] != sentence[second]).any()):
        raise ValueError("every pair of distances must be two word rows of one sentence: "
                         "give labels.tree_distances of the same rows as the layers")
    train = np.flatnonzero(~test[first])
    if len(train) > max_pairs:
        train = np.sort(np.random.default_rng(seed).choice(train, max_pairs, replace=False))
    scored = _sentence_distances(first, second, gold, test, sentence, min_words)
    if not train.size or not scored:
        raise ValueError(f"too few pairs: the probe needs pairs of words in the training "
                         f"sentences and held-out sentences with {min_words} or more word rows")
    rows = []
    for layer, X in enumerate(layers[1:], start=1):
        X = np.asarray(X, dtype=np.float64)
        if len(X) != len(sentence):
            raise ValueError(f"layer {layer} has {len(X)} rows and the sentence index "
                             f"{len(sentence)}: give one per word row")
        B, scale = depth_probe_fit(X[first[train]] - X[second[train]], gold[train],
                                   rank=rank, seed=seed)
        per_sentence = []
        for members, silver in scored:
            P = (X[members] / scale) @ B.T
            norms = np.einsum("ij,ij->i", P, P)
            predicted = norms[:, None] + norms[None, :] - 2 * P @ P.T
            rho = [spearmanr(predicted[w][known], silver[w][known]).statistic
                   for w, known in enumerate(np.isfinite(silver))
                   if np.ptp(silver[w][known]) > 0]
            if rho:
                per_sentence.append(np.mean(rho))
        rows.append({"layer": layer, "spearman": float(np.mean(per_sentence)),
                     "n_sentences": len(per_sentence)})
    return pd.DataFrame(rows)


def _sentence_distances(first: np.ndarray, second: np.ndarray, gold: np.ndarray,
                        test: np.ndarray, sentence: np.ndarray, min_words: int
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per held-out sentence with at least ``min_words`` word rows among the pairs: its rows
    and the square matrix of their silver distances (NaN on the diagonal and between two
    words with no path, in the two trees of a split sentence)."""
    out = []
    held = np.flatnonzero(test[first])
    for pairs in pd.Series(held).groupby(sentence[first[held]]).apply(np.asarray):
        members = np.unique(np.concatenate([first[pairs], second[pairs]]))
        if len(members) < min_words:
            continue
        silver = np.full((len(members), len(members)), np.nan)
        a, b = np.searchsorted(members, first[pairs]), np.searchsorted(members, second[pairs])
        silver[a, b] = silver[b, a] = gold[pairs]
        out.append((members, silver))
    return out


def structural_probes(layers: Sequence[np.ndarray], depth: np.ndarray,
                      distances: pd.DataFrame, sentence: np.ndarray, *, seed: int = 0,
                      rank: int = 32) -> pd.DataFrame:
    """Both of Hewitt and Manning's structural probes of the word rows ``layers``, as
    Merchant et al. §4.1 run them: :func:`depth_probe` and :func:`distance_probe`, one row
    per (probe, layer)."""
    return pd.concat([
        depth_probe(layers, depth, sentence, seed=seed, rank=rank).assign(probe="depth"),
        distance_probe(layers, distances, sentence, seed=seed, rank=rank)
        .assign(probe="distance")], ignore_index=True)


def probe_table(probes: Mapping[tuple[str, str], tuple[pd.DataFrame,
                                                     Mapping[int, pd.DataFrame]]]
                ) -> pd.DataFrame:
    """Every probe of :func:`probe_accuracy` in one long table: ``model``, ``task`` and
    ``encoder`` (``"base"`` or ``"seed <s>"``) beside each row (``probes``: (model, task) ->
    (the base model's probes, seed -> the fine-tuned model's), as
    the claim of ``merchant.no_forgetting`` reads them)."""
    frames = []
    for (model, task), (base, tuned) in probes.items():
        frames.append(base.assign(model=model, task=task, encoder="base"))
        frames += [frame.assign(model=model, task=task, encoder=f"seed {seed}")
                   for seed, frame in tuned.items()]
    return pd.concat(frames, ignore_index=True)


def cross_task(own: Mapping[int, Sequence[np.ndarray]],
               other: Mapping[int, Sequence[np.ndarray]]) -> pd.DataFrame:
    """Two tasks' fine-tuned models from one base on the same words (``own`` and
    ``other``: seed -> every layer's word vectors): linear CKA between them at every layer,
    one row per (seed, layer), for the seeds both hold (the runs of a seed share the head's
    initialisation and the batch order)."""
    from ..similarity import linear_cka

    rows = []
    for seed in sorted(set(own) & set(other)):
        for layer, (X, Y) in enumerate(zip(own[seed], other[seed])):
            rows.append({"seed": seed, "layer": layer, "linear_cka": linear_cka(X, Y)})
    return pd.DataFrame(rows)


def matched_share(matched: pd.DataFrame, floor: float | None = None) -> pd.DataFrame:
    """How much of each out-minus-in gap is left once the domains are matched on length,
    frequency and split words (a share near 1: the covariates do not explain the gap).
    A gap smaller than ``floor`` (default: the claim of ``merchant.domain``'s smallest effect) has
    no share to speak of: a ratio of two near-zero numbers swings with rounding, so it is NaN."""
    floor = claim_of(merchant.domain).smallest_effect if floor is None else floor
    frame = matched.copy()
    big = np.abs(frame.raw.to_numpy(dtype=float)) >= floor
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["share_left"] = np.where(big, frame.matched / frame.raw, np.nan)
    return frame


def base_model(model: str, model_options: Mapping[str, Any] | None = None) -> LoadedModel:
    """The pretrained model (``model_options`` apply to ``random:`` models only)."""
    return load_model(model, model_options)
