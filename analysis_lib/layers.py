"""Layer identity as data, and the one layer-index convention of the library.

**Convention.** A model with ``L`` transformer layers has ``L + 1`` representation layers,
indexed ``0..L``: layer ``0`` is the embedding layer (the input to the first transformer
layer) and layer ``l`` for ``1 <= l <= L`` is the output of the ``l``-th transformer layer.
Every function that takes a layer uses this index: ``Extraction.words[l]``,
``Extraction.attention_layer(l)`` (``1..L``; the embeddings have no attention), freezing
(``freeze_layers``: ``0`` freezes the embeddings), truncation (``predict(layer=l)`` keeps
layers ``1..l`` and feeds layer ``l`` to the head), skipping (``skip=(first, last)``, both
kept inclusive, ``1 <= first <= last <= L``) and probes (``linear_probe(layer=l)``).

**Identity.** A collection of layers from several models carries a :class:`LayerTable`: one
row per layer with the model's name, family, whether it is pretrained, the layer index, its
depth as a fraction of the model's depth (``l / L``), and the kind of array (``words``,
``sentence``, ``attention``). Labels are made from it for display only (:func:`layer_label`);
nothing parses them back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

KINDS = ("words", "first", "last", "mean", "attention")
COLUMNS = ["model", "family", "pretrained", "layer", "depth", "kind", "label"]


def check_layer(layer: object, n_transformer: int, name: str = "layer", *,
                allow_embeddings: bool = True) -> int:
    """``layer`` as an int in ``0..n_transformer`` (``1..n_transformer`` without the
    embeddings), or a ``ValueError`` that names the argument, the value and the valid range."""
    low = 0 if allow_embeddings else 1
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise TypeError(f"{name} must be an integer layer index, got {layer!r}")
    if not low <= int(layer) <= n_transformer:
        what = "0 = embeddings, " if allow_embeddings else "the embedding layer 0 has none; "
        raise ValueError(
            f"{name}={layer} is out of range: this model has layers {low}..{n_transformer} "
            f"({what}1..{n_transformer} = transformer layers)")
    return int(layer)


def layer_label(model: str, layer: int) -> str:
    """A display label: ``"minilm emb"``, ``"minilm L3"``."""
    return f"{model} {'emb' if layer == 0 else f'L{layer}'}"


class LayerTable:
    """One row per layer of a collection, in the collection's order.

    Build it with :meth:`for_model` per model and :meth:`concat`; read it as a DataFrame
    (``frame``) or through the helpers that studies and plots use.
    """

    def __init__(self, frame: pd.DataFrame):
        missing = set(COLUMNS) - set(frame.columns)
        if missing:
            raise ValueError(f"a layer table needs the columns {COLUMNS}; missing {missing}")
        self.frame = frame.reset_index(drop=True)[COLUMNS + [c for c in frame.columns
                                                            if c not in COLUMNS]]

    @classmethod
    def for_model(cls, model: str, family: str, pretrained: bool, n_transformer: int,
                  kind: str = "words", layers: Sequence[int] | None = None) -> LayerTable:
        """The rows of one model: ``layers`` (default: ``0..n_transformer``, or
        ``1..n_transformer`` for attention)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if layers is None:
            layers = range(1 if kind == "attention" else 0, n_transformer + 1)
        layers = [check_layer(x, n_transformer, allow_embeddings=kind != "attention")
                  for x in layers]
        return cls(pd.DataFrame({
            "model": model, "family": family, "pretrained": bool(pretrained),
            "layer": layers, "depth": [x / max(1, n_transformer) for x in layers],
            "kind": kind, "label": [layer_label(model, x) for x in layers]}))

    @classmethod
    def concat(cls, tables: Sequence[LayerTable]) -> LayerTable:
        """One table of the layers of several tables, in their order."""
        return cls(pd.concat([t.frame for t in tables], ignore_index=True))

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def labels(self) -> list[str]:
        return self.frame["label"].tolist()

    @property
    def models(self) -> list[str]:
        """The models, in order of first appearance."""
        return list(dict.fromkeys(self.frame["model"]))

    @property
    def owners(self) -> np.ndarray:
        """The model of every row."""
        return self.frame["model"].to_numpy()

    def rows_of(self, model: str) -> np.ndarray:
        """Positions (in the collection) of one model's layers."""
        rows = np.flatnonzero(self.owners == model)
        if not rows.size:
            raise ValueError(f"model {model!r} is not in this collection; it holds "
                             f"{self.models}")
        return rows

    def same_model(self) -> np.ndarray:
        """Boolean (n, n): both layers belong to the same model."""
        owners = self.owners
        return owners[:, None] == owners[None, :]

    def attach(self, values: ArrayLike, name: str = "value") -> pd.DataFrame:
        """The table with one more column (a value per layer), for charts and tables."""
        frame = self.frame.copy()
        values = np.asarray(values)
        if len(values) != len(frame):
            raise ValueError(f"{len(values)} values for {len(frame)} layers")
        frame[name] = values
        return frame


def spread_layers(n_transformer: int, k: int | None, first: int = 0) -> list[int]:
    """``k`` layers spread evenly over ``first..n_transformer`` (both ends always in), or all
    of them when ``k`` is None, 0 or at least their number. ``first`` is 0 for hidden states
    (embeddings included) and 1 for attention."""
    n = n_transformer - first + 1
    if k is None or k <= 0 or k >= n:
        return list(range(first, n_transformer + 1))
    if k < 2:
        raise ValueError(f"layers_per_model must be 0 (all) or at least 2, got {k}")
    return sorted({int(round(x)) for x in np.linspace(first, n_transformer, k)})


class LayerCollection:
    """Base of a study's collection: ``table`` (a :class:`LayerTable`) and ``layers``, one
    entry per table row; the helpers read the table, never a label."""

    table: LayerTable
    layers: list

    @property
    def models(self) -> list[str]:
        return self.table.models

    @property
    def labels(self) -> list[str]:
        return self.table.labels

    @property
    def owners(self) -> list[str]:
        return list(self.table.owners)

    def of(self, model: str) -> list:
        """The layers of one model, in order."""
        return [self.layers[k] for k in self.table.rows_of(model)]
