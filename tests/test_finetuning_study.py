"""The fine-tuning study's bookkeeping: block and band fits on planted structure, undefined
layers, the four views, seed intervals, and the shared fine-tuning cache."""

from dataclasses import fields

import numpy as np
import pandas as pd
import pytest

from analysis_lib import claims, collect
from analysis_lib.book import prose
from analysis_lib.claims import tables, verdicts
from analysis_lib.claims.tables import seed_interval, summarize
from analysis_lib.claims.training_gate import training_problem, training_problems
from analysis_lib.collect import sentence_extraction
from analysis_lib.similarity import structure
from analysis_lib.similarity.core import constant_layer
from analysis_lib.training import freezing, loop
from analysis_lib.training import zoo as zoo_training
from analysis_lib.training.grid import (
    FinetuneGrid,
    Job,
    Runs,
    cached_grid,
    learning_curves,
    loss_curves,
    run_grid,
    train_side_by_side,
)
from tests.conftest import session_inputs


def _findings(change, views, frozen=None, *, untrained=None):
    """The fine-tuning chapter's findings: its claims judged on these results."""
    return verdicts.judge(claims.of_chapter("finetuning"), {
        "change": change, "views": views, "frozen": frozen, "untrained": untrained})


def planted_blocks(starts, n, inside=0.9, across=0.2):
    label = np.searchsorted(np.array(starts[1:]), np.arange(n), side="right")
    M = np.where(label[:, None] == label[None, :], inside, across).astype(float)
    np.fill_diagonal(M, 1.0)
    return M


def test_block_fit_recovers_planted_blocks():
    M = planted_blocks([0, 4], 10)
    fit = structure.block_fit(M, 2)
    assert fit["starts"] == [0, 4] and fit["r2"] == pytest.approx(1.0)
    assert fit["within"] == pytest.approx(0.9) and fit["between"] == pytest.approx(0.2)
    three = structure.block_fit(planted_blocks([0, 3, 7], 10), 3)
    assert three["starts"] == [0, 3, 7] and three["r2"] == pytest.approx(1.0)
    # noise lowers R^2 but keeps the boundary
    rng = np.random.default_rng(0)
    noisy = M + 0.05 * rng.standard_normal(M.shape)
    fit = structure.block_fit((noisy + noisy.T) / 2, 2)
    assert fit["starts"] == [0, 4] and 0.8 < fit["r2"] < 1.0


def test_band_and_block_tell_a_decay_from_blocks():
    n = 10
    gap = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    band = np.exp(-gap / 3.0)
    assert structure.band_fit(band) == pytest.approx(1.0)
    assert structure.block_fit(band, 2)["r2"] < 0.9
    blocks = planted_blocks([0, 5], n)
    assert structure.block_fit(blocks, 2)["r2"] == pytest.approx(1.0)
    assert structure.band_fit(blocks) < 0.9


def test_undefined_layers_are_left_out_not_scored():
    M = planted_blocks([0, 4], 8)
    M[0, :] = M[:, 0] = np.nan  # the first token at the embedding layer
    fit = structure.block_fit(M, 2)
    assert fit["starts"] == [1, 4] and fit["r2"] == pytest.approx(1.0)
    table = structure.structure_table({"FT-FT": [M[:4, :4]]})  # 3 defined layers: no 2-block fit
    assert np.isnan(table.loc[0, "block2_r2"]) and table.loc[0, "block2_starts"] == []
    with pytest.raises(ValueError, match="k=9 blocks need 1..7 defined layers"):
        structure.block_fit(M, 9)


def _layers(rng, n=120, d=8, constant_first=True):
    base = rng.standard_normal((n, d))
    layers = [np.tile(rng.standard_normal(d), (n, 1)) if constant_first else base]
    for _ in range(3):
        base = np.tanh(base @ rng.standard_normal((d, d)) / np.sqrt(d)) + 0.1 * base
        layers.append(base.astype(np.float32))
    return layers


def test_cka_matrix_leaves_constant_layers_undefined():
    rng = np.random.default_rng(1)
    layers = _layers(rng)
    assert [constant_layer(X) for X in layers] == [True, False, False, False]
    M = structure.cka_matrix(layers)
    assert np.isnan(M[0]).all() and np.isnan(M[:, 0]).all()
    np.testing.assert_allclose(np.diag(M)[1:], 1.0, atol=1e-6)
    np.testing.assert_allclose(M[1:, 1:], M[1:, 1:].T, atol=1e-9)
    assert np.all((M[1:, 1:] > 0) & (M[1:, 1:] <= 1 + 1e-9))


def test_comparisons_shapes_and_known_cells():
    rng = np.random.default_rng(2)
    base = _layers(rng)
    tuned = {s: [x + 0.3 * s * rng.standard_normal(x.shape).astype(np.float32) if k else x
                 for k, x in enumerate(base)] for s in (0, 1, 2)}
    views = structure.phang_views(base, tuned)
    assert [len(views[v]) for v in structure.VIEWS] == [1, 3, 3, 3]  # seed pairs: 3
    for name, mats in views.items():
        for M in mats:
            assert M.shape == (4, 4)
            assert np.isnan(M[0]).all() and np.isnan(M[:, 0]).all(), name
    for M in views["FT-FT"] + views["ORIG-ORIG"]:
        np.testing.assert_allclose(np.diag(M)[1:], 1.0, atol=1e-6)
    # seed 0 left the model unchanged: FT-ORIG equals ORIG-ORIG (to float32 rounding: the
    # self comparison and the cross comparison multiply the same numbers in another order)
    np.testing.assert_allclose(views["FT-ORIG"][0], views["ORIG-ORIG"][0], atol=1e-6)
    assert views["FT-ORIG"][2][3, 3] < views["FT-ORIG"][1][3, 3] < 1
    # the per-seed lists follow the seeds in sorted order, which the views carry: the
    # claims on them name each seed's value by its seed (here seeds 7, 11 and 13)
    renamed = structure.phang_views(base, {13: tuned[2], 7: tuned[0], 11: tuned[1]})
    assert renamed.seeds == (7, 11, 13)
    np.testing.assert_array_equal(renamed["FT-ORIG"][2], views["FT-ORIG"][2])
    from analysis_lib.claims.papers import phang

    [unit] = phang.ft_orig({("m", "t", "first"): renamed})
    assert unit.note.startswith("per seed: 7 ") and ", 11 " in unit.note
    assert ", 13 " in unit.note
    [plain] = phang.ft_orig({("m", "t", "first"): dict(renamed)})  # no seeds: no names
    assert plain.estimate == unit.estimate and "per seed" not in plain.note
    # the restarts' pairs name their seeds too, each with the mean of its two pairs
    [pairs] = phang.restarts({("m", "t", "first"): renamed})
    assert "per seed, the mean of its pairs: 7 " in pairs.note and ", 13 " in pairs.note
    [placed] = phang.restarts({("m", "t", "first"): dict(renamed)})  # no seeds: places
    assert (placed.estimate, placed.se) == (pairs.estimate, pairs.se)
    assert "pairs: 0 " in placed.note and ", 2 " in placed.note


