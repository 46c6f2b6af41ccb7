"""The book's findings page: every claim of the papers with the verdict its chapter gave,
read back from executed notebooks, and the same table on the command line."""

from __future__ import annotations

import io
import json

import nbformat
import pandas as pd
import pytest

from analysis_lib import claims
from analysis_lib.__main__ import main
from analysis_lib.book import findings
from analysis_lib.claims import tables, verdicts
from analysis_lib.claims.verdicts import Evidence, decide


def _executed(tmp_path, name, *tables):
    """An executed notebook whose cells recorded ``tables`` the way
    :func:`analysis_lib.book.prose.record_findings` does."""
    nb = nbformat.v4.new_notebook()
    for k, table in enumerate(tables):
        rows = [{"claim id": cid, "what this run shows": str(r["what this run shows"]),
                 "verdict": str(r["verdict"]), "how": str(r["how"]),
                 "units": table.attrs.get("units", {}).get(cid, [])}
                for cid, r in table.iterrows()]
        cell = nbformat.v4.new_code_cell("prose.record_findings(findings)")
        cell.outputs = [nbformat.v4.new_output(
            "display_data", data={findings.MIME: json.dumps({"rows": rows})},
            metadata={"scrapbook": {"name": f"{findings.RECORD}-{k}",
                                    "mime_prefix": "application/papermill.record/"}})]
        nb.cells.append(cell)
    nb.cells.append(nbformat.v4.new_code_cell("x = 1"))
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_the_scorecard_lists_every_claim_with_its_chapters_verdict(tmp_path):
    blocks = tables.table([decide("phang-blocks", [Evidence("m, t", 0.3, 0.01)])])
    domain = tables.table([verdicts.not_measured("merchant-domain", "not measured: why")])
    first = _executed(tmp_path, "finetuning", blocks)
    second = _executed(tmp_path, "domains", domain)
    table = findings.collect([first, second])
    assert list(table["claim id"]) == list(claims.CLAIMS)  # every claim, in their order
    assert list(table.columns) == list(findings.COLUMNS)
    row = table.set_index("claim id").loc["phang-blocks"]
    assert row.verdict == "holds" and row.chapter == "finetuning"
    assert row["what this run shows"].startswith("m, t: +0.300 [")
    assert row.control.startswith("condition: the pretrained model's own ORIG-ORIG")
    assert table.set_index("claim id").loc["merchant-domain", "chapter"] == "domains"
    unjudged = table[table.chapter == ""]
    assert len(unjudged) == len(claims.CLAIMS) - 2
    assert set(unjudged.verdict) == {"not measured"}
    assert set(unjudged["what this run shows"]) == {findings.UNJUDGED}
    # the page: a row per claim, the chapter linked, pipes in the text escaped
    text = findings.page(table.assign(claim=table.claim.str.replace("a", "a|", n=1)), "smoke")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == len(claims.CLAIMS)
    assert "{doc}`finetuning <../notebooks/finetuning>`" in text
    assert "\\|" in text and "`smoke` profile" in text and "1 holds" in text
    path = findings.write(tmp_path, table)
    pd.testing.assert_frame_equal(pd.read_csv(path, keep_default_na=False), table)


def test_the_chart_puts_each_unit_in_smallest_effects_the_papers_way(tmp_path):
    """Known values: ren-depth claims a decrease with smallest effect 0.01, so -0.04 is four
    smallest effects the paper's way; phang-cka-predicts is a correlation claim read as
    Fisher's z against atanh(0.3); a claim no chapter judged has no point."""
    import numpy as np

    depth = tables.table([decide("ren-depth", [Evidence("pairs", -0.04, 0.005)])])
    link = tables.table([decide("phang-cka-predicts",
                                [Evidence.from_correlation("t", -0.6, 40)])])
    blocks = tables.table([decide("phang-blocks", [Evidence("m, t", 0.3, 0.01),
                                                   Evidence("m, u", -0.05, 0.01)])])
    table = findings.collect([_executed(tmp_path, "seeds", depth),
                              _executed(tmp_path, "truncation", link),
                              _executed(tmp_path, "finetuning", blocks)])
    points = findings.estimates(table)
    assert sorted(set(points["claim id"])) == ["phang-blocks", "phang-cka-predicts",
                                               "ren-depth"]
    depth_point = points.set_index("claim id").loc["ren-depth"]
    assert depth_point.x == pytest.approx(4.0)
    assert depth_point.low < 4.0 < depth_point.high  # the interval turned with it
    assert depth_point.href == "../notebooks/seeds.html"
    z = points.set_index("claim id").loc["phang-cka-predicts", "x"]
    assert z == pytest.approx(np.arctanh(0.6) / np.arctanh(0.3))
    assert sorted(points[points["claim id"] == "phang-blocks"].x) == pytest.approx([-2.5, 15])
    text = findings.page(table, "smoke")
    assert "```{raw} html" in text and "window.vegaEmbed" in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == len(claims.CLAIMS) and all(line.count(" | ") == 3 for line in rows)
    assert ":class: dropdown" in text and "smallest effect here: 0.01" in text
    assert "```{raw} html" not in findings.page(findings.collect([]), "smoke")  # no points


