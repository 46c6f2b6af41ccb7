"""The book: the smoke build of every notebook, its parameters, the built HTML book opened in
headless Chromium with the network off, and a notebook downloaded from it opened in
JupyterLab. Every test that reads the smoke build (``built_book``) is in this file, so that
``make test``'s workers (``--dist loadfile``) build it once; a chapter run on its own is in
``test_chapter_runs.py``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import papermill
import pytest
from labtools import drawn, in_solutions, open_notebook, solutions_folded
from nbread import outputs, printed_text

from analysis_lib import book
from analysis_lib.book import times

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = book.toc_notebooks(ROOT)
ARTIFACTS = ROOT / "test-artifacts"
SMOKE = book.load_profile("smoke", ROOT)


def _executed(built, name: str):
    folder = built[2] / "_build" / "executed" / "smoke"
    return nbformat.read(str(folder / f"{name}.ipynb"), as_version=4)


def _notebook(name: str):
    """A module-scoped fixture: the smoke build's executed copy of one notebook."""

    @pytest.fixture(scope="module")
    def executed(built_book):
        return _executed(built_book, name)

    return executed


executed_primer = _notebook("measures_primer")
executed_representation = _notebook("representation")
executed_attention = _notebook("attention")
executed_finetuning = _notebook("finetuning")
executed_truncation = _notebook("truncation")
executed_domains = _notebook("domains")
executed_seeds = _notebook("seeds")


def _switchable_matrices(nb, n: int) -> dict[str, np.ndarray]:
    """The matrices behind a collection chart with a measure dropdown: {measure: (n, n)}."""
    specs = outputs(nb, "application/vnd.vegalite.v6+json")
    spec = next(s for s in specs if any(p.get("name") == "measure"
                                        for p in s.get("params", [])))
    rows = [r for data in spec["datasets"].values() for r in data if "measure" in r]
    out = {}
    for r in rows:
        M = out.setdefault(r["measure"], np.full((n, n), np.nan))
        M[r["i"], r["j"]] = r["value"]
    out["_labels"] = {(r["i"]): r["row"] for r in rows}
    return out


def _spec_values(spec) -> list[float]:
    rows = [r for data in spec.get("datasets", {}).values() for r in data]
    return [r["value"] for r in rows if "value" in r]


def test_every_toc_notebook_is_stored_without_outputs():
    assert NOTEBOOKS, "the table of contents lists no notebook"
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        assert all(not c.get("outputs") and not c.get("execution_count")
                   for c in nb.cells if c.cell_type == "code"), path.name
        assert path in NOTEBOOKS, f"{path.name} is not in _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_help_notebook_lists_every_parameter_with_type_and_meaning(path):
    declared = papermill.inspect_notebook(str(path))
    assert declared
    text = subprocess.run([sys.executable, "-m", "papermill", "--help-notebook", str(path)],
                          capture_output=True, text=True, check=True).stdout
    for name, info in declared.items():
        assert info["inferred_type_name"] not in ("None", ""), f"{name} has no type"
        assert info["help"], f"{name} has no comment"
        assert re.search(rf"{name}: {re.escape(info['inferred_type_name'])}", text), name
        assert info["help"][:30] in " ".join(text.split()), name


def test_primer_produces_its_tables_and_charts(executed_primer):
    nb = executed_primer
    specs = outputs(nb, "application/vnd.vegalite.v6+json")
    assert len(specs) >= 3
    html = outputs(nb, "text/html")
    assert any("random rotation" in h and "neuronsim" in h for h in html)  # the table
    for spec in specs:
        values = _spec_values(spec)
        assert values and all(-1.0 - 1e-9 <= v <= 1.0 + 1e-9 for v in values)
    # the transform heatmap: X against itself scores 1 under every measure
    rows = [r for data in specs[0]["datasets"].values() for r in data]
    assert {round(r["value"], 6) for r in rows if r["row"] == "itself"} == {1.0}
    rotated = {r["col"]: r["value"] for r in rows if r["row"] == "random rotation"}
    assert rotated["linear_cka"] > 0.999 and rotated["neuronsim"] < 0.95
    # the slider chart holds the whole grid and a bound range input
    slider = next(s for s in specs if any("bind" in p for p in s.get("params", [])))
    noise = {r["noise"] for data in slider["datasets"].values() for r in data}
    assert noise == set(SMOKE["noise_levels"])
    # the explorer's saved state is a chart too
    assert any("Saved state of the explorer" in h for h in html)
    text = printed_text(nb)
    assert "my CKA" in text and "after a random rotation" in text


