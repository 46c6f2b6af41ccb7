import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from analysis_lib import models
from analysis_lib.data import corpora, tasks
from analysis_lib.errors import OfflineError
from analysis_lib.training import finetune, loop, probes, surgery
from tests.conftest import TINY, session_inputs

POS = ["good", "great", "excellent", "nice", "lovely"]
NEG = ["bad", "awful", "terrible", "poor", "dreadful"]
SUBJECTS = ["the film", "this car", "our trip", "the food", "that song", "my day"]
VERBS = ["was", "is", "seemed", "felt"]


def keyword_task(seed=0):
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(240):
        positive = i % 2 == 0
        word = rng.choice(POS if positive else NEG)
        texts.append(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} really {word} today")
        labels.append("pos" if positive else "neg")
    corpus = corpora.from_sentences(texts, labels=labels, name="keywords")
    return tasks.task_from_corpus(corpus, n_train=192, n_val=24, n_test=24, seed=seed)


FAST = finetune.FinetuneConfig(batch_size=16, learning_rate=2e-3, epochs=6, warmup_ratio=0.1,
                               max_length=32, seed=0, weight_decay=0.0)


@pytest.fixture(scope="module")
def task():
    return keyword_task()


def _train(task, config=FAST, model="random:bert", **kw):
    return finetune.finetune(model, task, config, progress=False, **{**TINY, **kw})


def test_tiny_model_learns_a_separable_task(task, tmp_path):
    result = _train(task, cache_dir=tmp_path)
    test = result.metrics["test"]
    assert test["majority_baseline"] <= 0.6
    assert test["accuracy"] >= 0.9, test
    assert result.record["history"][-1]["train_loss"] < result.record["history"][0]["train_loss"]
    # the loss curve: up to 20 points over the run's steps, ending at its last step, and the
    # run passes the book's training gate
    curve = result.record["loss_curve"]
    steps = result.record["history"][-1]["steps"]
    assert len(curve) == min(20, steps) and curve[-1]["step"] == steps
    assert curve[-1]["train_loss"] < curve[0]["train_loss"]
    from analysis_lib.claims import training_gate

    assert training_gate.training_problem(result.record) == ""


def test_a_run_until_plateau_stops_where_the_gate_sees_a_plateau(task, tmp_path):
    """``until_plateau`` ends a run at the first epoch whose learning curve has plateaued
    (the rule the training gate reads), with the weights of a run cut there by hand: the
    schedule still spans the most epochs it may train."""
    from analysis_lib.claims import training_gate
    from analysis_lib.training import plateau

    most = replace(FAST, epochs=12)
    stopped = _train(task, replace(most, until_plateau=True), cache=False)
    curve = [e["validation_accuracy"] for e in stopped.record["history"]]
    assert plateau.PATIENCE < len(curve) < 12  # it stopped early, and at a plateau
    assert plateau.plateaued(curve, len(task.validation))
    assert not plateau.plateaued(curve[:-1], len(task.validation))
    assert training_gate.training_problem(stopped.record) == ""
    kept = stopped.record["kept_epoch"]
    assert kept == plateau.best_epoch(curve)
    assert stopped.metrics["validation"]["accuracy"] == curve[kept - 1]
    # the same schedule trained to the end passes through the same curve up to the stop
    full = _train(task, most, cache=False)
    whole = [e["validation_accuracy"] for e in full.record["history"]]
    assert len(whole) == 12 and whole[:len(curve)] == curve
    # the setting is part of the run's key: the two are cached apart
    assert finetune._run_path(models.load("random:bert", **TINY), task, most, torch.device(
        "cpu"), "full", tmp_path) != finetune._run_path(
        models.load("random:bert", **TINY), task, replace(most, until_plateau=True),
        torch.device("cpu"), "full", tmp_path)


