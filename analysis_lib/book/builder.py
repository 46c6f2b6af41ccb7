"""Build the book: run every notebook with papermill under a profile, then Jupyter Book.

``python -m analysis_lib book --profile NAME`` calls :func:`build`:

1. every notebook listed in ``_toc.yml`` is executed by papermill with the profile's
   parameters (``profiles/NAME.yml``; each notebook receives the ones its ``parameters`` cell
   declares) into ``_build/executed/NAME/``. The sources in ``notebooks/`` stay without outputs.
   An executed copy is reused when the notebook, its parameters and the library are unchanged.
2. the book's sources (``_config.yml``, ``_toc.yml``, ``book/``) and the executed notebooks are
   staged in ``_build/book-NAME/`` with a vega bundle in ``_static/`` (see
   :mod:`analysis_lib.book.render`), and ``jupyter-book build`` runs there strictly
   (``-W -n --keep-going``) with its own execution off.

A failing cell stops the build and shows the cell and its error.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..runtime import checks, profile
from ..runtime.cache import atomic_write, default_root, disk_usage, pin_root
from ..runtime.workers import environment
from . import findings, params, render, times
from .paths import LIBRARY, ROOT

#: library files the book's pages include (literalinclude), copied into the staged book
SHOWN_SOURCES = ("similarity/reference.py", "claims/verdicts.py", "claims/__init__.py")


class BuildError(RuntimeError):
    """A notebook failed, or Jupyter Book reported errors or warnings."""


def is_profile_path(name: object) -> bool:
    """Whether ``name`` names a profile file of one's own (a path ending in ``.yml`` or
    ``.yaml``, or one with a folder in it) rather than a profile of the book's folder."""
    return isinstance(name, str) and (name.endswith((".yml", ".yaml")) or "/" in name
                                      or os.sep in name)


def profile_label(name: str) -> str:
    """The name a build goes by, which names its folders (``_build/executed/<label>``): a
    profile of the book's folder by its name; one's own file by its stem and a digest of its
    absolute path (``~/smoke.yml`` builds into ``_build/executed/smoke-file-1a2b3c4d``), so
    that it never takes the place of one of the book's builds nor of another file's, and the
    same file names the same build from any working folder."""
    if not is_profile_path(name):
        return name
    where = str(Path(name).expanduser().absolute().resolve())
    return f"{Path(name).stem}-file-{hashlib.sha256(where.encode()).hexdigest()[:8]}"


def profile_title(name: str) -> str:
    """How the pages name a build's profile: a profile of the book's folder by its name, one's
    own file by its absolute path."""
    return str(Path(name).expanduser().absolute().resolve()) if is_profile_path(name) else name


def load_profile(name: str, root: Path = ROOT) -> dict[str, Any]:
    """The parameters of a profile, as plain values only
    (:func:`analysis_lib.book.params.read_yaml` refuses every YAML tag): a name of the
    book's ``profiles/`` folder (``"default"``), or the path of one's own YAML file
    (``"~/mine.yml"``, any folder; start from a copy of ``profiles/default.yml``)."""
    if is_profile_path(name):
        path = checks.existing_file(name, "profile", "pass the path of a YAML file of "
                                    "parameters, or the name of one in profiles/")
    else:
        path = root / "profiles" / f"{name}.yml"
        if not isinstance(name, str) or not path.is_file() or path.parent != root / "profiles":
            valid = sorted(p.stem for p in (root / "profiles").glob("*.yml"))
            raise ValueError(f"unknown profile {name!r}{checks.did_you_mean(name, valid)}; "
                             f"valid: {', '.join(valid)}, or the path of your own profile "
                             f"file (e.g. ./mine.yml)")
    values = params.read_yaml(path.read_text(encoding="utf-8"), f"profile {path.name}")
    if values is None:
        raise ValueError(f"profile {path.name} is empty: a profile sets at least one parameter "
                         "(copy profiles/default.yml and change what you need)")
    if not isinstance(values, dict):
        raise ValueError(f"profile {path.name} must be a mapping of parameter names to values")
    return values


def check_profile_keys(profile: dict[str, Any], notebooks: list[Path], name: str) -> None:
    """Refuse a profile key that none of ``notebooks`` declares (a misspelt key would
    otherwise leave every notebook on its default), naming the closest declared parameter.
    The build checks against every notebook of the book's folder, so a book whose table of
    contents holds a few of them still takes the whole profile."""
    import difflib

    known = set().union(*(params.declared(path) for path in notebooks))
    unknown = [key for key in profile if key not in known]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise params.ParameterError(
            f"profile {name!r} sets {', '.join(hints)}, which no notebook declares; fix the "
            "spelling or remove it (each notebook's parameters cell lists what it takes)")


