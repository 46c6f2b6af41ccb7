"""Are models that differ only by seed the same up to a transformation? (Ren et al. 2023)

The bookkeeping of the seeds chapter, on :mod:`analysis_lib.alignment`:

* :func:`synthetic_table`: Ren et al.'s Table 3 with known answers: Y = g(X) for a linear g
  and for a random invertible coupling flow g; every method's held-out distance;
* :func:`seed_layers`: the sentence vectors (mean over real tokens, dropout off) of every
  layer of several models on the same sentences;
* :func:`pair_distances`: per layer, the held-out distance after alignment for every pair of
  seeds (Fig. 2, 4, 5), each pair once, never a model with itself;
* :func:`layer_by_layer`: the distance between every pair of layers of one model (Fig. 3);
* :func:`method_table`: the methods on real seed pairs, train and held-out (Table 4);
* :func:`injection`: model 1's last layer mapped into model 2's space and read by model 2's
  head (Table 5).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from .. import alignment
from ..alignment.flows import CouplingFlow
from ..data.corpora import Corpus
from ..extract import extract
from ..models import LoadedModel
from ..similarity import attention_representation
from ..training.heads import FirstTokenHead, head_logits
from .finetuning import seed_interval


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
        for block in g.blocks:  # a clearly nonlinear map: non-zero output layers
            torch.nn.init.normal_(block.net[-1].weight, std=0.5)
        with torch.no_grad():
            Y = g(torch.as_tensor(X, dtype=torch.float32)).double().numpy()
    return X, Y


def synthetic_table(methods: Sequence[str], *, n: int = 3000, d: int = 8, seed: int = 0
                    ) -> pd.DataFrame:
    """Table 3 with known answers: held-out (and train) distance of every method for a
    linear and for an invertible nonlinear g."""
    rows = []
    for kind in ("linear", "flow"):
        X, Y = synthetic_pair(n, d, kind, seed=seed)
        for method in methods:
            result = alignment.held_out(X, Y, method, seed=seed)
            rows.append({"g": kind, "method": method, **result})
    return pd.DataFrame(rows)


def seed_layers(models: Mapping[str, LoadedModel], corpus: Corpus, kind: str = "mean"
                ) -> dict[str, list[np.ndarray]]:
    """Every layer's sentence vectors (``"mean"`` over real tokens, or ``"first"``) of each
    model, on the same sentences, extracted in eval mode (dropout off)."""
    return {name: extract(model, corpus, progress=False).layers(kind)
            for name, model in models.items()}


def attention_layers(models: Mapping[str, LoadedModel], corpus: Corpus
                     ) -> dict[str, list[np.ndarray]]:
    """Every attention layer ``1..L`` of each model as (word pairs x heads) rows."""
    out = {}
    for name, model in models.items():
        result = extract(model, corpus, attention=True, progress=False)
        out[name] = [attention_representation(result.attention_layer(layer))
                     for layer in range(1, result.info.n_attention_layers + 1)]
    return out


def pair_distances(layers: Mapping[str, Sequence[np.ndarray]], method: str, *,
                   seed: int = 0, first_layer: int = 0, **options) -> pd.DataFrame:
    """For every layer and every unordered pair of models: the held-out and train distance
    after aligning the first model's layer to the second's. ``first_layer`` is the index of
    the first entry (0 for hidden states, 1 for attention)."""
    names = list(layers)
    if len(names) < 2:
        raise ValueError("pair distances need at least two models (seeds)")
    n_layers = {len(v) for v in layers.values()}
    if len(n_layers) != 1:
        raise ValueError(f"the models have different numbers of layers: {sorted(n_layers)}")
    rows = []
    for a, b in itertools.combinations(names, 2):
        for k in range(len(layers[a])):
            result = alignment.held_out(layers[a][k], layers[b][k], method, seed=seed,
                                        **options)
            rows.append({"layer": k + first_layer, "pair": f"{a} / {b}", "method": method,
                         **result})
    return pd.DataFrame(rows)


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


def layer_by_layer(layers: Sequence[np.ndarray], method: str = "linreg", *, seed: int = 0,
                   **options) -> np.ndarray:
    """Fig. 3: held-out distance after aligning layer i to layer j of one model, for all
    i, j (0 on the diagonal)."""
    n = len(layers)
    M = np.zeros((n, n))
    for i, j in itertools.product(range(n), range(n)):
        if i != j:
            M[i, j] = alignment.held_out(layers[i], layers[j], method, seed=seed,
                                         **options)["test"]
    return M


def method_table(layers: Mapping[str, Sequence[np.ndarray]], methods: Sequence[str], *,
                 seed: int = 0) -> pd.DataFrame:
    """Table 4: every method on every seed pair and layer; mean and t interval over pairs
    and layers of the train and held-out distances."""
    frames = [pair_distances(layers, m, seed=seed) for m in methods]
    long = pd.concat(frames, ignore_index=True)
    rows = []
    for method, group in long.groupby("method", sort=False):
        row = {"method": method}
        for part in ("train", "test"):
            mean, low, high = seed_interval(group[part])
            row[part] = mean
            row[f"{part}_interval"] = f"[{low:.4f}, {high:.4f}]"
        rows.append(row)
    return pd.DataFrame(rows)


def injection(features: Mapping[str, Mapping[str, np.ndarray]], heads: Mapping[str, object],
              labels: Mapping[str, np.ndarray], methods: Sequence[str], *,
              seed: int = 0) -> pd.DataFrame:
    """Table 5: for every ordered pair of models (1, 2), map model 1's last-layer first-token
    vectors into model 2's space (fitted on the training split) and classify the test split
    with model 2's head. Rows: the pair, the method (``own``: model 2 on its own vectors;
    ``random``: a random orthogonal map, the floor), test accuracy."""
    rows = []
    rng = np.random.default_rng(seed)
    for a, b in itertools.permutations(list(features), 2):
        head = heads[b]
        own = np.mean(head_logits(head, features[b]["test"]).argmax(1) == labels["test"])
        rows.append({"from": a, "to": b, "method": "own", "accuracy": float(own)})
        d = features[a]["test"].shape[1]
        Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        mapped = (features[a]["test"] - features[a]["train"].mean(0)) @ Q + \
            features[b]["train"].mean(0)
        rows.append({"from": a, "to": b, "method": "random", "accuracy": float(np.mean(
            head_logits(head, mapped.astype(np.float32)).argmax(1) == labels["test"]))})
        # the CCA family maps into a canonical space, not model 2's: nothing to inject
        for method in [m for m in methods if m not in ("cca", "svcca", "pwcca")]:
            fitted = alignment.fit(features[a]["train"], features[b]["train"], method,
                                   seed=seed)
            mapped = fitted.transform(features[a]["test"]).astype(np.float32)
            rows.append({"from": a, "to": b, "method": method, "accuracy": float(np.mean(
                head_logits(head, mapped).argmax(1) == labels["test"]))})
    return pd.DataFrame(rows)


def heads_of(results: Mapping[str, object]) -> dict[str, FirstTokenHead]:
    """Each fine-tuned model's own head on first-token vectors."""
    return {name: FirstTokenHead(result.model) for name, result in results.items()}