def test_a_run_that_stops_on_its_plateau_keeps_its_best_epochs_weights(task, monkeypatch):
    """Early stopping keeps the best epoch: a run whose validation accuracy peaked two
    epochs before its plateau ends with the weights it had then, and reports that epoch's
    validation scores; its test scores are read from those weights."""
    from analysis_lib.training import plateau

    scripted = iter([0.6, 0.9, 0.7, 0.7, 0.7, 0.7])
    states = []
    real_evaluate = finetune.evaluate

    def evaluate(model, tokenizer, task, split, **kw):
        found = real_evaluate(model, tokenizer, task, split, **kw)
        if split != "validation":
            return found
        states.append({k: v.clone() for k, v in model.state_dict().items()})
        return {**found, "accuracy": next(scripted)}

    monkeypatch.setattr(finetune, "evaluate", evaluate)
    result = _train(task, replace(FAST, epochs=6, until_plateau=True), cache=False)
    curve = [e["validation_accuracy"] for e in result.record["history"]]
    assert curve == [0.6, 0.9, 0.7, 0.7]  # the plateau: two epochs without a rise
    assert result.record["kept_epoch"] == plateau.best_epoch(curve) == 2
    assert result.metrics["validation"]["accuracy"] == 0.9
    for name, weights in result.model.state_dict().items():
        assert torch.equal(weights, states[1][name]), name
    assert not all(torch.equal(w, states[3][k]) for k, w in result.model.state_dict().items())
    assert result.metrics["test"] == real_evaluate(
        result.model, result.tokenizer, task, "test", max_length=FAST.max_length,
        batch_size=FAST.eval_batch_size)
    # a run without early stopping keeps its last epoch, whatever its curve
    assert finetune.kept_epoch(FAST, [{"validation_accuracy": a} for a in curve]) == 4


def test_the_best_epoch_is_the_first_highest_finite_score():
    from analysis_lib.training import plateau

    assert plateau.best_epoch([0.5, 0.7, 0.7, 0.6]) == 2
    assert plateau.best_epoch([0.5, float("nan"), 0.4]) == 1
    assert plateau.best_epoch([float("nan"), float("nan")]) == 2
    with pytest.raises(ValueError, match="at least one"):
        plateau.best_epoch([])


def test_the_learning_curve_is_recorded_and_leaves_the_weights_unchanged(task, monkeypatch):
    splits = []
    real_evaluate = finetune.evaluate
    monkeypatch.setattr(finetune, "evaluate",
                        lambda *a, **k: splits.append(a[3]) or real_evaluate(*a, **k))
    result = _train(task, cache=False)
    curve = [e["validation_accuracy"] for e in result.record["history"]]
    assert len(curve) == FAST.epochs and all(0 <= a <= 1 for a in curve)
    # after the last epoch the curve reads the same model as the final validation scores,
    # which are taken from it: the validation split is read once per epoch, the test once
    assert splits == ["validation"] * int(FAST.epochs) + ["test"]
    final = real_evaluate(result.model, result.tokenizer, task, "validation",
                          max_length=FAST.max_length, batch_size=FAST.eval_batch_size)
    assert result.metrics["validation"] == final
    monkeypatch.setattr(finetune, "evaluate", real_evaluate)
    assert curve[-1] > curve[0] or curve[0] == 1.0
    # evaluating after each epoch draws no random numbers: without it, the same weights
    plain = loop.run
    monkeypatch.setattr(loop, "run", lambda *a, **k: plain(*a, **{**k, "on_epoch": None}))
    bare = _train(task, cache=False)
    assert "validation_accuracy" not in bare.record["history"][0]
    for (name, p), q in zip(result.model.state_dict().items(), bare.model.state_dict().values()):
        assert torch.equal(p, q), name


def test_same_seed_is_bit_identical_and_another_seed_differs(task):
    a = _train(task, cache=False)
    b = _train(task, cache=False)
    c = _train(task, replace(FAST, seed=1), cache=False)
    for (name, p), q in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(p, q), name
    assert a.metrics == b.metrics
    key = "classifier.weight"
    assert not torch.equal(a.model.state_dict()[key], c.model.state_dict()[key])


def test_cpu_fine_tuning_does_not_depend_on_the_process_thread_count(task, tmp_path):
    """A product's result depends on how it is split between threads, so the weights are
    trained at ``finetune.CPU_THREADS`` whatever the process (or machine) has; the caller's
    count is set back afterwards."""
    from analysis_lib.training import finetune as ft

    config = replace(FAST, epochs=1, max_steps=6)
    before = torch.get_num_threads()
    weights, keys = [], []
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            result = _train(task, config, cache_dir=tmp_path / str(threads), device="cpu")
            assert torch.get_num_threads() == threads
            assert result.record["cpu_threads"] == ft.CPU_THREADS
            weights.append(result.model.state_dict())
            keys.append(result.path.name)
    finally:
        torch.set_num_threads(before)
    assert keys[0] == keys[1]  # one cache key on every machine, and the same weights
    for (name, p), q in zip(weights[0].items(), weights[1].values()):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("freeze, frozen_layers", [
    (dict(freeze_embeddings=True, freeze_bottom=1), [0]),
    (dict(freeze_top=1), [1]),
    (dict(freeze_layers=(1,)), [0]),
])
def test_frozen_parts_do_not_change(task, freeze, frozen_layers):
    from analysis_lib import models

    base = models.load("random:bert", **TINY).model.state_dict()
    config = replace(FAST, epochs=1, **freeze)
    result = _train(task, config, cache=False)
    tuned = result.model.base_model.state_dict()
    for name, before in base.items():
        if "pooler" in name:
            continue
        layer = int(name.split(".")[2]) if name.startswith("encoder.layer.") else None
        frozen = (layer in frozen_layers) or (freeze.get("freeze_embeddings") and
                                              name.startswith("embeddings."))
        if frozen:
            assert torch.equal(before, tuned[name]), name
        elif "LayerNorm" not in name and "position_ids" not in name and "token_type" not in name:
            assert not torch.equal(before, tuned[name]), name
    assert result.record["frozen_parameters"]