def test_a_damaged_units_record_is_named_not_read(tmp_path):
    path = _executed(tmp_path, "seeds", tables.table([decide("ren-depth", [
        Evidence("pairs", -0.04, 0.005)])]))
    nb = nbformat.read(str(path), as_version=4)
    record = json.loads(nb.cells[0].outputs[0]["data"][findings.MIME])
    record["rows"][0]["units"] = [["pairs", "-0.04", None, None]]  # text, not a number
    nb.cells[0].outputs[0]["data"][findings.MIME] = json.dumps(record)
    nbformat.write(nb, str(path))
    with pytest.raises(findings.UnreadableChapter, match="units"):
        findings.read(path)


def test_an_undecided_verdict_on_the_page_says_how_it_was_reached(tmp_path):
    skip = tables.table([decide("phang-skip-bottom", [Evidence("m, a", -0.01, 0.05),
                                                        Evidence("m, b", -0.02, 0.05)])])
    table = findings.collect([_executed(tmp_path, "truncation", skip)])
    row = table.set_index("claim id").loc["phang-skip-bottom"]
    assert row.verdict == "inconclusive"
    assert "2 of 2 estimates run against the paper" in row.how
    text = findings.page(table, "default")
    line = next(x for x in text.splitlines() if x.startswith("| `phang-skip-bottom`"))
    assert "| **inconclusive** |" in line and "run against the paper" not in line
    # how it was reached is with the claim in full, under the table's fold
    full = next(x for x in text.splitlines() if x.startswith("- `phang-skip-bottom`"))
    assert "Verdict inconclusive: " in full and "run against the paper" in full
    # a decided verdict shows only what it reads at half and at twice its smallest effect
    clause = ("half the smallest effect (0.01) reads holds, twice the smallest effect "
              "(0.04) reads inconclusive")
    decided = findings.page(table.assign(verdict="holds", how=f"Holm over 2 units; {clause}"),
                            "default")
    full = next(x for x in decided.splitlines() if x.startswith("- `phang-skip-bottom`"))
    assert f"Verdict holds: {clause}." in full and "Holm" not in full
    assert "Verdict holds" not in findings.page(table.assign(verdict="holds"), "default")
    assert "Verdict not measured" not in findings.page(
        table.assign(verdict="not measured", how=f"x; {clause}"), "default")


def test_the_front_page_answer_states_every_claim_in_words_with_its_verdict(tmp_path):
    """The front page's one view: the tally, then every claim's sentence (not its id) with
    its verdict, grouped by paper, linked to the chapter that judged it; text from a
    chapter is escaped, never markup."""
    import html
    import re

    from analysis_lib.claims.claim import PAPERS

    blocks = tables.table([decide("phang-blocks", [Evidence("m, t", 0.3, 0.01)])])
    table = findings.collect([_executed(tmp_path, "finetuning", blocks)])
    table.loc[table["claim id"] == "wu-adjacent", "claim"] = "a <b>bold</b> & claim"
    text = findings.answer(table, "smoke")
    n = len(claims.CLAIMS)
    assert text.startswith(f"Of the {n} claims") and f"1 hold, {n - 1} not measured" in text
    items = re.findall(r'<li title="([^"]+)">(.*?)</li>', text)
    assert [cid for cid, _ in items] == list(claims.CLAIMS)  # the papers' order, every claim
    for (cid, item), sentence in zip(items, table.claim):
        shown = html.unescape(re.sub(r"<[^>]+>", "", item))
        assert cid not in shown and shown.endswith(sentence)  # words; the id is a tooltip
        assert shown.startswith(str(table.set_index("claim id").loc[cid, "verdict"]))
    assert "a &lt;b&gt;bold&lt;/b&gt; &amp; claim" in text and "<b>bold" not in text
    phang = dict(items)["phang-blocks"]
    assert 'href="../notebooks/finetuning.html"' in phang and ">holds<" in phang
    assert 'href="' not in dict(items)["wu-adjacent"]  # no chapter judged it: no link
    assert all(title.split(", ")[0] in text for title in PAPERS.values())
    assert "<script" not in text


