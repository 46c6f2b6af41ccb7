"""The library as a package of its own: the wheel's metadata, the measures in a fresh
environment that holds only the core (no PyTorch), the command, the release files, and the
public API's type hints."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

import analysis_lib
from analysis_lib import alignment, similarity
from analysis_lib.book.sphinx_ext import API_PAGES, public_names

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (the dev extra installs tomli there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: what the core may install: nothing that pulls PyTorch or a model library
CORE = {"numpy", "scipy", "pandas", "scikit-learn", "array-api-compat", "threadpoolctl",
        "tqdm", "platformdirs", "pyyaml"}

#: computed in a fresh environment with only the wheel and its core dependencies
CORE_SCRIPT = textwrap.dedent("""
    import importlib.util, json, sys
    import numpy as np
    from analysis_lib import alignment, similarity
    from analysis_lib.similarity import _backend

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 24))
    Y = X @ rng.standard_normal((24, 16)) + 0.3 * rng.standard_normal((300, 16))
    out = {
        "torch_installed": importlib.util.find_spec("torch") is not None,
        "backend": _backend.get().name,
        "linear_cka": similarity.linear_cka(X, Y),
        "pwcca": similarity.pwcca(X, Y),
        "svcca": similarity.svcca(X, Y),
        "rsa": similarity.rsa(X, Y),
        "neuronsim": similarity.neuronsim(X, Y),
        "matrix": similarity.pairwise([X, Y, X[:, :8]], measure="linear_cka").tolist(),
        "suite": {k: v.tolist() for k, v in similarity.pairwise_suite(
            [X, Y], measures=["pwcca", "rsa"]).items()},
        "interval": [float(v) for v in (lambda b: (b.low, b.high))(
            similarity.bootstrap(X, Y, "linear_cka", n_boot=20, seed=1))],
        "p_value": similarity.permutation_test(X, Y, "linear_cka", n_perm=20, seed=1).p_value,
        "ridge": alignment.fit(X, Y, "ridge").distance(X, Y),
    }
    errors = {}
    for name, call in [("cuda", lambda: similarity.linear_cka(X, Y, device="cuda")),
                       ("torch", lambda: similarity.linear_cka(X, Y, backend="torch")),
                       ("inn", lambda: alignment.fit(X, X, "inn"))]:
        try:
            call()
        except ImportError as error:
            errors[name] = str(error)
    out["errors"] = errors
    out["heavy_modules"] = sorted(m for m in sys.modules
                                  if m.split(".")[0] in ("torch", "transformers", "datasets"))
    print(json.dumps(out))