def test_frozen_parameters_get_no_gradient_and_no_optimizer_state(task):
    model = finetune.task_model(models.load("random:bert", **TINY), 2, False, 0)
    config = finetune.FinetuneConfig(freeze_embeddings=True, freeze_bottom=2)
    layers = finetune.frozen_layers(config, 2)
    assert layers == {0, 1, 2}
    frozen = surgery.frozen_parameters(model, layers)
    groups = loop.param_groups(model, frozen, 0.01)
    in_optimizer = {id(p) for g in groups for p in g["params"]}
    for name, p in model.named_parameters():
        assert (name in frozen) == (not p.requires_grad) == (id(p) not in in_optimizer), name
    assert any(n.startswith("bert.embeddings") for n in frozen)


def test_cache_trains_once_retrains_on_change_and_on_damage(task, tmp_path, monkeypatch):
    calls = []
    real_train = finetune.train
    monkeypatch.setattr(finetune, "train", lambda *a, **k: calls.append(1) or real_train(*a, **k))
    first = _train(task, cache_dir=tmp_path)
    again = _train(task, cache_dir=tmp_path)
    assert len(calls) == 1 and again.from_cache and again.metrics == first.metrics
    record = json.loads((again.path / "record.json").read_text())
    assert record["config"]["learning_rate"] == FAST.learning_rate and record["library_version"]
    changed = replace(FAST, learning_rate=1e-3)
    _train(task, changed, cache_dir=tmp_path)
    assert len(calls) == 2
    weights = next(first.path.glob("*.safetensors"))
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.warns(RuntimeWarning, match="damaged"):
        retrained = _train(task, cache_dir=tmp_path)
    assert len(calls) == 3 and not retrained.from_cache
    assert not [p for p in tmp_path.joinpath("finetune").iterdir() if p.name.startswith(".tmp")]


def test_lookup_reads_a_cached_run_and_never_trains(task, tmp_path, monkeypatch):
    calls = []
    real_train = finetune.train
    monkeypatch.setattr(finetune, "train", lambda *a, **k: calls.append(1) or real_train(*a, **k))

    def look(config=FAST, **kw):
        return finetune.lookup("random:bert", task, config, cache_dir=tmp_path,
                               **{**TINY, **kw})

    assert look() is None and not calls
    trained = _train(task, cache_dir=tmp_path)
    found = look()
    assert len(calls) == 1 and found.from_cache and found.path == trained.path
    assert found.metrics == trained.metrics
    # another setting, store or model size is another run, and is not found
    assert look(replace(FAST, seed=1)) is None
    assert look(store="trainable") is None
    assert look(layers=TINY["layers"] + 1) is None
    assert len(calls) == 1


def test_saved_model_loads_through_models_and_extract(task, tmp_path):
    from analysis_lib import extract

    result = _train(task, cache_dir=tmp_path)
    loaded = result.load()
    assert loaded.info.source == "local" and loaded.info.n_layers == TINY["layers"] + 1
    corpus = corpora.from_sentences(task.test.texts[:5])
    out = extract.extract(loaded, corpus, cache=False, progress=False)
    assert out.words.shape[0] == TINY["layers"] + 1
    with torch.inference_mode():
        enc = result.tokenizer(task.test.texts[:2], return_tensors="pt", padding=True)
        np.testing.assert_allclose(loaded.model(**enc).last_hidden_state.numpy(),
                                   result.model.base_model(**enc).last_hidden_state.numpy(),
                                   atol=1e-6)


