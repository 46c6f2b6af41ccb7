"""A chapter run on its own, outside the book's build: parameters that stop at the
parameter check, a failing cell or a wrong solution that fails the build, the sentences a run
states, and a chapter on your own text file and model folder. (The tests that read the smoke
build of the whole book are in ``test_book.py``.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pandas as pd
import papermill
import pytest
from nbread import outputs, printed_text

from analysis_lib import book

ROOT = Path(__file__).resolve().parent.parent
SMOKE = book.load_profile("smoke", ROOT)


BAD_PARAMETERS = [
    ({"n_neurons": "many"}, "n_neurons='many': must be int"),
    ({"n_stimuli": 5}, "n_stimuli=5: needs at least 20"),
    ({"angles": [0]}, "angles=[0]: needs at least 2"),
]


@pytest.mark.parametrize("bad, message", BAD_PARAMETERS)
def test_bad_parameters_are_named_by_the_pages_check(bad, message):
    """The check the page's second cell runs, called here on the page's own parameters."""
    from analysis_lib.book.params import ParameterError, check

    path = ROOT / "notebooks" / "measures_primer.ipynb"
    values = {**book.notebook_parameters(path, SMOKE), **bad}
    with pytest.raises(ParameterError) as caught:
        check(values, "measures_primer")
    assert message in str(caught.value)


def test_bad_parameters_stop_at_the_parameters(tmp_path):
    """A run of the page itself stops at that cell, with the error, and runs nothing after
    it (one bad value: the check's messages are the test above's)."""
    bad, message = BAD_PARAMETERS[0]
    path = ROOT / "notebooks" / "measures_primer.ipynb"
    params = {**book.notebook_parameters(path, SMOKE), **bad}
    with pytest.raises(papermill.PapermillExecutionError) as caught:
        papermill.execute_notebook(str(path), str(tmp_path / "bad.ipynb"), parameters=params,
                                   cwd=str(path.parent), progress_bar=False,
                                   execution_timeout=300)
    assert caught.value.ename == "ParameterError"
    assert message in caught.value.evalue
    nb = nbformat.read(str(tmp_path / "bad.ipynb"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    failed = next(i for i, c in enumerate(code) if any(o.get("output_type") == "error"
                                                      for o in c.get("outputs", [])))
    assert "params.check" in code[failed].source
    assert all(not c.get("outputs") for c in code[failed + 1:])


# --------------------------------------------------------------------------- the built book


def test_a_failing_cell_fails_the_build_and_shows_the_cell(tmp_path):
    broken = tmp_path / "broken.ipynb"
    cell = nbformat.v4.new_code_cell("x = 1\nraise ValueError('boom')")
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, str(broken))
    with pytest.raises(book.BuildError, match=r"(?s)broken.ipynb failed.*raise ValueError.*boom"):
        book.execute(broken, {}, tmp_path / "out")


def test_a_solution_result_is_folded_outside_the_book(capsys, monkeypatch):
    """prose.answer prints (or displays a table) in the book's build and in plain Python;
    in a notebook outside the book it shows a closed <details> holding the result."""
    import IPython
    import IPython.display

    from analysis_lib.book import prose, render

    shown: list = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    prose.answer("my CKA", 0.5)  # plain Python: like print
    assert capsys.readouterr().out == "my CKA 0.5\n" and not shown
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.delenv(render.PAGE_ENV, raising=False)
    prose.answer("my <CKA>", 0.5)
    table = pd.DataFrame({"a": [1.5]})
    prose.answer(table)
    folded = [obj.data for obj in shown]
    assert capsys.readouterr().out == ""
    assert folded[0] == (f"<details><summary>{prose.FOLDED}</summary>"
                         "<pre>my &lt;CKA&gt; 0.5</pre></details>")
    assert folded[1].startswith("<details>") and "<table" in folded[1]
    assert "<details open" not in "".join(folded)
    monkeypatch.setenv(render.PAGE_ENV, "1")  # the book: as it is, in the dropdown
    shown.clear()
    prose.answer("my CKA", 0.5)
    prose.answer(table)
    assert capsys.readouterr().out == "my CKA 0.5\n" and shown == [table]
    with pytest.raises(ValueError, match="pass the text"):
        prose.answer()


def test_say_prints_outside_a_notebook_and_refuses_empty_text(capsys):
    from analysis_lib.book import prose

    assert prose.say("**one** sentence") is None
    assert capsys.readouterr().out == "**one** sentence\n"
    for bad in ("", "  ", None, 3):
        with pytest.raises(ValueError, match="Markdown text"):
            prose.say(bad)


def test_verdicts_states_every_claim_of_a_findings_table_once(capsys):
    from analysis_lib import claims
    from analysis_lib.book import prose
    from analysis_lib.claims import tables, verdicts

    ids = [c.id for c in claims.of_chapter("attention") + claims.of_chapter("domains")]
    found = tables.table([verdicts.not_measured(cid, "no models") for cid in ids])
    prose.verdicts(found)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(ids)
    for cid, line in zip(ids, lines, strict=True):
        assert line.startswith("- not measured: ") and f"({cid})" in line, line


def test_stated_prose_follows_the_profile_it_was_built_with(tmp_path):
    """The primer built with the smoke profile's values and with other ones (another seed,
    more neurons, other noise levels and widths) states other values in its sentences."""
    path = ROOT / "notebooks" / "measures_primer.ipynb"
    smoke = book.notebook_parameters(path, SMOKE)
    other = {**smoke, "seed": 1, "n_neurons": 24, "noise_levels": [0.0, 1.0, 3.0],
             "book_widths": [16, 48]}
    runs = {}
    for name, values in (("smoke", smoke), ("other", other)):
        done = book.execute(path, values, tmp_path / name)
        # the sentences it stated from its run (prose.say): its Markdown outputs
        runs[name] = outputs(nbformat.read(str(done.path), as_version=4), "text/markdown")
    source = nbformat.read(str(path), as_version=4)
    stating = [c for c in source.cells if c.cell_type == "code" and "prose.say(" in c.source]
    assert len(runs["smoke"]) == len(runs["other"]) >= len(stating) >= 4
    differ = [a for a, b in zip(runs["smoke"], runs["other"], strict=True) if a != b]
    assert differ, "the two profiles stated the same values in every sentence"


def test_a_wrong_solution_fails_the_build(tmp_path):
    root = tmp_path / "book"
    root.mkdir()
    shutil.copy2(ROOT / "_config.yml", root / "_config.yml")
    for folder in ("book", "notebooks", "profiles"):
        shutil.copytree(ROOT / folder, root / folder)
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                   "  - file: notebooks/measures_primer\n")
    path = root / "notebooks" / "measures_primer.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    planted = 0
    for cell in nb.cells:  # the solution to the scaling exercise, made to claim the opposite
        if cell.cell_type == "code" and 'stays = synthetic.unchanged(' in cell.source:
            cell.source = cell.source.replace(
                'assert {"neuronsim", "mixedsim"} <= set(stays)',
                'assert "linear_cka" in stays  # a wrong claim')
            planted += 1
    assert planted == 1
    nbformat.write(nb, str(path))
    with pytest.raises(book.BuildError, match=r"(?s)a wrong claim.*AssertionError"):
        book.build("smoke", root=root, echo=lambda m: None, cell_timeout=300)


def test_a_chapter_runs_on_your_own_text_file_and_model_folder(tmp_path):
    """A chapter (attention) under papermill with ``corpus`` a text file of one's own (one
    sentence per line) and a model given by its folder."""
    from analysis_lib import models
    from analysis_lib.data import corpora

    text = tmp_path / "my_sentences.txt"
    text.write_text("\n".join(corpora.load_corpus("bbc-news", n=80, seed=3).texts),
                    encoding="utf-8")
    loaded = models.load("random:bert", layers=2, hidden=32, heads=2, vocab_size=2000)
    folder = tmp_path / "my-model"
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    path = ROOT / "notebooks" / "attention.ipynb"
    params = {**book.notebook_parameters(path, SMOKE), "corpus": str(text),
              "models": [str(folder), "random:gpt2"]}
    out = tmp_path / "attention.ipynb"
    papermill.execute_notebook(str(path), str(out), parameters=params, cwd=str(path.parent),
                               progress_bar=False, execution_timeout=300)
    nb = nbformat.read(out, as_version=4)
    assert "12 sentences" in printed_text(nb)  # the chapter's attention_sentences of the file
    charts = json.dumps(outputs(nb, "application/vnd.vegalite.v6+json"))
    assert str(folder) in charts  # the folder's model is one of the compared models
    words = {w.lower() for line in text.read_text().splitlines() for w in line.split()}
    assert any(f'"{w}"' in charts for w in words if len(w) > 6)  # the file's words


def _short_model(tmp_path, limit=12):
    """A model folder whose tokenizer reads at most ``limit`` tokens."""
    from analysis_lib import models

    loaded = models.load("random:bert", layers=2, hidden=32, heads=2, vocab_size=2000)
    folder = tmp_path / "short-model"
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.model_max_length = limit
    loaded.tokenizer.save_pretrained(folder)
    return str(folder)


def test_long_sentences_are_refused_before_any_work_or_dropped_on_request(tmp_path):
    from analysis_lib.collect import fit_to_models
    from analysis_lib.data import corpora

    folder = _short_model(tmp_path)
    text = corpora.from_sentences(["a short one", "this sentence has far too many words to "
                                   "fit in twelve tokens of the model", "fine as well"])
    from analysis_lib.book.params import ParameterError

    with pytest.raises(ParameterError, match="would cut 1 of the 3 sentences at its "
                                             "limit of 12 tokens.*long_sentences='drop'"):
        fit_to_models(text, [folder, "random:gpt2"])
    kept = fit_to_models(text, [folder], long_sentences="drop")
    assert kept.sentences == [["a", "short", "one"], ["fine", "as", "well"]]
    assert fit_to_models(text, ["random:gpt2"]) is text
    # in the chapter: refused at the corpus, before any extraction, naming the parameter
    path = ROOT / "notebooks" / "representation.ipynb"
    params = {**book.notebook_parameters(path, SMOKE), "models": [folder]}
    with pytest.raises(papermill.PapermillExecutionError, match="long_sentences"):
        papermill.execute_notebook(str(path), str(tmp_path / "out.ipynb"), parameters=params,
                                   cwd=str(path.parent), progress_bar=False,
                                   execution_timeout=300)
