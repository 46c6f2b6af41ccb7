"""The library's house rules, checked on its source: no import circles, no import from a
lower step of the data flow to a higher one, no module reading another package's private
names or modules, no function above ruff's complexity 10, and a measure's number reached
through a few files."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

LIBRARY = Path(__file__).resolve().parents[1] / "analysis_lib"


def _modules() -> dict[str, Path]:
    out = {}
    for path in LIBRARY.rglob("*.py"):
        parts = path.relative_to(LIBRARY.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]):
    """``(target module, imported name)`` of every import in the file, at any depth (a
    deferred import inside a function closes a circle as surely as one at the top)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full if full in modules else base), alias.name


def _graph():
    modules = _modules()
    graph = {m: set() for m in modules}
    private = []
    for name, path in modules.items():
        for target, imported in _imports(name, path, modules):
            if target in modules and target != name:
                graph[name].add(target)
            if imported and imported.startswith("_") and not imported.startswith("__"):
                private.append((name, target, imported))
    return graph, private


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan, iterative enough for
    a library of this size)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def _top_package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_circles():
    graph, _ = _graph()
    assert not _cycles(graph)


#: the library's packages from the bottom up: a package imports only those before it (the
#: measures work on bare arrays, so they sit below the data, which builds synthetic
#: representations with them; loading a model never trains one)
STEPS = ("analysis_lib.errors", "analysis_lib", "analysis_lib.runtime", "analysis_lib.similarity",
         "analysis_lib.data", "analysis_lib.families", "analysis_lib.models", "analysis_lib.layers",
         "analysis_lib.collection", "analysis_lib.extract", "analysis_lib.rules",
         "analysis_lib.alignment", "analysis_lib.training", "analysis_lib.collect",
         "analysis_lib.readout", "analysis_lib.claims", "analysis_lib.book", "analysis_lib.sweep",
         "analysis_lib.__main__")


def _upward(graph) -> list[tuple[str, str]]:
    """Imports from a package of :data:`STEPS` to one after it."""
    rank = {package: k for k, package in enumerate(STEPS)}
    return sorted((m, t) for m, targets in graph.items() for t in targets
                  if rank[_top_package(t)] > rank[_top_package(m)])


def test_every_package_has_its_step_and_no_step_imports_a_higher_one():
    graph, _ = _graph()
    assert {_top_package(m) for m in graph} == set(STEPS)
    assert not _upward(graph)


def test_the_step_check_finds_a_model_that_trains():
    graph = {"analysis_lib.models.zoo": {"analysis_lib.training.pretrain"},
             "analysis_lib.training.pretrain": {"analysis_lib.models.zoo_store"}}
    assert _upward(graph) == [("analysis_lib.models.zoo", "analysis_lib.training.pretrain")]


def test_the_circle_check_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_package_reads_another_packages_private_names():
    _, private = _graph()
    foreign = [(m, t, n) for m, t, n in private if _top_package(m) != _top_package(t)]
    assert not foreign, foreign


def test_no_package_imports_another_packages_private_module():
    graph, _ = _graph()
    foreign = sorted((m, t) for m, targets in graph.items() for t in targets
                     if _top_package(m) != _top_package(t)
                     and t.rsplit(".", 1)[-1].startswith("_")
                     and not t.rsplit(".", 1)[-1].startswith("__"))
    assert not foreign, foreign


#: the chapters' names (the notebooks that judge claims)
CHAPTER_NAMES = ("representation", "attention", "finetuning", "truncation", "seeds", "domains")


def test_no_module_is_named_after_a_chapter():
    """A chapter is a notebook that computes with the library's general functions: no module
    is written for one chapter. The only module named like a chapter is the attention
    measures' (:mod:`analysis_lib.similarity.attention`), a measure module."""
    from analysis_lib.claims.claim import CHAPTERS as DECLARED

    assert set(CHAPTER_NAMES) == set(DECLARED)
    named = sorted(m for m in _modules() if m.rsplit(".", 1)[-1] in CHAPTER_NAMES)
    assert named == ["analysis_lib.similarity.attention"]  # the check sees modules by name


def test_the_sweep_imports_neither_the_claims_nor_the_book():
    """The sweep runs units of the fine-tuning grid and the extraction; judging and
    publishing them is the book's."""
    graph, _ = _graph()
    found = sorted((m, t) for m, targets in graph.items() for t in targets
                   if _top_package(m) == "analysis_lib.sweep"
                   and _top_package(t) in ("analysis_lib.claims", "analysis_lib.book"))
    assert not found, found
    assert any(_top_package(t) == "analysis_lib.training"  # the check sees its imports
               for m, targets in graph.items() if _top_package(m) == "analysis_lib.sweep"
               for t in targets)


#: the library's general steps: what a study notebook computes with
GENERAL = ("analysis_lib.similarity", "analysis_lib.alignment", "analysis_lib.extract",
           "analysis_lib.models", "analysis_lib.training", "analysis_lib.data",
           "analysis_lib.layers", "analysis_lib.collect", "analysis_lib.collection",
           "analysis_lib.readout")