@pytest.mark.parametrize("family, freeze", [
    ("bert", dict(freeze_embeddings=True, freeze_bottom=1)),
])
def test_a_frozen_run_that_keeps_its_trained_weights_only_reads_back_the_same_model(
        task, tmp_path, family, freeze):
    from analysis_lib import extract

    config = replace(FAST, epochs=1, **freeze)
    full = _train(task, config, model=f"random:{family}", cache_dir=tmp_path)
    part = _train(task, config, model=f"random:{family}", cache_dir=tmp_path,
                  store="trainable")
    again = _train(task, config, model=f"random:{family}", cache_dir=tmp_path,
                   store="trainable")
    assert not part.from_cache and again.from_cache and part.path != full.path
    from safetensors.torch import load_file

    kept = set(load_file(str(part.path / finetune.TRAINABLE)))
    frozen = set(part.record["frozen_parameters"])
    assert frozen and kept == set(full.model.state_dict()) - frozen  # none of the frozen
    assert again.metrics == full.metrics  # the same training, bit for bit
    for name, value in full.model.state_dict().items():
        assert torch.equal(value, again.model.state_dict()[name]), name
    # the encoder extracts the same arrays as the full folder's
    corpus = corpora.from_sentences(task.test.texts[:6])
    a = extract.extract(full.load(), corpus, cache=False, progress=False)
    b = extract.extract(again.load(), corpus, cache=False, progress=False)
    np.testing.assert_array_equal(a.words, b.words)
    np.testing.assert_array_equal(a.sentence_first, b.sentence_first)
    assert b.info.fingerprint == f"finetune-{again.path.name}"
    with pytest.raises(ValueError, match="store='trainable'.*finetune"):
        models.load(str(again.path))
    # a damaged weights file is found and the run trained again
    weights = again.path / finetune.TRAINABLE
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.warns(RuntimeWarning, match="damaged"):
        retrained = _train(task, config, model=f"random:{family}", cache_dir=tmp_path,
                           store="trainable")
    assert not retrained.from_cache and retrained.metrics == full.metrics
    with pytest.raises(ValueError, match="unknown store 'half'; valid: full, trainable"):
        _train(task, config, cache=False, store="half")


@pytest.mark.parametrize("family", ["bert", "gpt2", "distilbert", "xlnet", "roberta",
                                    "albert", "electra", "mpnet", "llama"])
def test_truncation_and_empty_skip_reproduce_the_full_model(task, family):
    result = _train(task, replace(FAST, epochs=1), model=f"random:{family}", cache=False)
    m, tok = result.model, result.tokenizer
    full = finetune.predict(m, tok, task.test)
    np.testing.assert_array_equal(finetune.predict(m, tok, task.test, layer=2), full)
    np.testing.assert_array_equal(finetune.predict(m, tok, task.test, skip=()), full)
    np.testing.assert_array_equal(finetune.predict(m, tok, task.test, skip=None), full)
    cut = finetune.predict(m, tok, task.test, layer=1)
    skipped = finetune.predict(m, tok, task.test, skip=(2, 2))
    np.testing.assert_allclose(cut, skipped, atol=1e-6)  # the same single remaining layer
    assert not np.allclose(cut, full)
    if family == "albert":  # one shared layer applied L times
        assert m.config.num_hidden_layers == 2
    else:
        assert len(surgery.layer_list(m)) == 2  # restored


def test_linear_probe_untuned_and_tunedorig(task, tmp_path):
    result = _train(task, cache_dir=tmp_path)
    tuned = probes.linear_probe(result.load(), task, layer=2, cache=False)
    from analysis_lib import models

    untuned = probes.linear_probe(models.load("random:bert", **TINY), task, layer=0,
                                    cache=False)
    # the random model's embeddings carry the keywords too, but less cleanly than the
    # fine-tuned top layer
    assert tuned["accuracy"] >= 0.9 and tuned["accuracy"] >= untuned["accuracy"]
    assert untuned["majority_baseline"] == task.majority_baseline("test")
    with pytest.raises(ValueError, match=r"layer=9 is out of range: this model has layers 0\.\.2"):
        probes.linear_probe(result.load(), task, layer=9)


