"""On-disk cache for arrays, keyed by everything that changes them.

An entry is a folder ``<root>/<namespace>/<key>/`` holding one ``.npy`` file per array and a
``manifest.json`` with each file's shape, dtype and SHA-256, plus free metadata. Nothing in an
entry can run code when read: arrays load with ``allow_pickle=False`` and metadata is JSON.

Writes are atomic: the entry is written to a private temporary folder beside the final one and
renamed into place, so a reader sees either no entry or a whole one, and two processes writing
the same key leave one valid entry. A damaged entry (missing file, truncated or altered array,
unreadable manifest) is reported with a warning, removed, and treated as a miss so the caller
recomputes it.

The root folder is, in order of precedence: the ``root`` argument, the ``ANALYSIS_LIB_CACHE``
environment variable, or the user cache folder of the platform (``~/.cache/analysis_lib`` on
Linux).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import re
import shutil
import socket
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__

ENV_VAR = "ANALYSIS_LIB_CACHE"
MANIFEST = "manifest.json"


def disk_usage(root: str | os.PathLike | None = None) -> int:
    """Bytes the cache's files take (0 for a cache that does not exist yet)."""
    total = 0
    for folder, _, files in os.walk(default_root(root)):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def default_root(root: str | os.PathLike | None = None) -> Path:
    """The cache's root folder, absolute: ``root`` if given, else ``$ANALYSIS_LIB_CACHE``,
    else the platform's user cache folder. A relative folder is taken from the working
    folder of the process that first reads it: :func:`pin_root` makes the environment
    variable absolute for the processes it starts (notebook kernels, sweep workers), which
    would otherwise each read it from their own working folder."""
    if root is not None:
        return Path(root).expanduser().absolute()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().absolute()
    import platformdirs

    return Path(platformdirs.user_cache_dir("analysis_lib"))


def pin_root() -> None:
    """Make a relative ``$ANALYSIS_LIB_CACHE`` absolute (from this process's working folder),
    so that the processes this one starts, whatever folder they work in, share one cache."""
    env = os.environ.get(ENV_VAR)
    if env and not Path(env).expanduser().is_absolute():
        os.environ[ENV_VAR] = str(Path(env).expanduser().absolute())


def make_key(**parts: Any) -> str:
    """A stable hex key for the given parts (and the library version).

    The parts are serialised as canonical JSON (sorted keys), so their order does not matter;
    values must be JSON-serialisable (numbers, strings, lists, dicts, None).
    """
    payload = {"library_version": __version__, **parts}
    text = json.dumps(payload, sort_keys=True, default=_json_default)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


PACKAGE = Path(__file__).resolve().parents[1]


def code_digest(*modules: str) -> str:
    """A digest of the source of the library modules given (``"analysis_lib.extract"``) and
    of every library module they import, directly or through others (read from the code,
    not run). A cache key that includes it follows the code that computed the entry:
    editing a measure changes the digest of the measures and not that of extraction, and an
    entry computed by older code is recomputed instead of served."""
    files: set[Path] = set()
    for module in modules:
        files |= _closure(module)
    digest = hashlib.sha256()
    for file in sorted(files):
        digest.update(str(file.relative_to(PACKAGE)).encode() + b"\0")
        digest.update(_read_source(file))
    return digest.hexdigest()[:16]


def _read_source(file: Path) -> bytes:
    return file.read_bytes()


@functools.cache
def _closure(module: str) -> frozenset[Path]:
    """The source files of ``module`` and of the library modules it imports, transitively."""
    seen: set[Path] = set()
    todo = [module]
    while todo:
        file = _source(todo.pop())
        if file is None or file in seen:
            continue
        seen.add(file)
        todo += _imports(file)
    return frozenset(seen)


def _source(module: str) -> Path | None:
    """The file of a library module (``analysis_lib.a.b``), or None outside the library."""
    parts = module.split(".")
    if parts[0] != PACKAGE.name:
        return None
    base = PACKAGE.joinpath(*parts[1:])
    for file in (base.with_suffix(".py"), base / "__init__.py"):
        if file.is_file():
            return file
    return None


def _imports(file: Path) -> list[str]:
    """The library modules a source file imports anywhere in it (inside functions too)."""
    import ast

    package = ".".join((PACKAGE.name, *file.relative_to(PACKAGE).parent.parts))
    found = []
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found.append(name)
            found += [f"{name}.{alias.name}" for alias in node.names]  # submodules
    return found


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cache key part of type {type(value).__name__} is not JSON-serialisable")


