"""How long each page takes to run, as measured, and on what machine: the times pages state.

Every build writes its profile beside the executed notebooks (``profile.csv``: each
notebook's wall time). :func:`record` keeps one build's times in ``book/run_times.csv`` as
*cold* (the build started with an empty cache, so it converted the models, extracted every
layer and trained every fine-tuned run) or *warm* (a rerun that found all of it in the
cache), beside the machine they were measured on: its CPU's model name, its number of cores
and the date. Each chapter states its own times with :func:`sentence`, and the running page
lists them all (:func:`table`), so that no page promises a time nobody measured.

``python -m analysis_lib times`` prints the table; ``--record cold`` or ``--record warm``
keeps the last build of a profile in it.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pandas as pd

from ..runtime import machine as _machine
from ..runtime.cache import atomic_write
from .paths import ROOT

#: the committed table of measured run times
TIMES = ROOT / "book" / "run_times.csv"
COLUMNS = ["notebook", "profile", "cache", "seconds", "cpu", "cores", "measured"]
CACHE_STATES = ("cold", "warm")
#: set by the book's build for the notebooks' kernels: the profile the page runs under
PROFILE_ENV = "ANALYSIS_LIB_BOOK_PROFILE"
#: where the running page's table of run times goes (the build writes it there)
TIMES_MARKER = "% run-times table: written by the build (analysis_lib.book.times)"


def machine() -> tuple[str, int]:
    """This machine's CPU model name (as ``lscpu`` names it) and the number of cores this
    process may use (:mod:`analysis_lib.runtime.machine`)."""
    return _machine.cpu_name(), _machine.cores()


def read(path: str | os.PathLike = TIMES) -> pd.DataFrame:
    """The measured times (an empty table where none are kept yet)."""
    path = Path(path)
    if not path.is_file():
        return pd.DataFrame(columns=COLUMNS)
    table = pd.read_csv(path, keep_default_na=False)
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise ValueError(f"{path} is not a table of run times: it lacks {sorted(missing)}; "
                         f"delete it and record the times again (python -m analysis_lib "
                         f"times --record cold)")
    return table[COLUMNS]


def record(profile: str, cache: str, executed: str | os.PathLike | None = None,
           path: str | os.PathLike = TIMES, today: datetime.date | None = None
           ) -> pd.DataFrame:
    """Keep the last build of ``profile`` (its ``profile.csv`` under ``executed``, by
    default ``_build/executed/<profile>``) as its ``cache`` times (``"cold"`` or ``"warm"``)
    on this machine, replacing what ``path`` held for those notebooks; returns the rows
    kept. Notebooks the build reused from an earlier run are left out: they were not run."""
    if cache not in CACHE_STATES:
        raise ValueError(f"cache must be one of {CACHE_STATES}, got {cache!r}")
    folder = Path(executed) if executed else ROOT / "_build" / "executed" / profile
    source = folder / "profile.csv"
    if not source.is_file():
        raise FileNotFoundError(f"no build of the {profile!r} profile in {folder}: build it "
                                f"first (python -m analysis_lib book --profile {profile})")
    built = pd.read_csv(source)
    ran = built[(built.kind == "notebook") & ~built.reused.astype(bool)]
    if ran.empty:
        raise ValueError(f"the last build in {folder} ran no notebook (all were reused): "
                         f"rebuild with --force to measure them")
    cpu, cores = machine()
    rows = pd.DataFrame({"notebook": ran.notebook, "profile": profile, "cache": cache,
                         "seconds": ran.wall_s.round(1), "cpu": cpu, "cores": cores,
                         "measured": (today or datetime.date.today()).isoformat()})
    old = read(path)
    keep = ~(old.notebook.isin(rows.notebook) & (old.profile == profile)
             & (old.cache == cache))
    table = pd.concat([old[keep], rows], ignore_index=True)
    table = table.sort_values(["profile", "notebook", "cache"], kind="stable")
    atomic_write(Path(path), lambda tmp: table.to_csv(tmp, index=False))
    return rows.reset_index(drop=True)


def duration(seconds: float) -> str:
    """``48 s``, ``4 min 10 s``, ``1 h 12 min``: a wall time as a reader reads it."""
    seconds = round(float(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def sentence(notebook: str, path: str | os.PathLike = TIMES,
             profile: str | None = None) -> str:
    """One page's measured times (Markdown), per profile cold and warm, with the machines
    they were measured on. ``profile``: the profile the page runs under (by default the one
    the book's build names in :data:`PROFILE_ENV`), stated first, or said to be unmeasured;
    a sentence that says so where no times are kept."""
    if profile is None:
        profile = os.environ.get(PROFILE_ENV) or None
    table = read(path)
    mine = table[table.notebook == notebook]
    record = f"`python -m analysis_lib times --record cold --profile {profile or 'NAME'}`"
    missing = ("" if profile is None or (mine.profile == profile).any() else
               f" This build's profile, `{profile}`, is not measured yet ({record} after "
               f"its build keeps its times).")
    if mine.empty:
        return f"**Run time**: not measured yet for `{notebook}`.{missing or ' ' + record}"
    if profile is not None:  # the page's own profile first
        mine = mine.sort_values("profile", key=lambda p: p != profile, kind="stable")
    parts = []
    for (cpu, cores, measured), group in mine.groupby(["cpu", "cores", "measured"],
                                                      sort=False):
        runs = []
        for profile, rows in group.groupby("profile", sort=False):
            states = dict(zip(rows.cache, rows.seconds, strict=True))
            said = ", ".join(f"{duration(states[c])} {c}" for c in CACHE_STATES if c in states)
            runs.append(f"`{profile}` {said}")
        parts.append(f"{'; '.join(runs)} (on {cpu}, {cores} cores, {measured})")
    return ("**Run time**, measured (cold: the cache empty at the start; warm: a rerun with "
            "everything cached): " + "; ".join(parts) + "." + missing)


def table(path: str | os.PathLike = TIMES) -> str:
    """Every page's measured times as a Markdown table for the running page: one row per
    page, one column per profile and cache state, and the machines under it."""
    times = read(path)
    if times.empty:
        return "No run times are recorded yet (`python -m analysis_lib times --record cold`).\n"
    wide = times.assign(column=times.profile.map("`{}`".format) + " " + times.cache)
    grid = wide.pivot_table(index="notebook", columns="column", values="seconds",
                            aggfunc="first", sort=False)
    lines = ["| page | " + " | ".join(grid.columns) + " |",
             "|---|" + "---:|" * len(grid.columns)]
    for notebook, row in grid.iterrows():
        cells = [duration(v) if pd.notna(v) else "" for v in row]
        lines.append(f"| `{notebook}` | " + " | ".join(cells) + " |")
    machines = times.drop_duplicates(["profile", "cache", "cpu", "cores", "measured"])
    lines.append("")
    lines.append("Measured on: " + "; ".join(
        f"`{m.profile}` {m.cache}: {m.cpu}, {m.cores} cores, {m.measured}"
        for m in machines.itertuples()) + ".")
    return "\n".join(lines) + "\n"
