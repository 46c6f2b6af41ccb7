"""Linear probes: a fresh classifier on one layer's vectors.

:func:`logistic_probe` is the book's one probe (every chapter that fits a classifier to a
layer fits this one); :func:`linear_probe` fits it on one layer's sentence vectors of a task.
The base model's layer gives Phang et al.'s TUNEDORIG configuration (the pretrained encoder
truncated, a head trained on that layer), a fine-tuned encoder's layer gives TUNED with a
probe head (the cheaper stand-in for retraining the model's own head).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize  # its BLAS library loads with this module, before any limit

from ..data.labels import LABEL_SETS
from ..data.tasks import Split, Task, split_corpus
from ..layers import check_layer
from ..models import LoadedModel, load
from ..runtime.profile import profiled
from ..runtime.workers import blas, side_by_side

if TYPE_CHECKING:
    import sklearn.linear_model
    import sklearn.pipeline


def logistic_probe(C: float = 1.0, *, standardise: bool = True
                   ) -> sklearn.pipeline.Pipeline | sklearn.linear_model.LogisticRegression:
    """The book's linear probe, unfitted: a multinomial logistic regression (scikit-learn's)
    with L2 strength ``1 / C``, behind scikit-learn's ``StandardScaler`` fitted on the
    training rows (``standardise=False`` leaves the scaling to the caller).

    It is fitted by Newton-CG to scikit-learn's default tolerance (1e-4). On MiniLM's word
    rows with 43 silver dependency labels, L-BFGS stops after about 130 iterations with
    coefficients 1-3e-2 from the exact optimum (L-BFGS run to a tolerance of 1e-10), Newton-CG
    after about 15 with 3-8e-3, in a fifth to a third of the time; the optimum is unique
    (the loss is strictly convex), so the solver changes only how close a fit gets to it.
    The fit draws no random numbers: the same rows give the same probe."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    probe = LogisticRegression(C=C, solver="newton-cg", max_iter=1000)
    return make_pipeline(StandardScaler(), probe) if standardise else probe