def toc_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks listed in ``_toc.yml``, in book order."""
    toc = params.read_yaml((root / "_toc.yml").read_text(encoding="utf-8"), "_toc.yml")
    files: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if key in node:
                    files.append(node[key])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    paths = [root / f"{f}.ipynb" for f in dict.fromkeys(files)]
    return [p for p in paths if p.is_file()]


def notebook_parameters(path: Path, profile: dict[str, Any], name: str = "profile",
                        base: Path | None = None) -> dict[str, Any]:
    """The profile's values for the parameters the notebook declares, checked against the
    notebook's declared rules before anything is written into a notebook. Every corpus file
    and model folder they name is made absolute from ``base`` (default: the working folder)
    first, so the file that is checked is the file the notebook reads, whatever folder the
    notebook runs in (:func:`resolve_paths`)."""
    declared = params.declared(path)
    chosen = {k: v for k, v in profile.items() if k in declared}
    chosen = resolve_paths(chosen, declared, Path.cwd() if base is None else base)
    params.validate(chosen, declared, partial=True,
                    source=f"{name} values for {path.name}")
    return chosen


def _path_items(value: Any, rules: dict[str, Any], visit) -> Any:
    """``value`` with ``visit(item, kind)`` applied to each string a ``corpus`` or ``model``
    rule governs (in a list, a dict's values, a grid's fields), everything else kept."""
    if "fields" in rules and isinstance(value, dict):
        return {k: _path_items(v, rules["fields"][k].rules, visit)
                if k in rules["fields"] else v for k, v in value.items()}
    kind = "corpus" if rules.get("corpus") else "model" if rules.get("model") else None
    if kind is None:
        return value
    if isinstance(value, list):
        return [visit(v, kind) for v in value]
    if isinstance(value, dict):
        return {k: visit(v, kind) for k, v in value.items()}
    return visit(value, kind)


def _as_path(item: Any, kind: str, base: Path) -> Path | None:
    """The absolute path a corpus or model item names, or None where it names no path (a
    registered corpus, a packaged, zoo, random or hub model)."""
    from ..data.corpora import is_corpus_file

    if not isinstance(item, str) or not item:
        return None
    try:
        path = Path(item).expanduser()
    except RuntimeError:  # ~user of no user: the rules report it
        return None
    if kind == "corpus":
        if not is_corpus_file(item):
            return None
    elif not (item.startswith((".", "/", "~")) or (base / path).is_dir()):
        return None  # a model name or hub id ("google/multiberts-seed_0")
    return Path(os.path.normpath(base / path))


def resolve_paths(values: dict[str, Any], declared: dict[str, params.Parameter],
                  base: Path) -> dict[str, Any]:
    """``values`` with every corpus file and model folder given by a relative path made
    absolute from ``base``: the build checks and the notebook reads one file."""
    def visit(item: Any, kind: str) -> Any:
        path = _as_path(item, kind, base)
        return item if path is None else str(path)

    return {k: _path_items(v, declared[k].rules, visit) if k in declared else v
            for k, v in values.items()}


def input_digests(values: dict[str, Any], declared: dict[str, params.Parameter]
                  ) -> dict[str, str]:
    """``{absolute path: SHA-256 of its content}`` of every corpus file and model folder
    ``values`` name (a folder: of each file's name and content): what enters a notebook's
    key besides its parameters, so that an edited file reruns the notebook."""
    found: dict[str, str] = {}

    def visit(item: Any, kind: str) -> Any:
        path = _as_path(item, kind, Path.cwd())
        if path is not None and path.exists():
            found[str(path)] = _content_digest(path)
        return item

    for k, v in values.items():
        if k in declared:
            _path_items(v, declared[k].rules, visit)
    return found


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _content_digest(path: Path) -> str:
    """SHA-256 of a file, or of a folder's files (names and contents, in name order); each
    file's digest is kept in this process while its size and modification time stand."""
    from ..runtime.cache import sha256_file

    def one(file: Path) -> str:
        stat = file.stat()
        key = (str(file), stat.st_size, stat.st_mtime_ns)
        if key not in _DIGESTS:
            _DIGESTS[key] = sha256_file(file)
        return _DIGESTS[key]

    if path.is_file():
        return one(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(path)}\0{one(file)}\0".encode())
    return digest.hexdigest()


def _present(path: Path, parameters: dict[str, Any], profile_name: str | None) -> None:
    """Make the executed notebook show its parameters once: the declared cell rewritten with
    the values this run used (types and comments kept), papermill's injected cell removed."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    cells = []
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:
            continue
        if "parameters" in tags:
            cell.source = _with_values(cell.source, parameters)
            if profile_name:
                cell.source = f"# the parameters of this run (profile: {profile_name})\n" + \
                    cell.source
        cells.append(cell)
    nb.cells = cells
    nbformat.write(nb, str(path))


def _with_values(source: str, values: dict[str, Any], width: int = 88) -> str:
    """The parameters cell as the page shows it: each parameter's comment on the lines above
    it and its value (this run's, where given) pretty-printed, no line over ``width``."""
    import pprint
    import textwrap

    lines: list[str] = []
    for line in params.logical_lines(source):
        match = params._LINE.match(line.strip())
        if not match:
            lines.append(line)
            continue
        default, comment = params._split_comment(match["rest"])
        value = values[match["name"]] if match["name"] in values else ast.literal_eval(default)
        if comment:
            lines += textwrap.wrap(comment, width - 2, initial_indent="# ",
                                   subsequent_indent="# ", break_on_hyphens=False)
        head = f"{match['name']}: {match['type']} = "
        shown = pprint.pformat(value, width=max(20, width - len(head)), compact=True,
                               sort_dicts=False).splitlines()
        lines.append(head + shown[0])
        lines += [" " * len(head) + rest for rest in shown[1:]]
    return "\n".join(lines)


def library_fingerprint() -> str:
    """Hash of the library's source files (an executed notebook is reused only while the
    library is unchanged)."""
    digest = hashlib.sha256(__version__.encode())
    for file in sorted(LIBRARY.glob("**/*.py")):
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


@dataclass
class Executed:
    name: str
    path: Path
    seconds: float
    reused: bool
    cpu_seconds: float = 0.0
    #: the shares of the machine's core time that were busy (any process) and stolen by the
    #: host while the notebook ran (:meth:`times.CoreTime.shares_since`); NaN if reused
    busy: float = float("nan")
    stolen: float = float("nan")


#: Set for the notebooks' kernels: no progress bars or loading chatter in the book's pages.
QUIET_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
             "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}


#: The kernels' own log is left out of the build's output: at every start it warns that the
#: kernel talks to the build over this machine's local TCP ports without encryption, and at
#: every end jupyter_client interrupts it before asking it to stop, which it may log as an
#: error although nothing failed. What a notebook does wrong reaches the build through
#: papermill (a cell's error, a kernel that died), not through this log.
KERNEL_ARGUMENTS = ("--IPKernelApp.log_level=CRITICAL",)


def _quiet_env(extra: dict[str, str] | None = None):
    return environment({**QUIET_ENV, **(extra or {})})


def execute(path: Path, parameters: dict[str, Any], out_dir: Path, *, force: bool = False,
            cell_timeout: int = 1800, attempts: int = 2, profile_name: str | None = None,
            times_profile: str | None = None, env: dict[str, str] | None = None) -> Executed:
    """Run one notebook with papermill into ``out_dir`` unless an identical run is there.

    The run's key covers the notebook, its parameters, the content of every corpus file and
    model folder they name (:func:`input_digests`), the library's source and the recorded run
    times. The kernel records its steps (:mod:`analysis_lib.runtime.profile`) into
    ``out_dir/profile/<notebook>.jsonl``; a reused notebook keeps the records of its run.
    ``profile_name`` is how the page names the profile; ``times_profile`` the name its
    recorded run times are kept under (default: ``profile_name``).

    A cell that runs longer than ``cell_timeout`` seconds, or a kernel that dies, counts as a
    failed attempt (a lost message between client and kernel leaves both waiting); the
    notebook is run again up to ``attempts`` times. An error raised by a cell is final.
    ``env`` adds environment variables for the kernel.
    """
    import papermill
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / path.name
    stamp = out_dir / f".{path.stem}.key"
    # the pages state their measured run times (times.sentence): a new record reruns them
    measured = times.TIMES.read_bytes() if times.TIMES.is_file() else b""
    inputs = input_digests(parameters, params.declared(path))
    key = hashlib.sha256(path.read_bytes() + json.dumps(parameters, sort_keys=True).encode()
                         + json.dumps(inputs, sort_keys=True).encode()
                         + library_fingerprint().encode() + measured).hexdigest()
    if not force and target.is_file() and stamp.is_file() and stamp.read_text() == key:
        return Executed(path.stem, target, 0.0, True)
    start, cpu, cores = time.perf_counter(), _children_cpu(), times.core_time()
    tmp = out_dir / f".{path.stem}.running.ipynb"
    steps = out_dir / "profile" / f"{path.stem}.jsonl"
    for attempt in range(1, attempts + 1):
        steps.unlink(missing_ok=True)
        try:
            with _quiet_env({profile.ENV: str(steps), render.PAGE_ENV: "1",
                             times.PROFILE_ENV: times_profile or profile_name or "",
                             **(env or {})}):
                # written once, when the notebook ends or fails: a save after every cell
                # (papermill's default) writes the whole page again each time, a third of a
                # second per cell once a page holds its charts
                papermill.execute_notebook(str(path), str(tmp), parameters=parameters,
                                           cwd=str(path.parent), progress_bar=False,
                                           report_mode=False, execution_timeout=cell_timeout,
                                           request_save_on_cell_execute=False,
                                           extra_arguments=list(KERNEL_ARGUMENTS))
            break
        except papermill.PapermillExecutionError as error:
            raise BuildError(_describe_failure(tmp, path, error)) from error
        except (CellTimeoutError, DeadKernelError, TimeoutError) as error:
            if attempt == attempts:
                raise BuildError(f"notebook {path.name}: {type(error).__name__} in "
                                 f"{attempts} attempts: {error}") from error
    _present(tmp, parameters, profile_name)
    stamp.unlink(missing_ok=True)  # no moment where the old key stands beside a new page
    tmp.replace(target)
    atomic_write(stamp, lambda t: t.write_text(key))
    return Executed(path.stem, target, time.perf_counter() - start, False,
                    _children_cpu() - cpu, *core_shares(cores))


def core_shares(before: times.CoreTime | None) -> tuple[float, float]:
    """The shares of the machine's core time busy and stolen since ``before``
    (:func:`times.core_time`), NaN where the machine does not say."""
    now = times.core_time()
    return now.shares_since(before) if now and before else (float("nan"), float("nan"))


def cores_line(busy: float, stolen: float) -> str | None:
    """The build summary's line on the machine's cores while the notebooks ran: how busy
    they were (below 1, the build waited on something other than computing, or computed on
    fewer threads than cores), and how much of their time the host gave to other machines;
    None where the machine does not say."""
    if busy != busy:
        return None
    line = (f"  cores busy {busy:.0%} of the time the notebooks ran, stolen by the host "
            f"{stolen:.1%}")
    if stolen >= times.STOLEN_NOTED:
        line += (": the host ran other work on this machine's cores, so these times are "
                 "slower than this CPU computes (compare them with care)")
    return line


def _execute_chosen(path: Path, chosen: dict[Path, dict[str, Any]], out_dir: Path,
                    options: dict[str, Any]) -> Executed:
    """:func:`execute` with the notebook's chosen parameters (what a build's worker runs)."""
    return execute(path, chosen[path], out_dir, **options)


def _children_cpu() -> float:
    """CPU seconds of the child processes (the kernels) that have finished so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _describe_failure(executed: Path, source: Path, error) -> str:
    import nbformat

    cell_text = ""
    try:
        nb = nbformat.read(str(executed), as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.get("execution_count") == error.exec_count:
                cell_text = cell.source
    except Exception:  # the partial notebook may be unreadable; the error still says enough
        pass
    return (f"notebook {source.name} failed in cell [{error.exec_count}]:\n"
            f"{cell_text}\n---\n{error.ename}: {error.evalue}")


def stage(profile_name: str, executed: list[Executed], root: Path = ROOT,
          pages: dict[str, str] | None = None) -> Path:
    """Copy the book's sources and the executed notebooks into ``_build/book-<profile>``,
    with ``pages`` (a path under ``book/`` -> its text) in place of the pages of that name.

    A file that already holds what it would be given is left alone, so it keeps its time
    and Sphinx reads again only what changed: a rebuild with nothing new redraws no page."""
    src = root / "_build" / f"book-{profile_name}"
    wanted = {name: (root / name).read_bytes() for name in ("_config.yml", "_toc.yml")}
    for path in sorted((root / "book").rglob("*")):
        if path.is_file():
            wanted[path.relative_to(root).as_posix()] = path.read_bytes()
    for name, text in (pages or {}).items():
        wanted[f"book/{name}"] = text.encode("utf-8")
    # the measures page shows the reference definitions and the verdict rule from the
    # library's own source
    for shown in SHOWN_SOURCES:
        wanted[f"analysis_lib/{shown}"] = (LIBRARY / shown).read_bytes()
    for item in executed:
        wanted[f"notebooks/{item.path.name}"] = item.path.read_bytes()
    _update(src, wanted, ("book", "notebooks"))
    render.write_bundle(src / "_static")
    render.write_styles(src / "_static")
    return src


def _update(folder: Path, files: dict[str, bytes], owned: tuple[str, ...]) -> None:
    """Make ``folder`` hold ``files`` (relative path -> bytes), writing only those that
    differ, and remove the other files of its subfolders ``owned``."""
    for sub in owned:
        for path in sorted((folder / sub).rglob("*")) if (folder / sub).is_dir() else []:
            if path.is_file() and path.relative_to(folder).as_posix() not in files:
                path.unlink()
    for name, data in files.items():
        target = folder / name
        if not (target.is_file() and target.read_bytes() == data):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def _filled_pages(root: Path, scorecard, title: str, out_dir: Path, on: times.Machine,
                 chosen: dict[Path, dict[str, Any]]) -> dict[str, str]:
    """The book's pages that the build completes (path under ``book/`` -> text): the
    findings page, the front page's answer, and the tables the running, course and data
    pages take from this build and the cache."""
    book = root / "book"

    def filled(name: str, *markers: tuple[str, str]) -> str:
        text = (book / name).read_text(encoding="utf-8")
        for marker, table in markers:
            text = text.replace(marker, table)
        return text

    grid = _parameters_with(chosen, "finetune")
    zoo_set = str(_parameters_with(chosen, "zoo_set").get("zoo_set") or "")
    return {
        "findings.md": findings.page(scorecard, title),
        "intro.md": filled("intro.md", (findings.ANSWER_MARKER,
                                        findings.answer(scorecard, title))),
        "running.md": filled(
            "running.md",
            (findings.PROFILES_MARKER, findings.profiles_table(out_dir.parent)),
            (times.TIMES_MARKER, times.table()),
            (RATES_MARKER, rate_table(grid.get("finetune"), grid.get("model_options")))),
        "course.md": filled("course.md", (times.SUMMARY_MARKER,
                                          times.summary("default", here=on))),
        "data.md": filled("data.md", (ZOO_MARKER, zoo_table(zoo_set))),
    }


#: the data page's table of the zoo's models, replaced by :func:`zoo_table` at build time
ZOO_MARKER = "% zoo table: written by the build (analysis_lib.models.zoo.table)"


#: the running page's table of fine-tuning learning rates, replaced by :func:`rate_table`
RATES_MARKER = ("% learning-rate table: written by the build "
                "(analysis_lib.training.grid.rate_table)")


def _markdown(frame, cell) -> str:
    """A MyST table of ``frame``'s rows, each value written by ``cell(column, value)``."""
    columns = list(frame.columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(c, row[c]) for c in columns) + " |"
              for row in frame.to_dict("records")]
    return "\n".join(lines) + "\n"


def _parameters_with(chosen: dict[Path, dict[str, Any]], name: str) -> dict[str, Any]:
    """The parameters of the first notebook that has ``name`` ({} when none has)."""
    return next((values for values in chosen.values() if name in values), {})


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def rate_table(grid_values: dict[str, Any] | None, model_options: dict[str, Any] | None
               ) -> str:
    """The grid's first model fine-tuned at each of
    :data:`~analysis_lib.training.grid.RATES` (its first seed), as far as the cache holds the
    runs (MyST markdown), and how to train the others."""
    import pandas as pd

    from ..training.grid import FinetuneGrid, rate_table

    grid = FinetuneGrid.of(grid_values, model_options)
    frame = rate_table(grid)
    rows: dict[float, dict[str, Any]] = {}
    for run in frame.to_dict("records"):
        row = rows.setdefault(run["learning rate"], {"learning rate": run["learning rate"]})
        for split in ("validation", "test"):
            row[f"{run['task']} {split}"] = run[split]
    table = pd.DataFrame(list(rows.values()))

    def cell(column: str, value: Any) -> str:
        if column == "learning rate":
            return f"{value:g}"
        return "not in this cache" if _missing(value) else f"{value:.3f}"

    missing = "" if frame.cached.all() else (
        "\nA rate whose runs this cache does not hold reads \"not in this cache\"; "
        "`python benchmarks/finetune_rates.py` trains them (a few minutes on two cores).\n")
    return (f"{grid.models[0]} fine-tuned on {grid.n_train} examples for {grid.epochs:g} "
            f"epochs (seed {grid.seeds[0]}), accuracy on the validation and test splits "
            f"({grid.n_heldout} examples each):\n\n" + _markdown(table, cell) + missing)


def zoo_table(set_name: str, cache_dir: str | os.PathLike | None = None) -> str:
    """The zoo's models of ``set_name`` (a profile's ``zoo_set``) as the cache holds them:
    one row per model and checkpoint with its held-out perplexity against the unigram
    baseline and its training time (MyST markdown); a sentence when the set is empty or
    none of its models is trained here."""
    from ..models import zoo

    if not set_name:
        return "This profile trains no zoo models (its `zoo_set` is empty).\n"
    frame = zoo.table(list(zoo.SETS[set_name]), cache_dir=cache_dir)
    if frame["perplexity"].isna().all():
        return (f"No model of the `{set_name}` set is trained in this cache yet; the "
                "chapters that read the zoo train them.\n")
    columns = ["model", "objective", "layers", "data", "seed", "steps", "perplexity",
               "unigram perplexity", "ratio", "learned", "train seconds"]

    def cell(column: str, value: Any) -> str:
        if _missing(value):
            return ""
        if column == "model":
            return f"`{value}`"
        if column == "learned":
            return "yes" if value else "no"
        if column == "ratio":
            return f"{value:.3f}"
        return f"{value:.0f}" if isinstance(value, float) else str(value)

    return _markdown(frame[columns], cell)


def jupyter_book(src: Path) -> Path:
    """Run ``jupyter-book build`` strictly; return the built ``index.html``."""
    command = [sys.executable, "-m", "jupyter_book", "build", str(src), "-W", "-n",
               "--keep-going"]
    exe = Path(sys.executable).with_name("jupyter-book")
    if exe.exists():
        command = [str(exe), "build", str(src), "-W", "-n", "--keep-going"]
    result = subprocess.run(command, capture_output=True, text=True)
    log = result.stdout + result.stderr
    if result.returncode != 0:
        # Sphinx reads again only the pages whose files changed: without its record of this
        # build, the next one reads every page and cannot pass over this build's warnings
        shutil.rmtree(src / "_build" / ".doctrees", ignore_errors=True)
        warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
        raise BuildError("jupyter-book build failed:\n" + "\n".join(warnings[-40:] or
                                                                   log.splitlines()[-40:]))
    return src / "_build" / "html" / "index.html"


def check_models_available(chosen: dict[Path, dict[str, Any]], profile_name: str) -> None:
    """Refuse, before the first notebook runs, a profile whose hub models can be neither
    read from the local cache nor downloaded here (the fix: the offline default, or a
    machine with internet)."""
    from ..models.loading import unavailable

    names: set[str] = set()
    for path, values in chosen.items():
        for name, param in params.declared(path).items():
            if param.rules.get("model") and name in values:
                value = values[name]
                names.update(value if isinstance(value, list) else [value])
            if "fields" in param.rules and name in values:  # a fine-tuning grid's models
                names.update(values[name].get("models", []))
    missing = unavailable(sorted(names))
    if missing:
        raise BuildError(
            f"profile {profile_name!r} needs models from the Hugging Face hub that are not in "
            f"the local cache, and the hub cannot be reached from here: {missing}. Build the "
            "offline default profile (make book), or run once on a machine with internet "
            "(the models are then cached), or copy a Hugging Face cache (HF_HOME) here.")


def last_profile(out_dir: Path):
    """The notebook rows of the previous build's ``profile.csv`` (empty when none)."""
    import pandas as pd

    path = out_dir / "profile.csv"
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError):
        return pd.DataFrame(columns=["notebook", "kind", "wall_s"])
    return table[table.kind == "notebook"]