""")


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0].lower()


def test_the_core_declares_the_measures_dependencies_and_no_torch():
    project = PYPROJECT["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    assert core == CORE
    extras = project["optional-dependencies"]
    assert {"torch", "models", "book", "sweep", "dev"} <= set(extras)
    assert [_requirement_name(r) for r in extras["torch"]] == ["torch"]
    assert project["scripts"]["analysis-lib"] == "analysis_lib.__main__:main"
    assert project["readme"] == "README.md" and project["license"] == "MIT"
    assert {"Homepage", "Documentation", "Repository", "Changelog"} <= set(project["urls"])


def test_the_book_environment_installs_the_package_with_every_extra():
    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert "-e .[models,book,sweep,dev]" in lines
    pinned = {_requirement_name(line) for line in lines if "==" in line}
    extras = PYPROJECT["project"]["optional-dependencies"]
    # (a requirement for older Pythons only, such as tomli, is not pinned)
    declared = {_requirement_name(r) for group in extras.values() for r in group
                if not r.startswith("analysis_lib") and ";" not in r}
    declared |= CORE
    # every dependency the package declares is pinned in the book's tested environment
    assert declared <= pinned, declared - pinned


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from the checkout (without a build environment of its own, so that it
    builds offline with the setuptools this environment has)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "--wheel-dir", str(out), str(ROOT)], check=True, cwd=out)
    (found,) = out.glob("analysis_lib-*.whl")
    return found


def test_the_wheel_lists_the_core_dependencies_and_its_version(wheel):
    assert wheel.name.startswith(f"analysis_lib-{analysis_lib.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        meta = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
        entry_points = archive.read(next(n for n in names
                                         if n.endswith(".dist-info/entry_points.txt")))
    text = meta.decode()
    requires = re.findall(r"^Requires-Dist: (.+)$", text, flags=re.M)
    unconditional = {_requirement_name(r) for r in requires if "extra ==" not in r}
    assert unconditional == CORE
    torch_lines = [r for r in requires if _requirement_name(r) == "torch"]
    assert torch_lines and all('extra == "torch"' in r for r in torch_lines)
    assert f"Version: {analysis_lib.__version__}" in text
    assert "License-Expression: MIT" in text
    assert "analysis_lib/py.typed" in names
    assert "analysis_lib/similarity/reference.py" in names
    assert b"analysis-lib = analysis_lib.__main__:main" in entry_points


@pytest.mark.slow
def test_the_measures_run_from_the_wheel_in_a_fresh_environment_without_torch(wheel, tmp_path):
    """A fresh virtual environment, the wheel and its core dependencies only (from the package
    index): linear CKA, PWCCA, RSA, the all-pairs matrices, the intervals and a ridge map run
    on NumPy arrays and agree with this environment's (torch) numbers, nothing imports torch,
    and asking for torch says how to install it."""
    venv = tmp_path / "core"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # (not compiled at install: the script below imports a small part of what is installed)
    installed = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-compile",
                                "--disable-pip-version-check", str(wheel)],
                               capture_output=True, text=True)
    if installed.returncode != 0 and "Could not find a version" in installed.stderr:
        pytest.skip(f"the core's dependencies cannot be installed here: {installed.stderr}")
    assert installed.returncode == 0, installed.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    ran = subprocess.run([str(python), "-c", CORE_SCRIPT], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout.strip().splitlines()[-1])
    assert got["torch_installed"] is False
    assert got["backend"] == "numpy"
    assert got["heavy_modules"] == []
    assert set(got["errors"]) == {"cuda", "torch", "inn"}
    for message in got["errors"].values():
        assert 'pip install "analysis_lib[torch]"' in message
    # the same numbers as this environment computes with its own backend
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 24))
    Y = X @ rng.standard_normal((24, 16)) + 0.3 * rng.standard_normal((300, 16))
    for name in ("linear_cka", "pwcca", "svcca", "rsa", "neuronsim"):
        np.testing.assert_allclose(got[name], getattr(similarity, name)(X, Y), atol=1e-9)
    np.testing.assert_allclose(
        got["matrix"], similarity.pairwise([X, Y, X[:, :8]], measure="linear_cka"), atol=1e-9)
    suite = similarity.pairwise_suite([X, Y], measures=["pwcca", "rsa"])
    for name, matrix in suite.items():
        np.testing.assert_allclose(got["suite"][name], matrix, atol=1e-9)
    interval = similarity.bootstrap(X, Y, "linear_cka", n_boot=20, seed=1)
    np.testing.assert_allclose(got["interval"], [interval.low, interval.high], atol=1e-9)
    assert got["p_value"] == pytest.approx(
        similarity.permutation_test(X, Y, "linear_cka", n_perm=20, seed=1).p_value)
    assert got["ridge"] == pytest.approx(alignment.fit(X, Y, "ridge").distance(X, Y), abs=1e-9)
    # the command comes with the package and needs no torch to start
    command = venv / "bin" / "analysis-lib"
    shown = subprocess.run([str(command), "--version"], capture_output=True, text=True)
    assert shown.stdout.strip() == f"analysis_lib {analysis_lib.__version__}"
    models = subprocess.run([str(command), "models"], capture_output=True, text=True)
    assert models.returncode == 2
    assert 'pip install "analysis_lib[models]"' in models.stderr


CORE_MODULES = ("analysis_lib.similarity", "analysis_lib.similarity.stats",
                "analysis_lib.similarity.streaming", "analysis_lib.similarity.leave_out",
                "analysis_lib.alignment", "analysis_lib.alignment.pairs", "analysis_lib.layers",
                "analysis_lib.data.synthetic", "analysis_lib.data.stimuli", "analysis_lib.rules",
                "analysis_lib.runtime.cache", "analysis_lib.runtime.device",
                "analysis_lib.collection", "analysis_lib.families",
                "analysis_lib.similarity.curves",
                "analysis_lib.claims",
                "analysis_lib.claims.verdicts", "analysis_lib.claims.tables",
                "analysis_lib.claims.causes", "analysis_lib.claims.training_gate",
                "analysis_lib.claims.papers.wu", "analysis_lib.claims.papers.phang",
                "analysis_lib.claims.papers.ren", "analysis_lib.claims.papers.merchant")

BLOCK_TORCH = textwrap.dedent("""
    import importlib, importlib.abc, sys

    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "transformers"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoTorch())
    for name in sys.argv[1:]:
        importlib.import_module(name)
    import numpy as np
    from analysis_lib import similarity
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 6))
    print(similarity.linear_cka(X, X + 0.1 * rng.standard_normal((50, 6))))