def sha256_file(path: Path) -> str:
    """SHA-256 hex digest of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _valid_name(name: str) -> bool:
    return bool(name) and all(ch.isalnum() or ch in "._-" for ch in name) and name[0] != "."


class ArrayCache:
    """A folder of cached array bundles.

    Parameters
    ----------
    namespace : str
        Sub-folder separating kinds of entries (``"extract"``, ``"similarity"``, ...).
    root : path, optional
        Root folder; see :func:`default_root`.
    """

    def __init__(self, namespace: str, root: str | os.PathLike | None = None):
        if not _valid_name(namespace):
            raise ValueError(
                f"cache namespace {namespace!r} must use letters, digits, '.', '_', '-'")
        self.root = default_root(root)
        self.namespace = namespace
        self.folder = self.root / namespace

    def path(self, key: str) -> Path:
        """Folder of the entry for ``key``."""
        if not _valid_name(key):
            raise ValueError(f"cache key {key!r} must use letters, digits, '.', '_', '-'")
        return self.folder / key

    def __contains__(self, key: str) -> bool:
        return (self.path(key) / MANIFEST).is_file()

    def load(self, key: str) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """Read an entry: ``(arrays, metadata)``, or ``None`` on a miss or a damaged entry
        (which is then removed so that it is recomputed)."""
        entry = self.path(key)
        if not entry.exists():
            return None
        try:
            return self._read(entry)
        except (OSError, ValueError, KeyError, TypeError) as error:
            warnings.warn(
                f"cache entry {entry} is damaged ({error}); it will be recomputed",
                RuntimeWarning,
                stacklevel=2,
            )
            shutil.rmtree(entry, ignore_errors=True)
            return None

    @staticmethod
    def _read(entry: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        if not (isinstance(manifest, dict) and isinstance(manifest.get("arrays"), dict)
                and isinstance(manifest.get("meta"), dict)):
            raise ValueError("the manifest does not hold 'arrays' and 'meta' mappings")
        for name, info in manifest["arrays"].items():
            if not _valid_name(name):  # "../x" would read a file outside the entry
                raise ValueError(f"the manifest names an array {name!r} outside its entry")
            if not (isinstance(info, dict) and {"shape", "dtype", "sha256"} <= set(info)):
                raise ValueError(f"the manifest entry of {name!r} is incomplete")
        arrays = {}
        for name, info in manifest["arrays"].items():
            file = entry / f"{name}.npy"
            if sha256_file(file) != info["sha256"]:
                raise ValueError(f"checksum mismatch in {file.name}")
            array = np.load(file, allow_pickle=False)
            if list(array.shape) != info["shape"] or str(array.dtype) != info["dtype"]:
                raise ValueError(f"{file.name} has shape {array.shape}, expected {info['shape']}")
            arrays[name] = array
        return arrays, manifest["meta"]

    def save(self, key: str, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> Path:
        """Write an entry atomically and return its folder.

        If a valid entry for ``key`` already exists (another process finished first) it is
        kept and this write is discarded; the two hold the same result by construction.
        """
        final = self.path(key)

        def write(tmp: Path) -> None:
            manifest: dict[str, Any] = {"arrays": {}, "meta": dict(meta)}
            for name, array in arrays.items():
                if not _valid_name(name):
                    raise ValueError(f"array name {name!r} must use letters, digits, '.', '_', '-'")
                array = np.ascontiguousarray(array)
                if array.dtype == object:
                    raise TypeError(f"array {name!r} has dtype object, which cannot be cached")
                file = tmp / f"{name}.npy"
                np.save(file, array, allow_pickle=False)
                manifest["arrays"][name] = {
                    "shape": list(array.shape),
                    "dtype": str(array.dtype),
                    "sha256": sha256_file(file),
                }
            text = json.dumps(manifest, sort_keys=True, default=_json_default)
            (tmp / MANIFEST).write_text(text, encoding="utf-8")

        publish_folder(final, write, lambda: self._is_whole(final))
        return final

    def _is_whole(self, entry: Path) -> bool:
        try:
            self._read(entry)
            return True
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def get_or_compute(
        self,
        key: str,
        compute: Callable[[], tuple[Mapping[str, np.ndarray], Mapping[str, Any]]],
        *,
        required_arrays: tuple[str, ...] = (),
        required_meta: tuple[str, ...] = (),
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Return the entry for ``key``, computing and saving it on a miss.

        ``required_arrays`` and ``required_meta`` name what a whole entry must hold: an entry
        without them is damaged (warned about, removed and computed again). The cache folder
        is checked for writing *before* anything is computed.
        """
        hit = self._complete(key, required_arrays, required_meta)
        if hit is not None:
            return hit
        check_writable(self.folder)
        with claimed(self.path(key)):
            # another process may have computed it while this one waited for the lock
            hit = self._complete(key, required_arrays, required_meta)
            if hit is not None:
                return hit
            arrays, meta = compute()
            self.save(key, arrays, meta)
        return {k: np.asarray(v) for k, v in arrays.items()}, dict(meta)

    def _complete(self, key: str, required_arrays: tuple[str, ...],
                  required_meta: tuple[str, ...]
                  ) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """The entry for ``key`` when it holds what is required; else None, after removing
        (with a warning) an entry that lacks some of it."""
        hit = self.load(key)
        if hit is None:
            return None
        missing = [a for a in required_arrays if a not in hit[0]] + [
            m for m in required_meta if hit[1].get(m) is None]
        if not missing:
            return hit
        warnings.warn(f"cache entry {self.path(key)} is damaged (it lacks {missing}); it "
                      "will be recomputed", RuntimeWarning, stacklevel=3)
        shutil.rmtree(self.path(key), ignore_errors=True)
        return None

    def clear(self) -> None:
        """Remove every entry of this namespace."""
        shutil.rmtree(self.folder, ignore_errors=True)


