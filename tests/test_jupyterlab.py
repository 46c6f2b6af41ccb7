"""The notebooks in a real JupyterLab, in headless Chromium, with no internet.

A chapter run there (Run All) draws its charts (JupyterLab 4 renders vega-lite only up to 5,
and the book's vega bundle is not there), its prose reads as rendered MyST (exercises as
exercises, the run's sentences as Markdown), no cell fails, and the exercises' solutions stay
folded away. (A notebook downloaded from the built book is opened there by ``test_book.py``,
beside the other readers of the smoke build.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
from labtools import RAN, RAW_SYNTAX, drawn, in_solutions, open_notebook, solutions_folded

from analysis_lib.book import builder

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHAPTER = "measures_primer"


def test_a_chapter_run_in_jupyterlab_draws_its_charts(lab):
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    folder, port, browser = lab
    source = ROOT / "notebooks" / f"{CHAPTER}.ipynb"
    parameters = builder.notebook_parameters(source, builder.load_profile("smoke"))
    nb = parameterize_notebook(load_notebook_node(str(source)), parameters)
    nbformat.write(nb, str(folder / source.name))
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page = open_notebook(browser, port, source.name)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(RAN, timeout=300_000, polling=1000)
    page.wait_for_timeout(1000)
    outputs = json.loads(page.evaluate(
        "() => JSON.stringify(window.jupyterapp.shell.currentWidget.content.widgets"
        ".filter(c => c.model.type === 'code').map(c => c.model.outputs.toJSON()))"))
    errors = [o for cell in outputs for o in cell if o.get("output_type") == "error"]
    assert not errors, [f"{e['ename']}: {e['evalue']}" for e in errors]
    folded = in_solutions(nb)
    charts = [o for cell, hidden in zip(outputs, folded) if not hidden for o in cell
              if any(k.startswith("application/vnd.vegalite") for k in o.get("data", {}))]
    assert len(charts) >= 2, "the chapter made no charts"
    big = drawn(page)
    page.screenshot(path=str(shots / "jupyterlab_measures_primer.png"))
    assert len(big) >= len(charts), (len(charts), big)
    # the solutions ran (Run All) but stay folded: the reader opens them
    solutions_folded(page, nb)
    text = page.inner_text("body")
    assert "vega-bundle.js" not in text and "Chart error" not in text
    raw = [m for m in RAW_SYNTAX if m in text]
    assert not raw, f"markdown shown as source, not rendered: {raw}"
    said = page.eval_on_selector_all(
        ".jp-OutputArea-output.jp-RenderedMySTMarkdown, "
        ".jp-OutputArea-output.jp-RenderedMarkdown", "els => els.length")
    assert said >= 4, "the run's sentences (prose.say) did not render as Markdown"
    assert re.search(r"Exercise\s*\d*\s*\(?Predict, then compute", text), \
        "the exercises do not read as exercises"
    page.close()
