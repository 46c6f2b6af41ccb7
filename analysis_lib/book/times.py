"""How long each page takes to run, as measured, and on what machine: the times pages state.

Every build writes its profile beside the executed notebooks (``profile.csv``: each
notebook's wall time, and the machine it ran on: its kind of CPU (model name and widest
vector arithmetic, :func:`analysis_lib.runtime.machine.cpu_kind`), its cores and its speed,
:func:`analysis_lib.runtime.machine.speed`; and the shares of the machine's core time that
were busy and that its host took while each notebook ran, :func:`core_time`). :func:`record`
keeps one build's times in ``book/run_times.csv`` as *cold* (the build started with an empty
cache, so it converted the models, extracted every layer and trained every fine-tuned run)
or *warm* (a rerun with ``--force`` that found all of it in the cache). A warm record
belongs to the cold record of the same machine and profile before it: the two form one
*build*, and a page states cold and warm only from the same build.

Times hold on the machine that measured them. A page therefore states the times of the
reader's kind of CPU (the machine the page runs on) where one is recorded; else those of the
recorded machine nearest in speed, named, with the ratio of the two speeds and the times it
projects here (:func:`sentence`). The running page lists every record (:func:`table`) and the
course page the whole build's (:func:`summary`).

``python -m analysis_lib times`` prints the table; ``--record cold`` or ``--record warm``
keeps the last build of a profile in it.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..runtime import machine as _machine
from ..runtime.cache import atomic_write, disk_usage
from .paths import ROOT

#: the committed table of measured run times
TIMES = ROOT / "book" / "run_times.csv"
#: the columns every record has; :data:`LATER_COLUMNS` are filled in for older records
COLUMNS = ["notebook", "profile", "cache", "seconds", "cpu", "cores", "speed", "build",
           "cache_gb", "measured"]
LATER_COLUMNS = ("speed", "build", "cache_gb")
CACHE_STATES = ("cold", "warm")
#: set by the book's build for the notebooks' kernels: the profile the page runs under
PROFILE_ENV = "ANALYSIS_LIB_BOOK_PROFILE"
#: where the running page's table of run times goes (the build writes it there)
TIMES_MARKER = "% run-times table: written by the build (analysis_lib.book.times)"
#: where the course page's build times go (the build writes them there)
SUMMARY_MARKER = "% build-times summary: written by the build (analysis_lib.book.times)"
#: how a page's run-time sentence starts: a measured time of this machine, not a result
LEAD = "**Run time**"
#: two speeds within this ratio of each other are one speed: no projection is stated
SAME_SPEED = 1.25


def machine() -> tuple[str, int]:
    """This machine's kind of CPU (its model name as ``lscpu`` names it and its widest
    vector arithmetic, :func:`analysis_lib.runtime.machine.cpu_kind`) and the number of
    cores this process may use."""
    return _machine.cpu_kind(), _machine.cores()


@dataclass(frozen=True)
class Machine:
    """A machine as the run times name it: kind of CPU
    (:func:`analysis_lib.runtime.machine.cpu_kind`), cores, speed (GFLOP/s of
    :func:`analysis_lib.runtime.machine.speed`; NaN where unknown)."""

    cpu: str
    cores: int
    speed: float = float("nan")

    @classmethod
    def here(cls) -> Machine:
        """This machine (measures its speed once per process, about 0.1 s)."""
        return cls(_machine.cpu_kind(), _machine.cores(), round(_machine.speed(), 1))

    def label(self) -> str:
        speed = f", {self.speed:.0f} GFLOP/s" if self.speed == self.speed else ""
        return f"{self.cpu}, {self.cores} cores{speed}"

    def as_before(self, before: Machine) -> Machine:
        """``before`` where it is this machine at one speed (the same kind of CPU and cores,
        speeds within :data:`SAME_SPEED` of each other), else this machine. A build states
        the machine of the last build in its folder while the machine stays the same: the
        pages that state the speed stay the same, and a rebuild with nothing new writes no
        page again (a speed measured anew differs from build to build in its last digits)."""
        same = (self.cpu == before.cpu and self.cores == before.cores and before.speed > 0
                and 1 / SAME_SPEED <= self.speed / before.speed <= SAME_SPEED)
        return before if same else self


@dataclass(frozen=True)
class CoreTime:
    """The seconds this machine's cores have spent since it started, summed over its cores:
    ``busy`` computing (for any process, the kernel's interrupts included), ``idle`` with
    nothing to run or waiting for the disk, and ``stolen``: the time a virtual machine's
    cores had work to run but the host ran something else (another machine's work), which
    slows every timing on the machine without showing in any process's CPU time."""

    busy: float
    idle: float
    stolen: float

    def shares_since(self, before: CoreTime) -> tuple[float, float]:
        """``(busy, stolen)``: the shares of the cores' time between ``before`` and this
        reading that were busy and that were stolen (0 to 1; NaN when no time passed)."""
        busy, idle = self.busy - before.busy, self.idle - before.idle
        stolen = self.stolen - before.stolen
        total = busy + idle + stolen
        if not total > 0:
            return math.nan, math.nan
        return busy / total, stolen / total


#: the share of the cores' time a host may take (stolen time) before a build or a benchmark
#: says that its times are slower than the CPU computes
STOLEN_NOTED = 0.05

#: the fields of ``/proc/stat``'s ``cpu`` line, in order (``guest`` and ``guest_nice`` are
#: already counted in ``user`` and ``nice``)
_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def core_time(stat: str | os.PathLike = "/proc/stat") -> CoreTime | None:
    """The machine's :class:`CoreTime` now, read from Linux's ``/proc/stat``; None where it
    cannot be read (another system), so that nothing fails for want of it."""
    try:
        with open(stat, encoding="ascii") as lines:
            first = lines.readline().split()
        ticks = float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, AttributeError):
        return None
    if not first or first[0] != "cpu":
        return None
    try:
        values = dict(zip(_STAT_FIELDS, (int(v) / ticks for v in first[1:])))
    except ValueError:
        return None
    if "idle" not in values:
        return None
    return CoreTime(
        busy=sum(values.get(k, 0.0) for k in ("user", "nice", "system", "irq", "softirq")),
        idle=values["idle"] + values.get("iowait", 0.0),
        stolen=values.get("steal", 0.0))


def read(path: str | os.PathLike = TIMES) -> pd.DataFrame:
    """The measured times (an empty table where none are kept yet). Records kept before
    builds noted their speed have none (NaN), and form one build per machine and day."""
    path = Path(path)
    if not path.is_file():
        return pd.DataFrame(columns=COLUMNS)
    table = pd.read_csv(path, keep_default_na=False, na_values={"speed": [""],
                                                                  "cache_gb": [""]})
    missing = set(COLUMNS) - set(LATER_COLUMNS) - set(table.columns)
    if missing:
        raise ValueError(f"{path} is not a table of run times: it lacks {sorted(missing)}; "
                         f"delete it and record the times again (python -m analysis_lib "
                         f"times --record cold)")
    for column in ("speed", "cache_gb"):
        table[column] = pd.to_numeric(table.get(column, float("nan")), errors="coerce")
    if "build" not in table.columns:
        table["build"] = ""
    table["build"] = table["build"].astype(str)
    old = table.build == ""
    table.loc[old, "build"] = (table.measured.astype(str) + " " + table.cpu.astype(str))[old]
    return table[COLUMNS]


def built_on(built: pd.DataFrame) -> Machine:
    """The machine a build's ``profile.csv`` names (this machine for builds that named
    none)."""
    rows = built.dropna(subset=["cpu"]) if "cpu" in built.columns else built.iloc[:0]
    if rows.empty:
        return Machine.here()
    first = rows.iloc[0]
    return Machine(str(first.cpu), int(first.cores), float(first.get("speed", float("nan"))))


def record(profile: str, cache: str, executed: str | os.PathLike | None = None,
           path: str | os.PathLike = TIMES, today: datetime.date | None = None
           ) -> pd.DataFrame:
    """Keep the last build of ``profile`` (its ``profile.csv`` under ``executed``, by
    default ``_build/executed/<profile>``) as its ``cache`` times (``"cold"`` or ``"warm"``)
    on the machine the build names, replacing what ``path`` held for those notebooks on that
    machine (other machines' records stay); returns the rows kept. Notebooks the build
    reused from an earlier run are left out: they were not run.

    A cold record starts a new build of that machine (and drops its older warm times of the
    same pages); a warm record joins the machine's last cold build of the profile, and is
    refused where there is none. A cold record notes the cache's size (the cache a build
    fills)."""
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
    on = built_on(ran)
    old = read(path)
    same = (old.profile == profile) & (old.cpu == on.cpu) & (old.cores == on.cores)
    day = (today or datetime.date.today()).isoformat()
    if cache == "cold":
        tag = hashlib.sha256(f"{on}|{datetime.datetime.now().isoformat()}".encode())
        build, size = f"{day} {tag.hexdigest()[:6]}", round(disk_usage() / 1e9, 2)
        drop = same & old.notebook.isin(ran.notebook)
    else:
        colds = old[same & (old.cache == "cold")]
        if colds.empty:
            raise ValueError(f"no cold build of the {profile!r} profile on this machine's "
                             f"CPU ({on.cpu}) is recorded, and a warm time belongs to one: "
                             f"record the cold build first (python -m analysis_lib times "
                             f"--record cold --profile {profile}), then rerun it with --force")
        last = colds.sort_values("measured", kind="stable").iloc[-1]
        build, size = last.build, last.cache_gb
        drop = same & old.notebook.isin(ran.notebook) & (old.cache == "warm")
    rows = pd.DataFrame({"notebook": ran.notebook, "profile": profile, "cache": cache,
                         "seconds": ran.wall_s.round(1), "cpu": on.cpu, "cores": on.cores,
                         "speed": on.speed, "build": build, "cache_gb": size,
                         "measured": day})
    table = pd.concat([old[~drop], rows], ignore_index=True)
    table = table.sort_values(["profile", "notebook", "cpu", "cache"], kind="stable")
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


@dataclass(frozen=True)
class Build:
    """One recorded build of a profile on one machine: its pages' cold and warm seconds."""

    profile: str
    machine: Machine
    measured: str
    cache_gb: float
    cold: dict[str, float]
    warm: dict[str, float]


def builds(table: pd.DataFrame) -> list[Build]:
    """The recorded builds in ``table`` (:func:`read`), newest first."""
    found = []
    for (profile, _), rows in table.groupby(["profile", "build"], sort=False):
        first = rows.iloc[0]
        found.append(Build(
            str(profile), Machine(str(first.cpu), int(first.cores), float(first.speed)),
            str(rows.measured.max()), float(rows.cache_gb.max()),
            {r.notebook: float(r.seconds) for r in rows.itertuples() if r.cache == "cold"},
            {r.notebook: float(r.seconds) for r in rows.itertuples() if r.cache == "warm"}))
    return sorted(found, key=lambda b: b.measured, reverse=True)


def ratio(recorded: Machine, here: Machine) -> float:
    """How many times longer a run takes here than on ``recorded``, by their speeds (NaN
    where either speed is unknown)."""
    return recorded.speed / here.speed if recorded.speed > 0 and here.speed > 0 \
        else float("nan")


def nearest(candidates: list[Build], here: Machine) -> tuple[Build, bool]:
    """The build whose times hold best here, and whether it ran on this kind of CPU: the
    builds on this machine's CPU model where there are any (the one nearest in speed, then
    cores, then the newest), else the build nearest in speed (the newest where speeds are
    unknown)."""
    def distance(build: Build) -> tuple[float, int, int]:
        r = ratio(build.machine, here)
        return (abs(math.log(r)) if r == r else math.inf,
                abs(build.machine.cores - here.cores), candidates.index(build))

    mine = [b for b in candidates if b.machine.cpu == here.cpu]
    return min(mine or candidates, key=distance), bool(mine)


def _cold_warm(cold: float | None, warm: float | None, scale: float = 1.0) -> str:
    """``"4 min cold, 48 s warm"``; a warm rerun no faster than the cold run is said to be
    about as long (the page reuses little from the cache), never stated longer."""
    said = [f"{duration(cold * scale)} cold"] if cold is not None else []
    if warm is not None:
        said.append("about as long warm (it reuses little from the cache)"
                    if cold is not None and warm >= cold else f"{duration(warm * scale)} warm")
    return ", ".join(said)


def _stated(build: Build, notebook: str | None, here: Machine, own_kind: bool) -> str:
    """One build's times of one page (``notebook``) or of the whole build (None), with
    their source, projected to this machine where it is another kind or speed."""
    if notebook is None:
        cold = sum(build.cold.values()) if build.cold else None
        warm = sum(build.warm.values()) if build.warm else None
    else:
        cold, warm = build.cold.get(notebook), build.warm.get(notebook)
    where = f"{build.machine.label()}, {build.measured}"
    r = ratio(build.machine, here)
    measured = _cold_warm(cold, warm)
    if own_kind and not (r == r and not 1 / SAME_SPEED <= r <= SAME_SPEED):
        return f"`{build.profile}` {measured} (on this kind of CPU: {where})"
    if r != r:
        return (f"`{build.profile}` {measured} on {where}; this machine's CPU ({here.cpu}) "
                f"has no record yet, and that build's speed was not recorded to scale it by")
    kind = "this kind of CPU at another speed" if own_kind else \
        f"the recorded CPU nearest in speed to this one ({here.label()})"
    return (f"`{build.profile}` about {_cold_warm(cold, warm, r)} here: {measured} on "
            f"{kind}, {where}, which computes {r:.2f} times as fast")


def sentence(notebook: str, path: str | os.PathLike = TIMES,
             profile: str | None = None, here: Machine | None = None) -> str:
    """One page's measured times (Markdown) on this machine, per profile cold and warm, from
    one build: the times measured on this kind of CPU (``here``, by default this machine)
    where one is recorded, else those of the recorded machine nearest in speed with the ratio
    and the projected times. ``profile``: the profile the page runs under (by default the one
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
        return f"{LEAD}: not measured yet for `{notebook}`.{missing or ' ' + record}"
    here = here or Machine.here()
    found = builds(mine)
    profiles = sorted({b.profile for b in found}, key=lambda p: (p != profile, p))
    parts = []
    for name in profiles:
        build, own_kind = nearest([b for b in found if b.profile == name], here)
        parts.append(_stated(build, notebook, here, own_kind))
    return (f"{LEAD} (cold: the cache empty at the start; warm: a rerun with everything "
            "cached): " + "; ".join(parts) + "." + missing)


def summary(profile: str = "default", path: str | os.PathLike = TIMES,
            here: Machine | None = None) -> str:
    """The whole build of ``profile`` (Markdown): every page's time added up, cold and warm,
    and the cache it filled, from the recorded build that holds best on this machine
    (:func:`nearest`), with its source."""
    found = [b for b in builds(read(path)) if b.profile == profile]
    if not found:
        return (f"The `{profile}` build's times are not recorded yet (`python -m analysis_lib "
                f"times --record cold --profile {profile}` after its build).")
    here = here or Machine.here()
    build, own_kind = nearest(found, here)
    size = (f"; its cache held {build.cache_gb:.1f} GB after the cold build"
            if build.cache_gb == build.cache_gb else "")
    return (f"The whole book, {_stated(build, None, here, own_kind)}{size} (every page's "
            f"time on the running page).")


def table(path: str | os.PathLike = TIMES) -> str:
    """Every recorded build as Markdown for the running page: per machine, a table with one
    row per page (and their total) and a cold and a warm column per profile, cold and warm
    from one build."""
    found = builds(read(path))
    if not found:
        return "No run times are recorded yet (`python -m analysis_lib times --record cold`).\n"
    out = []
    for where in sorted({(b.machine.cpu, b.machine.cores) for b in found}):
        mine = [b for b in found if (b.machine.cpu, b.machine.cores) == where]
        latest: dict[str, Build] = {}
        for build in mine:  # newest first: one build per profile
            latest.setdefault(build.profile, build)
        shown = sorted(latest.values(), key=lambda b: b.profile)
        pages = sorted({n for b in shown for n in [*b.cold, *b.warm]})
        columns = [(b, c) for b in shown for c in CACHE_STATES if getattr(b, c)]
        out.append(f"**{where[0]}**, {where[1]} cores: " + "; ".join(
            f"`{b.profile}` built {b.measured}"
            + (f" at {b.machine.speed:.0f} GFLOP/s" if b.machine.speed == b.machine.speed
               else "")
            + (f", cache {b.cache_gb:.1f} GB" if b.cache_gb == b.cache_gb else "")
            for b in shown) + ".\n")
        out.append("| page | " + " | ".join(f"`{b.profile}` {c}" for b, c in columns) + " |")
        out.append("|---|" + "---:|" * len(columns))
        for page in pages:
            cells = [duration(getattr(b, c)[page]) if page in getattr(b, c) else ""
                     for b, c in columns]
            out.append(f"| `{page}` | " + " | ".join(cells) + " |")
        totals = [duration(sum(getattr(b, c).values())) for b, c in columns]
        out.append("| all pages | " + " | ".join(totals) + " |\n")
    return "\n".join(out)
