"""Truncation: the own head on cached first-token vectors, head re-fitting, the skip grid and
models cut before fine-tuning."""

import numpy as np
import pandas as pd
import pytest
import torch

from analysis_lib import claims, collect, extract, models, readout
from analysis_lib.book import prose
from analysis_lib.claims import causes, verdicts
from analysis_lib.claims.claim import claim_of
from analysis_lib.claims.papers import merchant, phang
from analysis_lib.data import corpora, tasks
from analysis_lib.training import finetune, surgery
from analysis_lib.training.grid import Runs
from analysis_lib.training.heads import FirstTokenHead, fit_head, fit_heads, head_logits
from tests.conftest import TINY


def _views(blocks: bool, seeds: int = 3) -> dict:
    """The CKA views the UNTUNED claim presupposes: the fine-tuned models' layers in two
    blocks (bottom three, top three) over a pretrained model whose similarity decays
    smoothly with distance, or the fine-tuned ones decaying the same way (no blocks)."""
    n = 7
    distance = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    decay = 1.0 - 0.1 * distance
    half = np.arange(n) >= 4
    planted = np.where(half[:, None] == half[None, :], 0.9, 0.3)
    np.fill_diagonal(planted, 1.0)
    rng = np.random.default_rng(0)
    tuned = [(planted if blocks else decay) + rng.normal(0, 0.002, (n, n))
             for _ in range(seeds)]
    return {("m", "t", "first"): {"FT-FT": [(M + M.T) / 2 for M in tuned],
                                  "ORIG-ORIG": [decay]}}


def _findings(scores, link=None, truncated=None, full=None, skips=None, *, untrained=None,
              views=None):
    """The truncation chapter's findings: its claims judged on these results (the views
    of a fine-tuned model with blocks of similar layers unless ``views`` says otherwise)."""
    return verdicts.judge(claims.of_chapter("truncation"), {
        "scores": scores, "link": link, "truncated": truncated, "full": full, "skips": skips,
        "views": _views(True) if views is None else views, "untrained": untrained})


@pytest.fixture(scope="module")
def task():
    texts = [f"{'good' if i % 2 else 'bad'} thing number {i % 7}" for i in range(120)]
    corpus = corpora.from_sentences(texts, labels=[i % 2 for i in range(120)])
    return tasks.task_from_corpus(corpus, n_train=80, n_val=20, n_test=20)


@pytest.mark.parametrize("family", ["bert", "albert", "roberta", "electra", "distilbert"])
def test_own_head_on_first_token_vectors_reproduces_the_model(family, task):
    base = models.load(f"random:{family}", **TINY)
    model = finetune.task_model(base, 2, False, 0).eval()
    corpus = tasks.split_corpus(task.test)
    # the encoder inside the task model, read through the library's extraction
    encoder = models.LoadedModel(model.base_model, base.tokenizer, base.info)
    first = extract.extract(encoder, corpus, cache=False, progress=False).sentence_first
    logits = finetune.predict(model, base.tokenizer, task.test)
    head = FirstTokenHead(model)
    np.testing.assert_allclose(head_logits(head, first[-1]), logits, atol=1e-4)
    # and on a lower layer it is what the truncated model predicts
    cut = finetune.predict(model, base.tokenizer, task.test, layer=1)
    np.testing.assert_allclose(head_logits(head, first[1]), cut, atol=1e-4)


def test_heads_that_do_not_read_the_first_token_are_refused():
    base = models.load("random:gpt2", **TINY)
    model = finetune.task_model(base, 2, False, 0)
    with pytest.raises(ValueError, match="does not read the first token.*probe"):
        FirstTokenHead(model)


def test_fit_head_learns_and_is_deterministic():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 16)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    base = models.load("random:bert", **{**TINY, "hidden": 16, "heads": 2})
    weights = []
    for _ in range(2):
        head = FirstTokenHead(finetune.task_model(base, 2, False, 0))
        info = fit_head(head, X[:150], y[:150], X[150:], y[150:], epochs=40, seed=3)
        weights.append(head.classifier.weight.detach().clone())
    assert info["validation_accuracy"] >= 0.9
    assert torch.equal(weights[0], weights[1])