def test_logistic_probe_reaches_the_exact_optimum_closer_than_lbfgs_at_the_same_tolerance():
    """The book's probe against a slow reference, on many classes, correlated features and
    a large offset (what a layer's word rows look like): its coefficients lie within 1e-2 of
    L-BFGS run to a tolerance of 1e-10, closer than L-BFGS at the default tolerance; its
    predictions agree but for a handful, and float32
    rows reach the same optimum."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(3)
    n, d, k = 1500, 48, 20
    mix = rng.standard_normal((d, d)) / np.sqrt(d)
    X = rng.standard_normal((n, d)) @ (np.eye(d) + 0.9 * mix) + 500.0
    y = (X - 500.0) @ rng.standard_normal((d, k)) + 2.0 * rng.standard_normal((n, k))
    y = y.argmax(axis=1)
    probe = probes.logistic_probe(C=0.1).fit(X, y)
    Z = probe[0].transform(X)
    exact = LogisticRegression(C=0.1, tol=1e-10, max_iter=20000).fit(Z, y)
    lbfgs = LogisticRegression(C=0.1, max_iter=1000).fit(Z, y)  # the same tolerance, 1e-4
    fitted = probe[-1]
    error = np.abs(fitted.coef_ - exact.coef_).max()
    assert error < 1e-2 and error < np.abs(lbfgs.coef_ - exact.coef_).max()
    assert (probe.predict(X) != exact.predict(Z)).sum() <= 3
    plain = probes.logistic_probe(C=0.1, standardise=False).fit(Z.astype(np.float32), y)
    assert np.abs(plain.coef_ - exact.coef_).max() < 1e-2
    assert np.array_equal(probes.logistic_probe(C=0.1).fit(X, y)[-1].coef_,
                          fitted.coef_)  # the same fit twice


def test_offline_tasks_and_baselines():
    t = tasks.load_task("tweets-sentiment", n_train=300, n_val=50, n_test=100, seed=1)
    assert (len(t.train), len(t.validation), len(t.test)) == (300, 50, 100)
    assert t.num_labels == 3 and 0.3 < t.majority_baseline() < 0.6
    same = tasks.load_task("tweets-sentiment", n_train=300, n_val=50, n_test=100, seed=1)
    assert same.train.texts == t.train.texts and same.fingerprint() == t.fingerprint()
    assert not set(t.train.texts) & set(t.test.texts)
    b = tasks.load_task("bbc-topic", unit="headline", n_train=100, n_val=20, n_test=20)
    assert b.num_labels == 5 and b.meta["unit"] == "headline"


def test_bad_input():
    with pytest.raises(ValueError, match="unknown task 'nope'.*tweets-sentiment"):
        tasks.load_task("nope")
    one = corpora.from_sentences(["a b", "c d", "e f"], labels=["x", "x", "x"])
    with pytest.raises(ValueError, match="single class"):
        tasks.task_from_corpus(one)
    with pytest.raises(ValueError, match="no labels"):
        tasks.task_from_corpus(corpora.from_sentences(["a b", "c d"]))
    with pytest.raises(ValueError, match=r"column\(s\) \['label'\]"):
        tasks.task_from_frame(pd.DataFrame({"text": ["a", "b"], "y": [0, 1]}))
    with pytest.raises(ValueError, match="freeze_bottom=5 but the model has 2"):
        _train(keyword_task(), finetune.FinetuneConfig(freeze_bottom=5), cache=False)
    with pytest.raises(ValueError, match="unknown preset"):
        finetune.preset("fastest")


def test_glue_offline_gives_offline_error(monkeypatch):
    import datasets

    def refuse(*a, **k):
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    with pytest.raises(OfflineError, match="glue/sst2"):
        tasks.load_task("sst2")


def test_bucketed_batches_cover_every_example_once():
    lengths = np.random.default_rng(0).integers(3, 60, size=203)
    batches = loop.bucketed_batches(lengths, 16, 4, np.random.default_rng(1))
    flat = np.concatenate(batches)
    assert sorted(flat) == list(range(203))
    spread = np.mean([np.ptp(lengths[b]) for b in batches])
    assert spread < np.ptp(lengths) / 3  # batches hold similar lengths


@pytest.mark.parametrize("labels, message", [
    ([0, 1, -100, 1], r"labels \[-100\] are not class indices 0..1"),
    ([0, 1, 7, 1], r"labels \[7\] are not class indices 0..1"),
    ([0, 1, 2.5, 1], r"labels \[2.5\] are not class indices 0..1"),
    ([0, 1, float("nan"), 1], "must be finite numbers"),
])
def test_tasks_refuse_labels_a_model_cannot_use(labels, message):
    from analysis_lib.data.tasks import Split, Task

    split = Split(["a", "b", "c", "d"], np.array(labels, dtype=float))
    good = Split(["a", "b"], np.array([0, 1]))
    with pytest.raises(ValueError, match=message):
        Task("t", split, good, good, ["x", "y"])


def test_tasks_refuse_one_label_name_and_missing_labels():
    from analysis_lib.data.tasks import Split, Task

    one = Split(["a", "b"], np.array([0, 0]))
    with pytest.raises(ValueError, match="1 label name"):
        Task("t", one, one, one, ["only"])
    with pytest.raises(ValueError, match=r"labels of sentences \[1\] are missing"):
        corpora.from_sentences(["a b", "c d"], labels=["x", float("nan")])


@pytest.mark.parametrize("field, value, message", [
    ("epochs", 0, "epochs must be > 0"), ("batch_size", 0, "batch_size must be a positive"),
    ("learning_rate", 0.0, "learning_rate must be > 0"), ("max_steps", 0, "max_steps"),
])
def test_impossible_schedules_are_refused_before_training(task, field, value, message):
    with pytest.raises(ValueError, match=message):
        _train(task, replace(FAST, **{field: value}), cache=False)


@pytest.mark.parametrize("damage", [{"metrics": None}, {"checksums": {}}, [1, 2]])
def test_a_record_of_the_wrong_shape_is_retrained(task, tmp_path, damage):
    first = _train(task, replace(FAST, epochs=1), cache_dir=tmp_path)
    record = json.loads((first.path / "record.json").read_text())
    bad = {**record, **damage} if isinstance(damage, dict) else damage
    (first.path / "record.json").write_text(json.dumps(bad))
    with pytest.warns(RuntimeWarning, match="damaged"):
        again = _train(task, replace(FAST, epochs=1), cache_dir=tmp_path)
    assert not again.from_cache and again.metrics == first.metrics
    assert _train(task, replace(FAST, epochs=1), cache_dir=tmp_path).from_cache


def test_a_folder_replaced_by_another_checkpoint_of_the_same_sizes_is_trained_again(
        task, tmp_path):
    """The cache key holds the base model's weights: a folder overwritten (``cp -rp``) by
    another checkpoint with the same file names, sizes and times is another model, never
    served the first one's fine-tuned weights."""
    import os
    import shutil

    first, second = tmp_path / "seed0", tmp_path / "seed1"
    for seed, folder in ((0, first), (1, second)):
        loaded = models.load("random:bert", seed=seed, **TINY)
        loaded.model.save_pretrained(folder)
        loaded.tokenizer.save_pretrained(folder)
    for a in first.iterdir():  # the same times too, as cp -p leaves them
        b = second / a.name
        assert a.stat().st_size == b.stat().st_size
        os.utime(b, ns=(a.stat().st_atime_ns, a.stat().st_mtime_ns))
    model = tmp_path / "model"
    shutil.copytree(first, model)
    trained = finetune.finetune(str(model), task, FAST, progress=False, cache_dir=tmp_path)
    shutil.rmtree(model)
    shutil.copytree(second, model)
    again = finetune.finetune(str(model), task, FAST, progress=False, cache_dir=tmp_path)
    assert not again.from_cache and again.path != trained.path


