"""The run times pages state: measured by a build, kept with the machine they ran on."""

from __future__ import annotations

import datetime

import pandas as pd
import pytest

from analysis_lib import __main__ as cli
from analysis_lib.book import times, toc_notebooks

DAY = datetime.date(2026, 11, 28)


def _build(folder, rows):
    """A build's profile.csv: (notebook, wall seconds, reused) per notebook, and a step."""
    folder.mkdir(parents=True, exist_ok=True)
    table = [{"notebook": n, "kind": "notebook", "name": n, "depth": 0, "wall_s": s,
              "reused": r} for n, s, r in rows]
    table.append({"notebook": rows[0][0], "kind": "extract", "name": "x", "depth": 1,
                  "wall_s": 1.0, "reused": False})
    pd.DataFrame(table).to_csv(folder / "profile.csv", index=False)
    return folder


def test_machine_names_a_cpu_and_counts_cores():
    cpu, cores = times.machine()
    assert cpu and cpu == cpu.strip() and "  " not in cpu
    assert isinstance(cores, int) and cores >= 1


@pytest.mark.parametrize("flags, kind", [
    ({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}, "Xeon 9 (AMX)"),
    ({"avx2", "avx512f", "avx512_bf16"}, "Xeon 9 (AVX512-BF16)"),
    ({"avx2", "avx512f"}, "Xeon 9 (AVX-512)"), ({"sse4_2", "avx2", "fma"}, "Xeon 9 (AVX2)"),
    ({"sse4_2"}, "Xeon 9"), (set(), "Xeon 9")])
def test_a_cpu_kind_is_its_model_name_and_its_widest_vector_arithmetic(flags, kind,
                                                                        monkeypatch):
    """One model name covers machines that train in other precisions and at other speeds
    (a virtual machine's "AMD EPYC" with AVX2 only or with AVX512-BF16): the kind tells
    them apart by the strongest of the flags that decide it, and is the name alone where
    none is found."""
    from analysis_lib.runtime import machine

    monkeypatch.setattr(machine, "cpu_name", lambda: "Xeon 9")
    monkeypatch.setattr(machine, "cpu_flags", lambda: frozenset(flags))
    machine.cpu_kind.cache_clear()
    try:
        assert machine.cpu_kind() == kind
        assert times.Machine.here().cpu == kind and times.machine()[0] == kind
    finally:
        machine.cpu_kind.cache_clear()


def test_two_kinds_of_one_model_name_keep_their_own_times(tmp_path):
    """A cold build on the AVX2 kind of a model name replaces its own kind's times only,
    and a page on either kind states its own."""
    path = tmp_path / "run_times.csv"
    for kind, seconds in (("AMD EPYC (AVX512-BF16)", 200.0), ("AMD EPYC (AVX2)", 300.0)):
        times.record("default", "cold", _machine_build(
            tmp_path / kind, [("seeds", seconds, False)], kind, 100.0), path, today=DAY)
    table = times.read(path)
    assert sorted(zip(table.cpu, table.seconds)) == [("AMD EPYC (AVX2)", 300.0),
                                                     ("AMD EPYC (AVX512-BF16)", 200.0)]
    for kind, said in (("AMD EPYC (AVX2)", "5 min cold"),
                       ("AMD EPYC (AVX512-BF16)", "3 min 20 s cold")):
        assert f"{said} (on this kind of CPU: {kind}, 2 cores" in times.sentence(
            "seeds", path, here=times.Machine(kind, 2, 100.0))


@pytest.mark.parametrize("seconds, shown", [(0.4, "0 s"), (48.6, "49 s"), (60, "1 min"),
                                            (250, "4 min 10 s"), (3600, "1 h"),
                                            (4330, "1 h 12 min")])
def test_duration_reads_as_a_reader_reads_it(seconds, shown):
    assert times.duration(seconds) == shown


def test_a_build_is_kept_as_cold_or_warm_and_a_new_record_replaces_its_own_rows(tmp_path):
    path = tmp_path / "run_times.csv"
    cold = _build(tmp_path / "a", [("primer", 12.34, False), ("seeds", 300.0, False)])
    kept = times.record("default", "cold", cold, path, today=DAY)
    assert list(kept.notebook) == ["primer", "seeds"] and list(kept.seconds) == [12.3, 300.0]
    warm = _build(tmp_path / "b", [("primer", 5.0, False), ("seeds", 1.0, True)])
    times.record("default", "warm", warm, path, today=DAY)
    table = times.read(path)
    assert len(table) == 3  # the reused notebook was not run, so it has no warm time
    assert set(table[table.cache == "warm"].notebook) == {"primer"}
    again = _build(tmp_path / "c", [("primer", 20.0, False)])
    times.record("default", "cold", again, path, today=DAY)
    table = times.read(path)
    assert len(table) == 2  # the new cold build of the primer drops the old build's warm time
    cold_primer = table[(table.notebook == "primer") & (table.cache == "cold")]
    assert list(cold_primer.seconds) == [20.0]
    assert table.cpu.eq(times.machine()[0]).all() and set(table.measured) == {"2026-11-28"}