def _heads_data(k, n=200, d=16, seed=0):
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal((n, d)).astype(np.float32) for _ in range(k)]
    y = (xs[0][:, 0] + 0.5 * xs[0][:, 1] > 0).astype(int)
    return xs, y


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_heads_trained_side_by_side_are_the_heads_trained_alone(family):
    """Without dropout (the one thing drawn from a shared stream) fit_heads gives each head
    exactly the weights and best epoch fit_head gives it, though each head reads its own
    features and starts from its own weights."""
    xs, y = _heads_data(3)
    base = models.load(f"random:{family}", **{**TINY, "hidden": 16, "heads": 2})

    def head(seed):
        made = FirstTokenHead(finetune.task_model(base, 2, False, seed))
        for module in made.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        return made

    alone = [head(s) for s in range(3)]
    infos = [fit_head(h, x[:150], y[:150], x[150:], y[150:], epochs=15, seed=3)
             for h, x in zip(alone, xs)]
    together = [head(s) for s in range(3)]
    found = fit_heads(together, [x[:150] for x in xs], y[:150], [x[150:] for x in xs],
                      y[150:], epochs=15, seed=3)
    assert found == infos
    for a, b in zip(alone, together):
        for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
            np.testing.assert_allclose(pa.detach(), pb.detach(), atol=1e-5, err_msg=name)
    # and the heads did learn: the first reads the features the labels come from, well
    # above the majority share (about a half)
    assert infos[0]["validation_accuracy"] >= 0.75


def test_fit_heads_is_deterministic_and_checks_its_arguments():
    xs, y = _heads_data(2)
    base = models.load("random:bert", **{**TINY, "hidden": 16, "heads": 2})
    weights = []
    for _ in range(2):
        heads = [FirstTokenHead(finetune.task_model(base, 2, False, 0)) for _ in xs]
        fit_heads(heads, [x[:150] for x in xs], y[:150], [x[150:] for x in xs], y[150:],
                  epochs=5, seed=1)
        weights.append([h.classifier.weight.detach().clone() for h in heads])
    assert all(torch.equal(a, b) for a, b in zip(*weights))
    assert fit_heads([], [], y, [], y) == []
    with pytest.raises(ValueError, match="2 heads need as many"):
        fit_heads(heads, xs[:1], y, xs, y)
    with pytest.raises(ValueError, match="150 training vectors for 200 labels"):
        fit_heads(heads, [x[:150] for x in xs], y, xs, y)


def test_skip_grid_is_the_upper_triangle(task):
    base = models.load("random:bert", **TINY)
    model = finetune.task_model(base, 2, False, 0).eval()
    result = finetune.FineTuned(None, model, base.tokenizer,
                                {"config": {"max_length": 32}, "metrics": {}})
    grid = readout.skip_scores(result, task)
    n = TINY["layers"]
    assert len(grid) == n * (n + 1) // 2 - 1  # all spans but the one removing every layer
    assert (grid["first"] <= grid["last"]).all()
    assert (grid.single == (grid["first"] == grid["last"])).all()
    assert grid.accuracy.between(0, 1).all()
    singles = readout.skip_scores(result, task, single_only=True)
    assert singles.single.all() and len(singles) == n
    diagonal = grid[grid.single].reset_index(drop=True)
    pd.testing.assert_frame_equal(singles.reset_index(drop=True), diagonal)
    # the floor each skip is read beside: the majority baseline on the examples scored
    assert (grid.majority == task.majority_baseline("test")).all()
    few = readout.skip_scores(result, task, n_test=7, single_only=True)
    labels = task.test.labels[:7]
    trained_majority = np.bincount(task.train.labels.astype(int)).argmax()
    assert (few.majority == np.mean(labels == trained_majority)).all()


def test_truncated_copy_keeps_the_bottom_layers_exactly(tmp_path):
    full = models.load("random:bert", **{**TINY, "layers": 3})
    folder = surgery.truncated_copy("random:bert", 2, cache_dir=tmp_path, **{**TINY, "layers": 3})
    assert surgery.truncated_copy("random:bert", 2, cache_dir=tmp_path,
                                  **{**TINY, "layers": 3}) == folder  # made once
    cut = models.load(folder)
    assert cut.info.n_attention_layers == 2
    ids = full.tokenizer(["some words here"], return_tensors="pt")
    with torch.inference_mode():
        a = full.model(**ids, output_hidden_states=True).hidden_states
        b = cut.model(**ids, output_hidden_states=True).hidden_states
    assert len(b) == 3
    for x, y in zip(a[:3], b):
        torch.testing.assert_close(x, y)