def test_representation_matrices_are_sound(executed_representation):
    n_layers = len(SMOKE["models"]) * (SMOKE["model_options"]["layers"] + 1)
    mats = _switchable_matrices(executed_representation, n_layers)
    labels = mats.pop("_labels")
    assert sorted(mats) == sorted(SMOKE["measures"])
    for measure, M in mats.items():
        assert not np.isnan(M).any(), measure
        assert np.all((M >= -1e-9) & (M <= 1 + 1e-9)), measure
        if measure in ("svcca", "linear_cka"):
            np.testing.assert_allclose(np.diag(M), 1.0, atol=1e-5)
            np.testing.assert_allclose(M, M.T, atol=1e-9)
    owners = [labels[i].rsplit(" ", 1)[0] for i in range(n_layers)]
    assert list(dict.fromkeys(owners)) == SMOKE["models"]  # models in the order given
    html = "".join(outputs(executed_representation, "text/html"))
    assert "what the paper reports" in html and "what this run shows" in html
    assert "agreement" in html and "wu-within-model" in html and "wu-other-corpus" in html
    text = printed_text(executed_representation)
    assert "regressed out" in text and "explicit mixedsim" in text
    assert "of the same layers with the rows shuffled" in text


def test_attention_matrices_and_explorer_are_sound(executed_attention):
    n_layers = len(SMOKE["models"]) * SMOKE["model_options"]["layers"]
    mats = _switchable_matrices(executed_attention, n_layers)
    mats.pop("_labels")
    assert len(mats) == 6 and "JS (head)" in mats and "CKA (distributed)" in mats
    for method, M in mats.items():
        assert not np.isnan(M).any(), method
        assert np.all((M >= -1 - 1e-9) & (M <= 1 + 1e-9)), method
        np.testing.assert_allclose(np.diag(M), 1.0, atol=1e-5, err_msg=method)
    specs = outputs(executed_attention, "application/vnd.vegalite.v6+json")
    explorer = next(s for s in specs if any(p.get("name") == "head"
                                            for p in s.get("params", [])))
    maps = [r for data in explorer["datasets"].values() for r in data if "weights" in r]
    assert {r["panel"] for r in maps} == {"chosen", "best match"}
    assert len({r["sentence"] for r in maps}) == SMOKE["explore_sentences"]
    for r in maps:  # every map's rows are distributions over the sentence's words
        n = r["n"]
        assert len(r["words"]) == n and len(r["weights"]) == n * n
        np.testing.assert_allclose(np.reshape(r["weights"], (n, n)).sum(axis=1), 1.0,
                                   atol=5e-3)
    text = printed_text(executed_attention)
    assert "across models the head-level JS similarity is" in text
    assert "largest deviation of a row sum from 1" in text


def _panels(spec, n: int) -> dict[str, np.ndarray]:
    out = {}
    for r in (r for data in spec["datasets"].values() for r in data if "panel" in r):
        M = out.setdefault(r["panel"], np.full((n, n), np.inf))
        M[r["i"], r["j"]] = np.nan if r["value"] is None else r["value"]
    assert all(np.isfinite(M).sum() + np.isnan(M).sum() == n * n for M in out.values())
    return out


def test_finetuning_matrices_are_sound(executed_finetuning):
    n = SMOKE["model_options"]["layers"] + 1
    specs = [s for s in outputs(executed_finetuning, "application/vnd.vegalite.v6+json")
             if any("panel" in r for data in s.get("datasets", {}).values() for r in data)]
    first, mean = (_panels(s, n) for s in specs[:2])
    for grid, pooling in ((first, "first"), (mean, "mean")):
        assert sorted(grid) == sorted(["ORIG-ORIG", "FT-ORIG", "FT-FT", "FT[1]-FT[2]"])
        for name, M in grid.items():
            defined = M[np.isfinite(M)]
            assert np.all((defined >= -1e-6) & (defined <= 1 + 1e-6)), (pooling, name)
        for name in ("ORIG-ORIG", "FT-FT"):
            M = grid[name]
            np.testing.assert_allclose(M, M.T, atol=1e-9)
            np.testing.assert_allclose(np.diag(M)[1:], 1.0, atol=1e-5)
    # the first token at the embedding layer is the same for every input: undefined
    for M in first.values():
        assert np.isnan(M[0]).all() and np.isnan(M[:, 0]).all()
        assert np.isfinite(M[1:, 1:]).all()
    assert np.isfinite(mean["FT-FT"]).all()  # the mean over tokens varies at every layer
    html = "".join(outputs(executed_finetuning, "text/html"))
    assert "what the paper reports" in html and "what this run shows" in html
    assert "phang-blocks" in html and "wu-freeze-order" in html  # keyed by claim id
    assert "block2_r2" in html and "band_r2" in html
    text = printed_text(executed_finetuning)
    assert "largest |M[i, j] - M[j, i]|" in text and "best split" in text