def test_two_builds_are_compared_claim_by_claim_and_a_contradiction_named(tmp_path, capsys):
    """The default against its replica: a claim shown one way in one build and the other
    way in the other is a contradiction (exit status 1); a decided against an undecided
    verdict is a difference; the same verdict is the same."""
    def build(name, blocks, restarts):
        folder = tmp_path / name
        folder.mkdir()
        _executed(folder, "finetuning", tables.table([
            decide("phang-blocks", [Evidence("m, t", blocks, 0.01)]),
            decide("phang-restarts", [Evidence("m, t", restarts, 0.01)])]))
        return folder
    first = build("default", 0.3, 0.3)
    same = build("same", 0.3, 0.3)
    undecided = build("undecided", 0.3, 0.02)
    opposite = build("opposite", -0.3, 0.3)
    read = {f.name: findings.collect([f / "finetuning.ipynb"])
            for f in (first, same, undecided, opposite)}
    compared = findings.compare(read["default"], read["opposite"]).set_index("claim id")
    assert list(compared.index) == list(claims.CLAIMS)
    assert compared.loc["phang-blocks", ["first", "second", "agreement"]].tolist() == \
        ["holds", "opposite", "contradicts"]
    assert compared.loc["phang-restarts", "agreement"] == "same"
    assert compared.loc["phang-blocks", "second shows"].startswith("m, t: -0.300")
    assert findings.compare(read["default"], read["undecided"]).set_index(
        "claim id").loc["phang-restarts", "agreement"] == "differs"
    # a claim only one build holds
    fewer = read["default"][read["default"]["claim id"] != "phang-blocks"]
    assert findings.compare(fewer, read["same"]).set_index("claim id").loc[
        "phang-blocks", ["first", "agreement"]].tolist() == ["not in this build", "differs"]
    # the command: exit 1 on a contradiction, 0 otherwise, the differing claims listed
    args = ["findings", "--executed", str(first), "--against"]
    assert main([*args, str(same)]) == 0
    assert "every claim reads the same verdict" in capsys.readouterr().out
    assert main([*args, str(undecided)]) == 0
    out = capsys.readouterr().out
    assert "| `phang-restarts` | holds | inconclusive | differs |" in out
    assert main([*args, str(opposite)]) == 1
    assert "| `phang-blocks` | holds | opposite | contradicts |" in capsys.readouterr().out
    assert main([*args, str(opposite), "--format", "csv"]) == 1
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert csv.columns.tolist()[:4] == ["claim id", "default", "opposite", "agreement"]
    assert main([*args, str(tmp_path / "none")]) == 1


def test_a_notebook_without_records_adds_nothing(tmp_path):
    empty = _executed(tmp_path, "primer")
    assert findings.read(empty).empty
    assert set(findings.collect([empty]).verdict) == {"not measured"}