def _scores(untuned_drop, tuned_drop, gain, seeds=(0, 1, 2), layers=6, noise=0.002):
    """A score grid with planted accuracies: full 0.8; UNTUNED and TUNED two layers below
    the top lower by the given drops; TUNED above TUNEDORIG by ``gain``."""
    import pandas as pd

    rng = np.random.default_rng(0)
    rows = []
    for seed in seeds:
        for layer in range(1, layers + 1):
            below = layer <= layers - 2
            for config, value in (("UNTUNED", 0.8 - (untuned_drop if below else 0)),
                                  ("TUNED", 0.8 - (tuned_drop if below else 0)),
                                  ("TUNEDORIG", 0.8 - (tuned_drop if below else 0) - gain)):
                rows.append({"model": "m", "task": "t", "seed": seed, "config": config,
                             "layer": layer, "accuracy": value + noise * rng.standard_normal(),
                             "full": 0.8, "majority": 0.5})
    return pd.DataFrame(rows)


def _by_depth(scores):
    """The UNTUNED claim judged at every number of dropped layers, as the truncation page
    judges it: the claim's own evidence with ``dropped`` as a setting."""
    top = int(scores.layer.max())
    return causes.by_unit(claim_of(phang.untuned),
                          {d: phang.untuned(scores, dropped=d) for d in range(1, top)},
                          "dropped", "full - UNTUNED")


def _at(table, dropped):
    return table[table.dropped == dropped]


def test_untuned_judged_at_each_number_of_dropped_layers_by_the_claims_rule():
    scores = _scores(untuned_drop=0.3, tuned_drop=0.0, gain=0.1)  # collapses 2 below the top
    table = _by_depth(scores)
    assert table.dropped.tolist() == [1, 2, 3, 4, 5]
    assert table.unit.nunique() == 1 and table.n.tolist() == [3] * 5
    assert table.verdict.tolist() == ["holds"] + ["opposite"] * 4
    np.testing.assert_allclose(table["full - UNTUNED"].iloc[1:], 0.3, atol=0.01)
    assert (table.low <= table["full - UNTUNED"]).all()
    assert (table["full - UNTUNED"] <= table.high).all()
    # two dropped layers is the findings table's own statistic, unit for unit
    found = _findings(scores)
    assert f"{table['full - UNTUNED'].iloc[1]:+.3f}" in found.loc["phang-untuned",
                                                                  "what this run shows"]
    assert table.verdict.iloc[1] == found.loc["phang-untuned", "verdict"]
    assert phang.untuned(scores) == phang.untuned(scores, dropped=2)
    # a third of 6 layers is two (Phang et al. drop four of twelve): the claim's own row
    assert round(6 * phang.PHANG_SHARE) == 2
    change = causes.changes(_at(table, 2), _at(table, 2), ["unit"], "full - UNTUNED")
    assert change.before.tolist() == change.after.tolist()
    assert causes.setting_cause(change.verdict_before, change.verdict_after) == \
        "not the cause"
    # twelve layers: the paper's share is four dropped, where this model does not collapse
    deep = _scores(untuned_drop=0.3, tuned_drop=0.0, gain=0.1, layers=12)
    deep.loc[(deep.config == "UNTUNED") & (deep.layer <= 8), "accuracy"] = 0.8
    deep = _by_depth(deep)
    assert round(12 * phang.PHANG_SHARE) == 4
    change = causes.changes(_at(deep, 2), _at(deep, 4), ["unit"], "full - UNTUNED")
    assert (change.verdict_before.tolist(), change.verdict_after.tolist()) == \
        (["opposite"], ["holds"])
    assert causes.setting_cause(change.verdict_before, change.verdict_after) == "the cause"
    assert causes.changes(deep.iloc[:0], deep.iloc[:0], ["unit"], "full - UNTUNED").empty


def test_by_unit_judges_each_unit_on_its_own_and_keeps_the_settings_order():
    """Two units at each setting: each judged as the claim judges one unit alone (no
    adjustment over the two), one row per setting and unit, in the order given."""
    two = pd.concat([_scores(0.3, 0.0, 0.1), _scores(0.0, 0.0, 0.1).assign(task="u")])
    table = causes.by_unit(claim_of(phang.untuned),
                           {d: phang.untuned(two, dropped=d) for d in (3, 1)},
                           "dropped", "full - UNTUNED")
    assert table.dropped.tolist() == [3, 3, 1, 1]
    assert table.unit.tolist() == ["m, t, full - UNTUNED", "m, u, full - UNTUNED"] * 2
    for row in table.itertuples():
        alone = [e for e in phang.untuned(two, dropped=row.dropped) if e.unit == row.unit]
        assert verdicts.decide(claim_of(phang.untuned), alone).outcome == row.verdict
    assert table.verdict.tolist() == ["opposite", "holds", "holds", "holds"]
    assert causes.by_unit(claim_of(phang.untuned), {}, "dropped", "x").empty