#: the hidden folder, in the cache's root, of the lock files :func:`claimed` takes
LOCKS = ".locks"


@contextlib.contextmanager
def claimed(final: Path) -> Iterator[None]:
    """Hold the right to compute the cache entry ``final`` (``<root>/<kind>/<name>``): an
    exclusive lock on the file ``<root>/.locks/<kind>/<name>.lock``, released when the
    block ends, or by the system when the process ends however it ends. A second process
    that asks for the same entry waits here, then finds it in the cache: when two notebooks
    or sweep workers need one model or extraction at once, it is computed once. The caller
    looks the entry up again inside the block. Two paths to one entry (through a linked
    folder) take one lock. Where the system has no ``fcntl`` (Windows) the block runs
    unlocked, and two processes may compute the same entry (the atomic writes keep one)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    final = final.resolve()
    folder = final.parent.parent / LOCKS / final.parent.name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        check_writable(final.parent)  # an error that names the folder and the fix
        raise
    with open(folder / f"{final.name}.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: the folders :func:`publish_folder` found writable in this process (checked once each)
_WRITABLE: set[Path] = set()


def check_writable(folder: Path) -> None:
    """Make sure files can be written in ``folder`` (creating it), or raise an ``OSError``
    that says where and how to choose another location (for the cache, through
    ``$ANALYSIS_LIB_CACHE`` or ``cache_dir``)."""
    folder = Path(folder)
    fix = (f"choose a folder you can write to (for the cache: set the {ENV_VAR} environment "
           "variable, or pass cache_dir=...)")
    for place in (folder, *folder.parents):
        if place.exists():
            if not place.is_dir():
                raise OSError(f"{place} is a file, not a folder; {fix}")
            break
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise OSError(f"cannot write to {folder} ({error}); {fix}") from error


def _rename_into_place(tmp: Path, final: Path, valid: Callable[[], bool]) -> None:
    """Rename the finished folder ``tmp`` to ``final``. When ``final`` exists already: keep it
    if ``valid()`` says it is whole (another process finished first), else replace it."""
    for _ in range(3):
        try:
            os.rename(tmp, final)
            return
        except OSError:
            if not final.exists() and not final.is_symlink():
                continue
            if final.is_symlink() or not final.is_dir():
                final.unlink()  # a stray file where the entry's folder belongs
                continue
            if valid():
                return
            shutil.rmtree(final, ignore_errors=True)
    raise OSError(f"could not publish cache entry {final}: it exists and could not be "
                  f"replaced (permissions?); remove {final} by hand, or set {ENV_VAR} to "
                  "another folder")


def publish_folder(final: Path, write: Callable[[Path], None], valid: Callable[[], bool]
                   ) -> Path:
    """Create the folder ``final`` atomically: ``write(tmp)`` fills a private temporary folder
    beside it, which is then renamed into place (see ``_rename_into_place``). A reader
    sees no folder or a whole one; a failed ``write`` leaves nothing behind. A folder that
    cannot be written (read-only, or a file in the way) is an ``OSError`` that says where
    and how to choose another cache location (:func:`check_writable`), before ``write``
    does any work."""
    if final.parent not in _WRITABLE:
        check_writable(final.parent)
        _WRITABLE.add(final.parent)
    sweep_stale(final.parent)
    tmp = final.parent / f".tmp-{final.name}-{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        try:
            write(tmp)
        except Exception as error:
            if not _out_of_space(error):
                raise
            free = shutil.disk_usage(final.parent).free
            raise OSError(
                errno.ENOSPC,
                f"the disk ran out of space while writing the cache entry {final.name} under "
                f"{final.parent} ({free / 2**20:.0f} MB free now; {error}); nothing was "
                "half-written: free some space (the cache's older entries can go, see "
                "book/running.md) or set ANALYSIS_LIB_CACHE to a folder on a larger disk, and "
                "run again") from error
        _rename_into_place(tmp, final, valid)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _out_of_space(error: Exception) -> bool:
    """Whether a write failed for want of disk space (or of quota). NumPy reports a short
    write as an OSError without an errno ("61824 requested and 3040 written"), and
    safetensors as its own error type, so the message is checked too."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(error)
    return bool(re.search(r"\d+ requested and \d+ written", text)) or any(
        words in text for words in ("Not enough free space", "No space left on device",
                                    "StorageFull", "Disk quota exceeded"))