def test_record_refuses_what_it_cannot_keep(tmp_path):
    path = tmp_path / "run_times.csv"
    with pytest.raises(ValueError, match="cold"):
        times.record("default", "lukewarm", tmp_path, path)
    with pytest.raises(FileNotFoundError, match="analysis_lib book --profile default"):
        times.record("default", "cold", tmp_path / "none", path)
    reused = _build(tmp_path / "r", [("primer", 3.0, True)])
    with pytest.raises(ValueError, match="--force"):
        times.record("default", "warm", reused, path)
    assert not path.exists()
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="record the times again"):
        times.read(path)


def _machine_build(folder, rows, cpu, speed, cores=2):
    """A build's profile.csv that names the machine it ran on."""
    _build(folder, rows)
    table = pd.read_csv(folder / "profile.csv")
    table["cpu"], table["cores"], table["speed"] = cpu, cores, speed
    table.to_csv(folder / "profile.csv", index=False)
    return folder


EPYC = times.Machine("AMD EPYC", 2, 100.0)
XEON = times.Machine("Intel Xeon Platinum", 2, 50.0)


def test_a_page_states_its_own_times_with_the_machine(tmp_path, monkeypatch):
    monkeypatch.delenv(times.PROFILE_ENV, raising=False)
    path = tmp_path / "run_times.csv"
    times.record("smoke", "cold", _machine_build(tmp_path / "s", [("primer", 9.0, False)],
                                                 "AMD EPYC", 100.0), path, today=DAY)
    times.record("default", "cold", _machine_build(
        tmp_path / "d", [("primer", 250.0, False), ("seeds", 70.0, False)], "AMD EPYC",
        100.0), path, today=DAY)
    times.record("default", "warm", _machine_build(tmp_path / "w", [("primer", 48.0, False)],
                                                   "AMD EPYC", 100.0), path, today=DAY)
    said = times.sentence("primer", path, here=EPYC)
    assert "`default` 4 min 10 s cold, 48 s warm" in said and "`smoke` 9 s cold" in said
    assert "on this kind of CPU: AMD EPYC, 2 cores, 100 GFLOP/s, 2026-11-28" in said
    assert "seeds" not in said and "not measured" in times.sentence("other", path, here=EPYC)
    own = times.sentence("primer", path, profile="smoke", here=EPYC)
    assert own.index("`smoke`") < own.index("`default`") and "not measured" not in own
    other = times.sentence("primer", path, profile="paper", here=EPYC)
    assert "`paper`, is not measured yet" in other and "--profile paper" in other
    monkeypatch.setenv(times.PROFILE_ENV, "paper")
    assert times.sentence("primer", path, here=EPYC) == other
    shown = times.table(path)
    assert "| `primer` |" in shown and "| `seeds` |" in shown and "`default` warm" in shown
    assert "**AMD EPYC**, 2 cores" in shown and "| all pages | 5 min 20 s | 48 s |" in shown


def test_a_page_states_the_times_of_its_own_cpu_else_the_nearest_with_the_ratio(tmp_path):
    """Two machines recorded: a page run on either states that machine's times; a page run
    on an unrecorded CPU states the recorded one nearest in speed, named, with the ratio and
    the times projected by it."""
    path = tmp_path / "run_times.csv"
    for machine, cold, warm in ((EPYC, 200.0, 20.0), (XEON, 500.0, 45.0)):
        times.record("default", "cold", _machine_build(
            tmp_path / f"{machine.cpu}c", [("seeds", cold, False)], machine.cpu,
            machine.speed), path, today=DAY)
        times.record("default", "warm", _machine_build(
            tmp_path / f"{machine.cpu}w", [("seeds", warm, False)], machine.cpu,
            machine.speed), path, today=DAY)
    assert "3 min 20 s cold, 20 s warm (on this kind of CPU: AMD EPYC" in \
        times.sentence("seeds", path, here=EPYC)
    assert "8 min 20 s cold, 45 s warm (on this kind of CPU: Intel Xeon Platinum" in \
        times.sentence("seeds", path, here=XEON)
    # an unrecorded CPU at 80 GFLOP/s: the EPYC (ratio 1.25) is nearer than the Xeon (0.625)
    said = times.sentence("seeds", path, here=times.Machine("Ampere Altra", 2, 80.0))
    assert "about 4 min 10 s cold, 25 s warm here: 3 min 20 s cold, 20 s warm on the " \
        "recorded CPU nearest in speed to this one (Ampere Altra, 2 cores, 80 GFLOP/s)" in said
    assert "AMD EPYC, 2 cores, 100 GFLOP/s, 2026-11-28, which computes 1.25 times as " \
        "fast" in said
    assert "Xeon" not in said
    # the same model name at a very different speed: its times, projected by the ratio
    slow = times.sentence("seeds", path, here=times.Machine("AMD EPYC", 2, 40.0))
    assert "about 8 min 20 s cold, 50 s warm here" in slow and "another speed" in slow
    # within SAME_SPEED of the recorded speed, the measured times as they are
    assert "3 min 20 s cold, 20 s warm (on this kind" in times.sentence(
        "seeds", path, here=times.Machine("AMD EPYC", 2, 90.0))
    course = times.summary("default", path, here=times.Machine("Ampere Altra", 2, 80.0))
    assert "about 4 min 10 s cold, 25 s warm here" in course and "cache held" in course