def test_the_untuned_claim_is_judged_only_where_its_block_structure_holds():
    """Phang et al. explain why a head survives the loss of the top layers through the
    fine-tuned model's blocks of similar layers; where this run shows no blocks, UNTUNED's
    collapse does not contradict them: no verdict, and the reason gives both claims'
    numbers. Where the blocks hold, the verdict stands."""
    scores = _scores(untuned_drop=0.3, tuned_drop=0.0, gain=0.1)
    with_blocks = _findings(scores, views=_views(True))
    assert with_blocks.loc["phang-untuned", "verdict"] == "opposite"
    judged = verdicts.judge([claims.get("phang-blocks")], {"views": _views(True),
                                                           "untrained": None})
    assert judged.loc["phang-blocks", "verdict"] == "holds"
    without = _findings(scores, views=_views(False)).loc["phang-untuned"]
    assert without["verdict"] == "not measured"
    shows = without["what this run shows"]
    assert "precondition" in shows and "phang-blocks" in shows
    assert "would read opposite" in shows
    assert with_blocks.loc["phang-untuned", "what this run shows"] in shows
    # no views at all: the precondition cannot be checked, so no verdict either
    assert _findings(scores, views={}).loc["phang-untuned", "verdict"] == "not measured"
    # a result set without the views does not answer the claim (another profile's runs)
    assert "phang-untuned" not in [c.id for c in claims.answerable(
        claims.of_chapter("truncation"), {"scores": scores, "untrained": None})]
    with pytest.raises(KeyError, match="no claim reads"):
        verdicts.judge([claims.get("phang-tuned")], {"scores": scores, "views": {}})


def test_findings_follow_planted_accuracies():
    import pandas as pd

    found = _findings(_scores(untuned_drop=0.3, tuned_drop=0.0, gain=0.1))
    assert list(found.index) == [c.id for c in claims.of_chapter("truncation")]
    assert found.loc["phang-untuned", "verdict"] == "opposite"   # collapses below the top
    assert found.loc["phang-tuned", "verdict"] == "holds"   # a new head does as well
    assert found.loc["phang-tuned-orig", "verdict"] == "holds"
    assert found.loc["phang-cka-predicts", "verdict"] == "not measured"
    # the CKA link within each task: a strong negative correlation holds
    x = np.linspace(0.2, 0.9, 30)
    link = pd.DataFrame({"task": "t", "cka_to_last": x, "accuracy_lost": 0.5 - 0.5 * x})
    seeds = (0, 1, 2)
    jitter = dict(zip(seeds, (0.004, -0.003, 0.001)))
    layers = [1, 2, 3, 4, 5, 6]
    skips = {("t", s): pd.DataFrame({"first": layers, "last": layers, "single": True,
                                     "accuracy": [0.5 + jitter[s]] + [0.8] * 5,
                                     "n_test": 200})
             for s in seeds}
    truncated = pd.DataFrame({"layers_kept": [2, 2, 2, 3, 3, 3], "seed": [0, 1, 2] * 2,
                              "accuracy": [0.6, 0.61, 0.6, 0.8, 0.801, 0.799],
                              "n_test": 500})
    full = {s: 0.8 + jitter[s] / 4 for s in seeds}
    found = _findings(_scores(0.0, 0.0, 0.0), link, truncated=truncated, full=full,
                           skips=skips)
    assert found.loc["phang-untuned", "verdict"] == "holds"
    assert found.loc["phang-cka-predicts", "verdict"] == "holds"
    # the link is implied by the block structure: without blocks, no verdict
    unblocked = _findings(_scores(0.0, 0.0, 0.0), link, views=_views(False))
    assert unblocked.loc["phang-cka-predicts", "verdict"] == "not measured"
    assert "phang-blocks" in unblocked.loc["phang-cka-predicts", "what this run shows"]
    assert found.loc["phang-skip-bottom", "verdict"] == "holds"
    assert found.loc["merchant-truncate", "verdict"] == "holds"  # 3 of 6 layers: a cost below 0.02
    # one seed of the cut and skipped runs: no spread over seeds, no verdict
    found = _findings(_scores(0.0, 0.0, 0.0), link,
                           truncated=truncated[truncated.seed == 0], full=full,
                           skips={k: v for k, v in skips.items() if k[1] == 0})
    assert found.loc["phang-skip-bottom", "verdict"] == "inconclusive"
    assert found.loc["merchant-truncate", "verdict"] == "inconclusive"
    # a cut model that did not train is counted, not set aside: how well a cut model
    # trains is the claim; the unit says how many cut runs failed
    gate = truncated.assign(did_not_train="")
    gate.loc[(gate.layers_kept == 3) & (gate.seed == 1), "did_not_train"] = "loss flat"
    found = _findings(_scores(0.0, 0.0, 0.0), link, truncated=gate, full=full,
                           skips=skips)
    assert found.loc["merchant-truncate", "verdict"] == "holds"  # it scored as well
    unit, = merchant.truncate(gate, full, _scores(0.0, 0.0, 0.0))
    assert unit.note.startswith("1 of 3 cut runs failed the training gate (counted); "
                                "per seed: 0 ")  # and each seed's difference
    collapsed = gate.copy()
    collapsed.loc[(collapsed.layers_kept == 3) & (collapsed.seed == 1), "accuracy"] = 0.5
    found = _findings(_scores(0.0, 0.0, 0.0), link, truncated=collapsed, full=full,
                      skips=skips)
    assert found.loc["merchant-truncate", "verdict"] != "holds"  # its failure counts
    # the grid's own runs gate the grid claims, never the cut runs' claim
    gate.loc[gate.layers_kept == 3, "did_not_train"] = "loss flat"
    found = _findings(_scores(0.0, 0.0, 0.0), link, truncated=gate, full=full,
                           skips=skips, untrained={"m, t, seed 0": "flat"})
    for claim_id in [c.id for c in claims.of_chapter("truncation") if "untrained" in c.gates]:
        assert found.loc[claim_id, "verdict"] == "not measured", claim_id
        assert "m, t, seed 0: flat" in found.loc[claim_id, "what this run shows"]
    assert found.loc["merchant-truncate", "verdict"] != "not measured"


