"""A zoo model as the cache holds it: its recipe, the recipe's checks, its cache key, and
reading a trained model back.

Training lives one step up, in :mod:`analysis_lib.training.pretrain`, which writes what this
module reads: loading a zoo model (:func:`analysis_lib.models.load`) never trains one. The
cache key carries a digest of the training code (read from its source, not imported), so an
entry made by other training code is not served.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch

from ..runtime.cache import code_digest, default_root, folder_checksums, make_key
from ..runtime.device import DeviceLike, key_parts, resolve
from .random_init import TOKENIZER_SCHEME

#: the module that trains zoo models; its code (and what it imports) is part of every key
TRAINING_CODE = "analysis_lib.training.pretrain"

OBJECTIVES = ("clm", "mlm")
DATA = ("both", "tweets", "bbc")
#: every HELD_OUT_EVERY-th sentence of each source is held out of training
HELD_OUT_EVERY = 50
#: a model has learned when held-out perplexity <= unigram perplexity * LEARNED_RATIO (the
#: zoo's target: its masked models reach 0.51-0.53, its causal ones about 0.15)
LEARNED_RATIO = 0.6


@dataclass(frozen=True)
class PretrainConfig:
    """Everything that changes a pretrained zoo model.

    Attributes
    ----------
    objective : ``"clm"`` or ``"mlm"`` (module docs).
    layers, hidden, heads : size of the BERT-architecture model (feed-forward ``4 * hidden``).
    data : ``"both"`` (tweets and BBC sentences), ``"tweets"`` or ``"bbc"``.
    seed : seeds the initialisation, dropout, batch sampling and masking.
    steps, batch_size, block : optimizer steps of ``batch_size`` blocks of ``block`` tokens
        (sentences, each ``[CLS] ... [SEP]``, concatenated and cut into blocks).
    learning_rate, warmup_steps, weight_decay : AdamW with linear warmup and decay.
    mask_rate : share of tokens predicted by the masked objective.
    dropout : dropout of the hidden states and attention weights during training.
    vocab_size : size of the shared WordPiece vocabulary.
    checkpoints : earlier steps whose weights are kept too (training dynamics).
    """

    objective: str = "clm"
    layers: int = 4
    hidden: int = 256
    heads: int = 4
    data: str = "both"
    seed: int = 0
    steps: int = 300
    batch_size: int = 32
    block: int = 64
    learning_rate: float = 1e-3
    warmup_steps: int = 30
    weight_decay: float = 0.01
    mask_rate: float = 0.3
    dropout: float = 0.1
    vocab_size: int = 8000
    checkpoints: tuple[int, ...] = ()


def check_config(config: PretrainConfig) -> PretrainConfig:
    """The config, or a ``ValueError`` naming each bad setting and its valid values."""
    if not isinstance(config, PretrainConfig):
        raise TypeError(f"expected a PretrainConfig, got {type(config).__name__}")
    problems = _choice_problems(config) + _size_problems(config) + _rate_problems(config)
    if problems:
        raise ValueError("invalid pretraining settings: " + "; ".join(problems))
    return config


def _choice_problems(config: PretrainConfig) -> list[str]:
    problems = []
    if config.objective not in OBJECTIVES:
        problems.append(f"objective={config.objective!r} (valid: {', '.join(OBJECTIVES)})")
    if config.data not in DATA:
        problems.append(f"data={config.data!r} (valid: {', '.join(DATA)})")
    return problems


def _size_problems(config: PretrainConfig) -> list[str]:
    problems = []
    for name in ("layers", "hidden", "heads", "steps", "batch_size", "block", "vocab_size"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{name}={value!r} (a positive integer)")
    if isinstance(config.hidden, int) and isinstance(config.heads, int) and config.heads > 0 \
            and config.hidden % config.heads:
        problems.append(f"hidden={config.hidden} is not divisible by heads={config.heads}")
    bad = [c for c in config.checkpoints if not isinstance(c, int) or not 0 < c < config.steps]
    if bad:
        problems.append(f"checkpoints {bad} (steps between 1 and steps - 1 = "
                        f"{config.steps - 1})")
    return problems


def _rate_problems(config: PretrainConfig) -> list[str]:
    problems = []
    if not 0 < config.mask_rate < 1:
        problems.append(f"mask_rate={config.mask_rate!r} (between 0 and 1)")
    if not 0 <= config.dropout < 1:
        problems.append(f"dropout={config.dropout!r} (at least 0, below 1)")
    if not config.learning_rate > 0:
        problems.append(f"learning_rate={config.learning_rate!r} (positive)")
    return problems


#: torch threads a model trains with on the CPU. The result of a product depends on how
#: it is split between threads, so a free thread count would give other weights on a machine
#: with more cores under the same cache key; several models train side by side instead
#: (:func:`~analysis_lib.training.pretrain.pretrain_many`).
CPU_THREADS = 1


@dataclass
class Pretrained:
    """A pretrained zoo model on disk: its folder and its record."""

    path: Path
    record: dict[str, Any]
    from_cache: bool = False

    @property
    def learned(self) -> bool:
        return bool(self.record["evaluation"]["learned"])

    def checkpoint(self, step: int) -> Path:
        """The folder of the weights at an earlier ``step`` (one of ``checkpoints``, or 0:
        the initial weights, which every run keeps)."""
        folder = self.path / "checkpoints" / f"step-{step}"
        if not folder.is_dir():
            kept = [0, *self.record["config"]["checkpoints"]]
            raise ValueError(f"no checkpoint at step {step}; this model keeps {kept}")
        return folder


def key_of(config: PretrainConfig, device: DeviceLike = None) -> str:
    """The cache key of ``config`` trained on ``device`` (default: CUDA when available, else
    the CPU; a GPU's weights differ by rounding, so they are kept apart)."""
    dev = resolve(device)
    return make_key(kind="pretrain", config=asdict(config), torch=torch.__version__,
                    code=code_digest(TRAINING_CODE),
                    held_out_every=HELD_OUT_EVERY, tokenizer=TOKENIZER_SCHEME,
                    cpu_threads=CPU_THREADS if dev.type == "cpu" else None, **key_parts(dev))


def cached(config: PretrainConfig, cache_dir: str | os.PathLike | None = None,
           device: DeviceLike = None) -> Pretrained | None:
    """The trained ``config`` if the cache holds it whole, else None (never trains)."""
    return read_saved(default_root(cache_dir) / "pretrain" / key_of(config, device),
                       quiet=True)


_RECORD_KEYS = {"config": dict, "evaluation": dict, "curve": list, "checksums": dict}


def read_saved(path: Path, quiet: bool = False) -> Pretrained | None:
    """The trained model in the cache folder ``path``, or None when there is none. A damaged
    entry is None too; unless ``quiet``, it is removed with a warning so that it is trained
    again."""
    if not path.exists():
        return None
    try:
        record = json.loads((path / "record.json").read_text(encoding="utf-8"))
        for key, kind in _RECORD_KEYS.items():
            if not isinstance(record.get(key), kind):
                raise ValueError(f"record.json: {key!r} is missing or not a {kind.__name__}")
        names = [f.name for f in fields(PretrainConfig)]
        if sorted(record["config"]) != sorted(names):
            raise ValueError("record.json holds settings of another version")
        if folder_checksums(path, list(record["checksums"])) != record["checksums"]:
            raise ValueError("checksum mismatch in the weights")
    except (OSError, ValueError, KeyError, TypeError) as error:
        if not quiet:
            warnings.warn(f"saved pretrained model {path} is damaged ({error}); it will be "
                          "trained again", RuntimeWarning, stacklevel=3)
            shutil.rmtree(path, ignore_errors=True)
        return None
    return Pretrained(path, record, from_cache=True)