""")


def test_the_core_modules_import_and_measure_with_torch_unavailable():
    """The quick check beside the wheel test: with torch made unimportable, the core's modules
    import and a measure runs (an import of torch that creeps back fails here)."""
    ran = subprocess.run([sys.executable, "-c", BLOCK_TORCH, *CORE_MODULES],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert 0.9 < float(ran.stdout.strip()) <= 1.0


SUMMARY_WITHOUT_TORCH = textwrap.dedent("""
    import json
    import numpy as np
    from analysis_lib import collection, families
    from analysis_lib.layers import LayerTable

    table = LayerTable.concat([LayerTable.for_model("enc", "bert", True, 2),
                               LayerTable.for_model("dec", "gpt2", True, 2),
                               LayerTable.for_model("enc2", "roberta", True, 2)])
    rng = np.random.default_rng(0)
    layers = [rng.standard_normal((40, 5)) for _ in range(len(table))]
    c = collection.Collection(table, layers, np.arange(40), np.zeros((40, 3)),
                              np.repeat(np.arange(8), 5))
    M = np.arange(81, dtype=float).reshape(9, 9) / 81
    found = collection.summary(M, c)
    jackknife = collection.summary_jackknife("linear_cka", c, n_folds=4)
    try:
        families.causal_family("a-family-nobody-knows")
        unknown = "no error"
    except ImportError as error:
        unknown = str(error)
    print(json.dumps({"summary": {str(k): v for k, v in found.items()},
                      "se": jackknife.se("within_model"), "unknown": unknown}))