def test_cold_and_warm_come_from_one_build_and_warm_is_never_stated_longer(tmp_path):
    path = tmp_path / "run_times.csv"
    with pytest.raises(ValueError, match="record the cold build first"):
        times.record("default", "warm", _machine_build(
            tmp_path / "w0", [("primer", 5.0, False)], "AMD EPYC", 100.0), path)
    times.record("default", "cold", _machine_build(
        tmp_path / "c", [("primer", 9.0, False), ("seeds", 300.0, False)], "AMD EPYC",
        100.0), path, today=DAY)
    times.record("default", "warm", _machine_build(
        tmp_path / "w", [("primer", 9.5, False), ("seeds", 40.0, False)], "AMD EPYC",
        100.0), path, today=DAY)
    table = times.read(path)
    assert table.build.nunique() == 1 and table.cache_gb.notna().all()
    said = times.sentence("primer", path, here=EPYC)
    assert "9 s cold, about as long warm" in said and "10 s warm" not in said
    # another machine's build does not pair with this one's
    times.record("default", "cold", _machine_build(
        tmp_path / "x", [("primer", 30.0, False)], "Intel Xeon Platinum", 50.0), path,
        today=DAY)
    assert "30 s cold (on this kind" in times.sentence("primer", path, here=XEON)
    # a new cold build of a machine drops its warm times of the old build
    times.record("default", "cold", _machine_build(
        tmp_path / "c2", [("primer", 8.0, False)], "AMD EPYC", 100.0), path, today=DAY)
    table = times.read(path)
    epyc = table[table.cpu == "AMD EPYC"]
    assert set(epyc[epyc.notebook == "primer"].cache) == {"cold"}
    assert len(table[table.cpu == "Intel Xeon Platinum"]) == 1
    for cpu in set(table.cpu):
        for build in times.builds(table[table.cpu == cpu]):
            assert set(build.warm) <= set(build.cold)


def test_records_kept_before_builds_named_their_speed_still_read(tmp_path):
    path = tmp_path / "run_times.csv"
    path.write_text("notebook,profile,cache,seconds,cpu,cores,measured\n"
                    "seeds,default,cold,96.1,AMD EPYC,2,2026-11-29\n"
                    "seeds,default,warm,176.3,AMD EPYC,2,2026-11-28\n")
    table = times.read(path)
    assert table.speed.isna().all() and table.build.nunique() == 2
    said = times.sentence("seeds", path, here=EPYC)
    assert "1 min 36 s cold (on this kind of CPU: AMD EPYC, 2 cores, 2026-11-29)" in said
    assert "2 min 56 s" not in said  # a warm time of another day is not this build's
    assert "has no record yet" in times.sentence("seeds", path, here=XEON)


def test_the_book_keeps_cold_and_warm_times_of_every_page_for_both_offline_profiles():
    table = times.read()
    pages = {p.stem for p in toc_notebooks()}
    for profile in ("smoke", "default"):
        for cache in times.CACHE_STATES:
            mine = table[(table.profile == profile) & (table.cache == cache)]
            assert set(mine.notebook) == pages, (profile, cache)
            assert (mine.seconds > 0).all() and (mine.cpu != "").all()
    for page in pages:
        assert "not measured" not in times.sentence(page)


def test_the_times_command_prints_the_table_and_names_a_missing_build(tmp_path, capsys):
    assert cli.main(["times"]) == 0
    assert "| page |" in capsys.readouterr().out
    assert cli.main(["times", "--record", "cold", "--profile", "nothing",
                     "--executed", str(tmp_path)]) == 1
    assert "analysis_lib book --profile nothing" in capsys.readouterr().err


def test_a_new_record_of_times_reruns_the_pages_that_state_them(tmp_path, monkeypatch):
    import nbformat

    from analysis_lib.book import builder

    path = tmp_path / "page.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, str(path))
    monkeypatch.setattr(times, "TIMES", tmp_path / "run_times.csv")
    out = tmp_path / "out"
    assert not builder.execute(path, {}, out).reused
    assert builder.execute(path, {}, out).reused
    times.record("default", "cold", _build(tmp_path / "b", [("page", 2.0, False)]),
                 times.TIMES, today=DAY)
    assert not builder.execute(path, {}, out).reused