def test_untuned_scores_are_score_grids_untuned_rows_and_fit_nothing(task, tmp_path,
                                                                     monkeypatch):
    from analysis_lib.training import heads

    config = finetune.FinetuneConfig(batch_size=16, learning_rate=2e-3, epochs=2,
                                     max_length=32, seed=0)
    base = models.load("random:bert", **TINY)
    result = finetune.finetune("random:bert", task, config, cache_dir=tmp_path,
                               progress=False, **TINY)

    class Grid(Runs):  # the grid's task is the fixture's, not the book's split
        def task(self, name):
            return task

    runs = Grid(pd.DataFrame(), {("m", "t", 0): result}, len(task.train))
    full = readout.layer_scores(result, base, task, head="probe")
    fits = []
    monkeypatch.setattr(heads, "fit_heads", lambda *a, **k: fits.append(1))
    alone = readout.untuned_scores(runs, ["m"], ["t"])
    assert not fits
    expected = full[full.config == "UNTUNED"].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone[["config", "layer", "accuracy"]], expected)
    # the full score is read the way every layer is: UNTUNED at the top layer
    assert (alone.full == alone.accuracy.iloc[-1]).all()
    assert (alone.majority == task.majority_baseline("test")).all()
    # at the top layer nothing is cut: UNTUNED is the model's own score (these inputs are
    # tokenized alike as words and as raw text)
    assert alone.accuracy.iloc[-1] == pytest.approx(result.metrics["test"]["accuracy"])


def test_score_grids_full_score_is_untuned_at_the_top_layer(monkeypatch):
    """The full model's score beside a layer's is read on the same vectors (UNTUNED at the
    top layer), not the model's ``predict`` on the raw text, which may tokenize a few
    inputs differently: a planted run whose recorded accuracy differs shows which is read."""

    class Run:
        metrics = {"test": {"accuracy": 0.9}}

    class Task:
        def majority_baseline(self, part):
            return 0.5

    class Grid(Runs):
        def task(self, name):
            return Task()

    planted = pd.DataFrame({"config": ["UNTUNED", "TUNED"] * 3,
                            "layer": [1, 1, 2, 2, 3, 3],
                            "accuracy": [0.5, 0.6, 0.6, 0.7, 0.7, 0.8]})
    monkeypatch.setattr(readout, "load_model", lambda *a, **k: None)
    monkeypatch.setattr(readout, "first_token_features", lambda *a, **k: None)
    monkeypatch.setattr(readout, "layer_scores", lambda *a, **k: planted)
    runs = Grid(pd.DataFrame(), {("m", "t", 0): Run(), ("m", "t", 1): Run()})
    scores = readout.score_grid(runs, ["m"], ["t"])
    assert (scores.full == 0.7).all() and len(scores) == 12