#: the notebook metadata that names the notebooks whose results a notebook reads
#: (``{"analysis_lib": {"after": ["finetuning"]}}``): a build runs it after them
AFTER = "after"


def after(path: Path) -> tuple[str, ...]:
    """The notebooks (by name) that ``path`` reads results of and so runs after in a build:
    the ``after`` list of its ``analysis_lib`` metadata."""
    import nbformat

    meta = nbformat.read(str(path), as_version=4).metadata.get("analysis_lib", {})
    names = meta.get(AFTER, [])
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise BuildError(f"notebook {path.name}: metadata analysis_lib.{AFTER} must be a list "
                         f"of notebook names, got {names!r}")
    return tuple(names)


def critical_paths(names: list[str], needs: dict[str, tuple[str, ...]],
                   seconds: dict[str, float]) -> dict[str, float]:
    """For each notebook, its own expected time plus the longest chain of notebooks that
    must wait for it: the build starts the notebook with the longest such path first, so
    that the chain that decides the build's length never waits for a free core. A
    notebook named in ``needs`` but not in ``names`` is not waited for; a cycle is an
    error."""
    waiting = {n: [m for m in names if n in needs.get(m, ())] for n in names}
    paths: dict[str, float] = {}

    def path(name: str, seen: tuple[str, ...]) -> float:
        if name in seen:
            raise BuildError("the notebooks' 'after' metadata makes a circle: "
                             + " -> ".join((*seen[seen.index(name):], name)))
        if name not in paths:
            paths[name] = seconds.get(name, 1.0) + max(
                (path(m, (*seen, name)) for m in waiting[name]), default=0.0)
        return paths[name]

    for name in names:
        path(name, ())
    return paths


