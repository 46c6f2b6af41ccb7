"""What the analyses need to know about a loaded model: :class:`ModelInfo`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from ..families import causal_family

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

def is_causal(config: Any) -> bool:
    """Whether a model of this configuration reads left to right: a causal family
    (:func:`~analysis_lib.families.causal_family`), or a configuration marked
    ``is_decoder`` (the zoo's causal BERTs)."""
    return bool(getattr(config, "is_decoder", False)) or causal_family(
        getattr(config, "model_type", ""))


@dataclass(frozen=True)
class ModelInfo:
    """Facts about a loaded model.

    Attributes
    ----------
    name : str
        The name it was loaded by.
    family : str
        ``config.model_type`` (``"bert"``, ``"gpt2"``, ...).
    n_layers : int
        Number of representation layers *including* the embedding layer (= length of
        ``hidden_states``).
    n_attention_layers : int
        Number of layers with attention (``n_layers - 1``).
    hidden_size, n_heads : int
    causal : bool
        Whether the model reads left to right (each token sees only earlier ones).
    max_length : int
        Longest token sequence the model accepts.
    source : str
        ``"package"``, ``"zoo"``, ``"hub"``, ``"local"`` or ``"random"``.
    fingerprint : str
        Identifies the exact weights and tokenizer (revision, config hash, seed); part of cache
        keys.
    """

    name: str
    family: str
    n_layers: int
    n_attention_layers: int
    hidden_size: int
    n_heads: int
    causal: bool
    max_length: int
    source: str
    fingerprint: str

    @property
    def pretrained(self) -> bool:
        """False for randomly initialised (``random:``) models."""
        return self.source != "random"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class LoadedModel(NamedTuple):
    """What :func:`load` returns; unpack as ``model, tokenizer, info = load(...)``."""

    model: torch.nn.Module
    tokenizer: Any
    info: ModelInfo


#: the config keys that hold the number of transformer layers, across the families here
DEPTH_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
#: the config keys that hold the width of the hidden states
WIDTH_KEYS = ("hidden_size", "n_embd", "d_model", "dim")


def hidden_size(model: torch.nn.Module) -> int:
    """The width of a transformers model's hidden states, read from its configuration."""
    return int(_first_attr(model.config, WIDTH_KEYS))


def model_info(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, name: str, source: str,
               fingerprint: str) -> ModelInfo:
    """The :class:`ModelInfo` of a loaded model and its tokenizer."""
    config: Any = model.config  # a transformers configuration
    family = config.model_type
    n_tf = _first_attr(config, DEPTH_KEYS)
    hidden = hidden_size(model)
    heads = _first_attr(config, ("num_attention_heads", "n_head", "n_heads"))
    positions = _first_attr(config, ("max_position_embeddings", "n_positions"), default=None)
    if family == "roberta" and positions:
        positions -= (config.pad_token_id or 0) + 1
    limits = [x for x in (positions, getattr(tokenizer, "model_max_length", None)) if x]
    limits = [x for x in limits if 0 < x < 1_000_000]
    return ModelInfo(
        name=name, family=family, n_layers=int(n_tf) + 1, n_attention_layers=int(n_tf),
        hidden_size=int(hidden), n_heads=int(heads),
        causal=is_causal(config),
        max_length=int(min(limits)) if limits else 512,
        source=source, fingerprint=fingerprint,
    )


def _first_attr(config, names, default=...):
    for n in names:
        value = getattr(config, n, None)
        if value is not None:
            return value
    if default is ...:
        raise ValueError(f"config of type {config.model_type} has none of {names}")
    return default


def weights_digest(model: torch.nn.Module) -> str:
    """A hash of every parameter and buffer's exact bytes (names, shapes, dtypes, values), so
    that weights changed in memory after loading never reuse another model's cached arrays.
    The same weights give the same digest on any machine.

    Every extraction and fine-tuning run keys its cache on it, so it reads every weight each
    time: SHA-256 (which x86 and ARM CPUs compute in hardware) reads the tensors' own memory,
    not a copy of it, at about three times the speed of BLAKE2b over copied bytes
    (``benchmarks/bench_extract.py``)."""
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().contiguous().cpu()
        digest.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        if t.numel():  # one flat row of bytes, a zero-dimensional buffer included
            digest.update(memoryview(t.reshape(-1).view(torch.uint8).numpy()))
    return digest.hexdigest()[:32]