def _called(path: Path) -> set[str]:
    """The library functions and classes a notebook's code cells call, each named by the
    module that defines it (``module.name``)."""
    import importlib
    import inspect
    import json

    cells = ["\n".join(line for line in "".join(c["source"]).splitlines()
                       if not line.lstrip().startswith(("%", "!")))
             for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
             if c["cell_type"] == "code"]
    trees = [ast.parse(c) for c in cells if "google.colab" not in c]
    nodes = [n for tree in trees for n in ast.walk(tree)]
    names = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("analysis_lib"):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    called = set()
    for node in (n for n in nodes if isinstance(n, ast.Call)):
        parts, func = [], node.func
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not (isinstance(func, ast.Name) and func.id in names):
            continue
        obj, path_ = None, names[func.id].split(".") + parts[::-1]
        for cut in range(len(path_), 0, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(path_[:cut]))
            except ImportError:
                continue
            for attr in path_[cut:]:
                obj = getattr(obj, attr, None)
            break
        target = inspect.unwrap(obj) if callable(obj) else None
        if target is not None and not inspect.ismodule(target):
            called.add(f"{target.__module__}.{target.__qualname__}")
    return called


@pytest.mark.parametrize("chapter", CHAPTER_NAMES)
def test_every_study_notebook_computes_with_the_librarys_general_functions(chapter):
    """A study notebook shows its computation: at least eight distinct functions of the
    library's general steps (:data:`GENERAL`) called in its code cells."""
    called = _called(LIBRARY.parent / "notebooks" / f"{chapter}.ipynb")
    general = sorted(c for c in called if c.startswith(GENERAL))
    assert len(general) >= 8, general


@pytest.mark.parametrize("chapter", CHAPTER_NAMES)
def test_a_notebook_calls_a_papers_module_only_to_judge_a_claim(chapter):
    """What a chapter computes comes from the general steps; from a paper's claim module a
    notebook calls only a claim's own evidence function (to judge the claim again under
    another setting, as the seeds page does at earlier checkpoints). A statistic that a page
    shows and a claim reads lives in the general module of what it takes."""
    import importlib

    from analysis_lib.claims.claim import claim_of

    called = _called(LIBRARY.parent / "notebooks" / f"{chapter}.ipynb")
    from_papers = sorted(c for c in called if c.startswith("analysis_lib.claims.papers."))
    helpers = []
    for name in from_papers:
        module, function = name.rsplit(".", 1)
        try:
            claim_of(getattr(importlib.import_module(module), function))
        except ValueError:
            helpers.append(name)
    assert not helpers, helpers


def test_the_papers_module_check_tells_a_claim_from_a_helper():
    from analysis_lib.claims.claim import claim_of
    from analysis_lib.claims.papers import ren, wu

    assert claim_of(ren.depth).id.startswith("ren-")
    with pytest.raises(ValueError, match="computes no claim"):
        claim_of(wu.shared_stages)  # a helper of the module, not a claim


#: what the claims package may import from the steps below it that load, extract or train:
#: the plateau rule of a finished run's curve (read on its record); a model family's reading
#: direction comes from :mod:`analysis_lib.families`, which loads nothing
CLAIMS_MAY_READ = {"analysis_lib.training.plateau", "analysis_lib.training.learning"}


def test_claim_ids_are_written_only_in_the_papers_modules():
    """A claim's id is typed once, in its paper's module (``claims/papers``); the library
    elsewhere names a claim by its evidence function (``claims.claim.claim_of``), so that
    renaming an id is one edit."""
    import re

    from analysis_lib.claims import CLAIMS

    ids = sorted(CLAIMS, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, ids)) + r")(?![\w-])")
    papers = LIBRARY / "claims" / "papers"
    found = [(str(path.relative_to(LIBRARY)), match)
             for path in LIBRARY.rglob("*.py") if papers not in path.parents
             for match in pattern.findall(path.read_text(encoding="utf-8"))]
    assert not found, found
    assert pattern.search((papers / "ren.py").read_text(encoding="utf-8"))  # the check reads


def test_the_claims_package_loads_trains_and_extracts_nothing():
    """Every module the claims package reaches, directly or through others, is a measure,
    data, a layer table, the runtime or the claims themselves (and the readers of
    :data:`CLAIMS_MAY_READ`): nothing that loads a model, extracts or trains."""
    graph, _ = _graph()
    claims = [m for m in graph if _top_package(m) == "analysis_lib.claims"]
    assert len(claims) >= 10  # the check sees the package
    seen, todo = set(), list(claims)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph[module]
    heavy = {"analysis_lib.models", "analysis_lib.extract", "analysis_lib.training",
             "analysis_lib.studies", "analysis_lib.book", "analysis_lib.sweep"}
    found = sorted(m for m in seen - CLAIMS_MAY_READ if _top_package(m) in heavy)
    assert not found, found