def kernel_threads(jobs: int) -> dict[str, str]:
    """The environment of a kernel that runs beside ``jobs - 1`` others: its share of the
    cores for torch, OpenMP and the BLAS libraries, and OpenMP threads that sleep while
    they wait instead of spinning on the cores another kernel computes on. Nothing for one
    notebook at a time. Training keeps its own fixed thread counts (they are in its cache
    keys), and a forward pass or a product gives the same numbers at any count."""
    if jobs <= 1:
        return {}
    from ..runtime.threads import usable_cores

    share = str(max(1, usable_cores() // jobs))
    return {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": share,
            "OPENBLAS_NUM_THREADS": share, "MKL_NUM_THREADS": share}


def run_notebooks(notebooks: list[Path], run, *, jobs: int, seconds: dict[str, float],
                  echo=print) -> list[Executed]:
    """Run ``run(path)`` for every notebook, ``jobs`` at a time in worker processes (each
    measures its own kernel's CPU time), a notebook only once those its metadata
    names (:func:`after`) are done: one at a time in the order of ``notebooks``, side by
    side the longest chain first (:func:`critical_paths`). The results come back in the
    order of ``notebooks``. When a notebook fails, no other
    starts; the ones running finish (their pages are kept) and the first error is raised."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait

    names = [p.stem for p in notebooks]
    needs = {p.stem: tuple(n for n in after(p) if n in names) for p in notebooks}
    priority = critical_paths(names, needs, seconds)
    pending, done, results = list(notebooks), set[str](), {}
    failure: BaseException | None = None
    # side by side in worker processes, each running one kernel at a time (its only child,
    # so that its children's CPU time is that kernel's); one at a time, in this process
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) \
        if jobs > 1 else ThreadPoolExecutor(1)
    with pool:
        running: dict = {}
        while running or (pending and failure is None):
            ready = [p for p in pending if set(needs[p.stem]) <= done]
            while failure is None and ready and len(running) < jobs:
                # one at a time, in the book's order; side by side, the longest chain first
                path = ready[0] if jobs == 1 else max(ready, key=lambda p: priority[p.stem])
                ready.remove(path)
                pending.remove(path)
                echo(f"[{len(notebooks) - len(pending)}/{len(notebooks)}] {path.stem}"
                     f"{_estimate(seconds, path)}")
                running[pool.submit(run, path)] = path
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                path = running.pop(future)
                try:
                    result = future.result()
                except BaseException as error:  # the first failure is raised at the end
                    failure = failure or error
                    continue
                results[path.stem] = result
                done.add(path.stem)
                echo(f"  {result.name:<32} "
                     f"{'reused' if result.reused else f'{result.seconds:6.1f} s'}")
    if failure is not None:
        raise failure
    return [results[name] for name in names]


def _recorded(profile_label: str, here: times.Machine
              ) -> tuple[times.Build, bool, float] | None:
    """The recorded cold build of the profile (``book/run_times.csv``) whose times hold best
    here (:func:`analysis_lib.book.times.nearest`: this kind of CPU, else the one nearest in
    speed), whether it is this kind of CPU, and how many times as long it takes here (the
    ratio of the machines' speeds, NaN where either is unknown); None where none is kept."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        found = [b for b in times.builds(times.read())
                 if b.profile == profile_label and b.cold]
        if found:
            build, own = times.nearest(found, here)
            return build, own, times.ratio(build.machine, here)
    return None


def expected_seconds(before, profile_label: str, here: times.Machine | None = None
                     ) -> dict[str, float]:
    """Each notebook's expected time on this machine (``here``, by default measured now):
    its last build's in this folder (``before``, the notebook rows of :func:`last_profile`),
    else its time in the recorded cold build that holds best here, scaled to this machine's
    speed (:func:`_recorded`). For ordering a build (:func:`critical_paths`) and telling a
    reader how long a first build will take (:func:`first_build_estimate`)."""
    seconds = {}
    if recorded := _recorded(profile_label, here or times.Machine.here()):
        build, _, ratio = recorded
        seconds = {name: s * (ratio if ratio == ratio else 1.0)
                   for name, s in build.cold.items()}
    seconds.update({k: v for k, v in zip(before.notebook, before.wall_s) if v > 0})
    return seconds


def first_build_estimate(profile_label: str, here: times.Machine) -> str:
    """The line a build with no earlier build in its folder starts with: how long its
    notebooks take here on an empty cache, projected from the recorded cold build that holds
    best here (:func:`_recorded`), named; ``""`` where none is recorded. A build that finds
    its models in the cache takes less. Where the times are scaled by the ratio of the
    speeds, the line gives the recorded time too: the ratio holds for pages that train and
    extract, and a profile of small models (``smoke``) is mostly Python code, whose time
    scales less (its 3 min 16 s on an AVX512-BF16 EPYC projected to 17 min on a machine
    5.2 times slower, where it took 4.6 min).

    On this kind of CPU at another speed the line gives a range, from the recorded time to
    the scaled one: where the host shares a core, one machine's speed reading moves by more
    than :data:`~analysis_lib.book.times.SAME_SPEED` from one second to the next (an Intel
    Xeon read 167 to 287 GFLOP/s within a minute, and ran the default's notebooks in 27 and
    31 minutes where this line, scaled by one reading, said 45 and 46), and a reading at a
    build's start cannot tell such a stretch from a slower machine of the kind."""
    recorded = _recorded(profile_label, here)
    if recorded is None:
        return ""
    build, own, ratio = recorded
    there = sum(build.cold.values())
    source = f"from the cold build on {build.machine.label()}, {build.measured}"
    if own and ratio == ratio and not 1 / times.SAME_SPEED <= ratio <= times.SAME_SPEED:
        low, high = sorted((there, there * ratio))
        return (f"expected here ({here.label()}): {times.duration(low)} to "
                f"{times.duration(high)} of notebooks on an empty cache, {source} (the "
                f"same kind of CPU, {times.duration(there)} there, at a speed reading "
                f"{ratio:.2f} times this machine's; where a host shares cores, a reading "
                "moves that much from second to second, and the time may lie anywhere "
                "between)")
    if ratio != ratio:  # a speed not recorded: the times as measured
        ratio, said = 1.0, ", whose speed against this machine's is not known"
    elif own:
        said = ""
    else:
        said = (f", which computes {ratio:.2f} times as fast as this machine ("
                f"{times.duration(there)} there; pages that train and extract scale with "
                "the speed, pages of Python code less)")
    return (f"expected here ({here.label()}): about {times.duration(there * ratio)} of "
            f"notebooks on an empty cache, {source}{said}")


def _estimate(seconds: dict[str, float], path: Path) -> str:
    """``" (about 120 s expected)"`` from the expected times (:func:`expected_seconds`), or
    ``""``."""
    return f" (about {seconds[path.stem]:.0f} s expected)" if path.stem in seconds else ""


def write_profile(out_dir: Path, runs: list[Executed], on: times.Machine | None = None):
    """``profile.csv`` beside the executed notebooks: one row per notebook (its wall and
    kernel CPU time, its largest peak memory, the bytes its steps wrote, the shares of the
    machine's core time busy and stolen by the host while it ran, and the machine it ran on,
    ``on``: CPU, cores and speed) and one per step its kernel recorded, with the
    notebook named in every row. Written atomically."""
    import pandas as pd

    on = on or times.Machine.here()

    frames, rows = [], []
    for run in runs:
        steps = profile.read(out_dir / "profile" / f"{run.name}.jsonl")
        top = steps[steps.depth == 1] if not steps.empty else steps
        rows.append({"notebook": run.name, "kind": "notebook", "name": run.name,
                     "depth": 0, "wall_s": round(run.seconds, 1),
                     "cpu_s": round(run.cpu_seconds, 1),
                     "peak_rss_mb": float(steps.peak_rss_mb.max()) if not steps.empty
                     else float("nan"),
                     "written_mb": round(float(top.written_mb.sum()), 1)
                     if not top.empty else None,
                     "reused": run.reused, "busy": round(run.busy, 3),
                     "stolen": round(run.stolen, 4), "cpu": on.cpu, "cores": on.cores,
                     "speed": on.speed})
        if not steps.empty:
            frames.append(steps.assign(notebook=run.name))
    table = pd.concat([pd.DataFrame(rows), *frames], ignore_index=True)
    atomic_write(out_dir / "profile.csv", lambda tmp: table.to_csv(tmp, index=False))
    return table


def profile_summary(table) -> list[str]:
    """The build's profile as printed lines: per notebook its wall and CPU time, peak
    memory and the share of the machine's core time that was busy, then where its time
    went by kind of step."""
    lines = ["", "profile (seconds; reused notebooks show their last run's steps):",
             f"  {'notebook':<18} {'wall':>7} {'cpu':>7} {'peak MB':>8} {'busy':>5}  top steps"]
    notebooks = table[table.kind == "notebook"]
    kinds = profile.by_kind(table[table.kind != "notebook"])
    for row in notebooks.itertuples():
        mine = kinds[kinds.notebook == row.notebook].sort_values("wall_s", ascending=False) \
            if not kinds.empty else kinds
        top = ", ".join(f"{k.kind} {k.wall_s:.0f}" for k in mine.head(3).itertuples())
        peak = f"{row.peak_rss_mb:8.0f}" if row.peak_rss_mb == row.peak_rss_mb else " " * 8
        wall = "reused" if row.reused else f"{row.wall_s:7.1f}"
        share = row.busy  # the share of the machine's cores busy, any process
        busy = f"{share:5.0%}" if share == share else " " * 5
        lines.append(f"  {row.notebook:<18} {wall:>7} {row.cpu_s:7.1f} {peak} {busy}  {top}")
    return lines


def shape_projection(profile_name: str, table, out_dir: Path, root: Path = ROOT) -> list[str]:
    """For a ``<name>-shape`` build whose profile ``<name>`` exists: the projected time of
    ``<name>`` (:mod:`.projection`), written to ``projection.csv`` beside the executed
    notebooks and returned as printed lines; nothing for any other build."""
    from . import projection

    full_name = profile_name.removesuffix("-shape")
    if full_name == profile_name or not (root / "profiles" / f"{full_name}.yml").is_file():
        return []
    shape, full = load_profile(profile_name, root), load_profile(full_name, root)
    built = set(table[table.kind == "notebook"].notebook)
    paths = [p for p in toc_notebooks(root) if p.stem in built]
    projected = projection.project(
        table, {p.stem: notebook_parameters(p, shape, profile_name) for p in paths},
        {p.stem: notebook_parameters(p, full, full_name) for p in paths},
        {p.stem: params.declared(p) for p in paths})
    atomic_write(out_dir / "projection.csv", lambda tmp: projected.to_csv(tmp, index=False))
    return projection.summary(projected, full_name)


def build(profile_name: str = "default", *, force: bool = False, root: Path = ROOT,
          echo=print, cell_timeout: int = 1800, jobs: int = 1) -> Path:
    """Execute every notebook of the book under a profile, then build the HTML book.

    ``jobs`` notebooks run side by side (default one at a time), each after the notebooks
    whose results it reads (:func:`run_notebooks`), each kernel on its share of the cores
    (:func:`kernel_threads`); what each computes does not depend on it. A profile of one's
    own (a path) builds under a name of its own (:func:`profile_label`) and the pages name
    its file. Two builds of one profile into one folder never run at once: the second
    waits for the first (:func:`build_lock`) and then reuses its work."""
    pin_root()  # the kernels run in the notebooks' folder: one cache for all of them
    profile = load_profile(profile_name, root)
    title = profile_title(profile_name)
    label = profile_label(profile_name)
    out_dir = root / "_build" / "executed" / label
    on = times.Machine.here()  # the machine the times are measured on, quiet at the start
    total = time.perf_counter()
    notebooks = toc_notebooks(root)
    # every notebook's values are checked before the first one runs
    check_profile_keys(profile, sorted((root / "notebooks").glob("*.ipynb")), title)
    chosen = {path: notebook_parameters(path, profile, f"profile {title!r}")
              for path in notebooks}
    check_models_available(chosen, title)
    jobs = checks.integer(jobs, "jobs", low=1)
    with build_lock(out_dir, echo):
        before = last_profile(out_dir)
        if not before.empty:
            on = on.as_before(times.built_on(before))
        seconds = expected_seconds(before, label, on)
        if before.empty and (estimate := first_build_estimate(label, on)):
            echo(estimate)
        run = functools.partial(_execute_chosen, chosen=chosen, out_dir=out_dir,
                                options=dict(force=force, cell_timeout=cell_timeout,
                                             profile_name=title, times_profile=label,
                                             env=kernel_threads(jobs)))
        cores = times.core_time()
        runs = run_notebooks(notebooks, run, jobs=jobs, echo=echo,
                             seconds=seconds)
        busy, stolen = core_shares(cores) if any(not r.reused for r in runs) \
            else (float("nan"), float("nan"))
        table = write_profile(out_dir, runs, on)
        for line in profile_summary(table) + shape_projection(label, table, out_dir, root):
            echo(line)
        if said := cores_line(busy, stolen):
            echo(said)
        echo(f"  cache: {disk_usage() / 1e9:.2f} GB in {default_root()}")
        scorecard = findings.collect([run.path for run in runs])
        echo(f"  findings: {findings.write(out_dir, scorecard)}")
        start = time.perf_counter()
        src = stage(label, runs, root, _filled_pages(root, scorecard, title, out_dir, on, chosen))
        index = jupyter_book(src)
        # the notebooks the pages offer for download, drawn without the book's script
        for served in sorted((index.parent / "_sources" / "notebooks").glob("*.ipynb")):
            render.serve(served)
    echo(f"  {'jupyter-book build':<32} {time.perf_counter() - start:6.1f} s")
    echo(f"built the book ({title} profile) in {time.perf_counter() - total:.1f} s: "
         f"{index}")
    return index


@contextlib.contextmanager
def build_lock(out_dir: Path, echo=print):
    """Hold the build folder ``out_dir`` (and its staged book) for one build at a time: an
    exclusive lock on ``out_dir/.build.lock``, which the system releases when the process
    ends, however it ends. A second build waits, saying which process holds it."""
    import fcntl

    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".build.lock", "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            echo(f"another build of this profile is running ({holder}) into {out_dir}: "
                 "waiting for it to finish")
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