def test_the_command_prints_the_scorecard(tmp_path, capsys):
    blocks = tables.table([decide("phang-blocks", [Evidence("m, t", 0.3, 0.01)])])
    _executed(tmp_path, "finetuning", blocks)
    assert main(["findings", "--profile", "smoke", "--executed", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "phang-blocks" in out and "holds" in out
    assert f"{len(claims.CLAIMS)} claims" in out and "1 holds" in out
    assert main(["findings", "--executed", str(tmp_path / "none")]) == 1
    assert "build the book with this profile first" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["representation", "attention", "finetuning", "truncation",
                                  "domains", "seeds"])
def test_every_study_records_its_findings_in_a_visible_cell(name):
    from analysis_lib.book import ROOT

    nb = nbformat.read(str(ROOT / "notebooks" / f"{name}.ipynb"), as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "record_findings" in c.source]
    assert cells, name
    hidden = [c for c in nb.cells if c.cell_type == "code" and "findings(" in c.source
              and "remove-cell" in c.metadata.get("tags", [])]
    assert not hidden, name


def test_the_profiles_table_sets_every_built_profile_side_by_side(tmp_path):
    assert "No profile has been built" in findings.profiles_table(tmp_path)
    for name, value in (("default", 0.3), ("larger", -0.3)):
        folder = tmp_path / name
        folder.mkdir()
        table = tables.table([decide("phang-blocks", [Evidence("m, t", value, 0.01)])])
        path = _executed(folder, "finetuning", table)
        findings.write(folder, findings.collect([path]))
    text = findings.profiles_table(tmp_path)
    lines = text.splitlines()
    assert lines[0] == "| claim | `default` | `larger` |"
    row = next(line for line in lines if line.startswith("| `phang-blocks`"))
    assert "**holds**: m, t: +0.300" in row and "**opposite**: m, t: -0.300" in row
    assert len(lines) == 2 + len(claims.CLAIMS)


def test_the_running_page_rate_table_is_read_from_the_cache(monkeypatch):
    """The learning-rate table of the running page comes from the runs in the cache (never
    typed): every rate and task as a column, "not in this cache" where a run is missing, and
    the command that trains the missing ones."""
    from analysis_lib.book import builder

    A, B = "tweets-sentiment", "bbc-topic"
    frame = pd.DataFrame([
        {"learning rate": rate, "task": task, "validation": v, "test": t, "cached": v is not None}
        for rate, task, v, t in ((5e-5, A, None, None), (5e-5, B, None, None),
                                 (2e-4, A, 0.6964, 0.668), (2e-4, B, 0.768, 0.7961))])
    monkeypatch.setattr("analysis_lib.training.grid.rate_table", lambda grid: frame)
    text = builder.rate_table({"tasks": [A, B], "n_train": 600}, None)
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert lines[0] == (f"| learning rate | {A} validation | {A} test | {B} validation | "
                        f"{B} test |")
    assert lines[2] == ("| 5e-05 | not in this cache | not in this cache | not in this cache "
                        "| not in this cache |")
    assert lines[3] == "| 0.0002 | 0.696 | 0.668 | 0.768 | 0.796 |"
    assert "600 examples" in text and "benchmarks/finetune_rates.py" in text
    full = frame.assign(cached=True).fillna(0.5)
    monkeypatch.setattr("analysis_lib.training.grid.rate_table", lambda grid: full)
    assert "benchmarks/finetune_rates.py" not in builder.rate_table({"tasks": [A, B]}, None)


def _holds(claim_id):
    return tables.table([decide(claim_id, [Evidence("m, t", 0.3, 0.01)])])


@pytest.mark.parametrize("damage, why", [
    (lambda p: p.write_text(""), "not a readable notebook"),
    (lambda p: p.write_text(p.read_text()[:200]), "not a readable notebook"),
    (lambda p: p.write_text('{"rows": []}'), "not a readable notebook"),
    (lambda p: p.write_text("[1, 2]"), "not a readable notebook"),
    (lambda p: p.write_text(p.read_text().replace('\\"verdict\\": \\"holds\\"',
                                                  '\\"verdict\\": \\"hold')), "damaged"),
    (lambda p: p.write_text(p.read_text().replace('\\"verdict\\": \\"holds\\"',
                                                  '\\"verdict\\": \\"great\\"')), "damaged"),
])
def test_a_damaged_chapter_is_named_not_read_and_not_a_traceback(tmp_path, capsys, damage,
                                                                  why):
    path = _executed(tmp_path, "finetuning", _holds("phang-blocks"))
    damage(path)
    with pytest.raises(findings.UnreadableChapter, match=why):
        findings.read(path)
    table = findings.collect([path]).set_index("claim id")
    assert table.loc["phang-blocks", "verdict"] == "not measured"
    assert "could not be read: finetuning" in table.loc["phang-blocks", "what this run shows"]
    assert main(["findings", "--executed", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "finetuning.ipynb" in err and "rebuild it" in err and "Traceback" not in err


def test_a_failed_or_unfinished_notebook_is_not_read_as_finished(tmp_path):
    for status, why in [("failed", "marked by papermill as failed"),
                        ("pending", "did not finish"),
                        ("error", "holds an error from a cell .ValueError: bad")]:
        path = _executed(tmp_path, "finetuning", _holds("phang-blocks"))
        nb = nbformat.read(str(path), as_version=4)
        if status == "failed":
            nb.metadata["papermill"] = {"exception": True}
        elif status == "pending":
            nb.cells[-1].metadata["papermill"] = {"status": "pending"}
        else:
            nb.cells[-1].outputs = [nbformat.v4.new_output(
                "error", ename="ValueError", evalue="bad", traceback=[])]
        nbformat.write(nb, str(path))
        with pytest.raises(findings.UnreadableChapter, match=why):
            findings.read(path)
        assert findings.collect([path]).set_index("claim id").loc[
            "phang-blocks", "verdict"] == "not measured"


def test_a_leftover_of_a_stopped_build_never_replaces_the_finished_chapter(tmp_path):
    finished = _executed(tmp_path, "finetuning", _holds("phang-blocks"))
    opposite = tables.table([decide("phang-blocks", [Evidence("m, t", -0.3, 0.01)])])
    leftover = _executed(tmp_path, "x", opposite).rename(
        tmp_path / ".finetuning.running.ipynb")
    paths = sorted(tmp_path.glob("*.ipynb"))
    assert paths[0] == leftover  # it sorts first
    table = findings.collect(paths).set_index("claim id")
    assert table.loc["phang-blocks", "verdict"] == "holds"
    assert findings.finished(paths) == [finished]


def test_a_missing_chapter_is_named_in_the_claims_nobody_judged(tmp_path):
    path = _executed(tmp_path, "finetuning", _holds("phang-blocks"))
    table = findings.collect([path], expected=["finetuning", "seeds"])
    assert table.attrs["unread"] == {
        "seeds": "chapter 'seeds' has no executed notebook in this build"}
    row = table.set_index("claim id").loc["ren-layer-gradient"]
    assert row.verdict == "not measured"
    assert row["what this run shows"].endswith("could not be read: seeds")


def test_a_damaged_findings_csv_is_named_not_a_traceback(tmp_path):
    good = tmp_path / "default"
    good.mkdir()
    findings.write(good, findings.collect([_executed(tmp_path, "finetuning",
                                                     _holds("phang-blocks"))]))
    for name, text in [("smoke", '"claim id,verdict\n"unclosed'), ("larger", "a,b\n1,2\n")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "findings.csv").write_text(text)
    page = findings.profiles_table(tmp_path)
    assert "| claim | `default` |" in page
    assert "could not be read (rebuild them)" in page and "`smoke`" in page
    assert "`larger` (ValueError: it lacks the columns" in page


@pytest.mark.parametrize("width", [80, 120])
def test_the_command_prints_csv_markdown_and_a_table_that_fits_the_terminal(tmp_path, capsys,
                                                                           width):
    blocks = tables.table([decide("phang-blocks", [Evidence("m, t", 0.3, 0.01),
                                                     Evidence("m, u", 0.2, 0.01)])])
    _executed(tmp_path, "finetuning", blocks)
    assert main(["findings", "--executed", str(tmp_path), "--width", str(width)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert not any(line != line.rstrip() for line in lines)  # no padding
    assert any(line.startswith("phang-blocks") and "holds" in line for line in lines)
    assert main(["findings", "--executed", str(tmp_path), "--format", "csv"]) == 0
    read = pd.read_csv(io.StringIO(capsys.readouterr().out), keep_default_na=False)
    assert list(read.columns) == list(findings.COLUMNS) and len(read) == len(claims.CLAIMS)
    assert read.set_index("claim id").loc["phang-blocks", "verdict"] == "holds"
    assert main(["findings", "--executed", str(tmp_path), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "| claim | verdict | this run shows | chapter |" in md
    assert "| phang-blocks | holds |" in md


def test_no_book_page_types_a_claims_estimate():
    """A claim's numbers reach a page from a build (the findings page, the profiles table),
    never typed by hand: no paragraph of a written page names a claim beside a signed
    estimate, on its line or on another line of the same paragraph."""
    import re

    from analysis_lib.book import ROOT

    signed = re.compile(r"[+-]\d\.\d{2,}")
    typed = [f"{page.name}: {para[:80]}" for page in sorted((ROOT / "book").glob("*.md"))
             for para in (" ".join(block.split())
                          for block in page.read_text().split("\n\n"))
             if signed.search(para) and any(cid in para for cid in claims.CLAIMS)]
    assert not typed, typed


def test_the_page_counts_the_verdicts_that_read_the_same_at_half_and_twice_their_line():
    """The page says how many measured verdicts read the same with each claim's smallest
    effect halved and doubled, counted from the clause each reason ends with; a table
    whose reasons hold no such clause (an older build's) gets no such sentence."""
    from analysis_lib.claims import claim as records

    line = records.Claim("t", "Wu", "", "", "", "", "greater", 0.1, "w", ("baseline", "zero"),
                         "none")
    near = [Evidence.from_values("u", [0.15, 0.16, 0.14])]  # equivalent at twice the line
    far = [Evidence.from_values("u", [0.50, 0.52, 0.51])]
    hows = ["one unit" + verdicts.at_other_effects(line, units) for units in (near, far, far)]
    table = pd.DataFrame({"claim id": ["a", "b", "c", "d"],
                          "verdict": ["holds", "holds", "holds", "not measured"],
                          "how": [*hows, "not measured: no runs"]})
    table = table.assign(**{c: "" for c in findings.COLUMNS if c not in table.columns})
    assert findings._steady(table) == (2, 3)
    assert "2 of the 3 measured verdicts read the same" in findings.page(table, "default")
    older = table.assign(how="one unit")
    assert findings._steady(older) is None
    assert "measured verdicts read the same" not in findings.page(older, "default")