def test_pooling_scores_read_each_pooling_with_a_probe_fitted_on_the_top_layer(task, tmp_path):

    config = finetune.FinetuneConfig(batch_size=16, learning_rate=2e-3, epochs=1,
                                     max_length=32, seed=0)
    result = finetune.finetune("random:bert", task, config, cache_dir=tmp_path,
                               progress=False, **TINY)

    class Grid(Runs):
        def task(self, name):
            return task

    runs = Grid(pd.DataFrame(), {("m", "t", 0): result}, len(task.train))
    pooled = readout.pooling_scores(runs, ["m"], ["t"])
    assert set(pooled.pooling) == set(collect.SENTENCE_POOLINGS)
    feats = collect.pooled_features(result.load(), task, ("train", "test"))
    top = int(pooled.layer.max())
    for pooling in collect.SENTENCE_POOLINGS:
        # at the top layer the probe reads the vectors it was fitted on: the plain probe
        at_top = pooled[(pooled.pooling == pooling) & (pooled.layer == top)].accuracy.item()
        assert at_top == pytest.approx(readout.probe_accuracy(feats[pooling], top, task))
        # UNTUNED's layout: the top layer's accuracy is the full score of every layer's row
        assert (pooled[pooled.pooling == pooling].full == at_top).all()
    assert set(pooled.config) == {"UNTUNED"}
    assert np.array_equal(feats["first"]["test"][2],
                          collect.first_token_features(result.load(), task, ["test"])["test"][2])
    assert not np.allclose(feats["first"]["test"][2], feats["mean"]["test"][2])


def test_the_pooling_change_names_the_first_token_the_cause_where_only_it_collapses():
    def planted(drop_first, drop_mean, seeds=(0, 1, 2, 3, 4)):
        """Rows as ``readout.pooling_scores`` gives them: a head fitted at the top and read
        unchanged below (UNTUNED), ``full`` its top-layer accuracy."""
        rng = np.random.default_rng(0)
        rows = []
        for pooling, drop in (("first", drop_first), ("mean", drop_mean)):
            for s in seeds:
                at = {layer: 0.8 - (drop if layer <= 4 else 0.0)
                      + 0.002 * rng.standard_normal() for layer in range(1, 7)}
                rows += [{"model": "m", "task": "t", "seed": s, "pooling": pooling,
                          "config": "UNTUNED", "layer": layer, "accuracy": value,
                          "full": at[6]} for layer, value in at.items()]
        return pd.DataFrame(rows)

    def by_pooling(pooled):
        return causes.by_unit(claim_of(phang.untuned),
                              {p: phang.untuned(pooled[pooled.pooling == p])
                               for p in pooled.pooling.unique()}, "pooling", "full - UNTUNED")

    def change(table):
        return causes.changes(table[table.pooling == "first"], table[table.pooling == "mean"],
                              ["unit"], "full - UNTUNED")

    table = by_pooling(planted(0.3, 0.0))
    assert table.set_index("pooling").verdict.to_dict() == {"first": "opposite",
                                                           "mean": "holds"}
    first = change(table)
    assert first.before.item() == pytest.approx(0.3, abs=0.01)
    assert causes.setting_cause(first.verdict_before, first.verdict_after) == "the cause"
    both = change(by_pooling(planted(0.3, 0.25)))
    assert causes.setting_cause(both.verdict_before, both.verdict_after) == "not the cause"


