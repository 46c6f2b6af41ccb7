"""Model surgery: which parameters are frozen, and a model with layers removed.

Layers are indexed by the library's one convention (:mod:`analysis_lib.layers`): ``0`` is the
embedding layer, ``1..L`` the transformer layers. ALBERT applies one shared layer ``L`` times:
freezing a single layer is impossible there (its weights are every layer's weights), while
truncating and skipping stay well defined (fewer applications of the shared layer).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import torch

from ..layers import check_layer
from ..models.info import DEPTH_KEYS


def _base(model: torch.nn.Module) -> Any:
    """The encoder of a task model (a transformers model: its ``config`` and layers are read
    by name), or the model itself."""
    return getattr(model, "base_model", model)


def n_transformer_layers(model: torch.nn.Module) -> int:
    config = _base(model).config
    for attr in DEPTH_KEYS:
        value = getattr(config, attr, None)
        if value is not None:
            return int(value)
    raise ValueError(f"config of type {config.model_type} does not say its number of layers")


def is_shared(model: torch.nn.Module) -> bool:
    """Whether the transformer layers share one set of weights (ALBERT)."""
    return getattr(_base(model).config, "model_type", "") == "albert"


def layer_list(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The ModuleList of transformer layers of a (task or base) model. For ALBERT, the list of
    its layer *groups* (one group applied ``L`` times; :func:`removed_layers` changes how
    many times)."""
    base = _base(model)
    n = n_transformer_layers(model)
    if is_shared(model):
        return base.encoder.albert_layer_groups
    candidates = [m for m in base.modules() if isinstance(m, torch.nn.ModuleList)
                  and len(m) == n]
    if not candidates:
        raise ValueError(f"cannot find the {n} transformer layers of {type(base).__name__}")
    return candidates[0]


def _embedding_parameters(model: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    base = _base(model)
    keys = ("embed", "wte", "wpe", "mask_emb")
    return [(n, p) for n, p in base.named_parameters() if any(k in n for k in keys)]


def frozen_parameters(model: torch.nn.Module, layers: set[int]) -> set[str]:
    """Names (relative to ``model``) of the parameters of the given layers: ``0`` is the
    embeddings, ``1..L`` the transformer layers."""
    n = n_transformer_layers(model)
    layers = {check_layer(x, n, "frozen layer") for x in layers}
    owner = {id(p): name for name, p in model.named_parameters()}
    names = set()
    blocks = layer_list(model)
    transformer = layers - {0}
    if is_shared(model) and transformer:
        if transformer != set(range(1, n + 1)):
            raise ValueError(
                f"ALBERT shares one set of weights across all its layers, so layers "
                f"{sorted(transformer)} cannot be frozen without freezing all of them; freeze "
                f"the embeddings only (layer 0), or every layer 1..{n} together")
        names |= {owner[id(p)] for p in blocks.parameters()}
        transformer = set()
    for layer in transformer:
        names |= {owner[id(p)] for p in blocks[layer - 1].parameters()}
    if 0 in layers:
        names |= {owner[id(p)] for _, p in _embedding_parameters(model)}
    return names


def kept_layers(n: int, layer: int | None = None, skip: tuple[int, int] | None = None
                ) -> list[int]:
    """The transformer layers (``1..n``) left by truncating at ``layer`` and skipping the
    inclusive span ``skip = (first, last)``; at least one must remain."""
    kept = list(range(1, n + 1))
    if layer is not None:
        layer = check_layer(layer, n, "layer", allow_embeddings=False)
        kept = kept[:layer]
    if skip is not None and len(skip):
        if len(skip) != 2:
            raise ValueError(f"skip must be (first, last) or empty, got {skip!r}")
        first = check_layer(skip[0], n, "skip[0] (first skipped layer)",
                            allow_embeddings=False)
        last = check_layer(skip[1], n, "skip[1] (last skipped layer)", allow_embeddings=False)
        if last < first:
            raise ValueError(f"skip=(first, last) needs first <= last, got {skip}")
        kept = [x for x in kept if not first <= x <= last]
    if not kept:
        raise ValueError(f"layer={layer} and skip={skip} leave no transformer layer; keep at "
                         "least one")
    return kept


@contextlib.contextmanager
def removed_layers(model: torch.nn.Module, layer: int | None = None,
                   skip: tuple[int, int] | None = None) -> Iterator[list[int]]:
    """Within the block, ``model`` runs only the transformer layers :func:`kept_layers` leaves
    (the task head then reads the last kept layer's output); restored afterwards."""
    n = n_transformer_layers(model)
    kept = kept_layers(n, layer, skip)
    if kept == list(range(1, n + 1)):
        yield kept
        return
    if is_shared(model):
        config = _base(model).config
        old = config.num_hidden_layers
        config.num_hidden_layers = len(kept)  # ALBERT applies its shared layer this many times
        try:
            yield kept
        finally:
            config.num_hidden_layers = old
        return
    layers = layer_list(model)
    parent, attr = _owner_of(model, layers)
    setattr(parent, attr, torch.nn.ModuleList([layers[i - 1] for i in kept]))
    try:
        yield kept
    finally:
        setattr(parent, attr, layers)


def _owner_of(model, target):
    for module in model.modules():
        for name, child in module.named_children():
            if child is target:
                return module, name
    raise ValueError("layer list not found in the model")


def truncate(model: torch.nn.Module, layer: int) -> torch.nn.Module:
    """Cut ``model`` (in place) to its transformer layers ``1..layer``, config included, so
    that it saves and loads as a smaller model; returns it."""
    n = n_transformer_layers(model)
    layer = check_layer(layer, n, "layer", allow_embeddings=False)
    config = _base(model).config
    if not is_shared(model):
        layers = layer_list(model)
        parent, attr = _owner_of(model, layers)
        setattr(parent, attr, torch.nn.ModuleList(list(layers)[:layer]))
    for name in DEPTH_KEYS:
        if getattr(config, name, None) is not None:
            setattr(config, name, layer)
            break
    return model


def truncated_copy(model: str, layer: int, *, cache_dir: str | os.PathLike | None = None,
                   **load_options: Any) -> str:
    """A saved copy of ``model`` cut to its transformer layers ``1..layer`` (Merchant et
    al.'s truncated models, fine-tuned afterwards), made once in the cache; returns the
    folder, which :func:`analysis_lib.models.load` and fine-tuning take like any model."""
    import copy

    from ..models import load, weights_digest
    from ..runtime.cache import code_digest, default_root, make_key, publish_folder

    base = load(model, cache_dir=cache_dir, **load_options)
    layer = check_layer(layer, base.info.n_attention_layers, "layer", allow_embeddings=False)
    key = make_key(kind="truncated", base=base.info.fingerprint,
                   weights=weights_digest(base.model), layer=layer, code=code_digest(__name__))
    path = default_root(cache_dir) / "truncated" / key

    def write(tmp):
        cut = truncate(copy.deepcopy(base.model), layer)
        cut.save_pretrained(tmp, safe_serialization=True)
        base.tokenizer.save_pretrained(tmp)

    def whole() -> bool:
        return (path / "config.json").is_file() and any(path.glob("*.safetensors"))

    if not whole():
        import shutil

        shutil.rmtree(path, ignore_errors=True)
        publish_folder(path, write, whole)
    return str(path)