""")


def test_a_collection_matrix_is_summarised_with_torch_and_transformers_unavailable():
    """The statistics of a collection matrix are core: which family reads left to right is
    known without transformers for the families the library names, and a family it does not
    name says what to install rather than guessing."""
    import json

    from analysis_lib import collection
    from analysis_lib.layers import LayerTable

    blocked = BLOCK_TORCH.split("for name in sys.argv")[0]
    ran = subprocess.run([sys.executable, "-c", blocked + SUMMARY_WITHOUT_TORCH],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout)
    table = LayerTable.concat([LayerTable.for_model("enc", "bert", True, 2),
                               LayerTable.for_model("dec", "gpt2", True, 2),
                               LayerTable.for_model("enc2", "roberta", True, 2)])
    here = collection.Collection(table, [], np.arange(0), np.zeros((0, 3)), np.arange(0))
    want = collection.summary(np.arange(81, dtype=float).reshape(9, 9) / 81, here)
    assert got["summary"].keys() == {str(k) for k in want}
    for key, value in want.items():
        assert got["summary"][str(key)] == pytest.approx(value, nan_ok=True), key
    assert got["summary"]["encoder_decoder"] != got["summary"]["encoders_across"]
    assert got["se"] > 0
    assert 'pip install "analysis_lib[models]"' in got["unknown"]


def test_the_command_prints_the_version_and_names_a_missing_extra(monkeypatch, capsys):
    from analysis_lib import __main__ as cli

    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"analysis_lib {analysis_lib.__version__}"

    def needs_dask(args):
        raise ModuleNotFoundError("No module named 'dask'", name="dask")

    monkeypatch.setattr(cli, "cmd_corpora", needs_dask)
    assert cli.main(["corpora"]) == 2
    assert 'pip install "analysis_lib[sweep]"' in capsys.readouterr().err

    # a command names the extra that makes the whole command work, not the one that holds
    # the first missing package: the book needs torch, and the book extra brings it
    def needs_torch(args):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(cli, "cmd_findings", needs_torch)
    assert cli.main(["findings"]) == 2
    assert 'pip install "analysis_lib[book]"' in capsys.readouterr().err
    executable = shutil.which("analysis-lib", path=str(Path(sys.executable).parent))
    assert executable, "the analysis-lib command is not installed beside this Python"


def test_release_files_describe_this_version():
    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    assert citation["version"] == analysis_lib.__version__
    titles = " ".join(ref["title"] for ref in citation["references"])
    for words in ("Similarity Analysis of Contextual Word Representation Models",
                  "Fine-Tuned Transformers Show Clusters", "All Roads Lead to Rome",
                  "What Happens To BERT Embeddings During Fine-tuning"):
        assert words in titles
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## [{analysis_lib.__version__}]" in changelog
    running = (ROOT / "book" / "running.md").read_text(encoding="utf-8")
    assert "## Making a release" in running and "git tag" in running


def test_a_workflow_runs_the_tests_on_push_and_pull_request():
    workflows = ROOT / ".github" / "workflows"
    tests = yaml.safe_load((workflows / "tests.yml").read_text(encoding="utf-8"))
    # YAML reads the key `on` as True
    triggers = tests.get("on", tests.get(True))
    assert {"push", "pull_request"} <= set(triggers)
    text = (workflows / "tests.yml").read_text(encoding="utf-8")
    assert "make test" in text
    assert '"3.10"' in text
    assert "pip install dist/" in text or "dist/*.whl" in text


def _public_callables():
    for modules in API_PAGES.values():
        for name in modules:
            module = importlib.import_module(name)
            for attr in public_names(module):
                obj = getattr(module, attr)
                if inspect.isclass(obj):
                    for member, value in vars(obj).items():
                        if member.startswith("_") and member != "__init__":
                            continue
                        function = value.__func__ if isinstance(
                            value, classmethod | staticmethod) else value
                        if isinstance(function, property):
                            function = function.fget
                        if inspect.isfunction(function):
                            yield f"{name}.{attr}.{member}", function
                elif callable(obj):
                    yield f"{name}.{attr}", inspect.unwrap(obj)


def test_every_public_function_has_type_hints():
    """Every parameter (but ``self``/``cls``) and every return of the API reference's
    functions and methods is annotated (``__init__`` returns nothing, which needs no hint)."""
    missing = []
    for name, function in _public_callables():
        if not inspect.isfunction(function):
            continue
        signature = inspect.signature(function)
        unannotated = [p.name for p in signature.parameters.values()
                       if p.annotation is inspect.Parameter.empty
                       and p.name not in ("self", "cls")]
        no_return = (signature.return_annotation is inspect.Signature.empty
                     and function.__name__ != "__init__")
        if unannotated or no_return:
            missing.append(f"{name}({', '.join(unannotated)})" + (" -> ?" if no_return else ""))
    assert not missing, f"{len(missing)} public functions lack type hints: {missing[:40]}"


def test_the_type_check_is_part_of_lint_and_of_the_tests():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")

    def rule(target: str) -> str:
        return makefile.split(f"\n{target}:")[1].split("\n\n")[0]

    assert "mypy" in rule("typecheck")
    assert "typecheck" in rule("lint").split("\n")[0]  # a prerequisite of make lint
    test = rule("test")
    assert "typecheck" in test and "pytest" in test  # make test runs both
    assert "pytest" in rule("pytest")
    assert PYPROJECT["tool"]["mypy"]["files"] == ["analysis_lib"]
