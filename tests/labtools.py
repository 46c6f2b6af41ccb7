"""JupyterLab in headless Chromium with the internet cut off, for the tests that open
notebooks there (``test_jupyterlab.py``, and ``test_book.py`` for a notebook downloaded from
the built book): a server on a folder of its own, and what a test reads from its page."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from analysis_lib.book import render

ROOT = Path(__file__).resolve().parents[1]
#: MyST syntax that shows only where markdown is not rendered as MyST: directive fences and
#: options (the exercises), and roles that only the built book resolves
RAW_SYNTAX = ["```{", ":label:", ":class: dropdown", "{solution-start}", "{glue", "{doc}`"]
#: the JavaScript that says whether the open notebook has run: every code cell has an
#: execution count and the kernel is idle
RAN = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext.session) return false;
  const kernel = panel.sessionContext.session.kernel;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code');
  return kernel && kernel.status === 'idle' && cells.length > 0
    && cells.every(c => c.model.executionCount !== null);
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_lab(folder: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != render.PAGE_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["JUPYTER_CONFIG_DIR"] = str(folder / ".jupyter")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(folder / ".workspaces")
    # every cell in the page (JupyterLab 4 leaves cells out of view unrendered by default)
    settings = folder / ".settings"
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    env["JUPYTERLAB_SETTINGS_DIR"] = str(settings)
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
               "--ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
               "--ServerApp.disable_check_xsrf=True", "--expose-app-in-browser",
               "--allow-root",
               f"--ServerApp.root_dir={folder}", "--LabApp.news_url=None",
               "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    log = open(folder / "lab.log", "w")  # noqa: SIM115 (closed with the process)
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=2)
            return process
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.5)
    process.kill()
    raise AssertionError("JupyterLab did not start: " + (folder / "lab.log").read_text())


#: the JavaScript that lists the open notebook's solution code cells (between a
#: solution-start and its solution-end): whether JupyterLab shows their source, and the text
#: their outputs show
SOLUTIONS = """() => {
  const cells = window.jupyterapp.shell.currentWidget.content.widgets;
  let inside = false;
  const found = [];
  for (const c of cells) {
    const text = c.model.sharedModel.getSource();
    if (text.includes('{solution-start}')) inside = true;
    if (inside && c.model.type === 'code')
      found.push({input: !c.inputHidden,
                  output: c.outputHidden ? '' : c.outputArea.node.innerText.trim()});
    if (text.includes('{solution-end}')) inside = false;
  }
  return found;
}"""


def serve(tmp_path_factory) -> Iterator[tuple[Path, int, object]]:
    """A JupyterLab server on a folder of its own, and a headless Chromium with the internet
    cut off: yields the folder, the server's port and the browser (the body of the ``lab``
    fixture in ``conftest.py``)."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("Debian's chromium is not installed and could not be (not root?): "
                    "`apt-get install -y chromium` to run the browser test")
    from playwright.sync_api import sync_playwright

    folder = tmp_path_factory.mktemp("lab")
    port = free_port()
    server = start_lab(folder, port)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=executable, headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
            yield folder, port, browser
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def open_notebook(browser, port: int, name: str):
    """Open notebook ``name`` in JupyterLab and wait for its kernel."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.route(re.compile(r"^https?://(?!127\.0\.0\.1)"), lambda route: route.abort())
    page.goto(f"http://127.0.0.1:{port}/lab/tree/{name}?reset")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell"
                           " && window.jupyterapp.shell.currentWidget"
                           " && window.jupyterapp.shell.currentWidget.sessionContext"
                           ".session", timeout=120_000)
    page.wait_for_function("() => window.jupyterapp.shell.currentWidget"
                           ".sessionContext.session.kernel.status === 'idle'",
                           timeout=120_000)
    return page


def drawn(page) -> list[list[float]]:
    """The sizes of the images JupyterLab drew in the open notebook's outputs."""
    images = ".jp-RenderedSVG img, .jp-RenderedSVG svg, .jp-RenderedImage img"
    drawn = page.eval_on_selector_all(
        images, "els => els.map(e => [e.getBoundingClientRect().width,"
        " e.getBoundingClientRect().height])")
    if drawn:
        page.locator(images).first.scroll_into_view_if_needed()
    return [size for size in drawn if size[0] > 150 and size[1] > 100]


def in_solutions(nb) -> list[bool]:
    """For each code cell of ``nb``, whether it is part of an exercise's solution."""
    flags, inside = [], False
    for cell in nb.cells:
        inside = inside or "{solution-start}" in cell.source
        if cell.cell_type == "code":
            flags.append(inside)
        inside = inside and "{solution-end}" not in cell.source
    return flags


def solutions_folded(page, nb) -> None:
    """No solution of the open notebook gives its answer away: its code cells show neither
    their source nor an output other than a folded result (prose.answer), its prose stays
    in the closed dropdown, and no line of its code but the first (a comment) is on the
    screen."""
    from analysis_lib.book.prose import FOLDED

    solutions = page.evaluate(SOLUTIONS)
    assert solutions, "no solution cells found"
    shown = [s for s in solutions if s["input"] or s["output"].replace(FOLDED, "").strip()]
    assert not shown, f"{len(shown)} of {len(solutions)} solutions show their answer: {shown}"
    text = page.inner_text("body")
    shown_code = "\n".join(page.eval_on_selector_all(  # the code the page shows
        ".jp-CodeCell .jp-Cell-inputWrapper", "els => els.map(e => e.innerText)"))
    code = [c for c in nb.cells if c.cell_type == "code"]
    flags = in_solutions(nb)
    elsewhere = {line.strip() for c, hidden in zip(code, flags) if not hidden
                 for line in c.source.splitlines()}
    for cell, hidden in zip(code, flags):
        if hidden:
            assert cell.source.startswith("# ")
            for line in cell.source.splitlines()[1:]:  # lines of its own, not the page's
                line = line.strip()
                assert len(line) < 12 or line in elsewhere or line not in shown_code, \
                    f"a solution's code is on the screen: {line!r}"
    words = " ".join(text.split())
    inside = False
    for cell in nb.cells:
        inside = inside or "{solution-start}" in cell.source
        if inside and cell.cell_type == "markdown":
            prose = [ln for ln in cell.source.splitlines()[3:] if len(ln.split()) >= 6]
            if prose:  # its first words as rendered (no Markdown marks)
                start = " ".join(re.sub(r"[*_`$]", "", prose[0]).split()[:6])
                assert start not in words, f"a solution's prose is on the screen: {start!r}"
        inside = inside and "{solution-end}" not in cell.source


