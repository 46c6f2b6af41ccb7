"""Command line: ``analysis-lib <command>`` (installed with the package), the same as
``python -m analysis_lib <command>``.

``book --profile NAME [--force]``
    Execute every notebook of the book with papermill under the profile's parameters
    (``profiles/NAME.yml``, or the path of your own profile file), then build the HTML book
    strictly; print per-notebook run times and the path of the built ``index.html`` (see
    :mod:`analysis_lib.book`).
``extract --model NAME --corpus NAME [--n N]``
    Extract one model on one corpus into the cache and print the array shapes.
``sweep SPEC.yml [--workers N | --scheduler ADDRESS | --here] [--out FOLDER]``
    Run a declared grid (see :mod:`analysis_lib.sweep`) on a Dask ``LocalCluster`` (N
    workers, default from the machine's cores), on a running Dask scheduler, or in this
    process; write the result table (parquet and CSV) and report failed units.
``findings --profile NAME [--executed DIR] [--format table|csv|md] [--width N] [--against P]``
    Print every claim of the four papers with the verdict of the profile's last build (read
    from its executed notebooks, by default ``_build/executed/NAME``, or from ``DIR``;
    see :mod:`analysis_lib.book.findings`), the table the book's findings page shows: a
    table that fits the terminal, CSV with every column, or Markdown. With ``--against
    P``: the two builds' verdicts claim by claim (the claims whose verdict differs, and
    whether it contradicts: :func:`analysis_lib.book.findings.compare`), exit status 1 when
    a claim holds in one build and is opposite in the other (the default against its
    ``replica``).
``times [--record cold|warm --profile NAME]``
    Print every page's measured run times (``book/run_times.csv``), or keep the last build
    of a profile in it as its cold times (the build started with an empty cache) or its warm
    ones (a rerun with everything cached), with this machine's CPU named (see
    :mod:`analysis_lib.book.times`).
``corpora`` / ``models``
    List the registered corpora / the offline model names.
``--version``
    Print the library's version.

A command that needs an optional dependency the installation lacks (PyTorch and transformers
for models, the book's tools, Dask) says which extra installs it, and exits with status 2.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from . import __version__
from .runtime import checks

#: the extra that installs each optional top-level package a command may need
EXTRAS = {"torch": "models", "transformers": "models", "tokenizers": "models",
          "safetensors": "models", "datasets": "models", "accelerate": "models",
          "gguf": "models", "psutil": "models", "papermill": "book", "nbformat": "book",
          "jupyter_book": "book", "altair": "book", "vl_convert": "book", "ipywidgets": "book",
          "dask": "sweep", "distributed": "sweep", "dask_jobqueue": "sweep"}
#: the narrowest and widest ``findings --width`` (a narrower table cannot show its columns;
#: a wider one only pads)
MIN_WIDTH, MAX_WIDTH = 40, 1000
#: the extra each command needs as a whole: a missing package is named, and the extra that
#: makes the whole command work (not only that package) is the one to install
COMMAND_EXTRAS = {"book": "book", "findings": "book", "times": "book", "sweep": "sweep",
                  "extract": "models", "zoo": "models", "models": "models"}


def cmd_book(args: argparse.Namespace) -> int:
    from .book import BuildError, build

    print(f"building the book with the {args.profile!r} profile")
    try:
        build(args.profile, force=args.force, jobs=args.jobs)
    except (BuildError, ValueError) as error:
        print(f"\nerror: {error}", file=sys.stderr)
        return 1
    return 0


def cmd_findings(args: argparse.Namespace) -> int:
    import shutil
    import textwrap
    from pathlib import Path

    import nbformat  # noqa: F401 - the executed notebooks are read with it (the book extra)

    from .book import ROOT, findings

    if args.width is not None and not MIN_WIDTH <= args.width <= MAX_WIDTH:
        print(f"error: --width must lie in [{MIN_WIDTH}, {MAX_WIDTH}] characters, got "
              f"{args.width}", file=sys.stderr)
        return 2
    if not args.executed and not (ROOT / "_toc.yml").is_file():
        print(f"error: this installation holds no book (no _toc.yml beside the library in "
              f"{ROOT}), so it has no build of the {args.profile!r} profile to read; pass "
              "the folder of a build's executed notebooks with --executed FOLDER, or run the "
              "command in a checkout of the book after building it", file=sys.stderr)
        return 2
    found = _read_findings(args.profile, args.executed)
    if found is None:
        return 1
    table, folder = found
    if args.against:
        given = Path(args.against)  # a profile's name, or a folder of executed notebooks
        other = _read_findings(args.against, args.against if given.is_dir() else None)
        return _compare_findings(table, args.profile, other,
                                 given.name if given.is_dir() else args.against, args.format)
    width = args.width or min(MAX_WIDTH, max(MIN_WIDTH,
                                             shutil.get_terminal_size((100, 24)).columns))
    if args.format == "csv":
        table.to_csv(sys.stdout, index=False)
    elif args.format == "md":
        print(findings.markdown(table))
    else:
        print(findings.text_table(table, width))
    if args.format != "csv":
        print(f"\n{len(table)} claims: " + ", ".join(
            f"{n} {v}" for v, n in table.verdict.value_counts().items()))
        source = f"read from {folder}"
        print(textwrap.fill(source, width) if args.format == "table" else source)
    unread = table.attrs.get("unread", {})
    for why in unread.values():
        print(f"warning: {why}", file=sys.stderr)
    executed = {p.stem for p in findings.finished(sorted(folder.glob("*.ipynb")))}
    damaged = [name for name in unread if name in executed]
    return 1 if damaged else 0


def _read_findings(profile: str, executed: str | None) -> tuple[Any, Any] | None:
    """The findings table of a profile's last build (or of the executed notebooks in
    ``executed``) and its folder; None, with the error printed, when nothing was built."""
    from pathlib import Path

    from .book import ROOT, findings
    from .book.builder import profile_label, toc_notebooks

    folder = Path(executed) if executed else ROOT / "_build" / "executed" / \
        profile_label(profile)
    notebooks = findings.finished(sorted(folder.glob("*.ipynb")))
    if not notebooks:
        built = sorted(p.parent.name for p in folder.parent.glob("*/*.ipynb"))
        hint = "" if executed else checks.did_you_mean(profile, set(built))
        have = f" (built so far: {', '.join(sorted(set(built)))})" if built and not \
            executed else ""
        print(f"error: no executed notebooks in {folder}{hint}; build the book with this "
              f"profile first: python -m analysis_lib book --profile {profile}{have}",
              file=sys.stderr)
        return None
    expected = [p.stem for p in toc_notebooks(ROOT)] if (ROOT / "_toc.yml").is_file() else []
    return findings.collect(notebooks, expected=expected), folder


def _compare_findings(table: Any, name: str, other: tuple[Any, Any] | None, other_name: str,
                      form: str) -> int:
    """``findings --against``: two builds' verdicts claim by claim; exit status 1 when a
    claim is shown one way in one build and the other way in the other."""
    from .book import findings

    if other is None:
        return 1
    compared = findings.compare(table, other[0]).rename(columns={
        "first": name, "second": other_name, "first shows": f"{name} shows",
        "second shows": f"{other_name} shows"})
    if form == "csv":
        compared.to_csv(sys.stdout, index=False)
    else:
        shown = compared[compared.agreement != "same"]
        lines = [f"| claim | `{name}` | `{other_name}` | agreement |", "|---|---|---|---|"]
        lines += [f"| `{r['claim id']}` | {r[name]} | {r[other_name]} | {r.agreement} |"
                  for _, r in shown.iterrows()]
        print("\n".join(lines) if len(shown) else "every claim reads the same verdict")
        counts = compared.agreement.value_counts()
        print(f"\n{len(compared)} claims: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    return 1 if (compared.agreement == "contradicts").any() else 0


def cmd_extract(args: argparse.Namespace) -> int:
    from . import extract
    from .data import corpora

    corpus = corpora.load_corpus(args.corpus, n=args.n, seed=args.seed)
    result = extract.extract(args.model, corpus, attention=args.attention)
    sentences = result.sentence_mean.shape if result.sentence_mean is not None else "none"
    print(f"{args.model} on {args.corpus} (n={len(corpus)}): words {result.words.shape}, "
          f"sentences {sentences}, truncated {result.n_truncated}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from .sweep import load_spec, run_sweep

    try:
        spec = load_spec(args.spec)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = args.out or f"sweeps/{spec.name}"
    workers = None if args.here or args.scheduler else (args.workers or "auto")
    try:
        result = run_sweep(spec, workers=workers, scheduler=args.scheduler,
                           cache_dir=args.cache_dir, out=out)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    units = result.units
    print(f"{len(units)} units in {result.seconds:.1f} s: {result.n_computed} computed, "
          f"{int((units['ok'] & ~units['computed']).sum())} from the cache, "
          f"{len(result.failures)} failed or skipped")
    for _, row in result.failures.iterrows():
        print(f"  {row['key']}: {row['error']}", file=sys.stderr)
    print(f"{len(result.table)} result rows in {out}/results.parquet (and .csv)")
    return 1 if len(result.failures) else 0


def cmd_corpora(args: argparse.Namespace) -> int:
    from .data.corpora import list_corpora

    for name, description in list_corpora().items():
        print(f"{name:<10} {description}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from .models import OFFLINE_MODELS

    print("\n".join(OFFLINE_MODELS))
    return 0


def cmd_zoo(args: argparse.Namespace) -> int:
    import pandas as pd

    from .models import zoo

    names = zoo.SETS[args.set]
    if args.train:
        from .training import zoo as zoo_training

        zoo_training.train(names, cache_dir=args.cache_dir)
    frame = zoo.table(names, cache_dir=args.cache_dir)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(frame.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    if not args.train and frame["perplexity"].isna().any():
        print(f"\nmodels without numbers are not trained yet: python -m analysis_lib zoo "
              f"--set {args.set} --train")
    return 0


def cmd_times(args: argparse.Namespace) -> int:
    from .book import times

    if args.record is None:
        print(times.table(), end="")
        return 0
    try:
        kept = times.record(args.profile, args.record, args.executed)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    cpu, cores = times.machine()
    print(f"kept {len(kept)} {args.record} times of the {args.profile!r} profile "
          f"({cpu}, {cores} cores) in {times.TIMES}")
    return 0


def _positive(text: str) -> int:
    """A whole number of at least 1 (``--jobs``), or an error that says so."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose error for a value outside an option's choices also names
    the closest choice."""

    def error(self, message: str):
        found = re.search(r"invalid choice: '?([^'(]*?)'? \(choose from (.*)\)", message)
        if found:
            options = [o.strip(" '") for o in found.group(2).split(",")]
            message += checks.did_you_mean(found.group(1), options)
        super().error(message)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="analysis-lib")
    parser.add_argument("--version", action="version", version=f"analysis_lib {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    book = sub.add_parser("book", help="run the notebooks under a profile and build the book")
    book.add_argument("--profile", default="default",
                      help="a profile's name (profiles/NAME.yml), or the path of your own "
                      "profile file (e.g. ./mine.yml; it builds into "
                      "_build/executed/mine-file-<digest of its path>)")
    book.add_argument("--force", action="store_true", help="re-run unchanged notebooks too")
    book.add_argument("--jobs", type=_positive, default=1,
                      help="notebooks run side by side, each after the ones it reads and on "
                      "its share of the cores (default 1: one at a time; the numbers do not "
                      "depend on it)")
    book.set_defaults(func=cmd_book)
    found = sub.add_parser("findings", help="print every claim with the verdict of a "
                           "profile's last build")
    found.add_argument("--profile", default="default",
                       help="a profile's name, or the path of your own profile file")
    found.add_argument("--executed", help="the folder of executed notebooks (default: "
                       "_build/executed/PROFILE)")
    found.add_argument("--format", choices=["table", "csv", "md"], default="table",
                       help="a table that fits the terminal (default), CSV with every column, "
                       "or a Markdown table")
    found.add_argument("--width", type=int, default=None,
                       help="the table's width in characters, 40 to 1000 (default: the "
                       "terminal's)")
    found.add_argument("--against", default=None, metavar="PROFILE",
                       help="compare with another profile's build (or a folder of executed "
                       "notebooks) claim by claim, the default against its replica; exit "
                       "status 1 when a claim holds in one and is opposite in the other")
    found.set_defaults(func=cmd_findings)
    ext = sub.add_parser("extract", help="extract one model on one corpus into the cache")
    ext.add_argument("--model", default="minilm")
    ext.add_argument("--corpus", default="tweets")
    ext.add_argument("--n", type=int, default=None)
    ext.add_argument("--seed", type=int, default=0)
    ext.add_argument("--attention", action="store_true")
    ext.set_defaults(func=cmd_extract)
    sweep = sub.add_parser("sweep", help="run a declared grid, here or on a Dask cluster")
    sweep.add_argument("spec", help="the sweep's YAML file")
    where = sweep.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None,
                       help="run on a Dask LocalCluster of N worker processes")
    where.add_argument("--scheduler", default=None,
                       help="address of a running Dask scheduler (tcp://host:8786)")
    where.add_argument("--here", action="store_true",
                       help="run in this process, one unit after another (no Dask)")
    sweep.add_argument("--out", default=None, help="folder for the tables "
                       "(default: sweeps/NAME)")
    sweep.add_argument("--cache-dir", default=None,
                       help="the cache every worker shares (default: $ANALYSIS_LIB_CACHE or "
                       "the user cache folder)")
    sweep.set_defaults(func=cmd_sweep)
    zoo = sub.add_parser("zoo", help="list the model zoo (models pretrained here) and train "
                         "a set of it")
    zoo.add_argument("--set", default="default", choices=["default", "replica", "zoo"],
                     help="the book's default set, the replica profile's (the default set "
                     "drawn again from other seeds), or the whole zoo")
    zoo.add_argument("--train", action="store_true", help="train the models not cached yet")
    zoo.add_argument("--cache-dir", default=None)
    zoo.set_defaults(func=cmd_zoo)
    timed = sub.add_parser("times", help="print each page's measured run times, or keep a "
                           "build's times")
    timed.add_argument("--record", choices=["cold", "warm"], default=None,
                       help="keep the last build's times as cold (its cache was empty when "
                       "it started) or warm (everything was cached)")
    timed.add_argument("--profile", default="default", help="the build's profile")
    timed.add_argument("--executed", default=None, help="the build's folder of executed "
                       "notebooks (default: _build/executed/PROFILE)")
    timed.set_defaults(func=cmd_times)
    sub.add_parser("corpora", help="list the corpora").set_defaults(func=cmd_corpora)
    sub.add_parser("models", help="list the offline model names").set_defaults(func=cmd_models)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, LookupError, OSError) as error:
        # a bad model, corpus, file or value: its message names the fix; no traceback
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"error: {message}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        top = (error.name or "").split(".")[0]
        if top not in EXTRAS:
            raise
        extra = COMMAND_EXTRAS.get(args.command, EXTRAS[top])
        print(f"analysis-lib {args.command} needs {top}, which is not installed here; install "
              f'what the command needs with pip install "analysis_lib[{extra}]"',
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
