"""The build's profile: steps recorded only when asked, their numbers, nesting, damaged
lines, and the table and summary the build writes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis_lib.book import builder, params
from analysis_lib.runtime import profile


def test_steps_are_recorded_only_when_a_file_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv(profile.ENV, raising=False)
    with profile.step("work", "nothing recorded"):
        pass
    target = tmp_path / "p.jsonl"
    monkeypatch.setenv(profile.ENV, str(target))
    with profile.step("outer", "a", cached=False):
        time.sleep(0.05)
        with profile.step("inner", "b"):
            np.linalg.svd(np.random.default_rng(0).standard_normal((300, 300)))
        (tmp_path / "blob.bin").write_bytes(b"x" * 2_000_000)
    records = profile.read(target)
    assert list(records.kind) == ["inner", "outer"]  # a step is written when it ends
    outer = records[records.kind == "outer"].iloc[0]
    inner = records[records.kind == "inner"].iloc[0]
    assert outer.depth == 1 and inner.depth == 2
    assert outer.wall_s >= 0.05 and outer.wall_s >= inner.wall_s
    assert inner.cpu_s > 0 and outer.peak_rss_mb > 10
    assert not outer.cached


def test_a_damaged_line_is_skipped_and_totals_count_outer_steps_once(tmp_path, monkeypatch):
    target = tmp_path / "p.jsonl"
    monkeypatch.setenv(profile.ENV, str(target))

    @profile.profiled("measure", lambda x: f"size {len(x)}")
    def work(x):
        with profile.step("inner", "part"):
            return sum(x)

    assert work([1, 2, 3]) == 6
    with open(target, "a") as f:
        f.write('{"kind": "cut sho')  # a write cut short
    records = profile.read(target)
    assert len(records) == 2 and set(records.name) == {"size 3", "part"}
    totals = profile.by_kind(records)
    assert list(totals.kind) == ["measure"]  # the inner step is inside the outer one
    assert profile.read(tmp_path / "missing.jsonl").empty


def test_the_build_writes_a_profile_table_and_prints_a_summary(tmp_path, monkeypatch):
    steps = tmp_path / "profile"
    steps.mkdir()
    monkeypatch.setenv(profile.ENV, str(steps / "first.jsonl"))
    with profile.step("extract", "model a"):
        time.sleep(0.01)
    monkeypatch.delenv(profile.ENV)
    runs = [builder.Executed("first", Path("first.ipynb"), 12.5, False, 20.0),
            builder.Executed("second", Path("second.ipynb"), 0.0, True, 0.0)]
    table = builder.write_profile(tmp_path, runs)
    again = pd.read_csv(tmp_path / "profile.csv")
    assert len(again) == len(table) == 3
    notebooks = again[again.kind == "notebook"]
    assert list(notebooks.notebook) == ["first", "second"]
    assert notebooks.wall_s.iloc[0] == 12.5 and notebooks.cpu_s.iloc[0] == 20.0
    lines = builder.profile_summary(table)
    assert any(line.strip().startswith("first") and "extract" in line for line in lines)
    assert any(line.strip().startswith("second") and "reused" in line for line in lines)
    before = builder.last_profile(tmp_path)
    text = builder._estimate(before, [Path("first.ipynb"), Path("second.ipynb")])
    assert "last build: 12 s" in text  # banker's rounding of 12.5
    assert builder._estimate(before.iloc[:0], [Path("first.ipynb")]) == ""


def _table(rows):
    return pd.DataFrame([{"notebook": n, "kind": k, "name": k, "depth": d, "wall_s": w}
                         for n, k, d, w in rows])


def test_own_time_leaves_out_the_steps_inside():
    from analysis_lib.book import projection

    # ended in this order: an extract inside heads, heads, then a finetune with a nested
    # extract that itself holds a measure
    steps = _table([("t", "extract", 2, 4.0), ("t", "heads", 1, 10.0),
                    ("t", "measure", 3, 1.0), ("t", "extract", 2, 3.0),
                    ("t", "finetune", 1, 8.0)])
    assert list(projection.own_times(steps).own_s) == [4.0, 6.0, 1.0, 2.0, 5.0]


def test_a_shape_build_projects_each_step_by_how_much_its_work_grows():
    """Known answer: twice the fine-tuning runs, ten times the steps and four times the
    rows scale each step's own time by its own factor; time outside steps stays."""
    from analysis_lib.book import projection
    from analysis_lib.training.grid import FinetuneGrid

    grid = {"models": ["minilm"], "tasks": ["tweets-sentiment"], "seeds": [0, 1],
            "n_train": 32, "epochs": 1.0, "preset": "cpu", "n_heldout": 20}
    shape = {"finetune": grid, "skip_examples": 10}
    full = {"finetune": {**grid, "seeds": [0, 1, 2, 3], "n_train": 320}, "skip_examples": 40}
    steps = [projection.optimizer_steps(FinetuneGrid.from_profile(p)) for p in (shape, full)]
    assert steps == [2, 20]
    capped = FinetuneGrid.of({**grid, "preset": "phang2021", "n_train": 500_000})
    assert projection.optimizer_steps(capped) == 10_000  # its cap
    table = _table([("truncation", "notebook", 0, 100.0), ("truncation", "extract", 2, 4.0),
                    ("truncation", "heads", 1, 10.0), ("truncation", "finetune", 1, 30.0)])
    declared = {"truncation": params.declared("truncation")}
    out = projection.project(table, {"truncation": shape}, {"truncation": full},
                             declared).iloc[0]
    runs, steps, rows = 2.0, 10.0, 4.0
    examples = (320 + 40) / (32 + 40)
    want = (100 - 40) + 4.0 * rows * runs + 6.0 * runs * examples + 30.0 * runs * steps
    assert out.measured_s == 100.0 and out.projected_s == pytest.approx(want)
    assert out["x finetune"] == 20.0