def test_the_sweep_never_imports_the_book():
    graph, _ = _graph()
    found = sorted((m, t) for m, targets in graph.items() for t in targets
                   if _top_package(m) == "analysis_lib.sweep"
                   and _top_package(t) == "analysis_lib.book")
    assert not found, found


NOTEBOOKS = LIBRARY.parent / "notebooks"


def _code_cells() -> list[tuple[str, int, str]]:
    import json

    found = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found += [(path.name, k, "".join(cell["source"])) for k, cell in enumerate(cells)
                  if cell["cell_type"] == "code"]
    return found


def test_no_notebook_code_cell_names_a_claim():
    """A chapter's claims are judged and stated by the library (``verdicts.judge``,
    ``prose.verdicts``); a cell that lists claim ids is a second list to keep."""
    from analysis_lib.claims import CLAIMS

    cells = _code_cells()
    assert len(cells) > 50
    named = [(name, k, claim) for name, k, text in cells for claim in CLAIMS if claim in text]
    assert not named, named


def test_no_notebook_code_cell_is_over_30_lines():
    """Counted as a reader reads them: a parameter's comment continued on the lines under
    it (params.logical_lines) is one line."""
    from analysis_lib.book.params import logical_lines

    long = [(name, k, len(logical_lines(text))) for name, k, text in _code_cells()
            if len(logical_lines(text)) > 30]
    assert not long, long


def _files_reached(fn, *args, **kwargs) -> set[str]:
    """The library's files whose functions run while ``fn(*args, **kwargs)`` computes, on
    its second call (the first makes the once-per-process choices, such as the backend)."""
    fn(*args, **kwargs)
    seen: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if LIBRARY in path.parents:
                seen.add(path.relative_to(LIBRARY).as_posix())

    sys.setprofile(profile)
    try:
        fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("backend", ["auto", "numpy", "torch"])
@pytest.mark.parametrize("name", ["linear_cka", "pwcca", "svcca"])
def test_a_single_pair_reaches_its_number_through_four_files(name, backend):
    if backend == "torch":
        pytest.importorskip("torch")
    from analysis_lib import similarity

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((50, 8)), rng.standard_normal((50, 6))
    files = _files_reached(getattr(similarity, name), X, Y, backend=backend)
    assert "similarity/measures.py" in files and "similarity/kernels.py" in files
    assert len(files) <= 4, sorted(files)


def test_the_file_count_sees_every_file_a_call_enters():
    from analysis_lib import similarity

    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 4))
    files = _files_reached(similarity.pairwise, [X, X + rng.standard_normal((30, 4))])
    assert {"similarity/pairwise.py", "similarity/core.py", "similarity/kernels.py"} <= files


def test_no_function_of_the_library_is_too_complex():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "C901",
                             "--config", "lint.mccabe.max-complexity = 10", str(LIBRARY)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def _own_names(path: Path) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _notebook_reads():
    """``(notebook, module, name)`` for every ``alias.name`` a notebook's code reads from a
    module of the library (not a package, whose ``__init__`` gathers its modules' names)
    that it imports as ``alias``."""
    import json

    modules = _modules()
    for path in sorted((LIBRARY.parent / "notebooks").glob("*.ipynb")):
        cells = ["\n".join(line for line in "".join(c["source"]).splitlines()
                           if not line.lstrip().startswith(("%", "!")))
                 for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
                 if c["cell_type"] == "code"]
        trees = [ast.parse(c) for c in cells if "google.colab" not in c]
        aliases = {}
        for node in (n for tree in trees for n in ast.walk(tree)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "analysis_lib"):
                for alias in node.names:
                    name = f"{node.module}.{alias.name}"
                    if name in modules and modules[name].name != "__init__.py":
                        aliases[alias.asname or alias.name] = name
        for node in (n for tree in trees for n in ast.walk(tree)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases:
                yield path.stem, aliases[node.value.id], node.attr


def test_notebooks_read_each_name_from_the_module_that_defines_it():
    """No module re-exports another's names: a notebook that reads ``module.x`` reads a
    function or table that the module defines, so a reader finds it where the notebook
    says."""
    modules = _modules()
    reads = list(_notebook_reads())
    assert {m for _, m, _ in reads} >= {"analysis_lib.collect", "analysis_lib.training.freezing",
                                        "analysis_lib.book.plots"}  # the check sees them
    foreign = sorted({(nb, m, name) for nb, m, name in reads
                      if name not in _own_names(modules[m])})
    assert not foreign, foreign


def test_no_module_imports_names_for_others_to_read():
    """A module imports only what it uses: no ``noqa: F401`` import kept for a notebook to
    read (the one import that checks an optional extra is installed aside)."""
    for path in LIBRARY.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        kept = [line for line in text.splitlines() if "noqa: F401" in line
                and "the book extra" not in line]
        assert not kept, (path.name, kept)
