"""The whole book's answer on one page: every claim of the four papers against this run.

Each chapter keeps its findings tables in its executed notebook
(:func:`analysis_lib.book.prose.record_findings`: a record that shows nothing on the page).
:func:`collect` reads them back from the executed notebooks of one build and lists every
claim of :mod:`analysis_lib.studies.claims`, with "not measured" for a claim that no chapter
of the profile judged; :func:`page` writes the book's findings page from that table, and
:func:`write` keeps it as ``findings.csv`` beside the executed notebooks. Nothing on the
page is typed: a rebuild under another profile, or on other models, gives its own scorecard.
``python -m analysis_lib findings --profile NAME`` prints the same table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

#: the name every findings record of a chapter starts with (one per findings table)
RECORD = "findings-record"
#: where a record's rows are in the executed notebook (myst-nb's glue, not displayed): JSON
#: text, as a notebook output holds an object only under a JSON media type
MIME = "application/papermill.record/text/plain"
#: the columns of the table, in order
COLUMNS = ("claim id", "paper", "claim", "what the paper reports", "the paper's effect",
           "smallest effect", "what this run shows", "verdict", "how", "control", "chapter")
#: what a claim that no chapter of the build judged reads
UNJUDGED = "not measured: no chapter of this build judges it"


class UnreadableChapter(ValueError):
    """An executed chapter whose findings cannot be trusted: not a notebook, a notebook
    that did not finish, or a damaged findings record. The message names the file and the
    fix (rebuild the chapter)."""


def _unreadable(path: Path, why: str) -> UnreadableChapter:
    return UnreadableChapter(
        f"executed chapter {path} {why}; rebuild it (python -m analysis_lib book --profile "
        "NAME reruns what is missing or unfinished)")


def read(path: Path) -> pd.DataFrame:
    """The findings rows an executed notebook recorded (empty when none).

    Only a finished chapter is read (:func:`_finished_notebook`); a damaged findings record
    raises :class:`UnreadableChapter` too, which names the file and why."""
    from ..studies.claim import VERDICTS

    path = Path(path)
    rows = []
    for cell in _finished_notebook(path).cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name", "")
            if not (str(name).startswith(RECORD) and MIME in output.get("data", {})):
                continue
            try:
                record = json.loads(output["data"][MIME])
                found = list(record["rows"])
                if not all(isinstance(r, dict) and "claim id" in r
                           and r.get("verdict") in VERDICTS for r in found):
                    raise ValueError("a row lacks its claim id or a verdict of the book")
            except (ValueError, TypeError, KeyError) as error:
                raise _unreadable(path, f"holds a damaged findings record {name!r} "
                                        f"({type(error).__name__}: {str(error)[:200]})"
                                  ) from error
            rows += found
    return pd.DataFrame(rows)


def _finished_notebook(path: Path) -> Any:
    """The notebook at ``path`` if a build finished it; :class:`UnreadableChapter` for a
    file that is not a notebook (empty, truncated, not JSON), a notebook papermill marked
    as failed or left unfinished (a cell still pending or running, as after a killed
    build), or one with a cell's error in its outputs."""
    import nbformat

    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as error:  # nbformat raises many kinds (JSON, schema, conversion)
        raise _unreadable(path, f"is not a readable notebook ({type(error).__name__}: "
                                f"{str(error)[:200]})") from error
    if not isinstance(nb.get("cells"), list):
        raise _unreadable(path, "is not a notebook (it has no list of cells)")
    papermill = nb.get("metadata", {}).get("papermill", {})
    if isinstance(papermill, dict) and papermill.get("exception"):
        raise _unreadable(path, "is marked by papermill as failed (a cell raised)")
    unfinished = [c.get("metadata", {}).get("papermill", {}).get("status")
                  for c in nb.cells if isinstance(c, dict)]
    unfinished = [s for s in unfinished if s not in (None, "completed")]
    if unfinished:
        raise _unreadable(path, f"did not finish ({len(unfinished)} cells {unfinished[0]})")
    errors = [o for c in nb.cells for o in c.get("outputs", [])
              if isinstance(o, dict) and o.get("output_type") == "error"]
    if errors:
        raise _unreadable(path, f"holds an error from a cell ({errors[0].get('ename', '')}: "
                                f"{str(errors[0].get('evalue', ''))[:120]})")
    return nb