def test_truncation_curves_and_skips_are_sound(executed_truncation):
    n = SMOKE["model_options"]["layers"]
    specs = outputs(executed_truncation, "application/vnd.vegalite.v6+json")
    rows = [r for s in specs for data in s["datasets"].values() for r in data
            if "config" in r and "mean" in r]
    curves = pd.DataFrame(rows).drop_duplicates(["model", "task", "config", "layer"])
    for _, group in curves.groupby(["model", "task", "config"]):
        assert sorted(group.layer) == list(range(1, n + 1))  # one point per layer
    assert curves["mean"].between(0, 1).all()
    # at the last layer UNTUNED is the fine-tuned model itself (mean over seeds)
    top = curves[(curves.config == "UNTUNED") & (curves.layer == n)]
    np.testing.assert_allclose(top["mean"], top["full"], atol=1e-9)
    spans = pd.DataFrame([r for s in specs for data in s["datasets"].values() for r in data
                          if "single" in r])
    assert (spans["first"] <= spans["last"]).all()  # the upper triangle only
    assert (spans.single == (spans["first"] == spans["last"])).all()
    assert len(spans.drop_duplicates(["first", "last"])) == n * (n + 1) // 2 - 1
    text = printed_text(executed_truncation)
    assert "test inputs read differently" in text and "library probe" in text


def test_domain_curves_are_sound(executed_domains):
    n_layers = SMOKE["model_options"]["layers"] + 1
    specs = outputs(executed_domains, "application/vnd.vegalite.v6+json")
    rows = [r for s in specs for data in s["datasets"].values() for r in data
            if "domain" in r and "rsa" in r]
    curves = pd.DataFrame(rows).drop_duplicates(["model", "task", "domain", "layer"])
    for _, group in curves.groupby(["model", "task"]):
        assert set(group.domain) == {"in-domain", "out-of-domain"}
        for _, one in group.groupby("domain"):  # one value per layer per domain
            assert sorted(one.layer) == list(range(n_layers))
    assert curves.rsa.between(-1, 1).all()
    assert (curves.low <= curves.rsa + 1e-9).all() and (curves.rsa <= curves.high + 1e-9).all()
    text = printed_text(executed_domains)
    assert "RSA of the base model with itself, per layer" in text  # asserted equal to 1
    html = "".join(outputs(executed_domains, "text/html"))
    assert "what the paper reports" in html and "merchant-domain" in html
    assert "p_holm" in html  # the permutation p-values, Holm-adjusted over the tests shown
    assert "smallest possible p with" in text


def test_seed_distributions_are_sound(executed_seeds):
    n_layers = SMOKE["model_options"]["layers"] + 1
    n_pairs = len(SMOKE["finetune"]["seeds"]) * (len(SMOKE["finetune"]["seeds"]) - 1) // 2
    specs = outputs(executed_seeds, "application/vnd.vegalite.v6+json")
    rows = [r for s in specs for data in s["datasets"].values() for r in data
            if "pairs" in r and "median" in r]
    summary = pd.DataFrame(rows).drop_duplicates(["task", "kind", "layer"])
    for (_, kind), group in summary.groupby(["task", "kind"]):
        expected = range(n_layers) if kind == "hidden states" else range(1, n_layers)
        assert sorted(group.layer) == list(expected)  # one distribution per layer
    assert (summary.pairs == n_pairs).all()  # every pair of seeds once, none with itself
    assert (summary.q1 <= summary["median"] + 1e-12).all()
    assert (summary["median"] <= summary.q3 + 1e-12).all() and (summary.q1 >= 0).all()
    html = "".join(outputs(executed_seeds, "text/html"))
    assert "what the paper reports" in html and "inn" in html
    assert "ren-depth" in html and "ren-attention" in html


