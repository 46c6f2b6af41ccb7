"""One forward pass over a corpus -> per-layer arrays of words, sentences and attention.

:func:`extract` tokenises every sentence of a :class:`~analysis_lib.data.corpora.Corpus` (already
split into words), runs the model once over length-sorted batches (so little is padded), and
returns an :class:`Extraction` holding, for every layer including the embedding layer:

* per-word vectors, one row per word of the corpus in order, pooled from the word's subwords
  by its ``last`` subword (Liu et al. 2019, as Wu et al. 2020), its ``first``, or their
  ``mean``;
* sentence vectors: the ``first`` token (``[CLS]`` for BERT-like models), the ``last`` real
  token (the one that has read the whole sentence in a left-to-right decoder such as GPT-2 or
  SmolLM2, whose first token has seen nothing else) and the ``mean`` over the sentence's real
  tokens, special tokens included, padding never;
* optionally, per-sentence word-level attention maps (Clark et al. 2019): the attention *to* a
  word is the sum over its subwords, the attention *from* a word the mean over its subwords.
  Special tokens are never rows. With ``special_tokens="drop"`` their columns are removed and
  every row renormalised; with ``"keep"`` each special token is an extra column after the
  words, in token order. Either way each row sums to 1.

Results are cached on disk (:mod:`analysis_lib.runtime.cache`) under a key of the model's
fingerprint, the corpus's content, the options and a digest of the code. A study that reads
a sample of the words and some of the layers says so (``word_rows``, ``keep_layers``): the model
still reads every sentence whole, and only what the study reads is kept and cached (a
30-layer model's 7 layers on 3,000 of 10,000 words take 7% of the disk of all of them).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from .data.corpora import Corpus
from .layers import check_layer
from .models import LoadedModel, ModelInfo, load, weights_digest
from .models.batching import pad_batch, pad_token_id
from .runtime import checks
from .runtime.cache import ArrayCache, code_digest, make_key
from .runtime.device import PRECISIONS, autocast, check_precision, key_parts, resolve
from .runtime.profile import label, profiled

_CPU = torch.device("cpu")
#: how extracted arrays are kept: float32, or float16 (half the disk and memory; the measures
#: read it as float32 and accumulate in float64)
STORAGE = ("float32", "float16")

WORD_POOLING = ("last", "first", "mean")
#: the arrays every cached extraction must hold
EXTRACT_ARRAYS = ("words", "sentence_first", "sentence_last", "sentence_mean", "word_sentence",
                  "word_position")
SPECIAL_TOKENS = ("drop", "keep")
#: ``word_rows`` of an extraction that keeps the sentence vectors only (every study that reads
#: only sentence vectors passes it, so they share one small cache entry per model and corpus)
SENTENCES_ONLY: tuple[int, ...] = ()
#: the sentence poolings an extraction keeps unless told otherwise (``sentences``)
SENTENCE_POOLING = ("first", "last", "mean")
#: ``sentences`` of an extraction that keeps no sentence vectors (a study that reads word rows
#: or attention maps only)
NO_SENTENCES: tuple[str, ...] = ()


@dataclass
class Extraction:
    """Per-layer arrays of one model on one corpus.

    Attributes
    ----------
    info : ModelInfo
    words : numpy.ndarray, shape (n_layers, n_words, hidden), float32 (float16 when extracted
        with ``storage="float16"``)
        ``words[l]`` is layer ``l`` (0 = embeddings, 1..L = transformer layers; see
        :mod:`analysis_lib.layers`); rows are the corpus's words in order. Extracted with
        ``keep_layers`` or ``word_rows``, only those are kept: ``words[i]`` is layer
        ``layer_ids[i]`` and row ``j`` is the corpus's word ``word_rows[j]``.
    sentence_first, sentence_last, sentence_mean : numpy.ndarray, shape (n_layers, n_sentences,
        hidden), or None
        First-token, last-real-token and mean-over-real-tokens sentence vectors (None for a
        pooling that was not kept: see ``sentences``).
    word_sentence : numpy.ndarray of int, shape (n_words,)
        Sentence index of each word row.
    word_position : numpy.ndarray of int, shape (n_words,)
        Position of each word row within its sentence.
    attention : list of numpy.ndarray, or None
        One array per sentence, shape (n_attention_layers, heads, w, w + s): w the sentence's
        (kept) words, s its special tokens when kept. Its first axis counts transformer
        layers from 0; read it through :meth:`attention_layer`, which takes layer ``1..L``.
    n_truncated : int
        Sentences cut to the model's maximum length (their cut words have no rows).
    layer_ids : numpy.ndarray of int
        The layer of each entry of ``words`` and of the sentence arrays (all layers, in
        order, unless extracted with ``keep_layers``).
    word_rows : numpy.ndarray of int, or None
        The corpus words the rows hold (None: every word, in order).
    options : dict
        The options the arrays were computed with.
    sentences : tuple of str
        The sentence poolings kept (all three unless extracted with ``sentences=...``).
    cache_key : str or None
        Key of the arrays' entry in the ``"extract"`` cache (None when not cached).
    from_cache : bool
        The arrays were read from the cache rather than computed by this call.
    """

    info: ModelInfo
    words: np.ndarray
    sentence_first: np.ndarray | None
    sentence_mean: np.ndarray | None
    sentence_last: np.ndarray | None
    word_sentence: np.ndarray
    word_position: np.ndarray
    attention: list[np.ndarray] | None = None
    n_truncated: int = 0
    layer_ids: np.ndarray | None = None
    word_rows: np.ndarray | None = None
    options: dict[str, Any] = field(default_factory=dict)
    sentences: tuple[str, ...] = SENTENCE_POOLING
    cache_key: str | None = None
    from_cache: bool = False

    def __post_init__(self):
        if self.layer_ids is None:
            self.layer_ids = np.arange(self.words.shape[0])

    @property
    def n_layers(self) -> int:
        """The number of layers kept (all of the model's unless extracted with ``keep_layers``)."""
        return self.words.shape[0]

    def layers(self, kind: str = "words") -> list[np.ndarray]:
        """The per-layer arrays as a list, ready for ``similarity.pairwise``.

        ``kind`` is ``"words"``, ``"first"`` (first-token sentence vectors), ``"last"`` (last
        real token) or ``"mean"`` (mean over real tokens).
        """
        source = {"words": self.words, "first": self.sentence_first,
                  "last": self.sentence_last, "mean": self.sentence_mean}
        if kind not in source:
            raise ValueError(f"kind must be one of {sorted(source)}, got {kind!r}")
        found = source[kind]
        if found is None:
            kept = ", ".join(self.sentences) or "none"
            raise ValueError(f"this extraction kept no {kind!r} sentence vectors (kept: {kept}); "
                             f"extract with sentences=[{kind!r}] or without sentences=...")
        return list(found)

    def layer(self, layer: int, kind: str = "words") -> np.ndarray:
        """One layer's array (``0`` = embeddings, ``1..L``) of ``kind`` (see :meth:`layers`)."""
        layer = check_layer(layer, self.info.n_layers - 1)
        ids = np.asarray(self.layer_ids)  # set by __post_init__
        found = np.flatnonzero(ids == layer)
        if not len(found):
            raise ValueError(f"layer {layer} was not kept: this extraction keeps layers "
                             f"{ids.tolist()}; extract without keep_layers=... for all")
        return self.layers(kind)[int(found[0])]

    def attention_layer(self, layer: int) -> list[np.ndarray]:
        """Per-sentence maps (heads x w x w') of transformer layer ``layer`` (``1..L``; the
        embedding layer 0 has no attention)."""
        if self.attention is None:
            raise ValueError("this extraction has no attention; call extract(..., attention=True)")
        layer = check_layer(layer, self.info.n_attention_layers, "layer",
                            allow_embeddings=False)
        return [a[layer - 1] for a in self.attention]


#: the options of :func:`extract` that a declared grid (a sweep spec) may set, with their
#: check; the cache, the device and the progress bar belong to whoever runs the grid, and
#: code from a model's folder runs only on an explicit opt-in in Python
#: (``models.load(name, trust_remote_code=True)``), never from a file
SPEC_OPTIONS: dict[str, Callable[[Any, str], Any]] = {
    "word_pooling": lambda v, n: checks.choice(v, n, WORD_POOLING),
    "special_tokens": lambda v, n: checks.choice(v, n, SPECIAL_TOKENS),
    "storage": lambda v, n: checks.choice(v, n, STORAGE),
    "precision": lambda v, n: checks.choice(v, n, PRECISIONS),
    "batch_size": lambda v, n: checks.integer(v, n, low=1),
    "max_length": lambda v, n: None if v is None else checks.integer(v, n, low=3),
    "attention": lambda v, n: checks.boolean(v, n),
    "sort_by_length": lambda v, n: checks.boolean(v, n),
    "revision": lambda v, n: _optional_text(v, n),
    "local_files_only": lambda v, n: None if v is None else checks.boolean(v, n),
}


def check_spec_options(options: Mapping[str, Any], where: str = "extract_options") -> None:
    """Check extraction options read from a file (a sweep spec) before any work, by the rules
    :func:`extract` applies: an unknown option (the closest known one named), an option a
    file may not give (``trust_remote_code``, ``cache_dir``, ``device``, ...) or a bad value
    is a ``ValueError``/``TypeError`` that names it."""
    import difflib

    for name, value in options.items():
        if name == "trust_remote_code":
            raise ValueError(f"{where}: trust_remote_code cannot be set from a file: a model "
                             "folder's own code runs only when Python code asks for it "
                             "(models.load(name, trust_remote_code=True))")
        if name not in SPEC_OPTIONS:
            close = difflib.get_close_matches(str(name), list(SPEC_OPTIONS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{where}: unknown option {name!r}{hint}; a spec may set "
                             f"{', '.join(SPEC_OPTIONS)}")
        SPEC_OPTIONS[name](value, f"{where}: {name}")


def _optional_text(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a string (a branch, tag or commit) or null, got "
                        f"{value!r}")
    return value


def _check_run_options(**options: Any) -> None:
    """The checks of :data:`SPEC_OPTIONS` on :func:`extract`'s own arguments."""
    for name, value in options.items():
        SPEC_OPTIONS[name](value, name)


@profiled("extract", lambda loaded, corpus, *a, **k: label(loaded))
def extract(
    model: str | LoadedModel,
    corpus: Corpus,
    *,
    word_pooling: str = "last",
    attention: bool = False,
    special_tokens: str = "drop",
    batch_size: int = 32,
    max_length: int | None = None,
    sort_by_length: bool = True,
    cache: bool = True,
    cache_dir: str | None = None,
    progress: bool = True,
    device: str | torch.device | None = None,
    precision: str = "float32",
    storage: str = "float32",
    keep_layers: Sequence[int] | None = None,
    word_rows: Sequence[int] | np.ndarray | None = None,
    sentences: Sequence[str] | None = None,
    **load_options: Any,
) -> Extraction:
    """Run ``model`` over ``corpus`` once and return every layer's arrays.

    Parameters
    ----------
    model : str or LoadedModel
        A name for :func:`analysis_lib.models.load` (with ``load_options``) or a loaded model.
    corpus : Corpus
    word_pooling : {'last', 'first', 'mean'}
        How a word's subword vectors become one row.
    attention : bool
        Also return word-level attention maps (memory: heads x w x w per sentence and layer).
    special_tokens : {'drop', 'keep'}
        Attention only: remove special-token columns and renormalise, or keep them as columns.
    batch_size : int
        Sentences per forward pass.
    max_length : int, optional
        Token limit (default and upper bound: the model's maximum). Longer sentences are cut
        with a warning that says how many; their cut words get no rows.
    sort_by_length : bool
        Batch sentences of similar length together (results are identical either way; only
        the speed changes).
    cache, cache_dir : bool, path
        Read and write the on-disk cache (see :mod:`analysis_lib.runtime.cache`).
    progress : bool
        Show a progress bar.
    device : str or torch.device, optional
        Where the model runs (default: CUDA when available, else the CPU; see
        :mod:`analysis_lib.runtime.device`). The model is moved there and stays. On a GPU the
        inputs go over in pinned memory and each batch's pooled rows come back while the next
        batch runs.
    precision : {'float32', 'bfloat16', 'float16'}
        The forward pass's precision; reduced precision is autocast on a GPU only.
    storage : {'float32', 'float16'}
        How the arrays are kept: float16 halves disk and memory (the measures read it as
        float32 and accumulate in float64; values keep about three significant digits).
    keep_layers : sequence of int, optional
        Keep only these layers (``0`` = embeddings, ``1..L``; increasing) of the word and
        sentence arrays. Default: every layer.
    word_rows : sequence of int, optional
        Keep only the rows of these words of the corpus (increasing indices into
        ``corpus.words``). The model still reads every sentence whole, so each kept row is
        the same as in a full extraction. Refused when the model cuts sentences (a cut
        word has no row). An empty sequence keeps no word rows: the sentence vectors only,
        for a study that reads nothing else (:data:`SENTENCES_ONLY`; the word rows are most
        of an entry's size). Default: every word.
    sentences : sequence of {'first', 'last', 'mean'}, optional
        Keep only these sentence poolings (the others are ``None``); an empty sequence
        (:data:`NO_SENTENCES`) keeps none, for a study that reads word rows or attention maps
        only. Default: all three.

    The cache key holds the device kind and precision unless they are the CPU in float32,
    the storage when it is float16, and the kept layers, rows and poolings when given.

    Raises
    ------
    ValueError
        Empty corpus, unknown option values, non-positive sizes.
    """
    if not isinstance(corpus, Corpus):
        raise TypeError(f"corpus must be a corpora.Corpus, got {type(corpus).__name__}; "
                        "wrap a list of sentences with corpora.from_sentences(...)")
    if len(corpus) == 0 or corpus.n_words == 0:
        raise ValueError("the corpus is empty: load at least one sentence with words")
    _check_run_options(word_pooling=word_pooling, special_tokens=special_tokens,
                       storage=storage, batch_size=batch_size, max_length=max_length,
                       attention=attention, sort_by_length=sort_by_length)
    for flag in ("cache", "progress"):
        checks.boolean(locals()[flag], flag)
    dev = resolve(device)
    check_precision(precision, dev)
    word_rows = _kept_rows(word_rows, corpus.n_words)
    pools = _kept_poolings(sentences)
    loaded = (model if isinstance(model, LoadedModel)
              else load(model, cache_dir=cache_dir, **load_options))
    info = loaded.info
    layers = _kept_layers(keep_layers, info.n_layers)
    limit = info.max_length if max_length is None else min(int(max_length), info.max_length)
    options = {"word_pooling": word_pooling, "attention": attention,
               "special_tokens": special_tokens if attention else None, "max_length": limit}
    key = make_key(kind="extract", format=2, model=info.fingerprint, corpus=corpus.fingerprint(),
                   code=code_digest(__name__),
                   weights=weights_digest(loaded.model) if cache else None, **options,
                   **key_parts(dev, precision),
                   **({} if storage == "float32" else {"storage": storage}),
                   **({} if layers is None else {"layers": layers.tolist()}),
                   **({} if word_rows is None else {"word_rows": _digest(word_rows)}),
                   **({} if pools == SENTENCE_POOLING else {"sentences": list(pools)}))
    computed = []

    def compute():
        computed.append(True)
        loaded.model.to(dev)
        arrays, meta = _run(loaded, corpus, limit, word_pooling, attention, special_tokens,
                            batch_size, sort_by_length, progress, dev, precision, storage)
        return _keep(arrays, meta, layers, word_rows, pools, info.name), meta

    if cache:
        dropped = {f"sentence_{p}" for p in SENTENCE_POOLING if p not in pools}
        needed = tuple(a for a in EXTRACT_ARRAYS if a not in dropped)
        needed += (("attention_flat", "attention_shapes") if attention else ())
        needed += (() if layers is None else ("layer_ids",)) + \
            (() if word_rows is None else ("word_rows",))
        arrays, meta = ArrayCache("extract", cache_dir).get_or_compute(
            key, compute, required_arrays=needed, required_meta=("n_truncated",))
    else:
        arrays, meta = compute()
    return _unpack(info, arrays, meta, options, sentences=pools,
                   cache_key=key if cache else None, from_cache=cache and not computed)


def _kept_rows(rows, n_words: int) -> np.ndarray | None:
    """``word_rows`` as an array of increasing word indices below ``n_words``, or None."""
    if rows is None:
        return None
    rows = np.asarray(rows)
    if rows.ndim == 1 and rows.size == 0:
        return np.zeros(0, dtype=np.int64)  # the sentence vectors only
    if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
        raise ValueError("word_rows must be a 1-D sequence of word indices (ints), "
                         f"got shape {rows.shape} of {rows.dtype}")
    if rows[0] < 0 or rows[-1] >= n_words or np.any(np.diff(rows) <= 0):
        raise ValueError(f"word_rows must increase strictly and lie in 0..{n_words - 1} (the "
                         "corpus's words); sort them and drop repeats (np.unique)")
    return rows.astype(np.int64)


def _kept_poolings(sentences) -> tuple[str, ...]:
    """``sentences`` as the kept poolings in :data:`SENTENCE_POOLING`'s order."""
    if sentences is None:
        return SENTENCE_POOLING
    if isinstance(sentences, str):
        sentences = [sentences]
    unknown = sorted(set(sentences) - set(SENTENCE_POOLING))
    if unknown:
        raise ValueError(f"sentences must name poolings among {list(SENTENCE_POOLING)}, got "
                         f"{unknown}; pass [] to keep no sentence vectors")
    return tuple(p for p in SENTENCE_POOLING if p in sentences)


def _kept_layers(layers, n_layers: int) -> np.ndarray | None:
    """``layers`` as an array of increasing layer numbers below ``n_layers``, or None."""
    if layers is None:
        return None
    kept = np.array([check_layer(k, n_layers - 1) for k in layers], dtype=np.int64)
    if not len(kept) or np.any(np.diff(kept) <= 0):
        raise ValueError("keep_layers must be a non-empty increasing list of layers "
                         f"0..{n_layers - 1}, got {list(layers)}")
    return kept


def _digest(rows: np.ndarray) -> str:
    return hashlib.sha256(rows.tobytes()).hexdigest()[:16]


def _keep(arrays: dict[str, np.ndarray], meta: dict[str, Any], layers, rows,
          pools: tuple[str, ...], model: str) -> dict[str, np.ndarray]:
    """The arrays with only the kept layers, word rows and sentence poolings (and which
    layers and rows they are)."""
    if rows is not None and len(rows) and meta["n_truncated"]:
        raise ValueError(f"{model} cut {meta['n_truncated']} sentences at its token limit, so "
                         "word_rows would name other words than the corpus's; use shorter "
                         "sentences or extract without word_rows")
    out = {name: a for name, a in arrays.items()
           if not name.startswith("sentence_") or name[len("sentence_"):] in pools}
    if layers is not None:
        for name in ("words", *(f"sentence_{p}" for p in pools)):
            out[name] = np.ascontiguousarray(out[name][layers])
        out["layer_ids"] = layers
    if rows is not None:
        out["words"] = np.ascontiguousarray(out["words"][:, rows])
        out["word_sentence"] = out["word_sentence"][rows]
        out["word_position"] = out["word_position"][rows]
        out["word_rows"] = rows
    return out


def _unpack(info: ModelInfo, arrays: dict[str, np.ndarray], meta: dict[str, Any],
            options: dict[str, Any], **flags: Any) -> Extraction:
    maps = None
    if "attention_flat" in arrays:
        flat, shapes = arrays["attention_flat"], arrays["attention_shapes"]
        sizes = np.prod(shapes, axis=1)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        maps = [flat[offsets[i]:offsets[i + 1]].reshape(shapes[i]) for i in range(len(shapes))]
    return Extraction(
        info=info, words=arrays["words"], sentence_first=arrays.get("sentence_first"),
        sentence_mean=arrays.get("sentence_mean"), sentence_last=arrays.get("sentence_last"),
        word_sentence=arrays["word_sentence"],
        word_position=arrays["word_position"], attention=maps,
        n_truncated=int(meta["n_truncated"]), layer_ids=arrays.get("layer_ids"),
        word_rows=arrays.get("word_rows"), options=options, **flags,
    )


def over_limit(loaded: LoadedModel, corpus: Corpus, max_length: int | None = None
               ) -> np.ndarray:
    """The indices of the sentences of ``corpus`` that ``loaded`` would cut at its token
    limit (``max_length`` when smaller), special tokens counted: what :func:`extract`
    truncates, found by tokenising alone, before any forward pass."""
    info = loaded.info
    limit = info.max_length if max_length is None else min(int(max_length), info.max_length)
    # verbose=False: the tokenizer's own "longer than the maximum" warning would be about
    # sentences this check reports (and a chapter drops or refuses) itself
    encoded = loaded.tokenizer([list(s) for s in corpus.sentences], is_split_into_words=True,
                               add_special_tokens=True, verbose=False)
    return np.array([i for i, ids in enumerate(encoded["input_ids"]) if len(ids) > limit],
                    dtype=np.int64)


@dataclass
class _Encoded:
    ids: list[int]
    word_ids: list[int | None]
    n_words: int  # words of the sentence that have tokens (after truncation)


def _encode(tokenizer, corpus: Corpus, limit: int) -> tuple[list[_Encoded], int]:
    """Tokenise every sentence; replace words that yield no token by the unknown token;
    truncate over-long sentences."""
    unk = tokenizer.unk_token or "?"
    sentences = [list(s) for s in corpus.sentences]
    # verbose=False: a sentence over the limit is cut below and counted (n_truncated), not
    # run through the model as the tokenizer's own warning fears
    encoded = tokenizer(sentences, is_split_into_words=True, add_special_tokens=True,
                        verbose=False)
    tokens = [(encoded["input_ids"][i], encoded.word_ids(i)) for i in range(len(sentences))]
    # sentences with a word that yields no token, again in one call with those words unknown
    redo = {}
    for i, (_, wids) in enumerate(tokens):
        present = {w for w in wids if w is not None}
        if len(present) < len(sentences[i]):
            redo[i] = [w if j in present else unk for j, w in enumerate(sentences[i])]
    if redo:
        again = tokenizer(list(redo.values()), is_split_into_words=True,
                          add_special_tokens=True, verbose=False)
        for k, (i, words) in enumerate(redo.items()):
            sentences[i], tokens[i] = words, (again["input_ids"][k], again.word_ids(k))
    out, n_cut = [], 0
    for words, (ids, wids) in zip(sentences, tokens):
        if len(ids) > limit:
            n_cut += 1
            single = tokenizer([words], is_split_into_words=True, add_special_tokens=True,
                               truncation=True, max_length=limit)
            ids, wids = single["input_ids"][0], single.word_ids(0)
            # a word whose subwords were split by the cut is dropped entirely
            last = max(w for w in wids if w is not None)
            full = tokenizer([words[: last + 1]], is_split_into_words=True,
                             add_special_tokens=False)["input_ids"][0]
            kept = sum(1 for w in wids if w is not None)
            if len(full) != kept:
                wids = [None if w == last else w for w in wids]
        n_words = len({w for w in wids if w is not None})
        if any(w is not None and w >= n_words for w in wids):
            raise AssertionError("word ids are not contiguous from 0")
        out.append(_Encoded(list(ids), list(wids), n_words))
    return out, n_cut


def _batches(lengths: np.ndarray, batch_size: int, sort: bool) -> list[np.ndarray]:
    order = np.argsort(-lengths, kind="stable") if sort else np.arange(len(lengths))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def _check_half_range(result: dict, model: str, storage: str = "float16") -> None:
    """Refuse float16 storage of activations beyond its range (65,504), which would be kept
    as inf and cached: an error naming the first such layer and its largest magnitude.
    Nothing to check for other storage."""
    if storage != "float16":
        return
    limit = float(torch.finfo(torch.float16).max)
    for values in result.values():
        peaks = values.abs().amax(dim=tuple(range(1, values.dim())))
        over = torch.nonzero(peaks > limit).flatten()
        if len(over):
            layer = int(over[0])
            raise ValueError(
                f"layer {layer} of {model} reaches {float(peaks[layer]):,.0f}, beyond float16's "
                f"largest value ({limit:,.0f}); extract with storage='float32'")


def _run(loaded: LoadedModel, corpus: Corpus, limit: int, pooling: str, attention: bool,
         special: str, batch_size: int, sort: bool, progress: bool,
         dev: torch.device = _CPU, precision: str = "float32", storage: str = "float32"):
    model, tokenizer, info = loaded
    encoded, n_cut = _encode(tokenizer, corpus, limit)
    if n_cut:
        warnings.warn(
            f"{n_cut} of {len(corpus)} sentences are longer than {limit} tokens and were cut; "
            "their cut words have no rows (see Extraction.word_sentence/word_position)",
            UserWarning, stacklevel=3)
    n_sent = len(encoded)
    counts = np.array([e.n_words for e in encoded])
    starts = np.concatenate([[0], np.cumsum(counts)])
    n_rows, L, D = int(starts[-1]), info.n_layers, info.hidden_size
    kept = np.dtype(storage)
    words = np.empty((L, n_rows, D), dtype=kept)
    first = np.empty((L, n_sent, D), dtype=kept)
    mean = np.empty((L, n_sent, D), dtype=kept)
    last = np.empty((L, n_sent, D), dtype=kept)
    maps: list[np.ndarray | None] = [None] * n_sent
    pad_id = pad_token_id(tokenizer)
    token_ids = [e.ids for e in encoded]
    lengths = np.array([len(e.ids) for e in encoded])
    batches = _batches(lengths, batch_size, sort)
    word_tokens = [_word_tokens(e, pooling) for e in encoded]
    bar = tqdm(total=n_sent, desc=f"extract {info.name}", unit="sent", disable=not progress)
    gpu = dev.type == "cuda"
    kept_torch = getattr(torch, storage)
    # each batch's results are written into the arrays by a helper thread while the next
    # batch runs (on a GPU: once their copy to host memory, started at once, has finished)
    writing = None

    def write(done) -> None:
        batch, plan, host, event = done
        if event is not None:
            event.synchronize()
        if plan.group_starts is not None:
            _mean_groups(host["words"], plan, words)
        else:
            words[:, plan.rows] = host["words"].numpy()
        first[:, batch] = host["first"].numpy()
        last[:, batch] = host["last"].numpy()
        mean[:, batch] = host["mean"].numpy()

    with torch.inference_mode(), ThreadPoolExecutor(max_workers=1) as writer:
        for batch in batches:
            ids, mask = _to_device(*pad_batch(token_ids, batch, pad_id), dev)
            with autocast(dev, precision):
                out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True,
                            output_attentions=attention)
            plan = _pool_plan(batch, word_tokens, starts, pooling, ids.shape[1])
            result = _pooled(out.hidden_states, mask, lengths[batch], plan)
            _check_half_range(result, info.name, storage)
            word_dtype = torch.float32 if plan.group_starts is not None else kept_torch
            host, event = _to_host({k: v.to(word_dtype if k == "words" else kept_torch)
                                    for k, v in result.items()}, gpu)
            if attention:
                _word_maps(out.attentions, batch, lengths, encoded, special, info.name, maps)
            del out, result
            if writing is not None:
                writing.result()
            writing = writer.submit(write, (batch, plan, host, event))
            bar.update(len(batch))
        if writing is not None:
            writing.result()
    bar.close()
    arrays = {"words": words, "sentence_first": first, "sentence_last": last,
              "sentence_mean": mean,
              "word_sentence": np.repeat(np.arange(n_sent), counts),
              "word_position": np.concatenate([np.arange(c) for c in counts]).astype(np.int64)}
    if attention:
        arrays["attention_flat"], arrays["attention_shapes"] = _stacked_maps(maps)
    return arrays, {"n_truncated": n_cut, "model": info.to_dict(), "corpus": corpus.meta}


def _to_device(ids: torch.Tensor, mask: torch.Tensor, dev: torch.device):
    """A padded batch on ``dev`` (pinned, and copied without waiting, on a GPU)."""
    if dev.type == "cpu":
        return ids, mask
    if dev.type == "cuda":
        return (ids.pin_memory().to(dev, non_blocking=True),
                mask.pin_memory().to(dev, non_blocking=True))
    return ids.to(dev), mask.to(dev)


def _pooled(hs, mask: torch.Tensor, lengths: np.ndarray, plan) -> dict[str, torch.Tensor]:
    """Every layer's pooled rows of one batch, computed where the model ran: the planned
    word tokens, the first and the last real token, and the mean over real tokens."""
    dev, D = mask.device, hs[0].shape[-1]
    weights = mask.to(torch.float64)
    ends = torch.as_tensor(lengths - 1, device=dev)  # right padding
    rows_b = torch.arange(len(lengths), device=dev)
    tokens = plan.tokens.to(dev)
    return {
        "words": torch.stack([h.reshape(-1, D).index_select(0, tokens) for h in hs]),
        "first": torch.stack([h[:, 0] for h in hs]),
        "last": torch.stack([h[rows_b, ends] for h in hs]),
        "mean": torch.stack([torch.bmm(weights[:, None, :], h.double())[:, 0]
                             for h in hs]) / weights.sum(dim=1)[None, :, None],
    }


def _to_host(result: dict[str, torch.Tensor], gpu: bool):
    """The batch's results on the CPU; on a GPU the copies start now and the returned
    event says when they are done (after the next forward pass has been queued)."""
    if not gpu:
        return {k: v.cpu() for k, v in result.items()}, None
    host = {k: v.to("cpu", non_blocking=True) for k, v in result.items()}
    event = torch.cuda.Event()
    event.record()
    return host, event


def _word_maps(attentions, batch, lengths, encoded, special: str, name: str,
               maps: list) -> None:
    """Each sentence's word-level attention maps of one batch, into ``maps``."""
    if not attentions:
        raise RuntimeError(f"model {name} returned no attentions; load it with "
                           "attn_implementation='eager' (models.load does this)")
    att = torch.stack(attentions).float().cpu().numpy()  # (La, B, H, T, T)
    for r, s in enumerate(batch):
        maps[s] = word_attention(att[:, r, :, : lengths[s], : lengths[s]],
                                 encoded[s].word_ids, special)


@dataclass
class _PoolPlan:
    """Where one batch's word rows come from (flat token indices) and go (corpus rows)."""

    tokens: torch.Tensor
    rows: np.ndarray
    group_starts: np.ndarray | None  # mean pooling: first token of each word in ``tokens``


def _word_tokens(encoded: _Encoded, pooling: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The token positions whose vectors make a sentence's word rows (the last or first
    subword of each word, or all of them for mean pooling) and, for mean pooling, where
    each word's group starts among them."""
    wids = encoded.word_ids  # plain lists: sentences are short, so NumPy calls cost more
    pos = [t for t, w in enumerate(wids) if w is not None]
    starts = [k for k in range(len(pos)) if k == 0 or wids[pos[k]] != wids[pos[k - 1]]]
    if pooling == "first":
        chosen = [pos[k] for k in starts]
    elif pooling == "last":
        chosen = [pos[k - 1] for k in starts[1:]] + pos[-1:]
    else:
        return np.array(pos, dtype=np.int64), np.array(starts, dtype=np.int64)
    return np.array(chosen, dtype=np.int64), None


def _pool_plan(batch: np.ndarray, tokens: list, starts: np.ndarray, pooling: str,
               T: int) -> _PoolPlan:
    """Where a batch's word rows come from, given each sentence's :func:`_word_tokens`."""
    token_index, group_start, rows = [], [], []
    offset = 0
    for r, s in enumerate(batch):
        chosen, boundaries = tokens[s]
        if boundaries is not None:
            group_start.append(boundaries + offset)
        offset += len(chosen)
        token_index.append(chosen + r * T)
        rows.append(np.arange(starts[s], starts[s + 1]))
    return _PoolPlan(torch.from_numpy(np.concatenate(token_index)), np.concatenate(rows),
                     np.concatenate(group_start) if pooling == "mean" else None)


def _stacked_maps(maps: list[np.ndarray | None]) -> tuple[np.ndarray, np.ndarray]:
    """Every sentence's word attention maps as one flat array and their shapes (how the
    cache keeps them)."""
    filled = [m for m in maps if m is not None]
    if len(filled) != len(maps):
        raise RuntimeError(f"attention maps of {len(maps) - len(filled)} sentences are missing")
    return (np.concatenate([m.ravel() for m in filled]),
            np.array([m.shape for m in filled], dtype=np.int64))


def _mean_groups(gathered: torch.Tensor, plan: _PoolPlan, out: np.ndarray) -> None:
    """Mean pooling: average each word's subword rows (every layer, float64 sums) and write
    them to the word's rows of ``out``."""
    starts = plan.group_starts
    if starts is None:
        raise ValueError("mean pooling needs the first token of each word (a mean plan)")
    g = gathered.numpy()  # (L, tokens, D)
    sizes = np.diff(np.r_[starts, g.shape[1]])
    sums = np.add.reduceat(g.astype(np.float64), starts, axis=1)
    out[:, plan.rows] = (sums / sizes[None, :, None]).astype(out.dtype)


def word_attention(att: np.ndarray, word_ids: list[int | None], special: str = "drop"
                   ) -> np.ndarray:
    """Aggregate token attention to word attention (Clark et al. 2019).

    Parameters
    ----------
    att : numpy.ndarray, shape (layers, heads, t, t)
        Token-level attention of one sentence (rows sum to 1).
    word_ids : list of int or None, length t
        Word index of each token, None for special tokens.
    special : {'drop', 'keep'}
        Drop special-token columns and renormalise rows, or keep them as extra columns.

    Returns
    -------
    numpy.ndarray, shape (layers, heads, w, w) or (layers, heads, w, w + s)
        Row i: attention from word i (mean over its subwords) to each word (sum over its
        subwords), then to each special token when kept. Rows sum to 1.
    """
    wids = np.array([-1 if w is None else w for w in word_ids])
    n_words = int(wids.max()) + 1 if (wids >= 0).any() else 0
    specials = np.flatnonzero(wids < 0)
    cols = n_words + (len(specials) if special == "keep" else 0)
    to_col = np.zeros((len(wids), cols), dtype=np.float64)
    real = np.flatnonzero(wids >= 0)
    to_col[real, wids[real]] = 1.0
    if special == "keep":
        to_col[specials, n_words + np.arange(len(specials))] = 1.0
    from_row = np.zeros((n_words, len(wids)), dtype=np.float64)
    from_row[wids[real], real] = 1.0
    from_row /= from_row.sum(axis=1, keepdims=True)
    words = from_row @ att.astype(np.float64) @ to_col
    if special == "drop":
        words /= words.sum(axis=-1, keepdims=True)
    return words.astype(np.float32)