def test_the_loss_curve_has_evenly_spaced_points_that_average_every_step():
    from analysis_lib.training.loop import LOSS_POINTS, loss_curve

    losses = [float(k) for k in range(100)]
    curve = loss_curve(losses)
    assert len(curve) == LOSS_POINTS == 20 and curve[-1]["step"] == 100
    assert [p["step"] for p in curve[:3]] == [5, 10, 15]
    assert curve[0]["train_loss"] == 2.0 and curve[-1]["train_loss"] == 97.0
    # windows cover every step once: their step-weighted means give the overall mean
    steps = np.diff([0] + [p["step"] for p in curve])
    assert np.dot(steps, [p["train_loss"] for p in curve]) / 100 == pytest.approx(49.5)
    assert [p["step"] for p in loss_curve([1.0, 2.0, 3.0])] == [1, 2, 3]  # one per step
    assert len(loss_curve(losses[:33], points=10)) == 10
    with pytest.raises(ValueError, match="points must be at least 1"):
        loss_curve(losses, points=0)


def keyword_tags(task):
    """The keyword task's own inputs, each word tagged: 1 a positive word, 2 a negative one,
    0 any other (a word-level task that only the word's identity decides)."""
    def tagged(split):
        words = [text.split() for text in split.texts]
        labels = np.concatenate([[1 if w in POS else 2 if w in NEG else 0 for w in ws]
                                 for ws in words])
        return tasks.Split(list(split.texts), labels, words=words)

    return tasks.Task("keywords:tags", tagged(task.train), tagged(task.validation),
                      tagged(task.test), ["other", "positive", "negative"])