def test_pretraining_seeds_from_folders_carry_the_depth_claim(built_book, tmp_path):
    """The seeds page's section 3b on models named by folder, the path the `paper` profile
    takes with the MultiBERTs' hub ids: two BERTs that differ only in their initial weights
    are compared layer by layer, and Ren et al.'s depth claim is judged on them."""
    from analysis_lib import models

    folders = []
    for s in (0, 1):
        loaded = models.load("random:bert", seed=s, layers=2, hidden=32, heads=2,
                             vocab_size=2000, cache_dir=tmp_path / "cache")
        folder = tmp_path / f"seed-{s}"
        loaded.model.save_pretrained(folder)
        loaded.tokenizer.save_pretrained(folder)
        folders.append(str(folder))
    path = ROOT / "notebooks" / "seeds.ipynb"
    # section 3b is what this run reads: the page's other sections on their smallest inputs
    params = {**book.notebook_parameters(path, SMOKE), "pretraining_seeds": folders,
              "align_methods": ["identity", "procrustes"], "synthetic_sizes": [100],
              "pretraining_finetune_epochs": 1.0}
    out = tmp_path / "seeds.ipynb"
    papermill.execute_notebook(str(path), str(out), parameters=params, cwd=str(path.parent),
                               progress_bar=False, execution_timeout=300)
    nb = nbformat.read(out, as_version=4)
    assert "section skipped" not in printed_text(nb)
    specs = outputs(nb, "application/vnd.vegalite.v6+json")
    ours = [s for s in specs if "pretraining seeds: distance between them" in json.dumps(s)]
    assert len(ours) == 1
    rows = [r for data in ours[0]["datasets"].values() for r in data if "median" in r]
    assert sorted({r["layer"] for r in rows}) == [0, 1, 2]  # both models' 3 layers
    assert {r["pairs"] for r in rows} == {1}  # one pair: the two folders
    findings = [t for t in outputs(nb, "text/html") if "ren-depth" in t]
    assert findings and "pretraining seeds" in findings[-1]
    # Fig. 3 draws the first seed model's layer-by-layer matrix beside MiniLM's
    assert [s for s in specs if f"pretraining seed: {folders[0]}" in json.dumps(s)]


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _shape(data) -> str:
    """A chart dataset's text with its numbers left out."""
    return json.dumps([{k: v for k, v in row.items() if not isinstance(v, float)}
                       for row in data], sort_keys=True)


def _printed(nb) -> list:
    """Everything a page shows, in order: each output's text, HTML and markdown, the values
    stated in its prose, and each chart's data (numbers as the chart holds them)."""
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        streamed = False  # the last output was printed text (a kernel flushes it in pieces)
        for o in cell.get("outputs", []):
            if o.get("name") == "stderr":  # warnings and progress, not the page's results
                continue
            data = o.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                continue  # a live widget (a progress bar): no result of its own
            if "text" in o:
                if streamed:  # one printout, however the kernel split it
                    out[-1] += o["text"]
                else:
                    out.append(o["text"])
                streamed = True
                continue
            streamed = False
            chart = next((v for m, v in data.items() if m.startswith("application/vnd.vegalite")),
                         None)
            if chart is not None:  # its HTML and text are renderings of the same spec
                # datasets are named by a hash of their values: order them by the rest
                out.append(sorted(chart.get("datasets", {}).values(), key=_shape))
                continue
            out += [v for m, v in data.items() if m.split("/")[-2:-1] == ["text"]
                    and not str(v).startswith(times.LEAD)]  # a time, not a result
    return out


def _floats(value) -> list[float]:
    """Every float held as a number in :func:`_printed`'s output, in order."""
    if isinstance(value, float):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(
        value, list) else []
    return [f for item in items for f in _floats(item)]


def _last_digit(number: str) -> float:
    """One unit in the last printed digit of a decimal number (0 for an integer)."""
    mantissa, _, power = number.lower().partition("e")
    digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 10.0 ** (int(power or 0) - digits) if digits else 0.0