#: this machine's name in temporary names, so that a sweep on a shared cluster folder only
#: judges the processes of its own machine
_HOST = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:40] or "host"
#: how old another machine's (or an unreadable) temporary file must be to count as left over
STALE_SECONDS = 24 * 3600


def sweep_stale(folder: Path) -> int:
    """Remove the temporary files and folders (``.tmp-*``, ``.*.tmp``) that a process killed
    while writing left in ``folder``: those of this machine whose process is gone, and any
    older than :data:`STALE_SECONDS`. Returns how many went. A write in progress is never
    touched (its process is alive)."""
    removed = 0
    try:
        entries = list(folder.iterdir())
    except OSError:
        return 0
    now = time.time()
    for entry in entries:
        name = entry.name
        if not (name.startswith(".tmp-") or (name.startswith(".") and name.endswith(".tmp"))):
            continue
        owner = _owner(name)
        try:
            age = now - entry.lstat().st_mtime
        except OSError:
            continue
        gone = owner is not None and owner[0] == _HOST and not _alive(owner[1])
        if gone or age > STALE_SECONDS:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()
            removed += 1
    return removed


def _owner(name: str) -> tuple[str, int] | None:
    """(machine, process id) of a temporary name this module made, or None."""
    match = re.search(r"-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-[0-9a-f]{8}$", name) or \
        re.search(r"\.(?P<host>[A-Za-z0-9_]+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp$", name)
    return (match["host"], int(match["pid"])) if match else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists but belongs to someone else
        return True
    return True


def folder_checksums(folder: Path, files: str | list[str]) -> dict[str, str]:
    """SHA-256 of files in ``folder``: a glob pattern, or a list of names (a missing file
    raises ``OSError``)."""
    names = sorted(p.name for p in folder.glob(files)) if isinstance(files, str) else files
    return {name: sha256_file(folder / name) for name in names}


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Write the file ``path`` atomically: ``write(tmp)`` fills a temporary file in the same
    folder, which is then renamed into place. A failed write (a full disk, an interrupt)
    leaves no temporary file behind, and one left by a killed process is swept by the next
    write into the folder (:func:`sweep_stale`). A folder that cannot be written is an
    ``OSError`` that names it and the fix (:func:`check_writable`)."""
    if path.parent not in _WRITABLE:
        check_writable(path.parent)
        _WRITABLE.add(path.parent)
    sweep_stale(path.parent)
    tmp = path.with_name(f".{path.name}.{_HOST}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write a text file atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
