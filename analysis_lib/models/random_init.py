"""Randomly initialised models of nine families, with tokenizers trained here.

A ``random:<family>`` model has the family's architecture and its kind of subword tokenizer:
WordPiece (bert, electra, distilbert, mpnet), byte-level BPE (gpt2, roberta, llama) or unigram
(albert, xlnet), trained on a fixed sample of the packaged corpora. Weights are drawn from a seed
without touching the global random state.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tokenizers
import torch

from .. import __version__
from ..runtime import checks
from ..runtime.cache import atomic_write_text, claimed, default_root
from .info import LoadedModel, model_info

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

FAMILIES = ("bert", "gpt2", "roberta", "albert", "electra", "distilbert", "xlnet", "mpnet",
            "llama")
#: Which kind of subword tokenizer each family uses.
TOKENIZER_KIND = {
    "bert": "wordpiece", "electra": "wordpiece", "distilbert": "wordpiece",
    "mpnet": "wordpiece",
    "gpt2": "bytelevel-bpe", "roberta": "bytelevel-bpe", "llama": "bytelevel-bpe",
    "albert": "unigram", "xlnet": "unigram",
}
#: How the tokenizers are trained and numbered: part of their file names and the zoo's cache keys.
TOKENIZER_SCHEME = f"det1-tokenizers{tokenizers.__version__}"

_SPECIALS = {
    "wordpiece": dict(pad="[PAD]", unk="[UNK]", cls="[CLS]", sep="[SEP]", mask="[MASK]"),
    "bytelevel-bpe": dict(pad="<pad>", unk="<unk>", cls="<s>", sep="</s>", mask="<mask>"),
    "unigram": dict(pad="<pad>", unk="<unk>", cls="[CLS]", sep="[SEP]", mask="[MASK]"),
}


def _training_text(limit: int = 12000, cache_dir: str | os.PathLike | None = None
                   ) -> list[str]:
    """A fixed, deterministic sample of the offline corpora to train tokenizers on (the
    corpora parsed once per cache: ``cache_dir``, by default the library's)."""
    from ..data.corpora import read_bbc, read_tweets

    tweets, _ = read_tweets(cache_dir)
    bbc, _ = read_bbc("sentence", cache_dir)
    half = limit // 2
    return list(tweets[:: max(1, len(tweets) // half)][:half]) + list(
        bbc[:: max(1, len(bbc) // half)][:half])


def _special_tokens(family: str) -> dict[str, str | None]:
    sp: dict[str, str | None] = dict(_SPECIALS[TOKENIZER_KIND[family]])
    if family in ("gpt2", "llama"):
        sp = dict(pad="<|endoftext|>", unk="<|endoftext|>", cls=None, sep=None, mask=None,
                  eos="<|endoftext|>")
    if family == "mpnet":
        sp = dict(pad="<pad>", unk="<unk>", cls="<s>", sep="</s>", mask="<mask>")
    if family == "xlnet":
        sp.update(cls="<cls>", sep="<sep>", mask="<mask>")
    return sp


def _untrained(kind: str, sp: dict, specials: list[str], vocab_size: int,
               text: Sequence[str] = ()):
    """An empty tokenizer of ``kind`` and its trainer for ``text``.

    The WordPiece trainer is given every continuation token (``##`` and a character that
    occurs inside a word of ``text``) up front, sorted, as extra special tokens:
    left to itself it numbers them in the order of a randomly seeded hash map, and those
    numbers break ties between equally frequent merges (huggingface/tokenizers#1794), so the
    same text could learn another vocabulary in another process.
    :func:`train_tokenizer` turns them back into ordinary tokens after training."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import trainers as tr

    if kind == "wordpiece":
        tokenizer = Tokenizer(models.WordPiece(unk_token=sp["unk"]))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece()
        return tokenizer, tr.WordPieceTrainer(
            vocab_size=vocab_size, special_tokens=specials + _continuations(tokenizer, text),
            show_progress=False)
    if kind == "bytelevel-bpe":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tokenizer.decoder = decoders.ByteLevel()
        return tokenizer, tr.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                        show_progress=False)
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    return tokenizer, tr.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials,
                                        unk_token=sp["unk"], show_progress=False)


def _continuations(tokenizer, text, prefix: str = "##") -> list[str]:
    """``prefix + c`` for every character ``c`` that follows another inside a word of
    ``text`` (after the tokenizer's own normalizer and pre-tokenizer), sorted."""
    inside = set()
    for line in text:
        for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(
                tokenizer.normalizer.normalize_str(line)):
            inside.update(word[1:])
    return [prefix + c for c in sorted(inside)]


def canonical_ids(tokenizer: tokenizers.Tokenizer, specials: list[str]) -> tokenizers.Tokenizer:
    """The same tokenizer with its ids put in a fixed order: special tokens first (in the
    given order), then WordPiece tokens sorted by text, unigram pieces by score (rounded to
    six decimals) then text.

    The ``tokenizers`` trainers of WordPiece and unigram number what they learn in the order
    of a randomly seeded hash map, so without this step the same vocabulary would get other
    token ids (and give other models) on another run. Added tokens other than ``specials``
    (the WordPiece trainer's continuation tokens, see ``_untrained``) become ordinary
    tokens of the vocabulary.
    """
    from tokenizers import Tokenizer

    spec = json.loads(tokenizer.to_str())
    model = spec["model"]
    if model["type"] == "WordPiece":
        rest = sorted(t for t in model["vocab"] if t not in specials)
        model["vocab"] = {t: i for i, t in enumerate(specials + rest)}
    elif model["type"] == "Unigram":
        unk = model["vocab"][model["unk_id"]][0] if model.get("unk_id") is not None else None
        # scores differ between runs in the last bits (summation order): round them
        scores = {piece: round(score, 6) for piece, score in model["vocab"]}
        # the characters the trainer adds for coverage get evenly spaced scores in hash
        # order: give those scores to the characters in text order
        tail = sorted(_coverage_tail(scores, specials))
        for piece, score in zip(tail, sorted((scores[p] for p in tail), reverse=True)):
            scores[piece] = score
        order = specials + sorted((p for p in scores if p not in specials),
                                  key=lambda p: (-scores[p], p))
        model["vocab"] = [[p, scores[p]] for p in order]
        if unk is not None:
            model["unk_id"] = order.index(unk)
    else:
        return tokenizer
    ids = {t: i for i, t in enumerate(specials)}
    spec["added_tokens"] = [dict(token, id=ids[token["content"]])
                            for token in spec.get("added_tokens", [])
                            if token["content"] in ids]
    return Tokenizer.from_str(json.dumps(spec))


def _coverage_tail(scores: dict[str, float], specials: list[str]) -> list[str]:
    """The characters a unigram trainer of ``tokenizers`` appended to cover the text: it gives
    each character it has no piece for the lowest score plus 0.0001 times its place in a
    hash-ordered loop, so they are the single characters at the lowest score + k * 0.0001
    for k = 0, 1, ... up to the first step with none (a learnt character that happens to
    sit on that grid is included, which keeps the result the same on every run)."""
    pieces = {p: s for p, s in scores.items() if p not in specials}
    if not pieces:
        return []
    low = min(pieces.values())
    steps: dict[int, list[str]] = {}
    for piece, score in pieces.items():
        k = round((score - low) / 1e-4)
        if len(piece) == 1 and abs(score - (low + k * 1e-4)) < 2e-7:
            steps.setdefault(k, []).append(piece)
    tail, k = [], 0
    while k in steps:
        tail += steps[k]
        k += 1
    return tail


def train_tokenizer(family: str, vocab_size: int = 8000,
                    cache_dir: str | os.PathLike | None = None) -> PreTrainedTokenizerFast:
    """Train (or load from the cache) an offline tokenizer of ``family``'s kind.

    Returns a ``transformers.PreTrainedTokenizerFast`` with the family's special tokens and
    template (``[CLS] x [SEP]`` for BERT-like models, ``<s> x </s>`` for RoBERTa and MPNet,
    nothing for GPT-2 and Llama, ``x <sep> <cls>`` for XLNet). Every process on every machine
    learns the same vocabulary with the same ids (for the same ``tokenizers`` version): the
    WordPiece trainer gets its continuation tokens in a fixed order (``_untrained``) and
    the learnt ids are put in a fixed order (:func:`canonical_ids`). Trained once per cache
    (``TOKENIZER_SCHEME`` in the file name) and reused from there.
    """
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    if family not in TOKENIZER_KIND:
        raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")
    kind = TOKENIZER_KIND[family]
    sp = _special_tokens(family)
    specials = list(dict.fromkeys(v for v in sp.values() if v))
    # families of one kind with the same special tokens learn the same tokenizer (BERT,
    # ELECTRA and DistilBERT; GPT-2 and Llama): the first of them in FAMILIES names its file
    first = next(f for f in FAMILIES if TOKENIZER_KIND[f] == kind and _special_tokens(f) == sp)
    name = f"{first}-{kind}-{vocab_size}-v{__version__}-{TOKENIZER_SCHEME}.json"
    file = default_root(cache_dir) / "tokenizers" / name
    tokenizer = _read_tokenizer(file)
    if tokenizer is None:
        with claimed(file):  # two processes that ask at once: one trains, one reads
            tokenizer = _read_tokenizer(file)
            if tokenizer is None:
                text = _training_text(cache_dir=cache_dir)
                tokenizer, trainer = _untrained(kind, sp, specials, vocab_size, text)
                tokenizer.train_from_iterator(text, trainer=trainer)
                tokenizer = canonical_ids(tokenizer, specials)
                atomic_write_text(file, tokenizer.to_str())
    ids = {t: tokenizer.token_to_id(t) for t in specials}
    if family == "xlnet":
        tokenizer.post_processor = processors.TemplateProcessing(
            single="$A <sep> <cls>", special_tokens=[("<sep>", ids["<sep>"]),
                                                      ("<cls>", ids["<cls>"])])
    elif family not in ("gpt2", "llama"):
        cls, sep = str(sp["cls"]), str(sp["sep"])  # every other family has both
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {sep}", special_tokens=[(cls, ids[cls]), (sep, ids[sep])])
    named = {k + "_token": str(v) for k, v in sp.items() if v and k in ("pad", "unk", "cls", "sep",
                                                                   "mask", "eos")}
    if family in ("gpt2", "llama"):
        named["bos_token"] = str(sp["eos"])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, model_max_length=512, **named)


def _read_tokenizer(file: Path) -> tokenizers.Tokenizer | None:
    """The tokenizer saved in ``file``, or None when there is none or it is damaged (it is
    then trained again)."""
    if not file.is_file():
        return None
    try:
        return tokenizers.Tokenizer.from_file(str(file))
    except Exception:
        return None


def _random_config(family: str, tokenizer, layers: int, hidden: int, heads: int,
                   intermediate: int):
    from transformers import (
        AlbertConfig,
        BertConfig,
        DistilBertConfig,
        ElectraConfig,
        GPT2Config,
        LlamaConfig,
        MPNetConfig,
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
    if family == "mpnet":  # positions start after the padding id, as in RoBERTa
        return MPNetConfig(**{**common, "max_position_embeddings": 512 + pad + 1})
    if family == "llama":  # SmolLM2's design: grouped key-value heads where they divide
        kv = heads // 3 if heads % 3 == 0 else heads
        return LlamaConfig(**common, num_key_value_heads=kv, bos_token_id=pad,
                           eos_token_id=pad, tie_word_embeddings=True)
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


#: the range of each size of a random model (``model_options``)
SIZE_LIMITS = {"layers": (1, 128), "hidden": (2, 16384), "heads": (1, 256),
               "intermediate": (1, 65536), "vocab_size": (16, 500_000)}
#: the most parameters a random model may have (4 GB of float32 weights)
MAX_PARAMETERS = 1_000_000_000
#: the sizes a random model takes when none are given (``models.load``'s defaults)
DEFAULT_SIZES = {"layers": 6, "hidden": 384, "heads": 12, "vocab_size": 8000}


def size_problems(sizes: Mapping[str, Any]) -> list[str]:
    """What is wrong with a random model's sizes (``layers``, ``hidden``, ``heads``,
    ``intermediate``, ``vocab_size``; those absent are :data:`DEFAULT_SIZES`), each with the
    fix: a size that is not an integer or lies outside :data:`SIZE_LIMITS`, a width that the
    heads do not divide, a model of more than :data:`MAX_PARAMETERS` parameters."""
    sizes = {**DEFAULT_SIZES, **{k: v for k, v in sizes.items() if v is not None}}
    problems = []
    for key, value in sizes.items():
        if key not in SIZE_LIMITS:
            continue
        low, high = SIZE_LIMITS[key]
        try:
            checks.integer(value, key, low, high)
        except (TypeError, ValueError) as error:
            problems.append(str(error))
    if problems:
        return problems
    hidden, heads = sizes["hidden"], sizes["heads"]
    if hidden % heads:
        problems.append(f"hidden={hidden} must be divisible by heads={heads} (each head gets "
                        f"hidden / heads dimensions); use e.g. "
                        f"hidden={max(heads, hidden // heads * heads)}")
    inner = sizes.get("intermediate") or 4 * hidden
    count = sizes["layers"] * (4 * hidden * hidden + 2 * hidden * inner) + \
        sizes["vocab_size"] * hidden
    if count > MAX_PARAMETERS:
        problems.append(f"a random model of these sizes has about {count:,.0f} parameters, "
                        f"more than {MAX_PARAMETERS:,}; use fewer layers or a smaller hidden "
                        "size")
    return problems


def random_model(family: str, *, seed: int, layers: int, hidden: int, heads: int,
                  intermediate: int | None, vocab_size: int,
                  cache_dir: str | os.PathLike | None) -> LoadedModel:
    from transformers import AutoModel

    if family not in FAMILIES:
        raise ValueError(
            f"unknown model family {family!r} in 'random:{family}'; valid families: "
            f"{', '.join(FAMILIES)}"
        )
    seed = checks.integer(seed, "seed", 0)
    if intermediate is None:
        intermediate = 4 * hidden
    problems = size_problems(dict(layers=layers, hidden=hidden, heads=heads,
                                  intermediate=intermediate, vocab_size=vocab_size))
    if problems:
        raise ValueError("; ".join(problems))
    tokenizer = train_tokenizer(family, vocab_size, cache_dir)
    if len(tokenizer) > vocab_size:
        raise ValueError(f"vocab_size={vocab_size} is smaller than the {family} tokenizer's "
                         f"alphabet and special tokens ({len(tokenizer)} entries); use at "
                         f"least {len(tokenizer)}")
    config = _random_config(family, tokenizer, layers, hidden, heads, intermediate)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModel.from_config(config, attn_implementation="eager")
    vocab_hash = hashlib.sha256(json.dumps(tokenizer.get_vocab(), sort_keys=True).encode())
    fingerprint = (f"random-{family}-L{layers}-H{hidden}-A{heads}-I{intermediate}-"
                   f"V{vocab_size}-s{seed}-tok{vocab_hash.hexdigest()[:12]}-"
                   f"torch{torch.__version__}")
    info = model_info(model, tokenizer, f"random:{family}", "random", fingerprint)
    return LoadedModel(model.eval(), tokenizer, info)
