"""The build's profile: steps recorded only when asked, their numbers, nesting, damaged
lines, and the table and summary the build writes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from analysis_lib.book import builder
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