def test_a_word_level_task_trains_a_token_classifier_scored_per_word(task, tmp_path):
    tagged = keyword_tags(task)
    assert tagged.word_level and not task.word_level
    n_words = sum(len(w) for w in tagged.test.words)
    # per word: 4 of a keyword sentence's 6 words are "other"
    assert tagged.majority_baseline() == pytest.approx(5 / 6)
    result = _train(tagged, cache_dir=tmp_path)
    test = result.metrics["test"]
    assert test["n"] == len(tagged.test) and test["accuracy"] == 1.0, test  # examples
    assert type(result.model).__name__.endswith("ForTokenClassification")
    assert result.record["task_level"] == "word"
    logits = finetune.predict(result.model, result.tokenizer, tagged.test, max_length=32)
    assert logits.shape == (n_words, 3)
    # one row per word, read on its first piece: the rows line up with the labels
    np.testing.assert_array_equal(logits.argmax(1), tagged.test.labels)
    # a word cut off by the token limit has no logits and counts as wrong
    cut = finetune.predict(result.model, result.tokenizer, tagged.test, max_length=4)
    assert np.isnan(cut).any(axis=1).sum() > 0 and not np.isnan(cut[0]).any()
    short = finetune.evaluate(result.model, result.tokenizer, tagged, max_length=4)
    assert short["accuracy"] < 0.7
    # read back from the cache as a token classifier, and as an encoder for extraction
    again = _train(tagged, cache_dir=tmp_path)
    assert again.from_cache and type(again.model).__name__ == type(result.model).__name__
    assert again.metrics == result.metrics
    encoder = again.load()
    assert encoder.info.n_attention_layers == result.model.config.num_hidden_layers


def test_word_level_splits_keep_each_example_with_its_labels():
    words = [["a", "b"], ["c"], ["d", "e", "f"]]
    split = tasks.Split(["a b", "c", "d e f"], np.array([0, 1, 1, 0, 1, 0]), words=words)
    assert len(split) == 3
    assert [w.tolist() for w in split.word_labels()] == [[0, 1], [1], [0, 1, 0]]
    part = split.subset([2, 0])
    assert part.words == [["d", "e", "f"], ["a", "b"]] and part.labels.tolist() == [0, 1, 0,
                                                                                     0, 1]
    assert split.subset([]).labels.size == 0
    with pytest.raises(ValueError, match="has 6 words and 5 labels"):
        tasks.Task("t", tasks.Split(["a b", "c", "d e f"], np.array([0, 1, 1, 0, 1]),
                                    words=words), split, split, ["x", "y"])
    with pytest.raises(ValueError, match="some splits give words"):
        tasks.Task("t", split, tasks.Split(["a"], np.array([0])), split, ["x", "y"])
    with pytest.raises(ValueError, match="one label per example"):
        tasks.Split(["a"], np.array([0])).word_labels()


# --------------------------------------------------------------------------- precision


def test_training_precision_auto_is_bfloat16_only_on_a_cpu_that_computes_it(monkeypatch):
    from analysis_lib.runtime import device, machine

    cpu = torch.device("cpu")
    for flags, expected in ((set(), "float32"), ({"avx512f", "avx2"}, "float32"),
                            ({"avx512_bf16"}, "bfloat16"), ({"amx_bf16", "amx_tile"},
                                                            "bfloat16")):
        monkeypatch.setattr(machine, "cpu_flags", lambda flags=flags: frozenset(flags))
        assert device.training_precision("auto", cpu) == expected, flags
        # a model narrower than BF16_MIN_WIDTH gains nothing from bfloat16: float32
        assert device.training_precision("auto", cpu, 384) == expected, flags
        assert device.training_precision("auto", cpu, 64) == "float32", flags
        assert device.training_precision("bfloat16", cpu, 64) == "bfloat16"
        # an explicit precision is kept whatever the CPU has
        assert device.training_precision("float32", cpu) == "float32"
        assert device.training_precision("bfloat16", cpu) == "bfloat16"
    # a GPU trains the library's small steps faster in float32 (running page, "On a GPU")
    assert device.training_precision("auto", torch.device("cuda")) == "float32"
    assert device.training_precision("bfloat16", torch.device("cuda")) == "bfloat16"
    for bad in ("float16", "fp32", "half"):
        with pytest.raises(ValueError, match="training precision is one of"):
            device.training_precision(bad, cpu)
    with pytest.raises(ValueError, match="FinetuneConfig.precision"):
        finetune.check_config(replace(FAST, precision="float16"))