def test_the_schedule_change_names_what_training_length_did():
    short = _by_depth(_scores(untuned_drop=0.3, tuned_drop=0.0, gain=0.1))
    shows = _by_depth(_scores(untuned_drop=0.0, tuned_drop=0.0, gain=0.1))
    narrower = _by_depth(_scores(untuned_drop=0.2, tuned_drop=0.0, gain=0.1))

    def schedule_change(before, after):  # the claim's own reading, two layers dropped
        return causes.changes(_at(before, 2), _at(after, 2), ["unit"], "full - UNTUNED")

    def cause(before, after):
        change = schedule_change(before, after)
        assert change.unit.tolist() == before.unit.drop_duplicates().tolist()
        return causes.setting_cause(change.verdict_before, change.verdict_after)

    change = schedule_change(short, shows)
    assert change.before.iloc[0] == pytest.approx(0.3, abs=0.01)  # two dropped layers
    assert change.after.iloc[0] == pytest.approx(0.0, abs=0.01)
    assert cause(short, shows) == "the cause"
    assert cause(shows, shows) == "shows either way"
    assert cause(short, narrower) == "not the cause"  # narrower, still beyond the effect
    mixed = pd.concat([shows.assign(unit="a"), short.assign(unit="b")])
    assert cause(pd.concat([short.assign(unit="a"), short.assign(unit="b")]), mixed) == \
        "undecided"
    assert prose.missing_schedule("none") == "not read: `longer_profile` is `none`"
    assert "--profile larger" in prose.missing_schedule("larger")


def test_cut_curves_give_one_row_per_run_and_epoch():
    truncated = pd.DataFrame({"layers_kept": [1, 1, 3], "seed": [0, 1, 0],
                              "accuracy": [0.6, 0.62, 0.7],
                              "curve": [[0.5, 0.6], [0.52, 0.61], [0.55, 0.65, 0.7]]})
    curves = readout.cut_curves(truncated, "t")
    assert len(curves) == 7 and set(curves.task) == {"t"}
    three = curves[curves.model == "cut after L3"]
    assert three.epoch.tolist() == [1, 2, 3] and three.validation_accuracy.tolist() == \
        [0.55, 0.65, 0.7]
    assert curves[(curves.model == "cut after L1") & (curves.seed == 1)
                  ].validation_accuracy.tolist() == [0.52, 0.61]
    assert readout.cut_curves(truncated.iloc[:0], "t").empty


@pytest.mark.parametrize("spoil, match", [
    (lambda x, y: (np.where(np.arange(len(x))[:, None] == 3, np.nan, x), y), "NaN or infinite"),
    (lambda x, y: (np.where(np.arange(len(x))[:, None] == 0, np.inf, x), y), "NaN or infinite"),
    (lambda x, y: (x[:, 0], y), "must be 2-D"),
    (lambda x, y: (x, y.astype(float) + 0.5), "class indices"),
    (lambda x, y: (x, y - 1), "class indices"),
])
def test_heads_refuse_features_they_cannot_learn_from(spoil, match):
    """A NaN feature makes every logit NaN, and the 'accuracy' becomes the share of one
    class: both fit_head and fit_heads refuse it, naming the rows, before training."""
    xs, y = _heads_data(1)
    base = models.load("random:bert", **{**TINY, "hidden": 16, "heads": 2})
    bad_x, bad_y = spoil(xs[0][:150], y[:150])
    head = FirstTokenHead(finetune.task_model(base, 2, False, 0))
    with pytest.raises(ValueError, match=match):
        fit_head(head, bad_x, bad_y, xs[0][150:], y[150:], epochs=1)
    with pytest.raises(ValueError, match=match):
        fit_heads([head], [bad_x], bad_y, [xs[0][150:]], y[150:], epochs=1)
    # the same spoilt array as validation data is refused too
    with pytest.raises(ValueError, match=match):
        fit_head(head, xs[0][:150], y[:150], bad_x, bad_y, epochs=1)


def test_skip_bottom_reads_upper_layers_below_the_top_and_never_the_top_one():
    """Skipping the top layer hands the head the layer below: UNTUNED one layer down. The
    claim reads the upper half's other layers, so a planted collapse at the top alone
    leaves it unmoved, and a model with no such layer is not measured."""
    from analysis_lib.claims.claim import NotMeasured
    from analysis_lib.claims.papers import phang

    def frame(accuracies):
        layers = list(range(1, len(accuracies) + 1))
        return pd.DataFrame({"first": layers, "last": layers, "single": True,
                             "accuracy": accuracies, "n_test": 200})

    # L1 costs 0.3; L4 and L5 cost nothing; skipping L6 collapses (UNTUNED's question)
    six = {("t", s): frame([0.5 + 0.001 * s, 0.7, 0.75, 0.8, 0.8, 0.4]) for s in range(3)}
    [unit] = phang.skip_bottom(six)
    assert unit.unit == "t: skip L4-L5 (mean) - skip L1"
    assert unit.estimate == pytest.approx(0.3 - 0.001, abs=1e-9)
    # each seed's value in the note, by seed: whether one run carries the mean
    assert unit.note == "per seed: 0 +0.300, 1 +0.299, 2 +0.298"
    three = phang.skip_bottom({("t", 0): frame([0.5, 0.8, 0.1])})
    assert three[0].unit == "t: skip L2 (mean) - skip L1"
    with pytest.raises(NotMeasured, match="fewer than three transformer layers"):
        phang.skip_bottom({("t", 0): frame([0.5, 0.8])})
    assert phang.skip_bottom({}) == []