def test_every_notebook_says_what_its_work_grows_with():
    """The projection reads each notebook's sizes from the rules of its parameters: every
    notebook counts its inputs (``rows``); the chapters that compare every pair of a list of
    models say so (``pairs``); no chapter is named in the projection's code."""
    from analysis_lib.book import projection

    for path in builder.toc_notebooks():
        spec = params.declared(path)
        rows = [n for n, p in spec.items() if p.rules.get("rows")]
        assert rows, path.stem
        sizes = projection.sizes(spec, {})
        assert sizes["rows"] == sum(float(spec[n].default) for n in rows)
        if any(p.rules.get("pairs") for p in spec.values()):
            assert sizes["pairs"] == sizes["models"] ** 2 > 1
    source = Path(projection.__file__).read_text(encoding="utf-8")
    assert not [p.stem for p in builder.toc_notebooks() if f'"{p.stem}"' in source]


def test_the_sizes_rules_scale_rows_pairs_and_resamples():
    from analysis_lib.book import projection

    spec = params.parse_cell(
        "n: int = 10  # rows [rows; min: 1]\n"
        "models: list = ['a', 'b']  # compared [pairs; min: 1]\n"
        "boots: int = 5  # resamples [resamples; min: 1]\n"
        "perms: int = 7  # resamples [resamples; min: 1]\n")
    assert projection.sizes(spec, {}) == {"rows": 10.0, "models": 2.0, "pairs": 4.0,
                                          "runs": 1.0, "steps": 1.0, "examples": 1.0,
                                          "resamples": 12.0}
    grown = projection.sizes(spec, {"n": 40, "models": ["a", "b", "c"], "boots": 0})
    assert (grown["rows"], grown["pairs"], grown["resamples"]) == (40.0, 9.0, 7.0)


def test_only_a_shape_build_prints_and_keeps_a_projection(tmp_path):
    table = _table([("primer", "notebook", 0, 5.0)]).replace("primer", "measures_primer")
    assert builder.shape_projection("default", table, tmp_path) == []
    lines = builder.shape_projection("paper-shape", table, tmp_path)
    assert lines[0].startswith("projected time of the 'paper' profile")
    kept = pd.read_csv(tmp_path / "projection.csv")
    # the primer's rows grow from paper-shape's 200 stimuli to paper's 1000; no step ran
    assert kept.notebook.tolist() == ["measures_primer"] and kept.projected_s[0] == 5.0


def test_a_worker_process_records_its_steps_inside_the_step_that_started_it(
        tmp_path, monkeypatch):
    import os
    import subprocess
    import sys

    target = tmp_path / "p.jsonl"
    monkeypatch.setenv(profile.ENV, str(target))
    monkeypatch.delenv(profile.DEPTH_ENV, raising=False)
    child = ("from analysis_lib.runtime import profile\n"
             "with profile.step('pretrain', 'worker'):\n    pass\n")
    with profile.step("pretrain", "side by side"):
        subprocess.run([sys.executable, "-c", child], check=True)
    records = profile.read(target)
    assert list(zip(records.name, records.depth)) == [("worker", 2), ("side by side", 1)]
    assert profile.DEPTH_ENV not in os.environ
    totals = profile.by_kind(records)  # the worker's time is counted once, in its parent's
    assert totals.steps.tolist() == [1]
    assert totals.wall_s.iloc[0] == pytest.approx(records.wall_s.iloc[1], abs=0.05)
