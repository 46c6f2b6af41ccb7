"""The build's profile: steps recorded only when asked, their numbers, nesting, damaged
lines, and the table and summary the build writes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis_lib.book import builder, params, times
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
    seconds = builder.expected_seconds(before, "no-such-profile")
    assert seconds == {"first": 12.5}  # a reused notebook's 0 s says nothing
    text = builder._estimate(seconds, Path("first.ipynb"))
    assert "about 12 s expected" in text  # banker's rounding of 12.5
    assert builder._estimate({}, Path("first.ipynb")) == ""


STAT = ("cpu  {user} 50 {system} {idle} {iowait} 0 {softirq} {steal} 30 0\n"
        "cpu0 1 2 3 4 5 6 7 8 9 10\n")


def _stat(tmp_path, name, **fields):
    path = tmp_path / name
    path.write_text(STAT.format(**fields))
    return path


def test_core_time_reads_busy_idle_and_stolen_time_and_their_shares(tmp_path):
    """Busy is user, nice, system, interrupts; idle counts the disk waits; stolen is the
    host's; guest time is inside user time and is not counted twice. Shares are of the
    core time that passed between two readings, whatever the tick."""
    tick = times.os.sysconf("SC_CLK_TCK")
    first = times.core_time(_stat(tmp_path, "a", user=1000, system=200, idle=700, iowait=40,
                                  softirq=10, steal=0))
    assert (first.busy, first.idle, first.stolen) == pytest.approx((1260 / tick, 740 / tick, 0))
    # then 600 ticks busy (user 500, system 100), 300 idle (290 + 10 waiting), 100 stolen
    later = times.core_time(_stat(tmp_path, "b", user=1500, system=300, idle=990,
                                  iowait=50, softirq=10, steal=100))
    busy, stolen = later.shares_since(first)
    assert busy == pytest.approx(0.6) and stolen == pytest.approx(0.1)
    assert all(v != v for v in first.shares_since(first))  # no time passed: NaN
    for text in ("", "intr 1 2 3\n", "cpu a b c\n", "cpu 1 2 3\n"):  # not a cpu line
        (tmp_path / "bad").write_text(text)
        assert times.core_time(tmp_path / "bad") is None
    assert times.core_time(tmp_path / "missing") is None


def test_the_build_profile_records_and_says_how_busy_the_cores_were_and_what_was_stolen(
        tmp_path, monkeypatch):
    readings = iter([times.CoreTime(100.0, 100.0, 0.0), times.CoreTime(190.0, 110.0, 0.0)])
    monkeypatch.setattr(times, "core_time", lambda: next(readings))
    busy, stolen = builder.core_shares(times.core_time())
    assert (busy, stolen) == (0.9, 0.0)
    monkeypatch.setattr(times, "core_time", lambda: None)  # another system: nothing said
    assert all(v != v for v in builder.core_shares(None))
    assert builder.cores_line(float("nan"), float("nan")) is None
    quiet = builder.cores_line(0.9, 0.001)
    assert "cores busy 90%" in quiet and "stolen by the host 0.1%" in quiet
    assert "care" not in quiet
    noisy = builder.cores_line(0.9, times.STOLEN_NOTED)
    assert "slower than this CPU computes" in noisy
    runs = [builder.Executed("first", Path("first.ipynb"), 12.5, False, 20.0, 0.93, 0.02),
            builder.Executed("second", Path("second.ipynb"), 0.0, True, 0.0)]
    builder.write_profile(tmp_path, runs)
    table = pd.read_csv(tmp_path / "profile.csv")
    rows = table[table.kind == "notebook"].set_index("notebook")
    assert rows.loc["first", "busy"] == 0.93 and rows.loc["first", "stolen"] == 0.02
    assert np.isnan(rows.loc["second", "busy"])  # a reused notebook did not run here
    lines = builder.profile_summary(table)
    first = next(line for line in lines if line.strip().startswith("first"))
    assert "93%" in first
    second = next(line for line in lines if line.strip().startswith("second"))
    assert "%" not in second


def test_a_rebuild_states_its_folder_s_machine_while_the_speed_stays_one_speed(tmp_path):
    """A build on the machine of its folder's last build states that build's speed while
    the two are one speed (within times.SAME_SPEED): a speed measured anew differs in its
    last digits, and the pages stating it would be written and read again each time."""
    runs = [builder.Executed("first", Path("first.ipynb"), 12.5, False, 20.0)]
    last = times.Machine("AMD EPYC (AVX2)", 2, 70.4)
    builder.write_profile(tmp_path, runs, last)
    before = times.built_on(builder.last_profile(tmp_path))
    assert before == last
    for speed in (70.4, 69.1, 70.4 * 1.2, 70.4 / 1.2):  # the same machine, measured again
        assert times.Machine("AMD EPYC (AVX2)", 2, speed).as_before(before) == last
    for now in (times.Machine("AMD EPYC (AVX2)", 2, 70.4 * 1.3),  # faster than one speed
                times.Machine("AMD EPYC (AVX2)", 2, 70.4 / 1.3),
                times.Machine("AMD EPYC (AVX2)", 1, 70.4),  # other cores
                times.Machine("AMD EPYC (AVX512-BF16)", 2, 70.4),  # another kind of CPU
                times.Machine("AMD EPYC (AVX2)", 2, float("nan"))):  # speed unknown
        assert now.as_before(before) == now
    unknown = times.Machine("AMD EPYC (AVX2)", 2, float("nan"))
    assert last.as_before(unknown) == last  # a folder whose speed was not known


RECORDED = """notebook,profile,cache,seconds,cpu,cores,speed,build,cache_gb,measured
first,default,cold,100.0,AMD EPYC (AVX512-BF16),2,200.0,2026-12-05 aaaaaa,4.2,2026-12-05
second,default,cold,500.0,AMD EPYC (AVX512-BF16),2,200.0,2026-12-05 aaaaaa,4.2,2026-12-05
first,default,cold,300.0,AMD EPYC (AVX2),2,60.0,2026-12-06 bbbbbb,4.2,2026-12-06
second,default,cold,1800.0,AMD EPYC (AVX2),2,60.0,2026-12-06 bbbbbb,4.2,2026-12-06
first,default,warm,30.0,AMD EPYC (AVX2),2,60.0,2026-12-06 bbbbbb,4.2,2026-12-06
"""


def test_a_first_build_expects_its_own_kinds_times_else_the_nearest_speeds_scaled(
        tmp_path, monkeypatch):
    """Before a build with no earlier build in its folder, each notebook's expected time
    is its cold time on this kind of CPU (scaled where this machine's speed differs), else
    on the recorded CPU nearest in speed, scaled by the ratio of the speeds; the build's
    first line says how long that comes to and where it comes from."""
    path = tmp_path / "run_times.csv"
    path.write_text(RECORDED)
    read = times.read
    monkeypatch.setattr(times, "read", lambda: read(path))
    none = builder.last_profile(tmp_path)
    avx2, slow_avx2 = (times.Machine("AMD EPYC (AVX2)", 2, s) for s in (60.0, 30.0))
    arm = times.Machine("Ampere Altra", 2, 100.0)
    assert builder.expected_seconds(none, "default", avx2) == {"first": 300, "second": 1800}
    assert builder.expected_seconds(none, "default", slow_avx2) == {"first": 600,
                                                                    "second": 3600}
    # another CPU: the AVX2 record (60 GFLOP/s) is nearer in speed than the other (200)
    assert builder.expected_seconds(none, "default", arm) == pytest.approx(
        {"first": 180, "second": 1080})
    # this folder's last build comes first
    before = pd.DataFrame({"notebook": ["first"], "kind": ["notebook"], "wall_s": [10.0]})
    assert builder.expected_seconds(before, "default", avx2) == {"first": 10,
                                                                 "second": 1800}
    said = builder.first_build_estimate("default", avx2)
    assert said == ("expected here (AMD EPYC (AVX2), 2 cores, 60 GFLOP/s): about 35 min of "
                    "notebooks on an empty cache, from the cold build on AMD EPYC (AVX2), "
                    "2 cores, 60 GFLOP/s, 2026-12-06")
    said = builder.first_build_estimate("default", arm)
    assert "about 21 min of notebooks" in said and \
        "which computes 0.60 times as fast as this machine" in said
    # this kind of CPU at another speed reading: from the recorded time to the scaled one,
    # since one machine's reading moves that much where its host shares cores
    said = builder.first_build_estimate("default", slow_avx2)
    assert said.startswith("expected here (AMD EPYC (AVX2), 2 cores, 30 GFLOP/s): 35 min to "
                           "1 h 10 min of notebooks on an empty cache, from the cold build "
                           "on AMD EPYC (AVX2), 2 cores, 60 GFLOP/s, 2026-12-06 (the same "
                           "kind of CPU, 35 min there, at a speed reading 2.00 times")
    fast_avx2 = times.Machine("AMD EPYC (AVX2)", 2, 120.0)
    assert "17 min 30 s to 35 min of notebooks" in builder.first_build_estimate(
        "default", fast_avx2)
    # within SAME_SPEED of the reading: one figure
    near = times.Machine("AMD EPYC (AVX2)", 2, 60.0 * (times.SAME_SPEED - 0.01))
    assert "): about 28 min" in builder.first_build_estimate("default", near)
    assert builder.first_build_estimate("larger", avx2) == ""
    # a machine whose speed is unknown: the recorded times as measured, and it says so
    unknown = times.Machine("AMD EPYC (AVX2)", 2)
    assert builder.expected_seconds(none, "default", unknown) == {"first": 300,
                                                                  "second": 1800}
    assert "about 35 min" in builder.first_build_estimate("default", unknown) and \
        "speed against this machine's is not known" in builder.first_build_estimate(
            "default", unknown)
    assert builder.expected_seconds(none, "larger", avx2) == {}


def test_a_cold_build_is_ordered_by_the_book_s_recorded_cold_times(tmp_path):
    """With the book's own records, a first build expects each page's time of one recorded
    build, scaled to this machine."""
    here = times.Machine.here()
    seconds = builder.expected_seconds(builder.last_profile(tmp_path), "default", here)
    found = [b for b in times.builds(times.read()) if b.profile == "default" and b.cold]
    build, _ = times.nearest(found, here)
    scale = times.ratio(build.machine, here)
    assert set(seconds) == set(build.cold) and seconds
    assert seconds["finetuning"] == pytest.approx(build.cold["finetuning"] * scale)


def test_the_longest_chain_of_notebooks_starts_first():
    needs = {"c": ("a",), "d": ("a", "b"), "e": ()}
    paths = builder.critical_paths(["a", "b", "c", "d", "e"], needs,
                                   {"a": 10, "b": 50, "c": 30, "d": 5, "e": 20})
    assert paths == {"a": 40, "b": 55, "c": 30, "d": 5, "e": 20}
    # unknown times count one second; a circle is named
    assert builder.critical_paths(["a", "b"], {"b": ("a",)}, {}) == {"a": 2.0, "b": 1.0}
    with pytest.raises(builder.BuildError, match="circle: a -> b -> a"):
        builder.critical_paths(["a", "b"], {"a": ("b",), "b": ("a",)}, {})


def test_kernels_side_by_side_share_the_cores_and_sleep_while_they_wait(monkeypatch):
    from analysis_lib.runtime import threads

    monkeypatch.setattr(threads, "usable_cores", lambda: 8)
    assert builder.kernel_threads(1) == {}  # one at a time: the kernel's own defaults
    env = builder.kernel_threads(2)
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] \
        == "4"
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    assert builder.kernel_threads(3)["OMP_NUM_THREADS"] == "1"  # never none


def _fake_notebook(folder, name, after=()):
    import nbformat

    nb = nbformat.v4.new_notebook()
    if after:
        nb.metadata["analysis_lib"] = {"after": list(after)}
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    return path


def _record_run(log, path):
    """A stand-in for running a notebook: notes when it started and ended (a module-level
    function, so that worker processes can run it)."""
    start = time.time()
    time.sleep(0.5 if path.stem == "slow" else 0.05)
    with open(log, "a") as out:
        out.write(f"{path.stem} {start} {time.time()}\n")
    if path.stem == "broken":
        raise RuntimeError("the broken notebook failed")
    return builder.Executed(path.stem, path, time.time() - start, False)


@pytest.mark.parametrize("jobs", [1, 2])
def test_notebooks_run_after_those_they_read_and_side_by_side(tmp_path, jobs):
    import functools

    books = [_fake_notebook(tmp_path, "slow"), _fake_notebook(tmp_path, "quick"),
             _fake_notebook(tmp_path, "reader", ["slow", "not-in-this-build"])]
    log = tmp_path / "log.txt"
    said = []
    runs = builder.run_notebooks(books, functools.partial(_record_run, log), jobs=jobs,
                                 seconds={"slow": 100}, echo=said.append)
    assert [r.name for r in runs] == ["slow", "quick", "reader"]  # in the book's order
    spans = {name: (float(a), float(b)) for name, a, b in
             (line.split() for line in log.read_text().splitlines())}
    assert spans["reader"][0] >= spans["slow"][1]  # it reads the slow one's results
    if jobs == 2:  # the quick one ran while the slow one did
        assert spans["quick"][0] < spans["slow"][1]
    assert said[0].startswith("[1/3] slow")  # the book's order, and the longest chain
    if jobs == 1:  # one at a time: the book's order, even where another chain is longer
        order = builder.run_notebooks(books[::-1], functools.partial(_record_run, log),
                                      jobs=1, seconds={"slow": 100}, echo=said.append)
        assert [r.name for r in order] == ["reader", "quick", "slow"]
        assert said[-6].startswith("[1/3] quick")


def test_a_failing_notebook_stops_the_build_after_the_running_ones_finish(tmp_path):
    import functools

    books = [_fake_notebook(tmp_path, "broken"), _fake_notebook(tmp_path, "slow"),
             _fake_notebook(tmp_path, "after-broken", ["broken"])]
    log = tmp_path / "log.txt"
    with pytest.raises(RuntimeError, match="the broken notebook failed"):
        builder.run_notebooks(books, functools.partial(_record_run, log), jobs=2,
                              seconds={}, echo=lambda line: None)
    ran = {line.split()[0] for line in log.read_text().splitlines()}
    assert ran == {"broken", "slow"}  # the running one finished; the dependent never ran


def test_the_book_says_which_chapters_read_which():
    notebooks = {p.stem: p for p in builder.toc_notebooks()}
    needs = {name: builder.after(p) for name, p in notebooks.items()}
    for name, names in needs.items():
        assert set(names) <= set(notebooks), f"{name} waits for a notebook not in the book"
    builder.critical_paths(list(notebooks), needs, {})  # no circle
    # the chapters that read the fine-tuning grid run after the page that trains it, and
    # the seeds page after the page that pretrains the zoo
    for reader in ("truncation", "domains", "seeds"):
        assert "finetuning" in needs[reader]
    assert "representation" in needs["seeds"]


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
