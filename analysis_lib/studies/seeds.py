"""What the seeds chapter still keeps for itself (Ren et al. 2023), on the library's general
functions: :mod:`analysis_lib.alignment.pairs` (distances after alignment between seeds,
layer by layer, every method, the synthetic check), :mod:`analysis_lib.collect` (several
models' layers on the same sentences) and :func:`analysis_lib.training.heads.injection`.

* :func:`same_sentences`: Ren et al. Fig. 4, hidden states and attention of the same
  sentences, every pair of models;
* :func:`distance_summary`, :func:`method_table`: the tables of the distances with their
  intervals over pairs;
* :func:`depth_by_step`, :func:`depth_by_setting`, :func:`depth_change`: Ren et al.'s depth
  claim judged at each setting of the seed models (training step, width).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..alignment.pairs import pair_distances
from ..claims import causes
from ..claims.claim import claim_of
from ..claims.papers import ren
from ..claims.tables import seed_interval
from ..claims.verdicts import decide
from ..collect import attention_rows, word_layers
from ..data.corpora import Corpus
from ..data.tasks import Task
from ..models import LoadedModel
from ..training.finetune import FinetuneConfig, FineTuned, finetune
from ..training.heads import FirstTokenHead


def same_sentences(models: Mapping[str, LoadedModel], corpus: Corpus, method: str, *,
                   seed: int = 0) -> pd.DataFrame:
    """Ren et al. Fig. 4 on one set of sentences: for every pair of ``models``, the held-out
    distance (:func:`~analysis_lib.alignment.pairs.pair_distances` with ``method``) of every
    layer's word vectors (every word of ``corpus``, the last subword's vector) and of every
    attention layer (word pairs x heads, :func:`~analysis_lib.collect.attention_rows`) of
    the same sentences; ``kind`` says which."""
    words = {name: word_layers(model, corpus, np.arange(corpus.n_words)).words
             for name, model in models.items()}
    hidden = pair_distances(words, method, seed=seed).assign(kind="hidden states")
    attention = pair_distances(attention_rows(models, corpus), method, seed=seed,
                               first_layer=1).assign(kind="attention")
    return pd.concat([hidden, attention], ignore_index=True)


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


def method_table(long: pd.DataFrame) -> pd.DataFrame:
    """Table 4 from :func:`~analysis_lib.alignment.pairs.method_distances`: per method, mean
    and t interval over pairs and layers of the train and held-out distances; a method that
    could not be fitted on this many rows has no numbers and says why in ``note``."""
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


def heads_of(results: Mapping[str, FineTuned]) -> dict[str, FirstTokenHead]:
    """Each fine-tuned model's own head on first-token vectors."""
    return {name: FirstTokenHead(result.model) for name, result in results.items()}


def depth_by_step(pairs_by_step: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Ren et al.'s depth statistic (:func:`~analysis_lib.alignment.pairs.pair_distances` of
    the pretraining seeds: the distance at the first transformer layer minus at the top,
    over seed pairs) at each training step, each judged by the book's rule on its own: does
    the depth pattern come or go with training?"""
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