def finished(paths: Iterable[Path]) -> list[Path]:
    """The chapters among ``paths`` a build finished: a dot-file (``.seeds.running.ipynb``,
    the notebook a build writes while it runs, left behind by a build that stopped) is
    never a chapter."""
    return [Path(p) for p in paths if not Path(p).name.startswith(".")]


def collect(notebooks: Iterable[Path], expected: Iterable[str] = ()) -> pd.DataFrame:
    """Every claim of the papers (:data:`analysis_lib.studies.claims.CLAIMS`, in their
    order) with this build's verdict, read from the executed ``notebooks``; ``chapter`` is
    the notebook that judged it. A claim judged twice (a chapter that reads another
    profile's runs as well) keeps the first, the chapter's own.

    Dot-files are skipped (:func:`finished`). A chapter that cannot be read
    (:class:`UnreadableChapter`), or one of ``expected`` (chapter names, e.g. the book's
    table of contents) with no notebook, is named in the text of every claim no readable
    chapter judged, and in ``table.attrs["unread"]`` (chapter -> why), so that a damaged or
    missing chapter never reads as a chapter that judged nothing."""
    from ..studies.claims import CLAIMS, PAPERS

    found, unread = [], {}
    paths = finished(notebooks)
    for path in paths:
        try:
            rows = read(path)
        except UnreadableChapter as error:
            unread[path.stem] = str(error)
            continue
        if len(rows):
            found.append(rows.assign(chapter=path.stem))
    present = {p.stem for p in paths}
    for name in expected:
        if name not in present:
            unread[name] = f"chapter {name!r} has no executed notebook in this build"
    unjudged = UNJUDGED if not unread else (
        f"{UNJUDGED}; chapters that could not be read: {', '.join(sorted(unread))}")
    judged = (pd.concat(found, ignore_index=True).drop_duplicates("claim id")
              .set_index("claim id") if found else pd.DataFrame())
    out = []
    for claim_id, claim in CLAIMS.items():
        row = {"claim id": claim_id, "paper": f"{PAPERS[claim.paper].split(',')[0]} "
                                              f"{claim.where}",
               "claim": claim.claim, "what the paper reports": claim.reported,
               "the paper's effect": claim.paper_effect,
               "smallest effect": claim.smallest_effect,
               "what this run shows": unjudged, "verdict": "not measured", "how": "",
               "control": f"{claim.control[0]}: {claim.control[1]}", "chapter": ""}
        if claim_id in judged.index:
            got = judged.loc[claim_id]
            row.update({"what this run shows": str(got["what this run shows"]),
                        "verdict": str(got["verdict"]), "chapter": str(got["chapter"]),
                        "how": str(got.get("how", "") if pd.notna(got.get("how", "")) else "")})
        out.append(row)
    table = pd.DataFrame(out, columns=list(COLUMNS))
    table.attrs["unread"] = unread
    return table


def write(folder: Path, table: pd.DataFrame) -> Path:
    """Keep the table as ``findings.csv`` in ``folder`` (written atomically)."""
    from ..runtime.cache import atomic_write

    path = Path(folder) / "findings.csv"
    atomic_write(path, lambda tmp: table.to_csv(tmp, index=False))
    return path


#: the columns the command line shows, in order
SHOWN = ("claim id", "verdict", "what this run shows", "chapter")


def text_table(table: pd.DataFrame, width: int = 100) -> str:
    """The findings as plain text no wider than ``width`` characters: claim id, verdict and
    chapter in columns of their own width, what the run shows wrapped in the rest."""
    import textwrap

    rows = table[list(SHOWN)].astype(str).to_numpy().tolist()
    head = ["claim", "verdict", "this run shows", "chapter"]
    w_id = max(len(head[0]), *(len(r[0]) for r in rows)) if rows else len(head[0])
    w_verdict = max(len(head[1]), *(len(r[1]) for r in rows)) if rows else len(head[1])
    w_chapter = max(len(head[3]), *(len(r[3]) for r in rows)) if rows else len(head[3])
    w_shows = max(20, width - w_id - w_verdict - w_chapter - 6)
    lines = []
    for k, row in enumerate([head, *rows]):
        shows = textwrap.wrap(row[2], w_shows) or [""]
        for j, part in enumerate(shows):
            cells = (row[0], row[1], part, row[3]) if j == 0 else ("", "", part, "")
            lines.append(f"{cells[0]:<{w_id}}  {cells[1]:<{w_verdict}}  {cells[2]:<{w_shows}}"
                         f"  {cells[3]}".rstrip())
        if k == 0:
            lines.append("-" * min(width, w_id + w_verdict + w_shows + w_chapter + 6))
    return "\n".join(lines)


