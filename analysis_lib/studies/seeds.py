"""Are models that differ only by seed the same up to a transformation? (Ren et al. 2023)

The bookkeeping of the seeds chapter, on :mod:`analysis_lib.alignment`:

* :func:`synthetic_table`: Ren et al.'s Table 3 with known answers: Y = g(X) for a linear g
  and for a random invertible coupling flow g; every method's held-out distance;
* :func:`seed_layers`: the sentence vectors (mean over real tokens, dropout off) of every
  layer of several models on the same sentences;
* :func:`pair_distances`: per layer, the held-out distance after alignment for every pair of
  seeds (Fig. 2, 4, 5), each pair once, never a model with itself, both directions averaged
  and Procrustes scaled (:func:`figure_options`);
* :func:`layer_by_layer`: the distance between every pair of layers of one model (Fig. 3),
  and :func:`~analysis_lib.similarity.structure.layer_gradient`, how much it grows away
  from the diagonal;
* :func:`method_table`: the methods on real seed pairs, train and held-out (Table 4);
* :func:`injection`: model 1's last layer mapped into model 2's space and read by model 2's
  head (Table 5).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import alignment
from ..alignment.flows import CouplingFlow
from ..claims import causes
from ..claims.claim import claim_of
from ..claims.papers import ren
from ..claims.tables import seed_interval
from ..claims.verdicts import decide
from ..collect import sentence_extraction, word_layers
from ..data.corpora import Corpus
from ..data.tasks import Task
from ..extract import NO_SENTENCES, SENTENCES_ONLY, extract
from ..models import LoadedModel
from ..runtime.profile import profiled
from ..similarity import attention_representation
from ..training.finetune import FinetuneConfig, FineTuned, finetune
from ..training.heads import FirstTokenHead, head_logits


def synthetic_pair(n: int, d: int, kind: str, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """X (n, d), Gaussian with a decaying spectrum, and Y = g(X) for a random ``kind`` of g:
    ``"linear"`` (a random well-conditioned matrix) or ``"flow"`` (a random coupling flow of
    four layers, an invertible nonlinear map)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.arange(1, d + 1) ** -0.3
    if kind == "linear":
        A = rng.standard_normal((d, d)) / np.sqrt(d) + np.eye(d)
        return X, X @ A
    if kind != "flow":
        raise ValueError(f"kind must be 'linear' or 'flow', got {kind!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        g = CouplingFlow(d, layers=4, hidden=32, seed=seed + 1)
        for block in g.couplings():  # a clearly nonlinear map: non-zero output layers
            last: Any = block.net[-1]
            torch.nn.init.normal_(last.weight, std=0.5)
        with torch.no_grad():
            Y = g(torch.as_tensor(X, dtype=torch.float32)).double().numpy()
    return X, Y


@profiled("alignment", lambda methods, **k: f"synthetic, {k.get('n', 3000)} rows")
def synthetic_table(methods: Sequence[str], *, n: int = 3000, d: int = 8, seed: int = 0
                    ) -> pd.DataFrame:
    """Table 3 with known answers: held-out (and train) distance of every method for a
    linear and for an invertible nonlinear g."""
    rows = []
    for kind in ("linear", "flow"):
        X, Y = synthetic_pair(n, d, kind, seed=seed)
        for method in methods:
            result = alignment.held_out(X, Y, method, seed=seed)
            rows.append({"g": kind, "method": method, "seed": seed, **result})
    return pd.DataFrame(rows)


def seed_layers(models: Mapping[str, LoadedModel], corpus: Corpus, kind: str = "mean"
                ) -> dict[str, list[np.ndarray]]:
    """Every layer's sentence vectors (``"mean"`` over real tokens, or ``"first"``) of each
    model, on the same sentences, extracted in eval mode (dropout off)."""
    return {name: sentence_extraction(model, corpus, kind).layers(kind)
            for name, model in models.items()}


def attention_layers(models: Mapping[str, LoadedModel], corpus: Corpus
                     ) -> dict[str, list[np.ndarray]]:
    """Every attention layer ``1..L`` of each model as (word pairs x heads) rows."""
    out = {}
    for name, model in models.items():
        result = extract(model, corpus, attention=True, word_rows=SENTENCES_ONLY,
                         sentences=NO_SENTENCES, progress=False)
        out[name] = [attention_representation(result.attention_layer(layer))
                     for layer in range(1, result.info.n_attention_layers + 1)]
    return out


def same_sentences(models: Mapping[str, LoadedModel], corpus: Corpus, method: str, *,
                   seed: int = 0) -> pd.DataFrame:
    """Ren et al. Fig. 4 on one set of sentences: for every pair of ``models``, the held-out
    distance (:func:`pair_distances` with ``method``) of every layer's word vectors (every
    word of ``corpus``, the last subword's vector) and of every attention layer (word pairs
    x heads, :func:`attention_layers`) of the same sentences; ``kind`` says which."""
    words = {name: word_layers(model, corpus, np.arange(corpus.n_words)).words
             for name, model in models.items()}
    hidden = pair_distances(words, method, seed=seed).assign(kind="hidden states")
    attention = pair_distances(attention_layers(models, corpus), method, seed=seed,
                               first_layer=1).assign(kind="attention")
    return pd.concat([hidden, attention], ignore_index=True)


def figure_options(method: str) -> dict[str, bool]:
    """The options of the distances Ren et al.'s figures are read on: each pair aligned
    both ways and the two distances averaged (``both_ways``: no seed is the privileged
    target), and for ``procrustes`` the best scale after the rotation (``scaled``: the
    distance ignores either seed's overall size and stays at most 1 on the fitted rows,
    1 being no better than predicting the target's mean). The plain one-way map of
    Ren et al.'s L2 distance moves with the layers' scale: a seed with larger activations
    lands further away, beyond what two unrelated spaces give."""
    return {"both_ways": True, **({"scaled": True} if method == "procrustes" else {})}


@profiled("alignment", lambda layers, method, **k: f"seed pairs, {method}")
def pair_distances(layers: Mapping[str, Sequence[np.ndarray]], method: str, *,
                   seed: int = 0, first_layer: int = 0, **options) -> pd.DataFrame:
    """For every layer and every unordered pair of models: the held-out and train distance
    after aligning the two models' layers (:func:`figure_options`, which ``options``
    override: ``both_ways=False`` aligns the first model's layer to the second's only).
    ``first_layer`` is the index of the first entry (0 for hidden states, 1 for
    attention)."""
    options = {**figure_options(method), **options}
    names = list(layers)
    if len(names) < 2:
        raise ValueError("pair distances need at least two models (seeds)")
    n_layers = {len(v) for v in layers.values()}
    if len(n_layers) != 1:
        raise ValueError(f"the models have different numbers of layers: {sorted(n_layers)}")
    first = layers[names[0]][0]
    unfit = _unfit(method, alignment.fit_rows(len(first)), first.shape[1], first.shape[1],
                   options.get("ridge", 0.0))
    rows = []
    for a, b in itertools.combinations(names, 2):
        for k in range(len(layers[a])):
            row = {"layer": k + first_layer, "pair": f"{a} / {b}", "method": method}
            if unfit:
                rows.append({**row, "train": np.nan, "test": np.nan, "note": unfit})
                continue
            result = alignment.held_out(layers[a][k], layers[b][k], method, seed=seed,
                                        **options)
            rows.append({**row, **result, "note": ""})
    return pd.DataFrame(rows)


def _unfit(method: str, rows: int, x_columns: int, y_columns: int, ridge: float = 0.0) -> str:
    """Why ``method`` cannot be fitted on ``rows`` rows at these widths ("" when it can):
    a table reports such a method as not fitted instead of stopping the page."""
    needed = alignment.rows_needed(method, x_columns, y_columns, ridge)
    if rows >= needed:
        return ""
    return (f"not fitted: {method} at {max(x_columns, y_columns)} columns needs {needed} rows "
            f"to fit, this split has {rows}; use more sentences or a ridge")


def distance_summary(frame: pd.DataFrame, value: str = "test") -> pd.DataFrame:
    """Per layer (and method): median, quartiles, and mean with a t interval over pairs."""
    rows = []
    for (method, layer), group in frame.groupby(["method", "layer"], sort=False):
        x = group[value].to_numpy()
        mean, low, high = seed_interval(x)
        rows.append({"method": method, "layer": layer, "median": float(np.median(x)),
                     "q1": float(np.quantile(x, 0.25)), "q3": float(np.quantile(x, 0.75)),
                     "mean": mean, "low": low, "high": high, "pairs": len(x)})
    return pd.DataFrame(rows)


@profiled("alignment", lambda layers, method="linreg", **k: f"layer by layer, {method}")
def layer_by_layer(layers: Sequence[np.ndarray], method: str = "linreg", *, seed: int = 0,
                   **options) -> np.ndarray:
    """Fig. 3: held-out distance after aligning layer i to layer j of one model, for all
    i, j (0 on the diagonal), with :func:`figure_options` unless ``options`` override
    them (both ways, the matrix is symmetric)."""
    options = {**figure_options(method), **options}
    n = len(layers)
    M = np.zeros((n, n))
    for i, j in itertools.product(range(n), range(n)):
        if i < j or (i > j and not options["both_ways"]):
            M[i, j] = alignment.held_out(layers[i], layers[j], method, seed=seed,
                                         **options)["test"]
        if i < j and options["both_ways"]:
            M[j, i] = M[i, j]
    return M


def method_distances(layers: Mapping[str, Sequence[np.ndarray]], methods: Sequence[str], *,
                     seed: int = 0) -> pd.DataFrame:
    """Every method on every seed pair and layer (:func:`pair_distances`), one long table:
    each method as Ren et al.'s Table 4 fits it, one way and unscaled."""
    return pd.concat([pair_distances(layers, m, seed=seed,
                                     **dict.fromkeys(figure_options(m), False))
                      for m in methods],
                     ignore_index=True)


def method_table(long: pd.DataFrame) -> pd.DataFrame:
    """Table 4 from :func:`method_distances`: per method, mean and t interval over pairs and
    layers of the train and held-out distances; a method that could not be fitted on this
    many rows has no numbers and says why in ``note``."""
    rows = []
    for method, group in long.groupby("method", sort=False):
        row = {"method": method}
        for part in ("train", "test"):
            mean, low, high = seed_interval(group[part])
            row[part] = mean
            row[f"{part}_interval"] = f"[{low:.4f}, {high:.4f}]" if np.isfinite(mean) else ""
        row["note"] = next((n for n in group.get("note", []) if n), "")
        rows.append(row)
    return pd.DataFrame(rows)


#: rows of :func:`injection` that are baselines, not fitted maps
INJECTION_BASELINES = ("own", "random", "random label", "identity")


@profiled("alignment", lambda *a, **k: "injection")
def injection(features: Mapping[str, Mapping[str, np.ndarray]],
              heads: Mapping[str, torch.nn.Module],
              labels: Mapping[str, np.ndarray], methods: Sequence[str], *,
              seed: int = 0) -> pd.DataFrame:
    """Table 5: for every ordered pair of models (1, 2), map model 1's last-layer first-token
    vectors into model 2's space (fitted on the training split) and classify the test split
    with model 2's head. Rows: the pair, the method (``own``: model 2 on its own vectors;
    ``random``: a random orthogonal map, Ren et al.'s "random embedding"; ``random label``:
    uniform guesses, their "random label"; ``identity`` among ``methods``: model 1's vectors
    as they are), test accuracy, and a ``note`` (why a method that cannot be fitted on the
    training split's rows has no accuracy)."""
    rows = []
    rng = np.random.default_rng(seed)
    for a, b in itertools.permutations(list(features), 2):
        head = heads[b]
        own = head_logits(head, features[b]["test"])
        rows.append({"from": a, "to": b, "method": "own", "note": "",
                     "accuracy": float(np.mean(own.argmax(1) == labels["test"]))})
        d = features[a]["test"].shape[1]
        Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        mapped = (features[a]["test"] - features[a]["train"].mean(0)) @ Q + \
            features[b]["train"].mean(0)
        rows.append({"from": a, "to": b, "method": "random", "note": "", "accuracy": float(
            np.mean(head_logits(head, mapped.astype(np.float32)).argmax(1) == labels["test"]))})
        guesses = rng.integers(0, own.shape[1], len(labels["test"]))
        rows.append({"from": a, "to": b, "method": "random label", "note": "",
                     "accuracy": float(np.mean(guesses == labels["test"]))})
        # the CCA family maps into a canonical space, not model 2's: nothing to inject
        for method in [m for m in methods if m not in ("cca", "svcca", "pwcca")]:
            train_a, train_b = features[a]["train"], features[b]["train"]
            unfit = _unfit(method, len(train_a), train_a.shape[1], train_b.shape[1])
            if unfit:
                rows.append({"from": a, "to": b, "method": method, "accuracy": np.nan,
                             "note": unfit})
                continue
            mapped = alignment.fit(train_a, train_b, method, seed=seed).transform(
                features[a]["test"]).astype(np.float32)
            rows.append({"from": a, "to": b, "method": method, "note": "", "accuracy": float(
                np.mean(head_logits(head, mapped).argmax(1) == labels["test"]))})
    return pd.DataFrame(rows)


def heads_of(results: Mapping[str, FineTuned]) -> dict[str, FirstTokenHead]:
    """Each fine-tuned model's own head on first-token vectors."""
    return {name: FirstTokenHead(result.model) for name, result in results.items()}


def depth_by_step(pairs_by_step: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Ren et al.'s depth statistic (:func:`pair_distances` of the pretraining seeds: the
    distance at the first transformer layer minus at the top, over seed pairs) at each
    training step, each judged by the book's rule on its own: does the depth pattern come
    or go with training?"""
    return depth_by_setting({int(k): v for k, v in sorted(pairs_by_step.items())}, "step")


def depth_by_setting(pairs_by: Mapping[Any, pd.DataFrame], column: str) -> pd.DataFrame:
    """:func:`depth_by_step` for any setting of the seed models (their training step, their
    width, ...), one row per setting in the mapping's order, named ``column``."""
    rows = []
    for setting, pairs in pairs_by.items():
        verdict = decide(claim_of(ren.depth), ren.depth(pairs, f"{column} {setting}"))
        unit = verdict.units.iloc[0] if len(verdict.units) else {}
        rows.append({column: setting,
                     **{name: float(unit.get(field, np.nan)) for name, field in
                        (("L1 - top", "estimate"), ("low", "low"), ("high", "high"))},
                     "pairs": int(pairs.pair.nunique()) if len(pairs) else 0,
                     "verdict": verdict.outcome})
    return pd.DataFrame(rows)


def depth_change(by_setting: pd.DataFrame) -> pd.DataFrame:
    """The claim of ``ren.depth`` at the first and at the last setting of :func:`depth_by_setting`
    (the earliest checkpoint against the trained models; the base width against the wider models):
    :func:`~analysis_lib.claims.causes.changes`, whose verdicts say whether that setting is the
    cause of a depth pattern that does not show."""
    column = by_setting.columns[0]
    first, last = by_setting.iloc[[0]], by_setting.iloc[[-1]]
    unit = f"{column} {first[column].iloc[0]} to {last[column].iloc[0]}"
    return causes.changes(first.assign(unit=unit), last.assign(unit=unit), ["unit"],
                            "L1 - top")


def finetuned_seed_models(names: Sequence[str], task: Task,
                          config: FinetuneConfig | str = "cpu") -> dict[str, FineTuned]:
    """Each of ``names`` (models that differ only by their pretraining seed) fine-tuned once
    on ``task`` with the same ``config``, data and fine-tuning seed, so that the fine-tuned
    models too differ only by their pretraining seed (Ren et al. Fig. 5a). Cached as every
    fine-tuning run is."""
    return {name: finetune(name, task, config, progress=False) for name in names}