def _moved(a, b, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` (as :func:`_printed` gives them) differ beyond a move of 1e-4:
    a number held as a number may move by less than 1e-4; a number printed as text by that
    plus one unit in its last printed digit (rounding), an integer not at all; the words
    between the numbers are the same."""
    if isinstance(a, float) or isinstance(b, float):
        ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and (
            a == b or abs(a - b) < 1e-4)
        return [] if ok else [f"{where}: {a!r} vs {b!r}"]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [m for i, (x, y) in enumerate(zip(a, b)) for m in _moved(x, y, f"{where}[{i}]")]
    if isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b):
        return [m for k in a for m in _moved(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, str) and isinstance(b, str):
        # the words between the numbers, spaces aside (a table pads its columns to fit)
        words = [[" ".join(w.split()) for w in _NUMBER.split(x)] for x in (a, b)]
        numbers = [_NUMBER.findall(x) for x in (a, b)]
        if words[0] != words[1] or len(numbers[0]) != len(numbers[1]):
            return [f"{where}: {a[:200]!r} vs {b[:200]!r}"]
        moved = []
        for x, y in zip(*numbers):
            if abs(float(x) - float(y)) > 1e-4 + max(_last_digit(x), _last_digit(y)) + 1e-12:
                moved.append(f"{where}: {x} vs {y} in {a[:120]!r}")
        return moved
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]


def test_float16_word_rows_move_no_printed_number_by_1e4(built_book, tmp_path, monkeypatch):
    """The pages that can cache word rows in float16 (``word_storage``), run again in the
    other storage than the smoke build's on the same fine-tuned models: every number they
    print or chart moves by less than 1e-4, and every word they print is the same."""
    from analysis_lib.book import params as declared
    from analysis_lib.book import render, times

    monkeypatch.setenv(times.PROFILE_ENV, "smoke")  # as the build tells its kernels
    monkeypatch.setenv(render.PAGE_ENV, "1")
    changed = 0
    for name in ("finetuning", "domains"):
        path = ROOT / "notebooks" / f"{name}.ipynb"
        built = book.notebook_parameters(path, SMOKE).get(
            "word_storage", declared.declared(path)["word_storage"].default)
        other = {"float16": "float32", "float32": "float16"}[built]
        params = {**book.notebook_parameters(path, SMOKE), "word_storage": other}
        out = tmp_path / f"{name}.ipynb"
        papermill.execute_notebook(str(path), str(out), parameters=params,
                                   cwd=str(path.parent), progress_bar=False,
                                   execution_timeout=300)
        as_built = _printed(_executed(built_book, name))
        again = _printed(nbformat.read(out, as_version=4))
        moved = _moved(as_built, again, name)
        assert not moved, "\n".join(moved[:20])
        assert sum(isinstance(x, list) for x in again) >= 2  # the charts' data were compared
        changed += sum(x != y for x, y in zip(_floats(as_built), _floats(again)))
    assert changed  # float16 did move numbers (below 1e-4): the two runs differ


def test_rebuild_reuses_executed_notebooks(built_book):
    _, second, _ = built_book
    per_notebook = [m for m in second if m.split()
                    and m.split()[0] in {p.stem for p in NOTEBOOKS} and len(m.split()) <= 3]
    assert len(per_notebook) == len(NOTEBOOKS)
    assert all(m.split()[-1] == "reused" for m in per_notebook), per_notebook


def test_a_rebuild_with_nothing_new_writes_no_page_again(built_book):
    """The second build wrote no HTML page: every page it stages holds what the first build
    staged (the machine's speed as the first build stated it, ``Machine.as_before``), so
    Jupyter Book reads and writes nothing again. The second build wrote ``profile.csv``
    before it ran Jupyter Book."""
    index, _, root = built_book
    rebuilt = (root / "_build" / "executed" / "smoke" / "profile.csv").stat().st_mtime_ns
    written = sorted(str(p.relative_to(index.parent)) for p in index.parent.rglob("*.html")
                     if p.stat().st_mtime_ns > rebuilt)
    assert not written, written


def test_build_keeps_a_profile_beside_the_executed_notebooks(built_book):
    import pandas as pd

    _, second, root = built_book
    table = pd.read_csv(root / "_build" / "executed" / "smoke" / "profile.csv")
    notebooks = table[table.kind == "notebook"]
    assert sorted(notebooks.notebook) == sorted(p.stem for p in NOTEBOOKS)
    steps = table[table.kind != "notebook"]
    assert {"extract", "measure suite"} <= set(steps.kind)  # the kernels' own steps
    assert (steps.wall_s >= 0).all() and steps.notebook.notna().all()
    assert any(line.startswith("profile") for line in (m.strip() for m in second))
    assert any("cache:" in m for m in second)
    # the rebuild announced each notebook with the last build's time
    assert any(m.startswith("[1/") and " s expected)" in m for m in second)


def test_a_build_names_its_machine_and_its_record_states_times_for_any_cpu(built_book,
                                                                           tmp_path):
    """The build's profile names the CPU, cores and speed it ran on; kept as a record, its
    times are stated as measured on that kind of CPU, and projected by the ratio of speeds
    (with the recorded machine named) on a CPU that is not recorded."""
    from analysis_lib.book import times

    index, _, root = built_book
    executed = root / "_build" / "executed" / "smoke"
    table = pd.read_csv(executed / "profile.csv")
    ran = table[table.kind == "notebook"]
    here = times.Machine.here()
    assert set(ran.cpu) == {here.cpu} and set(ran.cores) == {here.cores}
    assert (ran.speed > 0).all()
    # the fixture's second build reused every page: keep the first build's times as run
    first = tmp_path / "first"
    first.mkdir()
    table.assign(reused=False).to_csv(first / "profile.csv", index=False)
    path = tmp_path / "run_times.csv"
    kept = times.record("smoke", "cold", first, path)
    assert set(kept.cpu) == {here.cpu} and (kept.speed == ran.speed.iloc[0]).all()
    on_it = times.sentence("seeds", path, profile="smoke",
                           here=times.Machine(here.cpu, here.cores, float(ran.speed.iloc[0])))
    seconds = float(ran.set_index("notebook").wall_s["seeds"])
    assert f"`smoke` {times.duration(seconds)} cold (on this kind of CPU: {here.cpu}" in on_it
    other = times.Machine("Some Other CPU", 2, float(ran.speed.iloc[0]) / 2)
    said = times.sentence("seeds", path, profile="smoke", here=other)
    assert f"about {times.duration(seconds * 2)} cold here" in said
    assert "nearest in speed to this one (Some Other CPU" in said and here.cpu in said
    assert "which computes 2.00 times as fast" in said
    course = (index.parent / "book" / "course.html").read_text(encoding="utf-8")
    assert "build-times summary" not in course and "The whole book" in course


def test_exercises_render_through_sphinx_exercise(built_book):
    index, _, _ = built_book
    for path in NOTEBOOKS:
        html = (index.parent / "notebooks" / f"{path.stem}.html").read_text()
        exercises = html.count('class="exercise admonition"')
        solutions = html.count('class="solution dropdown admonition"')
        assert exercises >= 3 and solutions == exercises, (path.stem, exercises, solutions)
    course = (index.parent / "book" / "course.html").read_text()
    assert "teacher" in course.lower() and "papermill" in course


def test_the_api_reference_lists_every_public_function(built_book):
    """The book's API reference documents every public name of the modules it covers (the
    similarity package's functions among them), the measures page links each measure to its
    entry, and the book shows the library's version."""
    import importlib

    import analysis_lib
    from analysis_lib import similarity
    from analysis_lib.book.sphinx_ext import API_PAGES, public_names

    index = built_book[0]
    api = index.parent / "book" / "api"
    similarity_page = (api / "similarity.html").read_text()
    functions = [n for n in similarity.__all__ if callable(getattr(similarity, n))]
    assert len(functions) > 25
    for name in functions:
        assert f'id="analysis_lib.similarity.{name}"' in similarity_page, name
    assert 'class="autosummary' in similarity_page  # the summary table
    for page, modules in API_PAGES.items():
        html = (api / f"{page}.html").read_text()
        for module_name in modules:
            module = importlib.import_module(module_name)
            for name in public_names(module):
                assert f'id="{module_name}.{name}"' in html, (page, module_name, name)
    measures = (index.parent / "book" / "measures.html").read_text()
    for name in ("neuronsim", "svcca", "pwcca", "linear_cka", "rsa", "procrustes"):
        assert f'href="api/similarity.html#analysis_lib.similarity.{name}"' in measures, name
    intro = (index.parent / "book" / "intro.html").read_text()
    assert f"version {analysis_lib.__version__} of the library" in intro


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


#: chapters whose charts use tooltips only (no slider or dropdown to move)
WITHOUT_CONTROLS = {"finetuning", "truncation", "domains", "seeds"}

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic"]


def _move_a_control(page, control, page_path):
    """Set a chart's first slider or dropdown to its last value and check the SVG changed."""
    chart = control.locator("xpath=ancestor::div[contains(@class,'analysis-lib-chart')]")
    before = chart.locator("svg").inner_html()
    control.evaluate(
        "el => { if (el.tagName === 'SELECT') { el.selectedIndex = "
        "el.options.length - 1; el.dispatchEvent(new Event('change', "
        "{bubbles: true})); } else { el.value = el.max; el.dispatchEvent("
        "new Event('input', {bubbles: true})); } }")
    page.wait_for_timeout(800)
    assert chart.locator("svg").inner_html() != before, \
        f"moving the chart's control changed nothing on {page_path.name}"


def _findings_fit(context, page_path, shots) -> None:
    """The findings page at a desktop and a phone width: its chart drew, within its column,
    and its table's verdict column is on screen (the table may scroll sideways past it)."""
    for width in (1400, 400):
        page = context.new_page()
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(page_path.as_uri())
        page.wait_for_selector(".analysis-lib-chart svg.marks", timeout=30_000)
        fit = page.evaluate("""() => {
          const column = document.querySelector('article').getBoundingClientRect();
          const chart = document.querySelector('.analysis-lib-chart svg')
            .getBoundingClientRect();
          const head = [...document.querySelectorAll('article table th')]
            .find(th => th.textContent.trim() === 'verdict').getBoundingClientRect();
          return {column: [column.left, column.right], chart: [chart.left, chart.right],
                  verdict: [head.left, head.right], viewport: window.innerWidth};
        }""")
        assert fit["chart"][1] <= fit["column"][1] + 2, (width, fit)
        assert fit["chart"][1] - fit["chart"][0] > 0.6 * (fit["column"][1] - fit["column"][0])
        assert fit["verdict"][1] <= fit["viewport"], (width, fit)
        page.screenshot(path=str(shots / f"findings_{width}px.png"), full_page=True)
        page.close()


#: the JavaScript that lists what runs past the right edge of the screen in a page's text
#: (the article and its links to the next page), outside any box that scrolls sideways by
#: itself (a wide table, a code block): what would make a reader scroll the page sideways
PAST_THE_SCREEN = """() => {
  const width = document.documentElement.clientWidth;
  const past = [];
  for (const el of document.querySelectorAll('main .bd-article *, main .prev-next-area *')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0 || box.right <= width + 1) continue;
    let up = el.parentElement, scrolls = false;
    while (up && up !== document.body && !scrolls) {
      scrolls = ['auto', 'scroll'].includes(getComputedStyle(up).overflowX);
      up = up.parentElement;
    }
    if (!scrolls) past.push(`${el.tagName} ${Math.round(box.right)}px: `
                            + (el.textContent || '').trim().slice(0, 60));
  }
  return {page: document.documentElement.scrollWidth, width: width, past: past.slice(0, 5)};
}"""


def _narrowed(page, width: int) -> None:
    """The open page at ``width`` pixels, laid out again: the resize reaches the page's own
    scripts (a chart sized to its container redraws) before the next two frames."""
    page.set_viewport_size({"width": width, "height": 900})
    page.evaluate("() => new Promise(done => requestAnimationFrame("
                  "() => requestAnimationFrame(done)))")


def _fits(page, where) -> None:
    """Nothing on the open page is wider than the screen."""
    fit = page.evaluate(PAST_THE_SCREEN)
    assert fit["page"] <= fit["width"] and not fit["past"], (where, fit)


def _front_page_answer(context, index, table, shots) -> None:
    """The front page at a desktop and a phone width: the tally and every claim's verdict,
    in the build's words, on the screen without scrolling sideways."""
    verdicts = dict(zip(table.claim, table.verdict))
    for width in (1400, 400):
        page = context.new_page()
        page.set_viewport_size({"width": width, "height": 900})
        page.goto((index.parent / "book" / "intro.html").as_uri())  # the front page
        page.wait_for_selector(".analysis-lib-answer", timeout=30_000)
        shown = page.evaluate("""() => {
          const right = e => e.getBoundingClientRect().right;
          const tally = document.querySelector('.al-tally').getBoundingClientRect();
          return {tally: [tally.left, tally.right, tally.height],
                  words: document.querySelector('.al-words').innerText,
                  rows: [...document.querySelectorAll('.al-claims li')].map(li => [
                    li.querySelector('.al-text').innerText,
                    li.querySelector('.al-verdict').innerText,
                    Math.max(right(li.querySelector('.al-verdict')),
                             right(li.querySelector('.al-text'))),
                    li.querySelector('.al-verdict').scrollWidth
                      <= li.querySelector('.al-verdict').clientWidth + 1])};
        }""")
        assert shown["tally"][0] >= 0 and shown["tally"][1] <= width and shown["tally"][2] > 0
        for verdict, n in table.verdict.value_counts().items():
            assert f"{n} {'hold' if verdict == 'holds' else verdict}" in shown["words"]
        assert len(shown["rows"]) == len(table)
        for text, verdict, right, whole in shown["rows"]:
            assert verdicts[text] == verdict, (text, verdict)
            assert right <= width and whole, (width, text, right)
        _fits(page, f"front page at {width} px")
        page.screenshot(path=str(shots / f"front_page_{width}px.png"), full_page=True)
        page.close()


def test_book_pages_render_charts_offline_in_chromium(built_book, tmp_path):
    executable = _chromium()
    if executable is None:
        pytest.skip("Debian's chromium is not installed and could not be (not root?): "
                    "`apt-get install -y chromium` to run the browser test")
    from playwright.sync_api import sync_playwright

    index, _, _ = built_book
    html_root = index.parent
    pages = sorted(p for p in html_root.rglob("*.html")
                   if not p.name.startswith(("genindex", "search")) and "_static" not in p.parts)
    chapters = [html_root / "notebooks" / f"{p.stem}.html" for p in NOTEBOOKS]
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    report = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS,
                                     headless=True)
        context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
        context.route(re.compile(r"^https?://"), lambda route: route.abort())
        table = pd.read_csv(built_book[2] / "_build" / "executed" / "smoke" / "findings.csv",
                            keep_default_na=False)
        _front_page_answer(context, index, table, shots)
        for page_path in pages:
            page = context.new_page()
            errors: list[str] = []
            page.on("console", lambda m, e=errors: m.type == "error" and e.append(m.text))
            page.on("pageerror", lambda exc, e=errors: e.append(f"pageerror: {exc}"))
            page.goto(page_path.as_uri())
            page.wait_for_load_state("load")
            name = str(page_path.relative_to(html_root)).replace("/", "_")
            body = page.inner_text("body")
            assert "Error loading script" not in body, page_path
            assert "did not load" not in body and "Chart error" not in body, page_path
            if page_path in chapters:
                page.wait_for_selector(".analysis-lib-chart svg", timeout=30_000)
                sizes = page.eval_on_selector_all(
                    ".analysis-lib-chart svg",
                    "els => els.map(e => [e.getBoundingClientRect().width, "
                    "e.getBoundingClientRect().height])")
                assert any(w > 200 and h > 150 for w, h in sizes), (page_path, sizes)
                past = page.evaluate(
                    "() => { const column = document.querySelector('article')"
                    ".getBoundingClientRect().right; return [...document.querySelectorAll("
                    "'.analysis-lib-chart svg.marks, .cell_output .output.text_html')]"
                    ".filter(e => e.getBoundingClientRect().right > column + 2).length; }")
                assert past == 0, f"{past} charts or tables run past the column: {page_path}"
                controls = page.locator(".analysis-lib-chart input[type=range], "
                                        ".analysis-lib-chart select")
                if page_path.stem in WITHOUT_CONTROLS:
                    assert controls.count() == 0
                else:
                    _move_a_control(page, controls.first, page_path)
            if page_path.name == "measures.html":  # formulas typeset offline, not TeX source
                page.wait_for_selector("mjx-container", timeout=30_000)
                assert page.locator("mjx-container").count() >= 10
                assert "\\frac" not in page.inner_text("article")
            if page_path in chapters:  # the parameters once; no plumbing on the page
                article = page.inner_text("article")
                assert "params.check" not in article, page_path
                assert "# Parameters" not in article, page_path
                assert article.count("the parameters of this run") == 1, page_path
            if page_path.name == "findings.html":
                _findings_fit(context, page_path, shots)
            # a chapter whole, any other page its first screen: a long page's full screenshot
            # takes seconds, and every page is checked above whole (the findings and front
            # pages have their whole screenshots at two widths)
            page.screenshot(path=str(shots / f"{name}.png"), full_page=page_path in chapters)
            if 'http-equiv="Refresh"' not in page_path.read_text(encoding="utf-8"):
                # the same page narrowed to a phone's width (loading every page a second
                # time took half the test); a forwarding page has nothing to fit
                _narrowed(page, 400)
                _fits(page, f"{page_path.relative_to(html_root)} at 400 px")
            report[name] = errors
            assert not errors, (page_path, errors)
            page.close()
        browser.close()
    (ARTIFACTS / "console.json").write_text(json.dumps(report, indent=1))
    assert len(report) == len(pages)


def test_the_findings_page_lists_every_claim_from_the_executed_chapters(built_book, capsys):
    from analysis_lib import claims
    from analysis_lib.__main__ import main

    index, _, root = built_book
    folder = root / "_build" / "executed" / "smoke"
    table = pd.read_csv(folder / "findings.csv", keep_default_na=False)
    assert list(table["claim id"]) == list(claims.CLAIMS)
    # every claim is judged by a chapter of the smoke build, with an estimate or a reason
    assert set(table.chapter) == {"representation", "attention", "finetuning", "truncation",
                                  "domains", "seeds"}
    assert (table["what this run shows"] != "").all()
    html = (index.parent / "book" / "findings.html").read_text(encoding="utf-8")
    for claim_id in claims.CLAIMS:
        assert claim_id in html, claim_id
    for chapter in set(table.chapter):
        assert f"notebooks/{chapter}.html" in html, chapter
    running = (index.parent / "book" / "running.html").read_text(encoding="utf-8")
    assert "profiles table: written by the build" not in running
    assert ">smoke<" in running and "phang-blocks" in running  # the build's own column
    assert main(["findings", "--executed", str(folder)]) == 0
    printed = capsys.readouterr().out
    for claim_id in table["claim id"]:
        assert claim_id in printed
    assert ", ".join(f"{n} {v}" for v, n in table.verdict.value_counts().items()) in printed


def test_a_notebook_downloaded_from_the_book_draws_its_charts(lab, built_book):
    """The executed notebook a chapter's download button serves, opened (not run) in
    JupyterLab, where it is not trusted: every chart is drawn, its solutions folded."""
    folder, port, browser = lab
    index = built_book[0]
    served = index.parent / "_sources" / "notebooks" / "representation.ipynb"
    shutil.copy2(served, folder / "downloaded.ipynb")
    nb = nbformat.read(str(served), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    charts = [o for c, hidden in zip(code, in_solutions(nb)) if not hidden
              for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(charts) >= 3
    assert not any("analysis-lib-chart" in str(o.get("data", {}).get("text/html", ""))
                   for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    page = open_notebook(browser, port, "downloaded.ipynb")
    page.wait_for_timeout(1500)
    big = drawn(page)
    (ARTIFACTS / "screenshots").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "screenshots" / "jupyterlab_downloaded.png"))
    assert len(big) >= len(charts), (len(charts), big)
    solutions_folded(page, nb)
    page.close()