def test_seed_interval_is_a_t_interval():
    mean, low, high = seed_interval([1.0, 2.0, 3.0])
    # t(0.975, 2) = 4.303; sd = 1; se = 1 / sqrt(3)
    assert mean == 2.0 and high - mean == pytest.approx(4.3027 / np.sqrt(3), rel=1e-4)
    mean, low, high = seed_interval([0.5, float("nan")])  # one value: no spread
    assert mean == 0.5 and np.isnan(low) and np.isnan(high)
    assert all(np.isnan(seed_interval([float("nan")])))


def test_the_seed_interval_is_the_verdicts_interval():
    """One t interval: a table's interval over seeds and a verdict's interval of the same
    values are the same numbers."""
    from analysis_lib.claims.verdicts import Evidence, decide

    values = [0.61, 0.64, 0.70, 0.58]
    mean, low, high = seed_interval(values)
    units = decide("wu-within-model", [Evidence.from_values("seeds", values)]).units
    assert (mean, low, high) == pytest.approx(
        (units.estimate[0], units.low[0], units.high[0]), rel=1e-12)
    assert np.isnan(Evidence.from_values("one", [1.0]).interval()[0])
    normal = Evidence("normal", 1.0, 0.5).interval(0.05)
    assert normal == pytest.approx((1.0 - 1.959964 * 0.5, 1.0 + 1.959964 * 0.5), rel=1e-6)