def markdown(table: pd.DataFrame) -> str:
    """The findings as a Markdown table (claim, verdict, what this run shows, chapter)."""
    lines = ["| claim | verdict | this run shows | chapter |", "|---|---|---|---|"]
    for row in table[list(SHOWN)].astype(str).to_numpy().tolist():
        lines.append("| " + " | ".join(_cell(x) for x in row) + " |")
    return "\n".join(lines)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _verdict_cell(row: dict) -> str:
    """The verdict in bold; an undecided or mixed one with how it was reached (which units
    disagree, which estimates run against the paper, whether equivalence was in reach)."""
    how = str(row.get("how", "") or "").removeprefix("one unit").removeprefix("; ")
    if row["verdict"] in ("inconclusive", "mixed") and how:
        return f"**{row['verdict']}** ({how})"
    return f"**{row['verdict']}**"


def page(table: pd.DataFrame, profile: str) -> str:
    """The findings page (MyST markdown): one row per claim, the paper's report beside this
    run's estimate and verdict, and a link to the chapter that computes it."""
    counts = table.verdict.value_counts()
    tally = ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
    lines = [
        "# What holds: the papers' claims against this run", "",
        "Every claim of the four papers that this book tests, with what the paper reports "
        "(and its own effect size beside the smallest effect this book reads as a difference), "
        "what this build shows (the estimate with its 95% interval, per unit), the verdict of "
        "the book's one rule (the measures page states it) and the control the statistic is "
        "read against. The page is written from the executed chapters of this build, never "
        f"typed: this build used the `{profile}` profile, and its verdicts are: {tally}. "
        "A claim that no chapter of the profile judges says so; `python -m analysis_lib "
        f"findings --profile {profile}` prints the same table, and `findings.csv` beside the "
        "executed notebooks holds it.", "",
        "| claim | paper | the paper reports | this run | verdict | control | chapter |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table.to_dict(orient="records"):
        chapter = row["chapter"]
        link = f"{{doc}}`{chapter} <../notebooks/{chapter}>`" if chapter else ""
        effect = row["the paper's effect"]
        reported = (f"{row['what the paper reports']} (its effect: {effect}; smallest "
                    f"effect here: {row['smallest effect']})")
        cells = (f"`{row['claim id']}`: {row['claim']}", row["paper"], reported,
                 row["what this run shows"],
                 _verdict_cell(row), row["control"])
        lines.append("| " + " | ".join(_cell(x) for x in cells) + f" | {link} |")
    return "\n".join(lines) + "\n"


#: the line of a book page that the build replaces with :func:`profiles_table`
PROFILES_MARKER = "% profiles table: written by the build (analysis_lib.book.findings)"


def profiles_table(executed: Path) -> str:
    """Every profile built in this checkout side by side (MyST markdown): one row per claim,
    one column per profile whose ``findings.csv`` lies under ``executed``
    (``_build/executed/<profile>/``), each cell the verdict and what that build shows. A
    profile not built yet has no column; none built at all gives a sentence that says so. A
    ``findings.csv`` that cannot be read (damaged, or not a findings table) is named under
    the table instead of a column."""
    tables, unreadable = {}, []
    for path in sorted(Path(executed).glob("*/findings.csv")):
        try:
            table = pd.read_csv(path, keep_default_na=False)
            if not {"claim id", "verdict", "what this run shows"} <= set(table.columns):
                raise ValueError("it lacks the columns of a findings table")
            tables[path.parent.name] = table.set_index("claim id")
        except (OSError, ValueError, pd.errors.ParserError) as error:
            unreadable.append(f"`{path.parent.name}` ({type(error).__name__}: "
                              f"{_cell(str(error)[:120])})")
    note = ("\nThe findings of these builds could not be read (rebuild them): "
            + "; ".join(unreadable) + ".\n") if unreadable else ""
    if not tables:
        return ("No profile has been built in this checkout yet; each build adds its "
                "column here.\n" + note)
    claim_ids = list(dict.fromkeys(cid for t in tables.values() for cid in t.index))
    names = list(tables)
    lines = ["| claim | " + " | ".join(f"`{n}`" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for cid in claim_ids:
        cells = []
        for name in names:
            table = tables[name]
            if cid in table.index:
                row = table.loc[cid]
                cells.append(_cell(f"**{row['verdict']}**: {row['what this run shows']}"))
            else:
                cells.append("not in this build")
        lines.append(f"| `{cid}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n" + note