def test_skip_bottom_is_not_read_where_the_upper_skips_sit_at_the_majority_class():
    """A model that falls to the majority class (0.45) whichever single layer is skipped
    costs the same at both ends: the difference, about zero, would read as skipping the
    first layer costing no more than an upper one. Planted so, the claim gets no verdict
    and names the floor; the first layer's skip alone at the floor is the claim's own
    effect and is read."""
    def frame(accuracies, seed):
        layers = list(range(1, len(accuracies) + 1))
        return pd.DataFrame({"first": layers, "last": layers, "single": True,
                             "accuracy": [a + 0.001 * seed for a in accuracies],
                             "n_test": 200, "majority": 0.45})

    broken = {("t", s): frame([0.45, 0.455, 0.45, 0.452, 0.451, 0.45], s) for s in range(3)}
    row = _findings(None, skips=broken).loc["phang-skip-bottom"]
    assert row["verdict"] == "not measured"
    assert "the accuracy with one upper layer skipped (t, per seed)" in row[
        "what this run shows"] and "floor" in row["what this run shows"]
    # two of three seeds at the floor: still refused (most seeds must lie clear)
    mixed = {**broken, ("t", 0): frame([0.45, 0.7, 0.75, 0.8, 0.8, 0.4], 0)}
    assert _findings(None, skips=mixed).loc["phang-skip-bottom", "verdict"] == \
        "not measured"
    # the first layer's skip at the floor, the upper ones clear of it: the claim holds
    costly = {("t", s): frame([0.45, 0.7, 0.75, 0.8, 0.8, 0.4], s) for s in range(3)}
    assert _findings(None, skips=costly).loc["phang-skip-bottom", "verdict"] == "holds"
    # no majority class (a regression task's NaN baseline): nothing to read it beside
    unknown = {k: v.assign(majority=float("nan")) for k, v in broken.items()}
    from analysis_lib.claims.papers import phang

    [unit] = phang.skip_bottom(unknown)
    assert unit.levels == () and abs(unit.estimate) < 0.01


def test_cut_runs_train_on_their_own_schedule_when_given_one(monkeypatch):
    """``epochs`` changes the cut runs' schedule alone: the cut model on the grid's first
    task, every seed, the grid's recipe otherwise; without it, the grid's schedule."""
    from analysis_lib.training.grid import FinetuneGrid

    asked = []

    class Run:
        metrics = {"test": {"accuracy": 0.7}}
        record = {"history": [{"train_loss": 1.0, "validation_accuracy": 0.5},
                              {"train_loss": 0.4, "validation_accuracy": 0.66}]}

    class Found:
        def __init__(self, grid):
            self.grid = grid

        def seeds(self, model, task):
            return list(self.grid.seeds)

        def get(self, model, task, seed):
            return Run()

        def task(self, name):
            return type("T", (), {"test": [0] * 9})()

    monkeypatch.setattr(readout, "truncated_copy", lambda model, k, **options: f"cut{k}")
    monkeypatch.setattr(readout, "run_grid",
                        lambda grid, progress=True: asked.append(grid) or Found(grid))
    grid = FinetuneGrid(models=("m", "n"), tasks=("x", "y"), seeds=(3, 4), epochs=5.0)
    found = readout.truncated_runs(grid, [1, 3], epochs=10.0, gate=lambda record: "",
                                   progress=False)
    assert [g.models for g in asked] == [("cut1",), ("cut3",)]
    assert {(g.tasks, g.seeds, g.epochs, g.n_train, g.preset) for g in asked} == \
        {(("x",), (3, 4), 10.0, grid.n_train, grid.preset)}
    assert len(found) == 4 and found.curve.iloc[0] == [0.5, 0.66]
    assert (found.did_not_train == "").all() and found.n_test.eq(9).all()
    asked.clear()
    readout.truncated_runs(grid, [3], progress=False)
    assert [g.epochs for g in asked] == [5.0]
