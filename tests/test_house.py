"""The library's house rules, checked on its source: no import circles, no import from a
lower step of the data flow to a higher one, no module reading another package's private
names, no function above ruff's complexity 10."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
         "analysis_lib.data", "analysis_lib.models", "analysis_lib.layers", "analysis_lib.extract",
         "analysis_lib.alignment", "analysis_lib.training", "analysis_lib.studies",
         "analysis_lib.book", "analysis_lib.sweep", "analysis_lib.__main__")


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


def test_no_function_of_the_library_is_too_complex():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "C901",
                             "--config", "lint.mccabe.max-complexity = 10", str(LIBRARY)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