def findings(synthetic: pd.DataFrame, summary: pd.DataFrame, methods: pd.DataFrame,
             injected: pd.DataFrame) -> pd.DataFrame:
    """Ren et al.'s claims beside this run's numbers, each with a verdict (a distance counts
    as smaller when it is below 90% of the other)."""
    rows = []
    largest = synthetic[synthetic.rows == synthetic.rows.max()]
    flow = largest[largest.g == "flow"].set_index("method").test
    if {"inn", "linreg"} <= set(flow.index):
        rows.append(("the INN recovers an invertible nonlinear map far better than linear "
                     "methods (synthetic)", "yes: INN 0.0059 vs > 0.13 (Table 3)",
                     f"held-out distance INN {flow['inn']:.4f} vs linreg {flow['linreg']:.4f}"
                     f" ({int(largest.rows.iloc[0])} rows)",
                     "holds" if flow["inn"] < 0.7 * flow["linreg"] else "does not hold"))
    linear = largest[largest.g == "linear"].set_index("method").test
    if "linreg" in linear.index:
        rows.append(("linear regression recovers a linear map (synthetic)", "(a sanity check)",
                     f"held-out distance {linear['linreg']:.4f}",
                     "holds" if linear["linreg"] < 0.05 else "does not hold"))
    hid = summary[summary.kind == "hidden states"]
    for task, group in hid.groupby("task", sort=False):
        low = group[group.layer == group.layer.min() + 1]
        high = group[group.layer == group.layer.max()]
        if len(low) and len(high):
            a, b = float(low["median"].iloc[0]), float(high["median"].iloc[0])
            rows.append((f"shallow layers are more alike across seeds than deep ones ({task})",
                         "yes (Fig. 2, 5)", f"median distance layer "
                         f"{int(low.layer.iloc[0])} {a:.4f} vs layer "
                         f"{int(high.layer.iloc[0])} {b:.4f}",
                         "holds" if a < 0.9 * b else "does not hold"))
        att = summary[(summary.kind == "attention") & (summary.task == task)]
        if len(att):
            rows.append((f"attention is more alike across seeds than hidden states ({task})",
                         "yes, by two orders of magnitude (Fig. 4)",
                         f"median over layers: attention {att['median'].median():.4f}, hidden "
                         f"states {group['median'].median():.4f}",
                         "holds" if att["median"].median() < 0.9 * group["median"].median()
                         else "does not hold"))
    table = methods.set_index("method").test
    if {"inn", "linreg"} <= set(table.index):
        rows.append(("the INN aligns real seed pairs best (held-out)",
                     "yes (Table 4)", f"INN {table['inn']:.4f} vs linreg "
                     f"{table['linreg']:.4f}; best {table.idxmin()}",
                     "holds" if table.idxmin() == "inn" else "does not hold"))
    mean = injected.groupby("method").accuracy.mean()
    if "own" in mean and "random" in mean:
        best = mean.drop(["own", "random"]).idxmax() if len(mean) > 2 else None
        shown = ", ".join(f"{m} {v:.3f}" for m, v in mean.items())
        rows.append(("an aligned layer works in another seed's head", "yes, INN best (Table 5)",
                     shown, f"best map: {best}" if best else "no map fitted"))
    return pd.DataFrame(rows, columns=["finding", "what the paper reports",
                                       "what this run shows", "verdict"])