def linear_probe(model: str | LoadedModel, task: Task, layer: int, *, pooling: str = "first",
                 max_train: int | None = None, C: float = 1.0,
                 **extract_options: Any) -> dict[str, float]:
    """Fit a fresh :func:`logistic_probe` on one layer's sentence vectors and score it on
    test.

    ``model`` is any model: the pretrained one gives Phang et al.'s TUNEDORIG configuration
    with a probe head, a fine-tuned encoder (``FineTuned.load()``) their TUNED configuration
    with a probe head. ``layer`` follows the library's convention (``0`` = embeddings,
    ``1..L``). ``pooling`` is ``"first"`` (first token, [CLS] for BERT-like models),
    ``"last"`` (last real token, for decoders) or ``"mean"`` (over the real tokens). Features
    are standardised.
    """
    from sklearn.metrics import f1_score

    from ..extract import SENTENCES_ONLY, extract

    if task.regression:
        raise ValueError("linear_probe fits a classifier; the task is a regression")
    if pooling not in ("first", "last", "mean"):
        raise ValueError(f"pooling must be 'first', 'last' or 'mean', got {pooling!r}")
    loaded = model if isinstance(model, LoadedModel) else load(model)
    layer = check_layer(layer, loaded.info.n_attention_layers, "layer")
    train = task.train if max_train is None else task.train.subset(range(min(max_train,
                                                                             len(task.train))))

    def features(split: Split) -> np.ndarray:
        options = {"word_rows": SENTENCES_ONLY, "sentences": [pooling], **extract_options}
        result = extract(loaded, split_corpus(split), progress=False, **options)
        return result.layer(layer, pooling)

    clf = logistic_probe(C)
    clf.fit(features(train), train.labels)
    pred = clf.predict(features(task.test))
    return {"accuracy": float(np.mean(pred == task.test.labels)),
            "macro_f1": float(f1_score(task.test.labels, pred, average="macro",
                                       zero_division=0)),
            "majority_baseline": task.majority_baseline("test"), "layer": layer}


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
def label_probes(layers: Sequence[np.ndarray], labels: pd.DataFrame, sentence: np.ndarray,
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
    reaches. ``lexical`` is the same probe's accuracy on the embedding layer, which holds
    the word's identity and position and no context: the level a probe that reads the word
    alone reaches, which a contextual layer must beat for its probe to read context. One row
    per (layer, labels).

    Each probe is fitted to scikit-learn's default tolerance (1e-4), not stopped early: a
    looser one (1e-3) moved the accuracies by up to 0.006 on MiniLM's layers, which was enough
    to move the claim of ``merchant.no_forgetting``'s interval across its smallest effect.
    The layers' probes are fitted side by side, one per core, each on one BLAS thread
    (:func:`~analysis_lib.runtime.workers.side_by_side`)."""
    from sklearn.preprocessing import StandardScaler

    sentence = np.asarray(sentence)
    test = held_out_words(sentence, held_out, seed)
    missing = [name for name in label_sets if name not in labels]
    if missing:
        raise ValueError(f"the labels have no column {missing}; silver_labels gives "
                         f"{LABEL_SETS}")
    def scored(layer: int, X: np.ndarray) -> dict[str, float]:
        X = np.asarray(X, dtype=np.float64)
        if len(X) != len(labels) or len(X) != len(sentence):
            raise ValueError(f"layer {layer} has {len(X)} rows, the labels {len(labels)} and "
                             f"the sentence index {len(sentence)}: give one per word row")
        # standardised in float64 (a layer's outlier neurons reach the thousands), fitted in
        # float32: the scaled features are of order one
        Z = StandardScaler().fit(X[~test]).transform(X).astype(np.float32)
        return {name: float(np.mean(logistic_probe(C, standardise=False)
                                    .fit(Z[~test], labels[name].to_numpy()[~test])
                                    .predict(Z[test]) == labels[name].to_numpy()[test]))
                for name in label_sets}

    lexical, *per_layer = side_by_side(lambda item: scored(*item), list(enumerate(layers)))
    rows = []
    for layer, accuracies in enumerate(per_layer, start=1):
        for name, accuracy in accuracies.items():
            y = labels[name].to_numpy()
            values, counts = np.unique(y[~test], return_counts=True)
            rows.append({"layer": layer, "labels": name, "accuracy": accuracy,
                         "majority": float(np.mean(y[test] == values[np.argmax(counts)])),
                         "lexical": lexical[name]})
    return pd.DataFrame(rows)


def depth_loss(b: np.ndarray, Z: np.ndarray, depth: np.ndarray, rank: int
               ) -> tuple[float, np.ndarray]:
    """The depth probe's loss and its gradient at ``b`` (the probe ``B``, ``rank`` x
    ``d``, flattened): the mean over rows of ``(||B z||^2 - depth)^2``, as
    ``scipy.optimize.minimize`` takes them (``jac=True``), computed in ``Z``'s dtype
    and returned in float64."""
    B = b.reshape(rank, Z.shape[1]).astype(Z.dtype)
    P = Z @ B.T
    residual = np.einsum("ij,ij->i", P, P) - depth.astype(Z.dtype, copy=False)
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
    is that after 300, 0.501).

    The fit runs on one BLAS thread. SciPy's L-BFGS-B and NumPy's products each bring their
    own OpenBLAS, whose idle threads keep spinning for a while after a call; alternating
    the two on a machine with few cores, each library's threads wait for cores the other's
    hold, and the fit ran five to seven times slower on two threads than on one
    (``benchmarks/bench_probe.py``)."""
    X = np.asarray(X, dtype=np.float64)
    depth = np.asarray(depth, dtype=np.float64)
    scale = X.std(axis=0)
    scale[scale == 0] = 1.0
    Z = (X / scale).astype(np.float32)
    rng = np.random.default_rng(seed)
    start = rng.standard_normal((rank, Z.shape[1])) / np.sqrt(Z.shape[1])
    typical = np.mean(np.einsum("ij,ij->i", Z @ start.T, Z @ start.T))
    start *= np.sqrt(max(np.mean(depth), 1.0) / typical)  # start at the depths' size
    with blas().limit(limits=1, user_api="blas"):
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
    :func:`label_probes`'s for the same ``seed`` and ``held_out``; the embedding layer is
    left out, as there. The layers' fits run side by side, one per core, each on one BLAS
    thread (:func:`~analysis_lib.runtime.workers.side_by_side`): the same numbers as one
    after another."""
    from scipy.stats import spearmanr

    sentence = np.asarray(sentence)
    depth = np.asarray(depth, dtype=np.float64)
    test = held_out_words(sentence, held_out, seed)
    scored = [rows for rows in pd.Series(np.flatnonzero(test)).groupby(sentence[test])
              .apply(np.asarray) if len(rows) >= min_words and np.ptp(depth[rows]) > 0]
    if not scored:
        raise ValueError(f"no held-out sentence has {min_words} or more word rows of more "
                         "than one depth: give more rows per sentence or a smaller min_words")
    for layer, X in enumerate(layers[1:], start=1):
        if len(X) != len(depth) or len(X) != len(sentence):
            raise ValueError(f"layer {layer} has {len(X)} rows, the depths {len(depth)} and "
                             f"the sentence index {len(sentence)}: give one per word row")
    fits = side_by_side(lambda X: depth_probe_fit(np.asarray(X, dtype=np.float64)[~test],
                                                  depth[~test], rank=rank, seed=seed),
                        layers[1:])
    rows = []
    for layer, (X, (B, scale)) in enumerate(zip(layers[1:], fits), start=1):
        P = (np.asarray(X, dtype=np.float64) / scale) @ B.T
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
    sentences are :func:`depth_probe`'s; the embedding layer is left out, as there. The
    layers' fits run side by side, as :func:`depth_probe`'s."""

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
    for layer, X in enumerate(layers[1:], start=1):
        if len(X) != len(sentence):
            raise ValueError(f"layer {layer} has {len(X)} rows and the sentence index "
                             f"{len(sentence)}: give one per word row")

    def fit(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = np.asarray(X, dtype=np.float64)
        return depth_probe_fit(X[first[train]] - X[second[train]], gold[train], rank=rank,
                               seed=seed)

    rows = []
    for layer, (X, (B, scale)) in enumerate(zip(layers[1:], side_by_side(fit, layers[1:])),
                                            start=1):
        X = np.asarray(X, dtype=np.float64)
        per_sentence = []
        for members, silver in scored:
            P = (X[members] / scale) @ B.T
            norms = np.einsum("ij,ij->i", P, P)
            predicted = norms[:, None] + norms[None, :] - 2 * P @ P.T
            rho = row_spearman(predicted, silver)
            varies = np.nanmax(silver, axis=1) > np.nanmin(silver, axis=1)
            if varies.any():
                per_sentence.append(np.mean(rho[varies]))
        rows.append({"layer": layer, "spearman": float(np.mean(per_sentence)),
                     "n_sentences": len(per_sentence)})
    return pd.DataFrame(rows)


def row_spearman(predicted: np.ndarray, silver: np.ndarray) -> np.ndarray:
    """Each row's Spearman correlation between ``predicted`` and ``silver`` over the entries
    where ``silver`` is finite: Pearson's correlation of the row's ranks, ties at their mean
    rank, as ``scipy.stats.spearmanr`` of each row's known entries gives it (the
    reference the tests hold it to), in one pass over all rows. A row whose known silver
    values are all equal gives NaN; every row needs one known entry."""
    from scipy.stats import rankdata

    known = np.isfinite(silver)
    p, s = (rankdata(np.where(known, values, np.nan), axis=1, nan_policy="omit")
            for values in (predicted, silver))
    p -= np.nanmean(p, axis=1, keepdims=True)
    s -= np.nanmean(s, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nansum(p * s, axis=1) / np.sqrt(np.nansum(p * p, axis=1)
                                                  * np.nansum(s * s, axis=1))


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
    """Every probe of :func:`label_probes` in one long table: ``model``, ``task`` and
    ``encoder`` (``"base"`` or ``"seed <s>"``) beside each row (``probes``: (model, task) ->
    (the base model's probes, seed -> the fine-tuned model's), as
    the claim of ``merchant.no_forgetting`` reads them)."""
    frames = []
    for (model, task), (base, tuned) in probes.items():
        frames.append(base.assign(model=model, task=task, encoder="base"))
        frames += [frame.assign(model=model, task=task, encoder=f"seed {seed}")
                   for seed, frame in tuned.items()]
    return pd.concat(frames, ignore_index=True)
