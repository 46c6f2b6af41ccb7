"""The whole book's answer on one page: every claim of the four papers against this run.

Each chapter keeps its findings tables in its executed notebook
(:func:`analysis_lib.book.prose.record_findings`: a record that shows nothing on the page).
:func:`collect` reads them back from the executed notebooks of one build and lists every
claim of :mod:`analysis_lib.claims`, with "not measured" for a claim that no chapter
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
           "smallest effect", "what this run shows", "verdict", "how", "control", "chapter",
           "units")
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
    from ..claims.claim import VERDICTS

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
                if not all(_units_ok(r.get("units", [])) for r in found):
                    raise ValueError("a row's units are not [unit, estimate, low, high]")
            except (ValueError, TypeError, KeyError) as error:
                raise _unreadable(path, f"holds a damaged findings record {name!r} "
                                        f"({type(error).__name__}: {str(error)[:200]})"
                                  ) from error
            rows += found
    return pd.DataFrame(rows)


def _units_ok(units: Any) -> bool:
    """Whether a record's units are a list of ``[unit text, estimate, low, high]`` with
    numbers or None (JSON null)."""
    def number(x: Any) -> bool:
        return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))

    return isinstance(units, list) and all(
        isinstance(u, list) and len(u) == 4 and isinstance(u[0], str)
        and all(number(x) for x in u[1:]) for u in units)


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
    """Every claim of the papers (:data:`analysis_lib.claims.CLAIMS`, in their
    order) with this build's verdict, read from the executed ``notebooks``; ``chapter`` is
    the notebook that judged it. A claim judged twice (a chapter that reads another
    profile's runs as well) keeps the first, the chapter's own.

    Dot-files are skipped (:func:`finished`). A chapter that cannot be read
    (:class:`UnreadableChapter`), a chapter that judges claims but holds no findings record
    (its record cell removed, its outputs cleared), or one of ``expected`` (chapter names,
    e.g. the book's table of contents) with no notebook, is named in the text of every
    claim no readable chapter judged, and in ``table.attrs["unread"]`` (chapter -> why), so
    that a damaged or missing chapter never reads as a chapter that judged nothing."""
    from ..claims import CLAIMS
    from ..claims.claim import PAPERS

    judging = {claim.chapter for claim in CLAIMS.values()}
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
        elif path.stem in judging:
            unread[path.stem] = str(_unreadable(path, (
                "holds no findings record (the cell that records them was removed, or its "
                "outputs were cleared, as Jupyter's Clear All Outputs does)")))
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
               "control": f"{claim.control[0]}: {claim.control[1]}", "chapter": "",
               "units": "[]"}
        if claim_id in judged.index:
            got = judged.loc[claim_id]
            units = got.get("units", [])
            row.update({"what this run shows": str(got["what this run shows"]),
                        "verdict": str(got["verdict"]), "chapter": str(got["chapter"]),
                        "how": str(got.get("how", "") if pd.notna(got.get("how", "")) else ""),
                        "units": json.dumps(units if isinstance(units, list) else [])})
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
    longest = max([len(head[2]), *(len(r[2]) for r in rows)])
    # no wider than the width asked for, and no wider than the longest text needs
    w_shows = min(max(20, width - w_id - w_verdict - w_chapter - 6), longest)
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


def _how(row: dict) -> str:
    """How an undecided or mixed verdict was reached (which units disagree, which estimates
    run against the paper, whether equivalence was in reach); for a decided one, what it
    reads at half and at twice its smallest effect
    (:func:`~analysis_lib.claims.verdicts.other_effects_clause`); ``""`` for a claim not
    measured."""
    from ..claims.verdicts import other_effects_clause

    how = str(row.get("how", "") or "").removeprefix("one unit").removeprefix("; ")
    if row["verdict"] in ("inconclusive", "mixed"):
        return how
    return other_effects_clause(how) if row["verdict"] != "not measured" else ""


#: each verdict's colour in the findings chart
COLOURS = {"holds": "#1a9850", "equivalent": "#4575b4", "opposite": "#d73027",
           "mixed": "#f46d43", "inconclusive": "#878787", "not measured": "#bdbdbd"}


def estimates(table: pd.DataFrame) -> pd.DataFrame:
    """One row per unit of every claim the build judged: its estimate and 95% interval in
    units of the claim's smallest effect (on the units' own scale, Fisher's z for a
    correlation claim), turned so that the paper's direction is positive: 1 is the smallest
    effect that matters the paper's way, -1 the same the other way. A claim whose smallest
    effect is zero, or a unit with no estimate, has no row."""
    from ..claims import CLAIMS

    rows = []
    for row in table.to_dict(orient="records"):
        claim = CLAIMS.get(str(row["claim id"]))
        units = json.loads(row.get("units") or "[]") if claim is not None else []
        if claim is None or not claim.delta > 0:
            continue
        turn = (-1.0 if claim.direction == "less" else 1.0) / claim.delta
        for unit, estimate, low, high in units:
            if estimate is None:
                continue
            ends = sorted((low * turn, high * turn)) if None not in (low, high) else [None] * 2
            rows.append({
                "claim id": row["claim id"], "claim": row["claim"], "unit": unit,
                "verdict": row["verdict"], "x": estimate * turn, "low": ends[0],
                "high": ends[1], "estimate": f"{estimate:+.3f}",
                "interval": "" if ends[0] is None else f"[{low:+.3f}, {high:+.3f}]",
                "href": f"../notebooks/{row['chapter']}.html" if row["chapter"] else ""})
    return pd.DataFrame(rows, columns=["claim id", "claim", "unit", "verdict", "x", "low",
                                       "high", "estimate", "interval", "href"])


def chart(table: pd.DataFrame) -> Any:
    """The findings at a glance (an altair chart, or None when the build judged nothing):
    per claim, each unit's estimate and interval in units of the smallest effect
    (:func:`estimates`), on a scale that is linear within one smallest effect and
    logarithmic beyond, coloured by the claim's verdict; the dashed lines are the smallest
    effect either way and zero; a point links to the chapter that computes it."""
    import altair as alt

    frame = estimates(table)
    if frame.empty:
        return None
    scale = alt.Scale(type="symlog", constant=1)
    base = alt.Chart(frame).encode(
        y=alt.Y("claim id:N", sort=list(dict.fromkeys(frame["claim id"])), title=None,
                axis=alt.Axis(labelLimit=200)),
        color=alt.Color("verdict:N", scale=alt.Scale(domain=list(COLOURS),
                                                     range=list(COLOURS.values())),
                        legend=alt.Legend(orient="top", title=None)),
        tooltip=["claim id", "claim", "unit", "estimate", "interval", "verdict"],
        href="href:N")
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("low:Q", scale=scale), x2="high:Q")
    dots = base.mark_circle(size=60, opacity=0.9).encode(x=alt.X(
        "x:Q", scale=scale,
        title="estimate in smallest effects (the paper's direction to the right)"))
    marks = alt.Chart(pd.DataFrame({"x": [-1.0, 0.0, 1.0]})).mark_rule(
        strokeDash=[4, 4], color="#666").encode(x=alt.X("x:Q", scale=scale))
    return alt.layer(marks, bars, dots).properties(width=560, height=alt.Step(18))


def page(table: pd.DataFrame, profile: str) -> str:
    """The findings page (MyST markdown): a chart of every unit's estimate against its
    claim's smallest effect (:func:`chart`), a table of one row per claim (its verdict,
    this run's estimates, a link to the chapter that computes it) narrow enough for a phone,
    and each claim in full (what the paper reports, its effect size, the control) under a
    fold."""
    from .render import chart_html

    counts = table.verdict.value_counts()
    tally = ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
    lines = [
        "# What holds: the papers' claims against this run", "",
        "Every claim of the four papers that this book tests, judged by the book's one rule "
        "(the measures page states it) on this build's executed chapters. The page is "
        f"written from them, never typed: this build used the `{profile}` profile, and its "
        f"verdicts are: {tally}. `python -m analysis_lib findings --profile {profile}` "
        "prints the same table, and `findings.csv` beside the executed notebooks holds it.",
        "",
    ]
    steady = _steady(table)
    if steady:
        lines += [f"{steady[0]} of the {steady[1]} measured verdicts read the same with each "
                  "claim's smallest effect halved and doubled; each of the others says, with "
                  "the claim in full below, what it reads there.", ""]
    shown = chart(table)
    if shown is not None:
        lines += [
            "Each point is one unit of a claim (a task, a model, a pair of seeds), its estimate "
            "divided by the claim's smallest effect and turned so that the paper's direction "
            "points right: past the dashed line at 1 the effect matters the paper's way, past "
            "-1 it matters the other way, between them it is too small to matter. The bar is "
            "the 95% interval, and the verdict reads it: a unit is decided only where its "
            "whole bar lies on one side of the dashed line at 1 or at -1 (Holm's adjustment "
            "over a claim's units can leave undecided a unit whose bar does). Hover for the "
            "numbers, click for the chapter.", "",
            "```{raw} html", chart_html(shown.to_dict()), "```", ""]
    lines += ["| claim | verdict | this run | chapter |", "|---|---|---|---|"]
    for row in table.to_dict(orient="records"):
        chapter = row["chapter"]
        link = f"{{doc}}`{chapter} <../notebooks/{chapter}>`" if chapter else ""
        cells = (f"`{row['claim id']}`: {row['claim']}", f"**{row['verdict']}**",
                 row["what this run shows"])
        lines.append("| " + " | ".join(_cell(x) for x in cells) + f" | {link} |")
    lines += ["", "```{admonition} Each claim in full: what the paper reports, its effect, "
                  "the smallest effect read here, the control, how an undecided verdict was "
                  "reached, and what each verdict reads at half and at twice its smallest "
                  "effect", ":class: dropdown", ""]
    for row in table.to_dict(orient="records"):
        effect = _cell(row["the paper's effect"])
        how = f" Verdict {row['verdict']}: {_cell(_how(row))}." if _how(row) else ""
        lines += [f"- `{_cell(row['claim id'])}` ({_cell(row['paper'])}): "
                  f"{_cell(row['claim'])}. The paper reports: "
                  f"{_cell(row['what the paper reports'])}; its effect: {effect}; smallest "
                  f"effect here: {row['smallest effect']}; control: {_cell(row['control'])}."
                  f"{how}"]
    lines += ["```", ""]
    return "\n".join(lines)


def _steady(table: pd.DataFrame) -> tuple[int, int] | None:
    """(verdicts that read the same at half and at twice their smallest effect, measured
    verdicts that say what they read there), or None where none says
    (:func:`~analysis_lib.claims.verdicts.other_effects_clause`)."""
    from ..claims.verdicts import other_effects_clause

    clauses = [other_effects_clause(str(how)) for how, verdict in zip(table["how"],
                                                                      table["verdict"])
               if verdict != "not measured"]
    said = [c for c in clauses if c]
    if not said:
        return None
    return sum(c.startswith("the same") for c in said), len(said)


#: the line of the front page that the build replaces with :func:`answer`
ANSWER_MARKER = "% the answer: written by the build (analysis_lib.book.findings.answer)"


def answer(table: pd.DataFrame, profile: str, chapters: str = "../notebooks") -> str:
    """The whole book's answer in one view, for the front page (MyST markdown holding one
    HTML block, no script): the tally of verdicts as a bar and in words, then every claim
    in words, paper by paper, each with its verdict and a link to the chapter that judges
    it (``chapters``: the chapters' folder, relative to the page). The block wraps at any
    width (styles in :data:`analysis_lib.book.render.STYLES`); how a verdict is reached and
    the numbers behind it are one link away, on the findings page."""
    import html

    from ..claims import CLAIMS
    from ..claims.claim import PAPERS

    counts = table.verdict.value_counts()
    order = [v for v in COLOURS if v in counts.index]
    said = {v: "hold" if v == "holds" else v for v in order}  # "20 hold, 1 opposite"
    words = ", ".join(f"{counts[v]} {said[v]}" for v in order)
    parts = ['<div class="analysis-lib-answer">',
             f'<div class="al-tally" role="img" aria-label="{html.escape(words)}">']
    parts += [f'<span class="al-seg" style="flex: {counts[v]}; background: {COLOURS[v]}">'
              f'</span>' for v in order]
    parts += ["</div>", '<p class="al-words">' + " &middot; ".join(
        f'<span class="al-key" style="--al-colour: {COLOURS[v]}">{counts[v]} {said[v]}'
        f'</span>' for v in order) + "</p>"]
    for paper, title in PAPERS.items():
        rows = table[[getattr(CLAIMS.get(str(c)), "paper", None) == paper
                      for c in table["claim id"]]]
        if rows.empty:
            continue
        name, _, subject = title.partition(", ")
        parts.append(f'<p class="al-paper"><strong>{html.escape(name)}</strong>, '
                     f'<em>{html.escape(subject)}</em></p>')
        parts.append('<ul class="al-claims">')
        for row in rows.to_dict(orient="records"):
            verdict = str(row["verdict"])
            ink = "#222" if verdict == "not measured" else "#fff"  # legible on its colour
            badge = (f'<span class="al-verdict" style="--al-colour: '
                     f'{COLOURS.get(verdict, "#878787")}; --al-ink: {ink}">'
                     f'{html.escape(verdict)}</span>')
            text = f'<span class="al-text">{html.escape(str(row["claim"]))}</span>'
            chapter = str(row.get("chapter") or "")
            item = (f'<a class="al-row" href="{chapters}/{html.escape(chapter)}.html">'
                    f'{badge}{text}</a>' if chapter else
                    f'<span class="al-row">{badge}{text}</span>')
            parts.append(f'<li title="{html.escape(str(row["claim id"]))}">{item}</li>')
        parts.append("</ul>")
    parts.append("</div>")
    return "\n".join([
        f"Of the {len(table)} claims of the four papers this book tests, the `{profile}` "
        f"build finds: {words}.", "", "```{raw} html", *parts, "```", ""])


#: pairs of verdicts of one claim in two builds that contradict each other: the claim shown
#: one way in one and the other way in the other (``mixed`` holds a contradiction of its own
#: and counts as a difference)
CONTRADICTING = (frozenset({"holds", "opposite"}), frozenset({"equivalent", "opposite"}))


def compare(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """Two builds' findings (:func:`collect`'s tables: the default and its replica, two
    CPUs, two schedules) claim by claim: both verdicts, both builds' ``what this run
    shows``, and ``agreement``: ``same`` (one verdict), ``contradicts`` (one build shows the
    claim and the other its opposite: :data:`CONTRADICTING`; with disjoint seeds, an
    interval over seeds that missed the second draw) or ``differs`` (any other change:
    decided in one and undecided in the other, or measured in one only). Rows in the first
    table's order, then the claims only the second holds."""
    a, b = (t.set_index("claim id") if "claim id" in t.columns else t
            for t in (first, second))
    rows = []
    for cid in dict.fromkeys([*a.index, *b.index]):
        va = str(a.loc[cid, "verdict"]) if cid in a.index else "not in this build"
        vb = str(b.loc[cid, "verdict"]) if cid in b.index else "not in this build"
        agreement = ("same" if va == vb else "contradicts"
                     if frozenset({va, vb}) in CONTRADICTING else "differs")
        rows.append({"claim id": cid, "first": va, "second": vb, "agreement": agreement,
                     "first shows": str(a.loc[cid, "what this run shows"])
                     if cid in a.index else "",
                     "second shows": str(b.loc[cid, "what this run shows"])
                     if cid in b.index else ""})
    return pd.DataFrame(rows, columns=["claim id", "first", "second", "agreement",
                                       "first shows", "second shows"])


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