@pytest.mark.slow
def test_a_fine_tuned_model_is_trained_once_for_the_whole_book(monkeypatch):
    options = dict(layers=2, hidden=32, heads=2, vocab_size=2000)
    calls = []
    real = loop.run
    monkeypatch.setattr(loop, "run", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setenv("ANALYSIS_LIB_WORKERS", "1")  # every run trained in this process
    grid = FinetuneGrid.of({"models": ["random:bert"], "tasks": ["tweets-sentiment"],
                            "seeds": [0, 1], "n_train": 48, "epochs": 0.5}, options)
    assert cached_grid(grid) is None and not calls
    first = run_grid(grid, progress=False)
    assert len(calls) == 2 and not first.frame.from_cache.any()
    # a page reads the runs another profile trained, and trains nothing
    found = cached_grid(grid.only(seeds=[0, 1, 2]))  # seed 2 was never trained
    assert len(calls) == 2 and found.seeds("random:bert", "tweets-sentiment") == [0, 1]
    for seed in (0, 1):
        assert found.get("random:bert", "tweets-sentiment", seed).path == \
            first.get("random:bert", "tweets-sentiment", seed).path
    columns = ["model", "task", "seed", "accuracy", "majority"]
    pd.testing.assert_frame_equal(found.frame[columns], first.frame[columns])
    assert found.task("tweets-sentiment").train.texts == \
        first.task("tweets-sentiment").train.texts
    # too few seeds cached, or another schedule: nothing to read
    assert cached_grid(grid.only(seeds=[0, 1, 2]), min_seeds=3) is None
    assert cached_grid(grid.only(epochs=1.0)) is None
    with pytest.raises(ValueError, match="min_seeds"):
        cached_grid(grid, min_seeds=0)
    assert len(calls) == 2
    # another study asks for the same models: loaded, no training step
    again = run_grid(grid.only(seeds=[1, 0]), progress=False)
    assert len(calls) == 2 and again.frame.from_cache.all()
    assert again.get("random:bert", "tweets-sentiment", 0).path == \
        first.get("random:bert", "tweets-sentiment", 0).path
    # a different setting is a different model
    one = grid.only(seeds=[0])
    run_grid(one, progress=False, freeze_bottom=1)
    assert len(calls) == 3
    # and so is a different recipe: a paper's preset, with its own batch size and rate
    wu = run_grid(one.only(preset="wu2020"), progress=False)
    assert len(calls) == 4 and not wu.frame.from_cache.any()
    config = wu.get("random:bert", "tweets-sentiment", 0).record["config"]
    assert (config["batch_size"], config["learning_rate"]) == (8, 5e-5)
    assert config["epochs"] == 0.5  # the study's schedule length, the paper's recipe
    # smaller held-out splits: the same training examples, another model and its own splits
    small = run_grid(one.only(n_heldout=40), progress=False)
    assert len(calls) == 5 and small.grid.n_heldout == 40
    task = small.task("tweets-sentiment")
    assert (len(task.train), len(task.validation), len(task.test)) == (48, 40, 40)
    assert task.train.texts == first.task("tweets-sentiment").train.texts


@pytest.mark.slow
def test_runs_trained_side_by_side_are_the_runs_trained_here(tmp_path, monkeypatch):
    """The runs of a grid trained side by side in worker processes are, bit for bit, the
    runs trained one after another in this process: the same weights, learning curves and
    scores (each trains at the fine-tuning threads with its own seed wherever it runs).
    Only the runs the cache does not hold are sent, and none with one worker."""
    import torch

    options = dict(layers=2, hidden=32, heads=2, vocab_size=2000)
    grid = FinetuneGrid.of({"models": ["random:bert"], "tasks": ["tweets-sentiment"],
                            "seeds": [0, 1, 2], "n_train": 48, "epochs": 1.0}, options)
    frozen = dict(freeze_bottom=1, freeze_embeddings=True)
    monkeypatch.setenv("ANALYSIS_LIB_CACHE", str(session_inputs(tmp_path / "here")))
    here = run_grid(grid, progress=False, workers=1)
    alone = run_grid(grid.only(seeds=(1,)), progress=False, store="trainable", **frozen)
    monkeypatch.setenv("ANALYSIS_LIB_CACHE", str(session_inputs(tmp_path / "apart")))
    jobs = [Job(grid, run) for run in grid.runs()] + [
        Job(grid.only(seeds=(1,)), grid.runs()[1], "trainable", frozen)]
    assert train_side_by_side(jobs, workers=1) == 0
    assert train_side_by_side(jobs, workers=2) == 4
    assert train_side_by_side(jobs, workers=2) == 0  # every run cached now
    apart = run_grid(grid, progress=False, workers=2)
    assert apart.frame.from_cache.all()
    pairs = [(here.get(*run), apart.get(*run)) for run in grid.runs()]
    pairs.append((alone.get(*grid.runs()[1]), run_grid(
        grid.only(seeds=(1,)), progress=False, store="trainable", **frozen).get(
        *grid.runs()[1])))
    for one, other in pairs:
        assert one.path != other.path and other.from_cache
        mine, theirs = one.model.state_dict(), other.model.state_dict()
        assert list(mine) == list(theirs)
        assert all(torch.equal(mine[k], theirs[k]) for k in mine)
        assert one.record["history"] == other.record["history"]
        assert one.metrics == other.metrics
    assert not torch.equal(*(r.model.classifier.weight for r, _ in pairs[:2]))
    with pytest.raises(ValueError, match="workers must be at least 1"):
        train_side_by_side(jobs, workers=0)


def test_the_grid_is_walked_in_one_order_by_every_reader(monkeypatch):
    """Model by model, task by task, seed by seed: :meth:`FinetuneGrid.runs` is the order
    in which a grid is trained, cached runs are found, and :meth:`Runs.each` and
    :meth:`Runs.groups` hand them to a study."""
    grid = FinetuneGrid().only(models=["a", "b"], tasks=["t", "u"], seeds=[2, 0])
    assert grid.pairs() == [("a", "t"), ("a", "u"), ("b", "t"), ("b", "u")]
    assert grid.runs()[:3] == [("a", "t", 2), ("a", "t", 0), ("a", "u", 2)]
    assert len(grid.runs()) == 8
    trained = []

    class Run:
        from_cache = False
        metrics = {"test": {"accuracy": 0.9, "macro_f1": 0.9, "majority_baseline": 0.5}}
        record = {"train_seconds": 1.0, "config": {"precision": "float32"}}

    monkeypatch.setattr(zoo_training, "ensure", lambda models: None)
    monkeypatch.setattr(FinetuneGrid, "train", lambda self, *run, **k: trained.append(run)
                        or Run())
    monkeypatch.setenv("ANALYSIS_LIB_WORKERS", "1")  # the fakes live in this process
    runs = run_grid(grid, progress=False)
    assert trained == grid.runs()
    assert list(zip(runs.frame.model, runs.frame.task, runs.frame.seed)) == grid.runs()
    assert [r[:3] for r in runs.each()] == grid.runs()
    assert [r[:3] for r in runs.each(models=["b"], tasks=["u"])] == [("b", "u", 2),
                                                                       ("b", "u", 0)]
    assert [(m, t, list(by_seed)) for m, t, by_seed in runs.groups()] == [
        (m, t, [2, 0]) for m, t in grid.pairs()]
    # the cache is read in the same order; a pair with too few seeds cached reads None
    monkeypatch.setattr(FinetuneGrid, "cached", lambda self, m, t, s, **k:
                        None if (m, t, s) == ("b", "u", 0) else Run())
    found = cached_grid(grid, min_seeds=1)
    assert list(found.models) == grid.runs()[:-1]
    assert cached_grid(grid, min_seeds=2) is None


def test_a_run_still_learning_when_its_schedule_ends_is_trained_again_for_longer(monkeypatch):
    """A run whose learning curve still rose when its schedule ended (the training gate's
    plateau rule) is trained again from its start, same seed, for ``longer_if_rising``
    times the epochs, once, and every reader gets the longer run; a settled run, a curve too
    short to judge and a recipe at its step limit are not, nor any with the rule off. The
    cache is read the same way, and a run still rising after the longer schedule fails the
    gate."""
    from analysis_lib.training import grid as grid_module

    curves = {  # (seed, epochs) -> validation accuracy after each epoch, on 500 examples
        (0, 5.0): [0.60, 0.70, 0.72, 0.73, 0.725],  # settled: +0.01 in its last two
        # the replica's tweets seed 101: +0.044 in its last two, 500 examples resolve 0.040
        (1, 5.0): [0.63, 0.668, 0.69, 0.708, 0.734],
        (1, 10.0): [0.60, 0.65, 0.68, 0.70, 0.72, 0.73, 0.74, 0.745, 0.75, 0.748],
        (2, 5.0): [0.50, 0.55, 0.60, 0.62, 0.66],  # slow, and still rising after ten
        (2, 10.0): [0.50, 0.55, 0.60, 0.62, 0.64, 0.66, 0.68, 0.70, 0.72, 0.76],
        (1, 2.0): [0.50, 0.70],  # two points: no plateau to judge by
    }
    steps = {"cpu": 40, "phang2021": 10_000}  # the phang2021 recipe stops at 10,000 steps

    class Run:
        from_cache = False

        def __init__(self, config):
            curve = curves[(config.seed, config.epochs)]
            self.config = config
            self.metrics = {"test": {"accuracy": curve[-1], "macro_f1": curve[-1],
                                     "majority_baseline": 0.45}}
            self.record = {
                "config": {"epochs": config.epochs, "until_plateau": config.until_plateau,
                           "precision": "float32", "seed": config.seed},
                "history": [{"epoch": k + 1, "validation_accuracy": a,
                             "steps": steps["phang2021" if config.max_steps else "cpu"]}
                            for k, a in enumerate(curve)],
                "loss_curve": [{"step": 1, "train_loss": 0.9}, {"step": 2, "train_loss": 0.6}],
                "metrics": {"validation": {"accuracy": curve[-1], "majority_baseline": 0.45,
                                           "n": 500}},
                "train_seconds": 1.0}

    trained, stored = [], {}

    def fake_finetune(model, task, config, **kwargs):
        trained.append((config.seed, config.epochs))
        stored[(config.seed, config.epochs)] = Run(config)
        return stored[(config.seed, config.epochs)]

    monkeypatch.setenv("ANALYSIS_LIB_WORKERS", "1")  # the fakes live in this process
    monkeypatch.setattr(grid_module, "finetune", fake_finetune)
    monkeypatch.setattr(grid_module, "lookup", lambda model, task, config, **k:
                        stored.get((config.seed, config.epochs)))
    monkeypatch.setattr(zoo_training, "ensure", lambda models: None)
    monkeypatch.setattr(FinetuneGrid, "task", lambda self, name: None)
    grid = FinetuneGrid.of({"models": ["minilm"], "tasks": ["tweets-sentiment"],
                            "seeds": [0, 1, 2], "epochs": 5.0, "until_plateau": False})
    assert grid.longer_if_rising == 2.0  # on by default
    runs = run_grid(grid, progress=False)
    assert trained == [(0, 5.0), (1, 5.0), (1, 10.0), (2, 5.0), (2, 10.0)]
    assert runs.frame.epochs.tolist() == [5.0, 10.0, 10.0]
    assert [r.config.epochs for *_, r in runs.each()] == [5.0, 10.0, 10.0]
    problems = training_problems(runs)
    assert list(problems) == ["minilm, tweets-sentiment, seed 2"]
    assert problems["minilm, tweets-sentiment, seed 2"].startswith(
        "it was still learning: validation accuracy rose 0.060 in its last 2 epochs")
    # the cache read as trained, nothing trained; without its longer run a rising run is
    # not in the cache, though its first schedule is
    found = cached_grid(grid, min_seeds=1)
    assert found.frame.epochs.tolist() == [5.0, 10.0, 10.0] and len(trained) == 5
    del stored[(1, 10.0)]
    assert grid.cached("minilm", "tweets-sentiment", 1) is None
    assert cached_grid(grid, min_seeds=1).seeds("minilm", "tweets-sentiment") == [0, 2]
    # the rule off: every run once, on its own schedule
    trained.clear()
    off = run_grid(grid.only(longer_if_rising=1.0), progress=False)
    assert trained == [(0, 5.0), (1, 5.0), (2, 5.0)] and off.frame.epochs.tolist() == [5.0] * 3
    # a curve too short to judge, and a recipe whose step limit the run reached: once
    trained.clear()
    grid.only(seeds=(1,), epochs=2.0).train("minilm", "tweets-sentiment", 1)
    grid.only(preset="phang2021").train("minilm", "tweets-sentiment", 1)
    assert trained == [(1, 2.0), (1, 5.0)]
    with pytest.raises(ValueError, match="longer_if_rising"):
        FinetuneGrid.of({"longer_if_rising": 0.5})


def test_the_fine_tuning_grid_is_declared_once_and_checked_by_its_own_rules():
    """Every chapter that reads fine-tuned models declares the grid as one parameter with
    the ``grid`` rule, and a value is checked against the rules the grid declares."""
    from analysis_lib.book import load_profile, params

    chapters = [name for name in ("finetuning", "truncation", "domains", "seeds")
                if "finetune" in params.declared(name)]
    assert chapters == ["finetuning", "truncation", "domains", "seeds"]
    for name in chapters:
        declared = params.declared(name)
        assert declared["finetune"].rules == {"fields": FinetuneGrid.parameters()}
        assert declared["finetune"].default == {}
        assert not [k for k in declared if k.startswith("ft_") and k[3:] in
                    {f.name for f in fields(FinetuneGrid)}]
    assert FinetuneGrid.of() == FinetuneGrid()
    larger = FinetuneGrid.from_profile(load_profile("larger"))
    assert larger.n_train == 3000 and larger.seeds == (0, 1, 2, 3, 4)
    assert larger.models == FinetuneGrid().models  # a field the profile leaves takes its default
    with pytest.raises(params.ParameterError) as error:
        FinetuneGrid.of({"seeds": [0], "epochs": 0.0, "preset": "nope", "batch": 8})
    text = str(error.value)
    for expected in ("finetune.seeds=[0]: needs at least 2 items", "finetune.epochs=0.0",
                     "finetune.preset: ['nope'] not allowed", "unknown settings ['batch']"):
        assert expected in text, expected
    assert FinetuneGrid.of({"seeds": [3, 4]}).only(seeds=[5, 6]).seeds == (5, 6)


def test_the_grid_trains_in_the_precision_it_names():
    """``finetune.precision`` reaches every run's settings ("auto" is resolved by the run
    itself, per machine, before its cache key is made); a precision the loop cannot train
    in is refused with the valid ones."""
    from analysis_lib.book import params

    assert FinetuneGrid().precision == "auto"
    assert FinetuneGrid().settings(1).precision == "auto"
    for precision in ("float32", "bfloat16"):
        grid = FinetuneGrid.of({"precision": precision})
        assert grid.settings(0).precision == precision
        assert grid.settings(2, freeze_bottom=1).precision == precision
    with pytest.raises(params.ParameterError, match="finetune.precision"):
        FinetuneGrid.of({"precision": "float16"})


def _noisy(M, rng, scale=0.01):
    E = scale * rng.standard_normal(M.shape)
    return M + (E + E.T) / 2


def _change(slope, rng, seeds=(0, 1, 2), layers=7, tasks=("t1", "t2"), noise=0.005):
    import pandas as pd

    rows = []
    for task in tasks:
        for seed in seeds:
            for layer in range(layers):
                value = 1 - slope * layer + noise * rng.standard_normal()
                rows.append({"model": "m", "task": task, "seed": seed, "layer": layer,
                             "linear_cka": value, "neuronsim": value, "rsa": value,
                             "attention_js": value if layer else np.nan})
    return pd.DataFrame(rows)


def _frozen(full, bottom, top, seeds=(0, 1, 2), spread=0.005):
    """Freezing runs of several seeds: each seed's accuracies move together (a seed's runs
    share the head's initialisation and the batch order) plus a little of their own."""
    import pandas as pd

    rng = np.random.default_rng(7)
    rows = []
    for seed in seeds:
        shift = 0.03 * rng.standard_normal()  # a seed effect larger than the differences
        for mode, k, acc in (("none", 0, full), ("bottom", 2, bottom), ("top", 2, top)):
            rows.append({"frozen": mode, "k": k, "seed": seed, "n_test": 500,
                         "accuracy": acc + shift + spread * rng.standard_normal()})
    return pd.DataFrame(rows)


def test_findings_follow_planted_structure():
    rng = np.random.default_rng(0)
    n = 7
    blocks = planted_blocks([0, 4], n)
    decay = 1 - 0.1 * np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    ft_orig = np.diag(np.linspace(1.0, 0.5, n)) + 0.1
    views = {("m", "t1", "first"): {"FT-FT": [_noisy(blocks, rng) for _ in range(3)],
                                    "FT-ORIG": [_noisy(ft_orig, rng) for _ in range(3)],
                                    "ORIG-ORIG": [decay]}}
    found = _findings(_change(0.05, rng), views, _frozen(0.80, 0.80, 0.60))
    assert list(found.index) == [c.id for c in claims.of_chapter("finetuning")]
    assert found.loc["wu-ft-top-change", "verdict"] == "holds"
    assert found.loc["merchant-depth", "verdict"] == "holds"
    assert found.loc["phang-blocks", "verdict"] == "holds"
    assert found.loc["phang-ft-orig", "verdict"] == "holds"
    assert found.loc["merchant-freeze-bottom", "verdict"] == "holds"  # a cost below 0.02
    assert found.loc["wu-freeze-order", "verdict"] == "holds"
    # a smooth decay is no block structure; no change with depth is "equivalent";
    # freezing that costs a lot is the opposite of "costs little"
    views = {("m", "t1", "first"): {"FT-FT": [_noisy(decay, rng) for _ in range(3)],
                                    "ORIG-ORIG": [blocks]}}
    # (Holm over six units with two degrees of freedom each needs a tight spread)
    found = _findings(_change(0.0, rng, noise=0.001), views, _frozen(0.80, 0.60, 0.80))
    assert found.loc["phang-blocks", "verdict"] == "opposite"  # blocks smoothed away
    # blocks that the pretrained model already has are not fine-tuning's doing: the control
    # condition (ORIG-ORIG) takes them away
    inherited = {("m", "t1", "first"): {"FT-FT": [_noisy(blocks, rng) for _ in range(3)],
                                        "ORIG-ORIG": [blocks]}}
    kept = _findings(_change(0.0, rng, noise=0.001), inherited).loc["phang-blocks"]
    assert kept["verdict"] in ("opposite", "equivalent")
    assert "FT-FT CLS - ORIG-ORIG" in kept["what this run shows"]
    alone = {("m", "t1", "first"): {"FT-FT": [_noisy(blocks, rng) for _ in range(3)]}}
    assert _findings(_change(0.0, rng), alone).loc["phang-blocks", "verdict"] == \
        "not measured"  # no control condition, no verdict
    assert found.loc["wu-ft-top-change", "verdict"] == "equivalent"
    assert found.loc["merchant-freeze-bottom", "verdict"] == "opposite"
    assert found.loc["wu-freeze-order", "verdict"] == "opposite"
    assert found.loc["phang-ft-orig", "verdict"] == "not measured"


def test_one_seed_gives_no_verdict():
    rng = np.random.default_rng(1)
    found = _findings(_change(0.1, rng, seeds=(0,)), {}, _frozen(0.8, 0.8, 0.6, (0,)))
    assert found.loc["wu-ft-top-change", "verdict"] == "inconclusive"
    assert found.loc["phang-blocks", "what this run shows"] == "not measured in this run"
    # one freezing seed: a 0.2 gap is not judged from test examples alone
    assert found.loc["wu-freeze-order", "verdict"] == "inconclusive"


def test_freezing_claims_pair_the_runs_of_each_seed():
    """A seed effect shared by a seed's runs cancels in the paired differences: the same
    gaps with a large seed-to-seed spread still give a verdict."""
    rng = np.random.default_rng(2)
    found = _findings(_change(0.05, rng), {}, _frozen(0.8, 0.8, 0.7, spread=0.002))
    assert found.loc["wu-freeze-order", "verdict"] == "holds"
    assert found.loc["merchant-freeze-bottom", "verdict"] == "holds"
    # with each run's own noise as large as the gap, three seeds cannot tell
    found = _findings(_change(0.05, rng), {}, _frozen(0.8, 0.8, 0.77, spread=0.03))
    assert found.loc["wu-freeze-order", "verdict"] == "inconclusive"


def test_a_build_without_partly_frozen_runs_names_the_setting_that_trains_them():
    """A build with the unfrozen runs alone (freeze_ks empty): both freezing claims read
    not measured, and the reason names freeze_ks and the profiles that train them."""
    rng = np.random.default_rng(3)
    unfrozen = _frozen(0.8, 0.8, 0.7)
    unfrozen = unfrozen[unfrozen.frozen == "none"]
    found = _findings(_change(0.05, rng), {}, unfrozen)
    for claim in ("wu-freeze-order", "merchant-freeze-bottom"):
        assert found.loc[claim, "verdict"] == "not measured"
        reason = found.loc[claim, "what this run shows"]
        assert "freeze_ks is empty" in reason and "larger profiles train them" in reason


def test_bottom_frozen_runs_alone_decide_the_bottom_claim_and_leave_the_order_unmeasured():
    """The default profile freezes the bottom only (freeze_ends [bottom]): the claim on the
    bottom's cost is judged as with both ends, the comparison of the two ends reads not
    measured, naming freeze_ends and the profile that trains the top."""
    rng = np.random.default_rng(3)
    both = _frozen(0.80, 0.80, 0.70, spread=0.002)
    bottom = both[both.frozen != "top"]
    change = _change(0.05, rng)
    with_top, without = _findings(change, {}, both), _findings(change, {}, bottom)
    assert with_top.loc["wu-freeze-order", "verdict"] == "holds"
    order = without.loc["wu-freeze-order"]
    assert order["verdict"] == "not measured"
    assert "freeze_ends is [bottom]" in order["what this run shows"]
    assert "larger profile trains both" in order["what this run shows"]
    for column in ("verdict", "what this run shows"):
        assert without.loc["merchant-freeze-bottom", column] == \
            with_top.loc["merchant-freeze-bottom", column]
    assert without.loc["merchant-freeze-bottom", "verdict"] == "holds"


def test_block_gain_charges_the_band_for_its_parameters():
    n = 7
    decay = 1 - 0.1 * np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    assert structure.block_gain(decay) < 0
    assert structure.block_gain(planted_blocks([0, 3], n)) > 0
    assert structure.adjusted_r2(0.9, 21, 3) == pytest.approx(1 - 0.1 * 20 / 17)
    assert np.isnan(structure.adjusted_r2(0.9, 4, 3))


def test_frozen_head_reads_what_the_frozen_encoder_already_separates(tmp_path, monkeypatch):
    """Known answer: a random encoder's mean-pooled top layer separates sentences by a
    word that decides the label, so the frozen head is near perfect there; with the labels
    shuffled it is not."""
    from analysis_lib.data import corpora, tasks

    monkeypatch.setenv("ANALYSIS_LIB_CACHE", str(tmp_path))
    rng = np.random.default_rng(0)
    filler = ["the", "a", "film", "day", "was", "is", "very", "quite", "so", "it"]
    texts, labels = [], []
    for k in range(240):
        label = k % 2
        words = list(rng.choice(filler, 5)) + [("sunny", "rainy")[label]]
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(label)

    class Grid:  # what frozen_head reads of the fine-tuning runs: their tasks
        def __init__(self, labels):
            self.found = tasks.task_from_corpus(
                corpora.from_sentences(texts, labels=labels), name="weather")

        def task(self, name):
            return self.found

    options = {"layers": 2, "hidden": 32, "heads": 2, "vocab_size": 2000}
    clear = collect.frozen_head(Grid(labels), ["random:bert"], ["weather"],
                              model_options=options)
    assert list(clear.columns) == ["model", "task", "frozen_head"]
    assert clear.frozen_head.iloc[0] >= 0.9
    shuffled = collect.frozen_head(Grid(list(rng.permutation(labels))), ["random:bert"],
                                 ["weather"], model_options=options)
    assert shuffled.frozen_head.iloc[0] < 0.8


def test_learning_curves_read_each_record_and_flag_runs_still_climbing():
    class Run:
        def __init__(self, accuracies):
            self.record = {"history": [{"epoch": k + 1, "steps": 10 * (k + 1),
                                        "train_loss": 1.0 / (k + 1), "validation_accuracy": a}
                                       for k, a in enumerate(accuracies)]}

    runs = Runs(pd.DataFrame(), {("m", "t", 0): Run([0.5, 0.6, 0.7]),
                                       ("m", "t", 1): Run([0.5, 0.7, 0.705]),
                                       ("m", "t", 2): Run([0.8])})
    curves = learning_curves(runs)
    assert len(curves) == 7 and list(curves.epoch[:3]) == [1, 2, 3]
    flagged = curves.groupby("seed").rising.agg(["min", "max"])
    assert (flagged["min"] == flagged["max"]).all()  # one flag per run
    assert flagged["max"].to_dict() == {0: True, 1: False, 2: False}  # one epoch: no trend
    assert learning_curves(runs, still_rising=0.2).rising.sum() == 0
    # a record without a curve (made before curves were kept) gives no rows
    old = Runs(pd.DataFrame(), {("m", "t", 0): type("Old", (), {"record": {
        "history": [{"epoch": 1, "steps": 5, "train_loss": 0.3}]}})()})
    assert learning_curves(old).empty


def test_accuracy_table_places_each_interval_against_the_frozen_head():
    class Run:
        def __init__(self, steps):
            self.record = {"history": [{"epoch": 1, "steps": steps}]}

    rows, found = [], {}
    for task, values in (("above", [0.80, 0.81, 0.82]), ("below", [0.50, 0.51, 0.52]),
                         ("overlaps", [0.55, 0.70, 0.85])):
        for seed, accuracy in enumerate(values):
            rows.append({"model": "m", "task": task, "seed": seed, "accuracy": accuracy,
                         "majority": 0.4})
            found[("m", task, seed)] = Run(75)
    runs = Runs(pd.DataFrame(rows), found)
    heads = pd.DataFrame({"model": "m", "task": ["above", "below", "overlaps"],
                          "frozen_head": 0.7})
    table = tables.accuracy_table(runs, heads)
    assert table.against_frozen.tolist() == ["above", "below", "overlaps"]
    assert table.steps.tolist() == [75] * 3 and table.majority.tolist() == [0.4] * 3
    np.testing.assert_allclose(table["mean"], [0.81, 0.51, 0.70])
    said = prose.accuracy_sentence(table)
    assert "m on below, 75 steps: 0.510" in said and "frozen head's 0.700 (below)" in said


def test_claims_from_runs_that_did_not_train_read_not_measured():
    rng = np.random.default_rng(5)
    frozen = _frozen(0.80, 0.80, 0.60).assign(did_not_train="")
    found = _findings(_change(0.05, rng), {}, frozen)
    assert found.loc["wu-freeze-order", "verdict"] == "holds"
    frozen.loc[frozen.frozen == "top", "did_not_train"] = "loss flat"
    found = _findings(_change(0.05, rng), {}, frozen,
                           untrained={"m, t1, seed 0": "accuracy at the majority"})
    for claim_id in [c.id for c in claims.of_chapter("finetuning")]:
        assert found.loc[claim_id, "verdict"] == "not measured", claim_id
    assert "top 2, seed 0: loss flat" in found.loc["wu-freeze-order", "what this run shows"]

    class Run:
        def __init__(self, accuracy, losses):
            self.record = {"metrics": {"validation": {"accuracy": accuracy,
                                                      "majority_baseline": 0.4, "n": 100}},
                           "history": [{"validation_accuracy": accuracy}] * 3,
                           "loss_curve": [{"step": k + 1, "train_loss": v}
                                          for k, v in enumerate(losses)]}

    runs = Runs(pd.DataFrame(), {("m", "t", 0): Run(0.8, [1.0, 0.5]),
                                        ("m", "t", 1): Run(0.41, [1.0, 0.99])})
    problems = training_problems(runs)
    assert list(problems) == ["m, t, seed 1"] and "majority baseline" in problems["m, t, seed 1"]
    assert "did_not_train" not in loss_curves(runs)  # no gate given: no column
    curves = loss_curves(runs, gate=training_problem)
    assert len(curves) == 4 and set(curves.did_not_train[curves.seed == 0]) == {""}
    assert (curves.did_not_train[curves.seed == 1] != "").all()
    from analysis_lib.book import plots

    chart = plots.loss_curves(curves).to_dict()
    assert "did not train" in str(chart)


def test_localization_claim_reads_the_top_layer_before_and_after_fine_tuning():
    rng = np.random.default_rng(8)
    change = _change(0.05, rng)
    top = change.layer == change.layer.max()
    planted = change.assign(localization_base=0.30,
                            localization_ft=np.where(top, 0.10, 0.30)
                            + 0.002 * rng.standard_normal(len(change)))
    found = _findings(planted, {})
    assert found.loc["wu-localization-ft", "verdict"] == "holds"
    shown = found.loc["wu-localization-ft", "what this run shows"]
    assert "localization at L6 (base - tuned)" in shown
    # each seed's value, by seed: 0.30 - 0.10 in every seed of both tasks
    assert shown.count("per seed: 0 +0.2") == change.task.nunique()
    same = planted.assign(localization_ft=0.30 + 0.0005 * rng.standard_normal(len(change)))
    assert _findings(same, {}).loc["wu-localization-ft", "verdict"] == "equivalent"
    assert _findings(change, {}).loc["wu-localization-ft", "verdict"] == "not measured"
    # the plain score falls at the top while the top layer keeps its place in the ranking
    # under both measures (the least like the others before and after): the ranks read
    # exactly 0 in every seed, yet a rank among 7 layers moves in steps of 1/6, so they
    # cannot show "no change" at the smallest effect: the claim stays undecided
    ranked = planted.assign(ranked_localization_base=0.0, ranked_localization_ft=0.0)
    row = _findings(ranked, {}).loc["wu-localization-ft"]
    assert "localization on ranks at L6 (base - tuned)" in row["what this run shows"]
    assert "ranks among 7 layers: steps of 0.167" in row["what this run shows"]
    assert row["verdict"] == "inconclusive"
    assert row["how"].startswith("undecided: too coarse in 2 of 4 units")
    # a top layer that drops a place under neuronsim, in every seed, is less localized on
    # ranks as well
    dropped = ranked.assign(ranked_localization_ft=np.where(top, -1 / 6, 0.0))
    assert _findings(dropped, {}).loc["wu-localization-ft", "verdict"] == "holds"


def test_the_pages_sentence_vectors_come_from_one_pass_and_one_cache_entry(monkeypatch,
                                                                           tmp_path):
    """The fine-tuning page's first-token CKA, the seeds page's mean vectors and the
    truncation page's probes read one extraction of a model on a set of sentences."""
    from analysis_lib import collect, models
    from analysis_lib.data import corpora

    monkeypatch.setenv("ANALYSIS_LIB_CACHE", str(tmp_path))
    model = models.load("random:bert", layers=2, hidden=16, heads=2, vocab_size=300)
    corpus = corpora.from_sentences(["the cat sat", "a dog ran far", "birds sing"])
    first = collect.pooled_layers(model, corpus, "first")
    entries = sorted((tmp_path / "extract").iterdir())
    assert len(entries) == 1
    mean = collect.sentence_layers({"m": model}, corpus, "mean")["m"]
    assert sorted((tmp_path / "extract").iterdir()) == entries
    both = sentence_extraction(model, corpus)
    assert sorted((tmp_path / "extract").iterdir()) == entries
    for a, b in zip(first, both.layers("first")):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(mean, both.layers("mean")):
        np.testing.assert_array_equal(a, b)
    # a pooling beyond the shared ones is a pass (and an entry) of its own
    sentence_extraction(model, corpus, "last")
    assert len(list((tmp_path / "extract").iterdir())) == 2


def test_task_depth_reads_the_tagging_model_against_the_sentence_model_of_each_seed():
    """Planted: the sentence-level model keeps RSA to the base near 1 below the top, the
    tagging model of the same seed falls from the middle layers, and a control model (a tag
    per word type) moves like the sentence model: the claim holds; tagging runs that move
    like the sentence ones give no difference; no tagging runs: not measured, naming the
    profile that trains them."""
    rng = np.random.default_rng(21)
    change = _change(0.01, rng, tasks=("t1", "t2"))
    tagged = _change(0.01, rng, tasks=("t1:pos",))
    deeper = tagged.assign(rsa=np.where(tagged.layer >= 3, tagged.rsa - 0.2, tagged.rsa))
    control = _change(0.01, rng, tasks=("t1:control",))

    def judged(tagging, **more):
        found = verdicts.judge(claims.of_chapter("finetuning"), {
            "change": change, "tagging": tagging, "tagging_control": control,
            "untrained": {}, **more})
        return found.loc["merchant-task-depth"]

    holds = judged(deeper)
    assert holds["verdict"] == "holds"
    # layers 3..5 of 1..5 are 0.2 lower: a mean gap of 0.12 over seeds
    assert "m, t1 against t1:pos, L1-L5: +0.12" in holds["what this run shows"]
    assert "part most at L" in holds["what this run shows"]
    assert "per seed: 0 +0.1" in holds["what this run shows"]
    # the top layer is not read: a gap there alone changes nothing
    top_only = tagged.assign(rsa=np.where(tagged.layer == 6, tagged.rsa - 0.5, tagged.rsa))
    assert judged(top_only)["verdict"] in ("equivalent", "inconclusive")
    assert judged(tagged)["verdict"] in ("equivalent", "inconclusive")
    for none in (None, tagged.iloc[:0]):  # a build without tagging runs (the default's)
        absent = judged(none)
        assert absent["verdict"] == "not measured"
        assert absent["what this run shows"].startswith(
            "not measured: this build trained no tagging runs (its tagging is none")
        assert "the larger profile trains both" in absent["what this run shows"]
    stopped = judged(deeper, untrained_tagging={"m, t1:pos, seed 0": "it did not learn"})
    assert stopped["verdict"] == "not measured" and "t1:pos" in stopped["what this run shows"]
    alone = tagged.assign(task="t3:pos")  # no sentence-level runs of t3 to compare with
    assert "no sentence-level runs of t3" in judged(alone)["what this run shows"]


def test_task_depth_separates_syntax_from_token_level_supervision_with_the_control_task():
    """Planted: the tagging model departs from the base below the top, the sentence-level
    model does not. A control model (a tag per word type) that moves like the sentence
    model: both units hold, the syntax reaches deeper. One that moves like the tagging
    model: its unit finds no difference, and the claim no longer holds. No control runs, or
    untrained ones: the syntax is not told apart from token-level supervision, so the claim
    reads not measured, naming the confound and what the sentence-level unit alone would
    read (here: holds), which never decides it."""
    rng = np.random.default_rng(5)
    change = _change(0.01, rng, tasks=("t1",))
    tagged = _change(0.01, rng, tasks=("t1:pos",))
    deeper = tagged.assign(rsa=np.where(tagged.layer >= 3, tagged.rsa - 0.2, tagged.rsa))
    shallow_control = _change(0.01, rng, tasks=("t1:control",))
    deep_control = deeper.assign(task="t1:control",
                                 rsa=deeper.rsa + rng.normal(0, 0.01, len(deeper)))

    def judged(control, untrained_control=None, tagging=deeper):
        found = verdicts.judge(claims.of_chapter("finetuning"), {
            "change": change, "tagging": tagging, "tagging_control": control,
            "untrained_control": untrained_control, "untrained": {}})
        return found.loc["merchant-task-depth"]

    both = judged(shallow_control)
    assert both["verdict"] == "holds"
    shown = both["what this run shows"]
    assert "m, t1 against t1:pos, L1-L5: +0.12" in shown
    assert "m, t1:control against t1:pos, L1-L5: +0.1" in shown
    assert "twice over" not in shown
    # token-level supervision alone moves the control as deep: the syntax adds nothing
    same = judged(deep_control)
    assert same["verdict"] in ("inconclusive", "equivalent", "mixed")
    assert "m, t1:control against t1:pos" in same["what this run shows"]
    for missing in (None, deep_control.iloc[:0]):
        alone = judged(missing)
        assert alone["verdict"] == "not measured"
        shown = alone["what this run shows"]
        assert shown.startswith("not measured: the tagging model differs from the "
                                "sentence-level one twice over")
        assert "none was trained here" in shown
        assert ("without that control, this claim's statistic would read holds, "
                "m, t1 against t1:pos, L1-L5: +0.12") in shown
        assert "t1:control against" not in shown
        # what the unit alone would read is its own verdict, whatever it is
        flat = judged(missing, tagging=tagged)
        assert flat["verdict"] == "not measured"
        assert "would read holds" not in flat["what this run shows"]
    stopped = judged(shallow_control, {"m, t1:control, seed 1": "it was still rising"})
    assert stopped["verdict"] == "not measured"
    assert "its control runs did not train: it was still rising" in (
        stopped["what this run shows"])
    assert "t1:control against" not in stopped["what this run shows"]


def test_restarts_compare_two_seeds_top_layers_with_their_distance_to_the_base():
    """Planted: three seeds whose top layers sit at CKA 0.3 from the pretrained model's; two
    restarts alike at 0.8 (the claim holds, +0.5), or only as alike as each is to the base
    (no gap). The pairs share seeds, so the interval is a jackknife over seeds."""
    rng = np.random.default_rng(3)
    n = 7
    ft_orig = np.full((n, n), 0.3)

    def views(restart_top):
        pair = np.full((n, n), 0.5)
        pair[-1, -1] = restart_top
        return {("m", "t1", "first"): {"FT-ORIG": [_noisy(ft_orig, rng) for _ in range(3)],
                                       "FT[1]-FT[2]": [_noisy(pair, rng) for _ in range(3)]}}

    found = _findings(None, views(0.8))
    assert found.loc["phang-restarts", "verdict"] == "holds"
    shown = found.loc["phang-restarts", "what this run shows"]
    assert "FT[1]-FT[2] - FT-ORIG at the top (CLS): +0.4" in shown
    assert "3 pairs of 3 seeds" in shown
    assert _findings(None, views(0.3)).loc["phang-restarts", "verdict"] in (
        "equivalent", "inconclusive")
    # two seeds make one pair: no jackknife, no interval, no verdict either way
    two = views(0.8)[("m", "t1", "first")]
    two = {("m", "t1", "first"): {"FT-ORIG": two["FT-ORIG"][:2],
                                  "FT[1]-FT[2]": two["FT[1]-FT[2]"][:1]}}
    assert _findings(None, two).loc["phang-restarts", "verdict"] == "inconclusive"


def _backward(saved, k=2, batches=4, full=2.0, frozen=1.0):
    """A planted backward_cost frame: ``saved`` per batch (a scalar is the same for all)."""
    return pd.DataFrame({"k": k, "batch": range(batches), "examples": 16,
                         "flops_full": 1e9, "flops_frozen": 1e9 * (1 - np.asarray(saved)),
                         "seconds_full": full, "seconds_frozen": frozen,
                         "saved": np.broadcast_to(saved, batches)})


def test_backward_cost_skips_the_frozen_layers_backward_pass(tmp_path, monkeypatch):
    """Freezing the bottom k of n layers (and the embeddings) saves at least k/n of the
    backward pass's operations (those layers need no backward pass) and less than (k+1)/n
    (every trained layer still needs its own); the count is the same run to run."""
    monkeypatch.setenv("ANALYSIS_LIB_CACHE", str(tmp_path))
    opts = {"layers": 4, "hidden": 64, "heads": 2, "vocab_size": 2000}
    grid = FinetuneGrid.of({"models": ["random:bert"], "tasks": ["tweets-sentiment"],
                            "seeds": [0, 1], "n_train": 64, "n_heldout": 50}, opts)
    cost = freezing.backward_cost(grid, [1, 2, 3, 4], n_batches=2, repeats=1)
    assert len(cost) == 8 and (cost.seconds_full > 0).all()
    for k, group in cost[cost.k < 4].groupby("k"):
        assert (k / 4 <= group.saved).all() and (group.saved < (k + 1) / 4).all(), k
    assert cost.groupby("k").saved.mean().is_monotonic_increasing
    assert cost.saved.max() > 0.95  # all four frozen: only the head and pooler train
    again = freezing.backward_cost(grid, [1, 2, 3, 4], n_batches=2, repeats=1)
    assert again.flops_frozen.tolist() == cost.flops_frozen.tolist()
    assert freezing.backward_cost(grid, n_batches=1, repeats=1).k.tolist() == [2]
    with pytest.raises(ValueError, match="each 1..4"):
        freezing.backward_cost(grid, [0, 5])


def test_freezing_saves_only_where_freezing_costs_little_accuracy():
    """wu-freeze-saves reads the backward count; it keeps its verdict only where freezing
    the bottom layers costs little accuracy (merchant-freeze-bottom holds), and reads not
    measured with the default profile's reason where no frozen pass was measured."""
    rng = np.random.default_rng(5)
    change = _change(0.05, rng)

    def judge(frozen, backward):
        return verdicts.judge(claims.of_chapter("finetuning"), {
            "change": change, "views": {}, "frozen": frozen, "backward": backward})

    cheap = _frozen(0.80, 0.80, 0.70, spread=0.002)
    found = judge(cheap, _backward([0.52, 0.53, 0.52, 0.51]))
    assert found.loc["merchant-freeze-bottom", "verdict"] == "holds"
    assert found.loc["wu-freeze-saves", "verdict"] == "holds"
    assert "share of backward operations saved: +0.520" in \
        found.loc["wu-freeze-saves", "what this run shows"]
    # a saving reliably below a tenth of the backward pass is no saving worth the name
    assert judge(cheap, _backward([0.04, 0.05, 0.05, 0.06])).loc[
        "wu-freeze-saves", "verdict"] == "equivalent"
    costly = judge(_frozen(0.80, 0.70, 0.60, spread=0.002), _backward(0.52))
    assert costly.loc["wu-freeze-saves", "verdict"] == "not measured"
    assert "precondition does not hold" in costly.loc["wu-freeze-saves",
                                                      "what this run shows"]
    none = judge(cheap[cheap.frozen == "none"], None).loc["wu-freeze-saves"]
    assert none["verdict"] == "not measured" and "freeze_ks is empty" in \
        none["what this run shows"]


def test_layer_change_of_a_model_with_itself_is_the_identity_of_every_measure():
    """Known values: a model against itself is 1 under CKA, neuronsim and RSA at every
    layer, its localization is the same before and after, and attention is undefined
    without attention maps; two models of different depths are refused."""
    rng = np.random.default_rng(3)
    words = [rng.standard_normal((60, 8)) @ rng.standard_normal((8, 8)) for _ in range(4)]
    same = collect.WordLayers(words, None)
    change = collect.layer_change(same, same)
    assert change.layer.tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(change[["linear_cka", "neuronsim", "rsa"]], 1.0, atol=1e-9)
    np.testing.assert_allclose(change.localization_base, change.localization_ft)
    np.testing.assert_allclose(change.ranked_localization_base,
                               change.ranked_localization_ft)
    assert change.ranked_localization_base.between(-1, 1).all()
    assert change.attention_js.isna().all()
    # a rotated copy: CKA and RSA (cosine) stay 1, neuronsim (unit by unit) falls
    Q = np.linalg.qr(rng.standard_normal((8, 8)))[0]
    turned = collect.layer_change(same, collect.WordLayers([X @ Q for X in words], None))
    np.testing.assert_allclose(turned[["linear_cka", "rsa"]], 1.0, atol=1e-9)
    assert (turned.neuronsim < 0.99).all()
    with pytest.raises(ValueError, match="4 and 3 layers"):
        collect.layer_change(same, collect.WordLayers(words[:3], None))


def test_structure_summary_recovers_planted_blocks_over_seeds():
    """Planted blocks in every seed's matrix: block R^2 near 1 with its interval capped at
    1 (an R^2 cannot exceed it), the boundary found, one row per view with its count."""
    rng = np.random.default_rng(4)
    mats = [planted_blocks([0, 3], 8) + rng.normal(0, 0.01, (8, 8)) for _ in range(3)]
    views = {("m", "t", "first"): {"FT-FT": mats, "ORIG-ORIG": mats[:2]}}
    summary = tables.structure_summary(views)
    assert summary.view.tolist() == ["FT-FT", "ORIG-ORIG"]
    assert summary.matrices.tolist() == [3, 2]
    assert (summary.block2_r2 > 0.99).all() and (summary.block2_r2_high <= 1.0).all()
    assert summary.block2_starts.iloc[0] == [0, 3]
    assert (summary.within > summary.between).all()


def test_freezing_runs_train_each_setting_and_seed_and_gate_them(monkeypatch):
    """The unfrozen run and, for each k, the bottom k (with the embeddings, as Merchant et
    al.) and the top k frozen, for every seed of the grid's first model and task; frozen
    runs keep only what they trained; the gate names each run that did not train."""
    calls = []

    class Run:
        def __init__(self, accuracy):
            self.metrics = {"test": {"accuracy": accuracy, "macro_f1": accuracy,
                                     "majority_baseline": 0.5}}
            self.record = {"accuracy": accuracy}

    def fake_run_grid(grid, *, progress=True, store="full", **changes):
        calls.append((grid.models, grid.tasks, grid.seeds, store, changes))
        accuracy = 0.5 if changes.get("freeze_top") == 2 else 0.8
        found = {(grid.models[0], grid.tasks[0], grid.seeds[0]): Run(accuracy)}
        return type("R", (), {"get": lambda self, m, t, s: found[(m, t, s)],
                              "task": lambda self, name: type("T", (), {"test": [0] * 7})()})()

    monkeypatch.setattr(freezing, "run_grid", fake_run_grid)
    grid = FinetuneGrid(models=("a", "b"), tasks=("x", "y"), seeds=(3, 4))
    frame, found = freezing.freezing_runs(
        grid, [1, 2], gate=lambda record: "flat" if record["accuracy"] < 0.6 else "")
    assert {c[:3] for c in calls} == {(("a",), ("x",), (3,)), (("a",), ("x",), (4,))}
    assert len(frame) == 2 * 5 and set(found) == set(zip(frame.frozen, frame.k, frame.seed))
    settings = {(c[2][0], c[3], tuple(sorted(c[4].items()))) for c in calls}
    assert (3, "full", ()) in settings
    assert (3, "trainable", (("freeze_bottom", 1), ("freeze_embeddings", True))) in settings
    assert (4, "trainable", (("freeze_top", 2),)) in settings
    assert frame.did_not_train[frame.k == 2].tolist().count("flat") == 2  # top 2, per seed
    assert (frame.n_test == 7).all()
    no_gate, _ = freezing.freezing_runs(grid, [1], progress=False)
    assert "did_not_train" not in no_gate
    # one end only: the unfrozen run and that end's, nothing of the other
    calls.clear()
    bottom, found = freezing.freezing_runs(grid, [1, 2], ends=["bottom"], progress=False)
    assert bottom.frozen.tolist() == ["none"] * 2 + ["bottom"] * 4  # two seeds each
    assert not any("freeze_top" in c[4] for c in calls)
    top, _ = freezing.freezing_runs(grid, [2], ends=("top",), progress=False)
    assert set(top.frozen) == {"none", "top"}
    for ends in ([], ["middle"], ["bottom", "side"]):
        with pytest.raises(ValueError, match=r"ends must name one or both of \('bottom', "):
            freezing.freezing_runs(grid, [1], ends=ends, progress=False)


def test_summarize_reads_each_group_in_the_frames_order_with_the_columns_asked_for():
    """Known values: each group's mean and t interval (the verdicts' interval), its count of
    values, and the columns ``also`` names read by their mean or their first value."""
    frame = pd.DataFrame({"k": [3, 3, 1, 1, 1], "accuracy": [0.6, 0.8, 0.5, 0.7, np.nan],
                          "loss": [1.0, 3.0, 2.0, 4.0, 6.0], "majority": [0.4] * 5})
    table = summarize(frame, ["k"], "accuracy", also={"loss": "mean", "majority": "first"})
    assert table.k.tolist() == [3, 1]  # the frame's order, not sorted
    np.testing.assert_allclose(table["mean"], [0.7, 0.6])
    assert table.n.tolist() == [2, 2]  # the NaN is no value
    mean, low, high = seed_interval([0.6, 0.8])
    assert (table.low.iloc[0], table.high.iloc[0]) == pytest.approx((low, high))
    np.testing.assert_allclose(table.loss, [2.0, 4.0])
    assert table.majority.tolist() == [0.4, 0.4]
    with pytest.raises(ValueError, match="'median' is not a reading"):
        summarize(frame, ["k"], "accuracy", also={"loss": "median"})
