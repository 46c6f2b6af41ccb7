"""Where a build's time goes: one record per step (an extraction, a training run, a measure
suite, a resampling loop) with its wall time, CPU time, peak memory and bytes written.

Recording is off unless the environment variable ``ANALYSIS_LIB_PROFILE`` names a file; the
book's build sets it for every notebook's kernel (``_build/executed/<profile>/profile/``)
and puts the records together into ``profile.csv`` beside the executed notebooks.

* ``wall_s``: seconds on the clock; ``cpu_s``: CPU seconds of this process and of the child
  processes it waited for during the step (all threads: a step on two busy cores shows about
  twice its wall time);
* ``peak_rss_mb``: the process's peak resident memory so far (Linux: ``ru_maxrss``), so the
  largest value of a notebook is that notebook's peak (NaN where the system has no
  ``resource`` module; CPU time there is this process's own);
* ``written_mb``: bytes this process wrote to disk during the step (``/proc/self/io``; NaN
  where the system does not say);
* ``depth``: 1 for a step that no other step encloses; totals add up the depth-1 steps only.
  A worker process started inside a step (the zoo's side-by-side pretraining) records its
  steps one level deeper, so they are not counted twice.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

try:  # POSIX only; elsewhere CPU time is this process's own and the peak memory unknown
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import pandas as pd

# a function that profiled() wraps
_F = TypeVar("_F", bound=Callable[..., Any])

ENV = "ANALYSIS_LIB_PROFILE"
#: the depth of the step a process was started in: a worker process's steps sit inside it
DEPTH_ENV = "ANALYSIS_LIB_PROFILE_DEPTH"
_DEPTH = contextvars.ContextVar("analysis_lib_profile_depth",
                                default=int(os.environ.get(DEPTH_ENV, "0") or 0))
_MB = 1024 * 1024


def _written() -> float:
    """Bytes this process has written to storage, or NaN where /proc/self/io is missing."""
    try:
        with open("/proc/self/io", encoding="ascii") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return float(line.split()[1])
    except OSError:
        pass
    return float("nan")


def _cpu() -> float:
    if resource is None:  # pragma: no cover - Windows
        return time.process_time()
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def _peak_mb() -> float:
    if resource is None:  # pragma: no cover - Windows
        return float("nan")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / _MB if sys.platform == "darwin" else peak / 1024  # bytes vs kilobytes


@contextlib.contextmanager
def step(kind: str, name: str, **fields: Any) -> Iterator[None]:
    """Record the enclosed work as one step (``kind``: what sort of work, e.g.
    ``"extract"``; ``name``: which one, e.g. the model; ``fields``: anything else worth a
    column, such as ``cached=True``). Does nothing unless :data:`ENV` is set."""
    path = os.environ.get(ENV)
    if not path:
        yield
        return
    wall, cpu, written = time.perf_counter(), _cpu(), _written()
    token = _DEPTH.set(_DEPTH.get() + 1)
    outer = os.environ.get(DEPTH_ENV)
    os.environ[DEPTH_ENV] = str(_DEPTH.get())  # for worker processes started inside
    try:
        yield
    finally:
        depth = _DEPTH.get()
        _DEPTH.reset(token)
        if outer is None:
            os.environ.pop(DEPTH_ENV, None)
        else:
            os.environ[DEPTH_ENV] = outer
        record = {"kind": kind, "name": str(name), "depth": depth,
                  "wall_s": round(time.perf_counter() - wall, 4),
                  "cpu_s": round(_cpu() - cpu, 4), "peak_rss_mb": round(_peak_mb(), 1),
                  "written_mb": round((_written() - written) / _MB, 3), **fields}
        line = json.dumps(record, default=str) + "\n"
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:  # one short line: one write
            f.write(line)


def read(path: str | os.PathLike) -> pd.DataFrame:
    """The records of one profile file as a table (empty when the file is missing); a line
    that is not a JSON object (a write cut short) is skipped, not fatal."""
    import pandas as pd

    rows = []
    path = Path(path)
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                rows.append(record)
    return pd.DataFrame(rows)


def by_kind(records: pd.DataFrame) -> pd.DataFrame:
    """Totals per (notebook, kind) of the depth-1 steps: steps, wall, CPU, written, and the
    largest peak memory."""
    if records.empty:
        return records
    top = records[records.depth == 1]
    keys = [c for c in ("notebook", "kind") if c in top]
    return (top.groupby(keys, sort=False)
            .agg(steps=("wall_s", "size"), wall_s=("wall_s", "sum"), cpu_s=("cpu_s", "sum"),
                 written_mb=("written_mb", "sum"), peak_rss_mb=("peak_rss_mb", "max"))
            .round(1).reset_index())


def profiled(kind: str, name: Callable[..., str] | None = None) -> Callable[[_F], _F]:
    """Decorator: each call of the function is one :func:`step` of ``kind``, named by
    ``name(*args, **kwargs)`` (default: the function's name)."""
    import functools

    def wrap(function: _F) -> _F:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not os.environ.get(ENV):
                return function(*args, **kwargs)
            label = name(*args, **kwargs) if name else function.__name__
            with step(kind, label):
                return function(*args, **kwargs)
        return cast(_F, call)
    return wrap


def label(thing: Any) -> str:
    """A short name for a model, task or corpus in a step's ``name``."""
    info = getattr(thing, "info", None)
    for candidate in (getattr(info, "name", None), getattr(thing, "name", None)):
        if isinstance(candidate, str):
            return candidate
    return str(thing)[:80]
