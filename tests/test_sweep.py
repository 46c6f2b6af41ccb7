"""Sweeps: the declared grid, its units, and the same table in-process and on Dask."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis_lib import sweep
from analysis_lib.__main__ import main
from analysis_lib.runtime.cache import ArrayCache
from analysis_lib.sweep import run as sweep_run

GRID = {
    "name": "tiny",
    "corpus": "tweets",
    "n_sentences": 24,
    "models": ["random:bert", "random:gpt2"],
    "model_options": {"layers": 2, "hidden": 32, "heads": 2, "vocab_size": 500},
    "seeds": [0, 1],
    "measures": ["linear_cka", "neuronsim"],
    "max_words": 150,
}
ORDER = ["model_a", "seed_a", "model_b", "seed_b", "measure", "layer_a", "layer_b"]


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    return table.sort_values(ORDER).reset_index(drop=True)


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as local:
        with distributed.Client(local) as client:
            yield client


# ----------------------------------------------------------------------------- the spec


def test_spec_reads_yaml_and_refuses_tags_and_unknown_settings(tmp_path):
    path = tmp_path / "grid.yml"
    path.write_text("name: g\nmodels: [random:bert, random:gpt2]\nmeasures: [linear_cka]\n")
    spec = sweep.load_spec(path)
    assert spec.models == ["random:bert", "random:gpt2"] and spec.seeds == [0]
    path.write_text("name: g\nmodels: !!python/tuple [a, b]\nmeasures: [linear_cka]\n")
    with pytest.raises(ValueError, match="tag"):
        sweep.load_spec(path)
    with pytest.raises(ValueError, match="unknown settings.*'modles'"):
        sweep.load_spec({**GRID, "modles": []})
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sweep.load_spec(tmp_path / "missing.yml")


@pytest.mark.parametrize("change, message", [
    ({"models": []}, "models is empty"),
    ({"models": ["random:bert", "random:bert"]}, "twice"),
    ({"measures": ["cka_of_doom"]}, "cka_of_doom"),
    ({"seeds": [0, -1]}, "seeds"),
    ({"kind": "tokens"}, "kind"),
    ({"pairs": "some"}, "pairs"),
    ({"layers": [0, "top"]}, "layers"),
    ({"max_words": 1}, "max_words"),
    ({"retries": -1}, "retries"),
    ({"measure_options": {"svcca": {}}}, "not in measures"),
    ({"finetune": {"epochs": 1}}, "tasks is empty"),
    ({"tasks": ["tweets-sentiment"], "finetune": {"epochs": -1}}, "epochs"),
    ({"tasks": ["tweets-sentiment"], "finetune": {"lr": 1}}, "unknown settings"),
    ({"tasks": ["tweets-sentiment"], "finetune": {"seeds": [0, 1]}}, "top of the spec"),
    ({"task_options": {"n_train": 600}}, "finetune: {n_train: 600"),
    ({"models": ["minilm"], "seeds": [0, 1]}, "one model variant"),
    ({"pairs": "within", "seeds": [0]}, "no pair"),
])
def test_spec_errors_name_the_setting(change, message):
    with pytest.raises((ValueError, KeyError), match=message):
        sweep.plan(sweep.load_spec({**GRID, **change}))


def test_plan_units_and_dependencies():
    spec = sweep.load_spec({**GRID, "models": ["random:bert", "random:gpt2", "minilm"]})
    units = sweep.plan(spec)
    stages = [u.stage for u in units]
    # 2 seeds x 2 random models + minilm once (a pretrained model has no seed to vary)
    assert stages.count("extract") == 5
    assert stages.count("measure") == 2 * (5 * 4 // 2)
    keys = [u.key for u in units]
    assert len(set(keys)) == len(keys)
    seen = set()
    for unit in units:  # every unit comes after the units it needs
        assert set(unit.deps) <= seen
        seen.add(unit.key)
    within = sweep.plan(sweep.load_spec({**GRID, "pairs": "within"}))
    assert all(u.axes["model_a"] == u.axes["model_b"] for u in within if u.stage == "measure")
    tasks = sweep.plan(sweep.load_spec({**GRID, "models": ["random:bert"],
                                        "tasks": ["tweets-sentiment"],
                                        "finetune": {"epochs": 1}}))
    finetunes = [u for u in tasks if u.stage == "finetune"]
    assert len(finetunes) == 2
    extracts = [u for u in tasks if u.stage == "extract"]
    assert {u.deps[0] for u in extracts} == {u.key for u in finetunes}


def test_a_sweeps_fine_tuning_runs_are_the_chapters_runs(monkeypatch, tmp_path):
    """A sweep with tasks fine-tunes the book's grid: its runs, in the grid's order, each
    trained as a chapter's :func:`run_grid` trains it (the same split, settings and model),
    so the chapters find them in the cache."""
    from analysis_lib.training import zoo as zoo_training
    from analysis_lib.training.grid import FinetuneGrid, run_grid

    values = {"n_train": 40, "n_heldout": 20, "epochs": 3.0}
    spec = sweep.load_spec({**GRID, "models": ["minilm", "random:bert"],
                            "tasks": ["tweets-sentiment", "bbc-topic"], "finetune": values})
    grid = FinetuneGrid.of(values).only(models=("minilm", "random:bert"),
                                               tasks=("tweets-sentiment", "bbc-topic"),
                                               seeds=(0, 1))
    units = [u for u in sweep.plan(spec) if u.stage == "finetune"]
    assert [(u.axes["model"], u.axes["task"], u.axes["seed"]) for u in units] == grid.runs()
    calls = []
    monkeypatch.setattr("analysis_lib.training.grid.finetune",
                        lambda model, task, config, **kw: calls.append(
                            (model, task.fingerprint(), config, kw.get("cache_dir")))
                        or FakeRun())
    monkeypatch.setattr("analysis_lib.training.zoo.ensure", lambda *a, **k: None)
    minilm = [u for u in units if u.axes["model"] == "minilm"]
    for unit in minilm:
        sweep_run._finetune(unit.params, [], str(tmp_path))
    monkeypatch.setattr(zoo_training, "ensure", lambda *a, **k: None)
    run_grid(grid.only(models=("minilm",)), progress=False)
    n = len(minilm)
    assert n == 4 and len(calls) == 2 * n
    assert [call[:3] for call in calls[:n]] == [call[:3] for call in calls[n:]]
    assert {call[3] for call in calls[:n]} == {str(tmp_path)}  # the sweep's cache folder
    # a random: model's sweep seed also seeds its initialisation
    bert = next(u for u in units if u.axes["model"] == "random:bert" and u.axes["seed"] == 1)
    assert bert.params["load_options"]["seed"] == 1


class FakeRun:
    path, from_cache = "run", True
    metrics = {"test": {"accuracy": 1.0, "macro_f1": 1.0, "majority_baseline": 0.5}}
    record = {"train_seconds": 0.0, "config": {"precision": "float32"}}


def test_same_grid_same_keys_and_a_changed_setting_changes_them():
    a = [u.key for u in sweep.plan(sweep.load_spec(GRID))]
    assert a == [u.key for u in sweep.plan(sweep.load_spec(dict(GRID)))]
    b = [u.key for u in sweep.plan(sweep.load_spec({**GRID, "max_words": 100}))]
    assert [k for k in a if k.startswith("extract")] == [k for k in b if k.startswith("extract")]
    assert not set(k for k in a if k.startswith("measure")) & set(b)


# ----------------------------------------------------------------------------- running


def test_grid_in_process_equals_grid_on_two_workers_and_reruns_nothing(tmp_path, cluster):
    here = sweep.run_sweep(GRID, cache_dir=tmp_path / "here", progress=False)
    assert here.failures.empty
    assert here.n_computed == len(here.units) == 4 + 2 * 6
    table = here.table
    # 6 pairs x 3 x 3 layer pairs; the asymmetric neuronsim in both directions
    assert (table.measure == "linear_cka").sum() == 6 * 3 * 3
    assert (table.measure == "neuronsim").sum() == 2 * 6 * 3 * 3
    assert table["value"].notna().all()
    assert {"library_version", "torch_version", "spec_digest", "corpus"} <= set(table.columns)
    # same model, same seed would be 1: different seeds of one family are below 1
    same_family = table[(table.model_a == table.model_b) & (table.measure == "linear_cka")]
    assert (same_family["value"] < 0.999).all()

    dask = sweep.run_sweep(GRID, client=cluster, cache_dir=tmp_path / "dask", progress=False)
    assert dask.failures.empty and dask.n_computed == len(dask.units)
    assert len({h for h in dask.units["host"]}) >= 1
    left, right = _sorted(here.table), _sorted(dask.table)
    assert left[ORDER].equals(right[ORDER])
    np.testing.assert_array_equal(left["value"].to_numpy(), right["value"].to_numpy())

    again = sweep.run_sweep(GRID, client=cluster, cache_dir=tmp_path / "dask", progress=False)
    assert again.n_computed == 0 and again.failures.empty
    np.testing.assert_array_equal(_sorted(again.table)["value"].to_numpy(),
                                  right["value"].to_numpy())


def test_a_failing_unit_is_reported_and_the_rest_finishes(tmp_path, cluster):
    # a folder is resolved where the units run, so a missing one fails as a unit
    grid = {**GRID, "models": ["random:bert", "random:gpt2", str(tmp_path / "nosuch-model")],
            "seeds": [0], "measures": ["linear_cka"]}
    for where in ({}, {"client": cluster}):
        result = sweep.run_sweep(grid, cache_dir=tmp_path, progress=False, **where)
        failures = result.failures
        broken = failures[failures.stage == "extract"]
        assert len(broken) == 1 and "nosuch" in broken.iloc[0]["error"]
        assert broken.iloc[0]["attempts"] == 1  # bad input is not retried
        skipped = failures[failures.stage == "measure"]
        assert len(skipped) == 2 and skipped["error"].str.startswith("skipped").all()
        assert set(zip(result.table.model_a, result.table.model_b)) == {
            ("random:bert", "random:gpt2")}


def test_a_transient_failure_is_retried(tmp_path, monkeypatch):
    calls = []
    real = sweep_run.STAGES["extract"]

    def flaky(params, deps, cache_dir):
        calls.append(params["model"])
        if len(calls) == 1:
            raise OSError("the shared disk went away for a moment")
        return real(params, deps, cache_dir)

    monkeypatch.setitem(sweep_run.STAGES, "extract", flaky)
    result = sweep.run_sweep({**GRID, "seeds": [0], "measures": ["linear_cka"]},
                             cache_dir=tmp_path, progress=False)
    assert result.failures.empty
    assert result.units.loc[0, "attempts"] == 2
    flaky_once = sweep.run_sweep({**GRID, "seeds": [0], "measures": ["linear_cka"],
                                  "retries": 0, "name": "other"},
                                 cache_dir=tmp_path / "b", progress=False)
    assert flaky_once.failures.empty  # only the very first call failed


def test_workers_racing_on_one_key_leave_one_whole_entry(tmp_path, cluster):
    spec = sweep.load_spec({**GRID, "seeds": [3]})
    unit = next(u for u in sweep.plan(spec) if u.stage == "extract")
    cache = str(tmp_path)
    futures = [cluster.submit(sweep.run_unit, unit, cache, key=f"race-{i}", pure=False)
               for i in range(4)]
    outcomes = cluster.gather(futures)
    assert all(o["ok"] for o in outcomes), [o["error"] for o in outcomes]
    assert len({o["value"]["key"] for o in outcomes}) == 1
    store = ArrayCache("extract", tmp_path)
    entries = [p for p in store.folder.iterdir()]
    assert [p.name for p in entries] == [outcomes[0]["value"]["key"]]
    assert store.load(outcomes[0]["value"]["key"]) is not None


def test_tables_written_and_read_back(tmp_path):
    result = sweep.run_sweep({**GRID, "seeds": [0], "measures": ["linear_cka"]},
                             cache_dir=tmp_path / "c", out=tmp_path / "out", progress=False)
    back = sweep.read_table(tmp_path / "out")
    pd.testing.assert_frame_equal(back, result.table)
    csv = sweep.read_table(tmp_path / "out" / "results.csv")
    np.testing.assert_allclose(csv["value"], result.table["value"])
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a sweep table"):
        sweep.read_table(tmp_path / "bad.csv")
    with pytest.raises(FileNotFoundError, match="sweep"):
        sweep.read_table(tmp_path / "nothing")


def test_run_sweep_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="workers"):
        sweep.run_sweep(GRID, workers=0, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="at most one"):
        sweep.run_sweep(GRID, workers=2, scheduler="tcp://localhost:1", cache_dir=tmp_path)


def test_cli_runs_a_spec_and_reports_failures(tmp_path, capsys):
    spec = tmp_path / "grid.yml"
    spec.write_text("name: cli\ncorpus: tweets\nn_sentences: 20\nseeds: [0]\n"
                    "models: [random:bert, random:gpt2]\nmeasures: [linear_cka]\n"
                    "model_options: {layers: 1, hidden: 32, heads: 2, vocab_size: 500}\n")
    out = tmp_path / "out"
    args = ["sweep", str(spec), "--here", "--out", str(out), "--cache-dir", str(tmp_path)]
    assert main(args) == 0
    assert (out / "results.parquet").is_file() and (out / "results.csv").is_file()
    assert "0 failed" in capsys.readouterr().out
    good = spec.read_text()
    spec.write_text(good.replace("random:gpt2", str(tmp_path / "nosuch-model")))
    assert main(args) == 1  # a unit failed where it ran
    assert "nosuch" in capsys.readouterr().err
    spec.write_text(good.replace("random:gpt2", "random:nosuch"))
    assert main(args) == 2  # refused before any unit
    assert "nosuch" in capsys.readouterr().err
    spec.write_text("name: cli\nmodels: [minilm]\nmeasures: [linear_cka]\n")
    assert main(args) == 2
    assert "one model variant" in capsys.readouterr().err


def test_representation_page_reads_a_sweep_table_as_its_own_matrices(tmp_path):
    from analysis_lib import collect
    from analysis_lib import collection as study
    from analysis_lib.data import corpora

    grid = {**GRID, "seeds": [0], "self_pairs": True,
            "measures": ["linear_cka", "neuronsim", "svcca"]}
    result = sweep.run_sweep(grid, cache_dir=tmp_path, progress=False)
    mats, collection = study.from_sweep(result.table, grid["measures"])
    text = corpora.load_corpus("tweets", n=24, seed=0)
    here = collect.word_collection(grid["models"], text,
                                   model_options=GRID["model_options"], max_words=150,
                                   seed=0, progress=False)
    expected = study.matrices(here, grid["measures"], progress=False)
    assert collection.table.frame["layer"].tolist() == here.table.frame["layer"].tolist()
    assert collection.table.frame["family"].tolist() == here.table.frame["family"].tolist()
    for measure in grid["measures"]:  # neuronsim is asymmetric: both directions present
        np.testing.assert_allclose(mats[measure], expected[measure], atol=1e-6)
    # the same numbers; the per-pair keys name the sweep's variants ("random:bert / seed 0")
    swept = list(study.summary(mats["linear_cka"], collection).items())
    local = list(study.summary(expected["linear_cka"], here).items())
    assert [k for k, _ in swept if isinstance(k, str)] == [
        k for k, _ in local if isinstance(k, str)]
    pair_keys = [k for k, _ in swept if not isinstance(k, str)]
    assert {(k.kind, k.a, k.b) for k in pair_keys} == {
        (kind, "random:bert / seed 0", "random:gpt2 / seed 0") for kind in ("pair", "matched")}
    assert [v for _, v in swept] == pytest.approx([v for _, v in local], abs=1e-6,
                                                  nan_ok=True)
    no_self = sweep.run_sweep({**grid, "self_pairs": False}, cache_dir=tmp_path,
                              progress=False)
    with pytest.raises(ValueError, match="self_pairs"):
        study.from_sweep(no_self.table, ["linear_cka"])
    with pytest.raises(ValueError, match="no 'pwcca' rows"):
        study.from_sweep(result.table, ["pwcca"])


def test_representation_notebook_renders_a_sweep_table(tmp_path):
    import nbformat

    from analysis_lib.book.builder import ROOT, execute, load_profile, notebook_parameters

    grid = {**GRID, "self_pairs": True, "measures": ["neuronsim", "svcca", "linear_cka"]}
    sweep.run_sweep(grid, cache_dir=tmp_path / "cache", out=tmp_path / "grid", progress=False)
    path = ROOT / "notebooks" / "representation.ipynb"
    values = notebook_parameters(path, load_profile("smoke"))
    values.update(sweep_table=str(tmp_path / "grid"), measures=grid["measures"])
    done = execute(path, values, tmp_path / "executed", force=True)
    nb = nbformat.read(str(done.path), as_version=4)
    text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                   for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "random:gpt2 / seed 1" in text  # the sweep's variants are the page's models
    assert "within_model" in text


def test_cached_results_follow_the_code_that_computed_them(tmp_path, monkeypatch):
    """Each cached step's key holds a digest of its code: after an edit to a measure's code
    (here: a comment appended to the similarity modules' source, as read by the digest) a
    rerun recomputes every measure unit and no extraction; after an edit to extraction's
    code, the extractions."""
    from analysis_lib.runtime import cache

    grid = {**GRID, "models": ["random:bert"], "seeds": [0, 1], "measures": ["linear_cka"]}
    first = sweep.run_sweep(grid, cache_dir=tmp_path, progress=False)
    assert first.failures.empty and first.n_computed == len(first.units)
    assert sweep.run_sweep(grid, cache_dir=tmp_path, progress=False).n_computed == 0

    read = cache._read_source

    def edited(part):
        return lambda file: read(file) + (b"\n# edited\n" if part in file.parts else b"")

    monkeypatch.setattr(cache, "_read_source", edited("similarity"))
    after_measure = sweep.run_sweep(grid, cache_dir=tmp_path, progress=False).units
    by_stage = after_measure.groupby("stage").computed.agg(["sum", "size"])
    assert by_stage.loc["measure", "sum"] == by_stage.loc["measure", "size"] > 0
    assert by_stage.loc["extract", "sum"] == 0

    monkeypatch.setattr(cache, "_read_source",
                        lambda file: read(file) + (b"\n# edited\n" if file.name == "extract.py"
                                                   else b""))
    after_extract = sweep.run_sweep(grid, cache_dir=tmp_path, progress=False).units
    by_stage = after_extract.groupby("stage").computed.agg(["sum", "size"])
    assert by_stage.loc["extract", "sum"] == by_stage.loc["extract", "size"] > 0


def test_code_digest_reads_the_import_closure():
    from analysis_lib.runtime.cache import PACKAGE, _closure

    extract = {str(f.relative_to(PACKAGE)) for f in _closure("analysis_lib.extract")}
    measures = {str(f.relative_to(PACKAGE)) for f in _closure("analysis_lib.similarity.pairwise")}
    assert {"extract.py", "models/loading.py", "data/corpora.py"} <= extract
    assert not any(f.startswith("similarity/") for f in extract)
    assert {"similarity/measures.py", "similarity/core.py", "similarity/reference.py"} <= measures


def test_names_that_mean_the_same_everywhere_are_checked_before_any_unit():
    from analysis_lib.sweep import load_spec

    base = {"name": "x", "models": ["random:bert", "random:gpt2"], "measures": ["linear_cka"]}
    for change, message in (({"models": ["random:nosuch", "random:bert"]}, "nosuch"),
                            ({"models": ["zoo:nosuch", "random:bert"]}, "no zoo model"),
                            ({"corpus": "nosuch"}, "corpus must be one of"),
                            ({"tasks": ["nosuch-task"]}, "unknown tasks"),
                            ({"max_units": 0}, "max_units")):
        with pytest.raises(ValueError, match=message):
            load_spec({**base, **change})
    # a folder or hub id may exist only where the units run: not resolved here
    load_spec({**base, "models": ["./somewhere/on/the/cluster", "org/model"]})


def test_a_grid_larger_than_max_units_is_refused_before_it_runs(tmp_path):
    from analysis_lib.sweep import load_spec, plan, run_sweep

    spec = load_spec({"name": "big", "models": ["random:bert", "random:gpt2"],
                      "seeds": [0, 1, 2], "measures": ["linear_cka", "neuronsim"],
                      "max_units": 5})
    assert len(plan(spec)) > 5
    with pytest.raises(ValueError, match=r"units .*more than max_units = 5; nothing has run"):
        run_sweep(spec, cache_dir=tmp_path, progress=False)
    assert not any(tmp_path.rglob("*.npy"))