def test_auto_trains_a_narrow_model_in_float32_and_a_wide_one_in_bfloat16(task, monkeypatch):
    """On a CPU with native bfloat16, "auto" resolves per model: the tiny test model (32
    wide) trains in float32, a model BF16_MIN_WIDTH (256) wide in bfloat16; the record,
    which the cache key is made from, holds the precision it resolved to."""
    from analysis_lib.runtime import machine

    monkeypatch.setattr(machine, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    auto = replace(FAST, precision="auto", epochs=1)
    narrow = _train(task, auto, cache=False, device="cpu")
    assert narrow.record["config"]["precision"] == "float32"
    wide = _train(task, auto, cache=False, device="cpu", hidden=256, heads=4)
    assert wide.record["config"]["precision"] == "bfloat16"


def test_a_bfloat16_run_learns_is_reproducible_and_never_shares_a_float32_runs_cache(
        task, tmp_path, monkeypatch):
    """bfloat16 autocast trains other weights than float32 (its products round to 8 bits
    of mantissa), learns the task as well, gives the same weights again for the same seed,
    and is cached under its own key: a float32 request never reads a bfloat16 run, nor
    the reverse; "auto" is stored as the precision it resolved to."""
    from analysis_lib.runtime import device

    calls = []
    real_train = finetune.train
    monkeypatch.setattr(finetune, "train", lambda *a, **k: calls.append(1) or real_train(*a, **k))
    half = replace(FAST, precision="bfloat16")
    single = _train(task, cache_dir=tmp_path)
    low = _train(task, half, cache_dir=tmp_path)
    assert len(calls) == 2 and low.path != single.path and not low.from_cache
    assert low.record["config"]["precision"] == "bfloat16"
    assert single.record["config"]["precision"] == "float32"
    assert low.metrics["test"]["accuracy"] >= 0.9, low.metrics
    key = "classifier.weight"
    assert not torch.equal(low.model.state_dict()[key], single.model.state_dict()[key])
    # autocast leaves the weights themselves in float32
    assert all(p.dtype == torch.float32 for p in low.model.parameters())
    again = _train(task, half, cache=False)
    for (name, p), q in zip(low.model.state_dict().items(), again.model.state_dict().values()):
        assert torch.equal(p, q), name
    assert again.metrics == low.metrics
    # each precision reads back its own run
    assert _train(task, cache_dir=tmp_path).metrics == single.metrics
    assert _train(task, half, cache_dir=tmp_path).from_cache and len(calls) == 3
    # "auto" is the resolved precision's run, never a third one
    resolved = device.training_precision("auto", device.resolve(None), TINY["hidden"])
    auto = _train(task, replace(FAST, precision="auto"), cache_dir=tmp_path)
    assert auto.from_cache and auto.record["config"]["precision"] == resolved
    assert auto.path == (low if resolved == "bfloat16" else single).path


def test_the_learning_curve_is_read_in_the_training_precision_and_the_test_in_float32(
        task, monkeypatch):
    """A bfloat16 run evaluates its validation split after each epoch under bfloat16
    autocast (the curve costs a third of float32's time there) and its test split in
    float32; a float32 run reads both in float32. The kept validation scores are the
    curve's own."""
    seen = []
    real = finetune.evaluate

    def watched(model, tokenizer, task, split="test", **options):
        on = torch.is_autocast_enabled("cpu")
        seen.append((split, torch.get_autocast_dtype("cpu") if on else torch.float32))
        return real(model, tokenizer, task, split, **options)

    monkeypatch.setattr(finetune, "evaluate", watched)
    for precision, curve in (("bfloat16", torch.bfloat16), ("float32", torch.float32)):
        seen.clear()
        run = _train(task, replace(FAST, precision=precision, epochs=3), cache=False,
                     device="cpu")
        assert seen == [("validation", curve)] * 3 + [("test", torch.float32)], seen
        last = run.record["history"][-1]
        assert run.metrics["validation"]["accuracy"] == last["validation_accuracy"]


_FRESH_RUN = """
import hashlib
from dataclasses import replace
from analysis_lib.training import finetune
from tests.conftest import TINY
from tests.test_finetune import FAST, keyword_task
for precision in ("float32", "bfloat16"):
    result = finetune.finetune("random:bert", keyword_task(), replace(
        FAST, epochs=2, precision=precision), cache=False, progress=False, **TINY)
    digest = hashlib.sha256()
    for name, value in result.model.state_dict().items():
        digest.update(name.encode() + value.detach().contiguous().numpy().tobytes())
    print(precision, digest.hexdigest())
"""


def test_the_same_seed_trains_the_same_weights_in_a_fresh_process(tmp_path):
    """Two fresh processes (no model cached, nothing warmed up) train bit-identical weights
    for the same seed, in either precision, and the two precisions train other weights."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "ANALYSIS_LIB_CACHE": str(session_inputs(tmp_path / "cache")),
           "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    runs = [subprocess.run([sys.executable, "-c", _FRESH_RUN], cwd=root, env=env,
                           capture_output=True, text=True, check=True).stdout.split()[-4:]
            for _ in range(2)]
    assert runs[0][0::2] == ["float32", "bfloat16"]
    assert runs[0] == runs[1] and runs[0][1] != runs[0][3] and len(runs[0][1]) == 64
