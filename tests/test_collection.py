from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from analysis_lib import claims, collect, collection, similarity
from analysis_lib.claims import verdicts
from analysis_lib.data import corpora
from analysis_lib.layers import LayerTable, spread_layers
from analysis_lib.similarity import _backend, attention, structure
from tests.conftest import TINY

K = collection.PairKey


def _findings(summaries, jackknives, measures, *, matrices=None, collection=None,
              models=None):
    """The representation chapter's findings on the results of its section 3 (the later
    sections' claims read "not measured")."""
    return verdicts.judge(claims.of_chapter("representation"), {
        "summaries": summaries, "jackknives": jackknives, "measures": measures,
        "matrices": matrices, "collection": collection, "models": models})


def _objective(values, seeds, controls, not_learned=(), draws=None):
    return verdicts.judge([claims.get("wu-objective")], {
        "zoo_summary": values, "zoo_seeds": seeds, "zoo_controls": controls,
        "zoo_draws": draws, "not_learned": not_learned, "measures": ["linear_cka"]})


def _corpus(agreements, n_layers):
    return verdicts.judge([claims.get("wu-other-corpus")],
                          {"agreements": agreements, "n_layers": n_layers})


def _localization(local, models):
    return verdicts.judge([claims.get("wu-localization-depth")],
                          {"localization": local, "models": models})


def _attention(methods, collection):
    return verdicts.judge(claims.of_chapter("attention"),
                          {"methods": methods, "collection": collection})


@pytest.fixture(scope="module")
def coll():
    text = corpora.load_corpus("tweets", n=30, seed=2)
    return collect.word_collection(["random:bert", "random:gpt2"], text, model_options=TINY,
                            max_words=300, seed=0, progress=False), text


def test_build_keeps_models_in_order_on_the_same_rows(coll):
    c, text = coll
    assert c.owners == ["random:bert"] * 3 + ["random:gpt2"] * 3
    assert c.labels[:3] == ["random:bert emb", "random:bert L1", "random:bert L2"]
    frame = c.table.frame
    assert frame["layer"].tolist() == [0, 1, 2, 0, 1, 2]
    assert frame["depth"].tolist() == [0, 0.5, 1, 0, 0.5, 1]
    assert frame["family"].tolist() == ["bert"] * 3 + ["gpt2"] * 3
    assert not frame["pretrained"].any() and (frame["kind"] == "words").all()
    models = c.models_frame()
    assert models["model"].tolist() == ["random:bert", "random:gpt2"]
    assert models["layers"].tolist() == [3, 3]
    assert models["neurons"].tolist() == [TINY["hidden"]] * 2
    assert all(x.shape == (300, TINY["hidden"]) for x in c.layers)
    assert c.covariates.shape == (300, 3) and c.sentence.shape == (300,)
    assert np.all(np.diff(c.rows) > 0) and c.rows.max() < text.n_words


def test_regress_out_leaves_residuals_orthogonal_to_the_covariates():
    rng = np.random.default_rng(0)
    C = rng.standard_normal((200, 3))
    X = C @ rng.standard_normal((3, 8)) + 0.01 * rng.standard_normal((200, 8)) + 4.0
    [R] = collection.regress_out([X], C)
    design = np.column_stack([np.ones(200), C])
    assert np.abs(design.T @ R).max() < 1e-8
    # a representation that is all covariate becomes unrelated to the covariate part
    Y = C @ rng.standard_normal((3, 5))
    [RY] = collection.regress_out([Y + 0.01 * rng.standard_normal((200, 5))], C)
    raw, controlled = similarity.linear_cka(X, Y), similarity.linear_cka(R, RY)
    assert raw > 0.3 and controlled < raw / 3
    with pytest.raises(ValueError, match="rows"):
        collection.regress_out([X[:10]], C)


def test_summary_cells_on_a_known_matrix(coll):
    c, _ = coll
    M = np.full((6, 6), 0.2)
    M[:3, :3] = 0.9
    M[3:, 3:] = 0.8
    np.fill_diagonal(M, 1.0)
    M[0, 1] = M[1, 0] = M[1, 2] = M[2, 1] = 0.95
    s = collection.summary(M, c)
    assert s["across_models"] == pytest.approx(0.2)
    assert s["within_model"] == pytest.approx((4 * 0.95 + 2 * 0.9 + 6 * 0.8) / 12)
    assert s["adjacent"] == pytest.approx((4 * 0.95 + 4 * 0.8) / 8)
    assert np.isnan(s["same_family"]) and s["other_family"] == pytest.approx(0.2)


def test_summary_encoder_decoder_and_pairs_on_a_known_matrix(coll):
    c, _ = coll  # random:bert reads both ways, random:gpt2 left to right
    M = np.full((6, 6), 0.2)
    M[:3, 3:] = 0.3  # bert rows, gpt2 columns: an asymmetric measure
    s = collection.summary(M, c)
    assert np.isnan(s["encoders_across"])  # one encoder: no pair of encoders
    assert s["encoder_decoder"] == pytest.approx(0.25)
    assert s[K("pair", "random:bert", "random:gpt2")] == pytest.approx(0.25)
    only = collection.summary(M, c, models=["random:bert"])
    assert np.isnan(only["across_models"]) and only["within_model"] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="not in this collection"):
        collection.summary(M, c, models=["minilm"])


def test_a_subset_gives_the_restricted_summary(coll):
    c, _ = coll
    three = collection.Collection(
        LayerTable.concat([c.table, LayerTable(
            c.table.frame.iloc[:3].assign(model="copy", label=lambda f: "copy " + f.label))]),
        c.layers + c.layers[:3], c.rows, c.covariates, c.sentence)
    M = similarity.pairwise(three.layers, measure="linear_cka")
    keep = ["random:bert", "copy"]
    sub = collection.subset(three, keep)
    assert sub.models == keep and len(sub.layers) == 6
    rows = np.flatnonzero(np.isin(three.table.owners, keep))
    full, part = collection.summary(M, three, models=keep), collection.summary(
        M[np.ix_(rows, rows)], sub)
    assert full.keys() == part.keys()
    for key in full:
        assert full[key] == pytest.approx(part[key], nan_ok=True), key
    # a model and its exact copy: identical layers across models
    across = M[np.ix_(rows[:3], rows[3:])]
    assert full[K("pair", "random:bert", "copy")] == pytest.approx(across.mean())
    assert np.allclose(np.diag(across), 1.0)


def test_spread_layers_keeps_the_ends_and_spaces_evenly():
    assert spread_layers(30, 7) == [0, 5, 10, 15, 20, 25, 30]
    assert spread_layers(12, 7) == [0, 2, 4, 6, 8, 10, 12]
    assert spread_layers(6, 7) == list(range(7))
    assert spread_layers(6, 0) == list(range(7))
    assert spread_layers(5, 3) == [0, 2, 5]
    assert spread_layers(30, 6, first=1) == [1, 7, 13, 18, 24, 30]
    assert spread_layers(6, 6, first=1) == list(range(1, 7))
    with pytest.raises(ValueError, match="at least 2"):
        spread_layers(6, 1)


def test_focus_is_the_pretrained_models_when_two_are_there(coll):
    c, _ = coll
    assert collection.focus(c) == ["random:bert", "random:gpt2"]  # none trained: all
    frame = c.table.frame.assign(pretrained=True)
    assert collection.focus(collection.Collection(LayerTable(frame), c.layers,
                                                  c.rows, c.covariates, c.sentence)) == [
        "random:bert", "random:gpt2"]
    frame = c.table.frame.assign(pretrained=c.table.frame.model == "random:bert")
    one = collection.Collection(LayerTable(frame), c.layers, c.rows, c.covariates,
                                c.sentence)
    assert collection.focus(one) == ["random:bert", "random:gpt2"]


def test_keep_rows_and_a_planted_first_word_outlier(coll):
    c, _ = coll
    first = c.covariates[:, 1] == 0
    assert first.any() and (~first).any()
    planted = [x.copy() for x in c.layers]
    planted[4][first, 0] += 1e4  # a massive activation on the first word, one neuron
    p = collection.Collection(c.table, planted, c.rows, c.covariates, c.sentence)
    share = collection.first_word_share(p)
    assert share["top_share"].iloc[4] > 0.99 and share["top_share"].iloc[1] < 0.9
    assert share["first_word_norm"].iloc[4] > 10 * share["other_words_norm"].iloc[4]
    later = collection.keep_rows(p, ~first)
    assert len(later.rows) == int((~first).sum()) and later.layers[4].shape[0] == len(
        later.rows)
    cka = similarity.linear_cka
    # the outlier rows dominate CKA; without them the planted layer is the clean one again
    assert cka(p.layers[4], c.layers[4]) < 0.5
    assert cka(later.layers[4], c.layers[4][~first]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="entries"):
        collection.keep_rows(p, first[:-1])


def test_matched_cells_pair_layers_of_the_same_relative_depth():
    table = LayerTable.concat([LayerTable.for_model("deep", "bert", True, 4),
                               LayerTable.for_model("flat", "bert", True, 2),
                               LayerTable.for_model("twin", "bert", True, 4)])
    c = collection.Collection(table, [], np.arange(0), np.zeros((0, 3)), np.arange(0))
    M = np.zeros((13, 13))
    deep, flat, twin = range(0, 5), range(5, 8), range(8, 13)
    for i, j in zip(deep, twin):  # same depth: layer k with layer k
        M[i, j] = M[j, i] = 1.0
    for i, j in zip((0, 2, 4), flat):  # depths 0, .5, 1 of both
        M[i, j] = M[j, i] = 0.5
    s = collection.summary(M, c)
    assert s[K("matched", "deep", "twin")] == pytest.approx(1.0)
    assert s[K("matched", "deep", "flat")] == pytest.approx(0.5)
    assert s[K("pair", "deep", "twin")] == pytest.approx(5 / 25)
    frame = collection.factor_table(
        {"linear_cka": s}, {"linear_cka": {K("matched", "deep", "flat"): (0.4, 0.6)}},
        {"depth": [("deep", "flat")], "seed": [("deep", "twin"), ("twin", "flat")]},
        "linear_cka", not_learned=["flat"])
    assert frame["models"].tolist() == ["deep vs flat", "deep vs twin", "twin vs flat"]
    assert frame.loc[0, "low"] == 0.4 and frame.loc[0, "note"] == "flat did not learn"
    # pairs with a model that did not learn are flagged and left out of the factor's mean
    assert np.isnan(frame.loc[0, "factor mean"])
    assert frame.loc[2, "factor mean"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no pair"):
        collection.factor_table({"linear_cka": s}, {}, {"x": [("deep", "nope")]}, "linear_cka")


def test_pair_table_shows_intervals_where_computed():
    ab, ac = K("pair", "a", "b"), K("pair", "a", "c")
    summaries = {"linear_cka": {"within_model": .9, ab: .5, ac: .25},
                 "svcca": {ab: .4, ac: .3}}
    intervals = {"linear_cka": {ab: (.4, .6), ac: (.2, .3)}}
    table = collection.pair_table(summaries, intervals)
    assert table.loc["a - b", "linear_cka"] == "0.500 [0.400, 0.600]"
    assert table.loc["a - c", "svcca"] == "0.300"


def test_agreement(coll):
    c, _ = coll
    rng = np.random.default_rng(1)
    A = rng.random((6, 6))
    out = collection.agreement(A, 2 * A + 1, c)
    assert out["all"] == pytest.approx(1.0) and out["across_models"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="cannot be compared"):
        collection.agreement(A, A[:5, :5])


def test_jackknife_intervals_cover_the_estimate(coll):
    c, _ = coll
    M = similarity.pairwise(c.layers, measure="linear_cka")
    est = collection.summary(M, c)
    iv = collection.summary_intervals("linear_cka", c, n_folds=5)
    for key in ("within_model", "across_models", "adjacent"):
        low, high = iv[key]
        assert low <= est[key] <= high and high - low < 0.5
    with pytest.raises(ValueError, match="n_folds"):
        collection.summary_intervals("linear_cka", c, n_folds=1)


def test_localization_frame_names_each_model_once(coll):
    c, _ = coll
    mats = collection.matrices(c, ["neuronsim", "svcca"], progress=False)
    local = collection.localization_frame(mats, c)
    assert sorted(local["model"].unique()) == ["random:bert", "random:gpt2"]
    assert len(local) == 3 * 6 and set(local["layer"]) == {0, 1, 2}
    plain = local[local.variant == "paper (plain)"]["value"].to_numpy()
    np.testing.assert_allclose(plain, similarity.localization(mats["neuronsim"],
                                                              mats["svcca"]))
    # ranks among pretrained layers only: random models have none
    assert local[local.variant == collection.RANKED]["value"].isna().all()
    # the same layers counted as pretrained: ranked among all of them
    trained = replace(c, table=LayerTable(c.table.frame.assign(pretrained=True)))
    ranked = collection.localization_frame(mats, trained)
    np.testing.assert_allclose(
        ranked[ranked.variant == collection.RANKED]["value"].to_numpy(),
        similarity.ranked_localization(mats["neuronsim"], mats["svcca"]))


def test_random_across_averages_only_pairs_of_different_random_models(coll):
    c, _ = coll
    M = np.zeros((6, 6))
    M[:3, 3:] = M[3:, :3] = 0.4
    assert collection.random_across(M, c) == pytest.approx(0.4)


def test_models_that_cut_different_words_are_refused(monkeypatch):
    text = corpora.from_sentences(["one two three four five six seven eight nine ten"] * 3)
    real = collect.extract
    calls = []

    def cut_second(*args, **kw):
        result = real(*args, **kw)
        calls.append(True)
        if len(calls) == 2:
            result.word_position = result.word_position[::-1].copy()
        return result

    monkeypatch.setattr(collect, "extract", cut_second)
    with pytest.raises(ValueError, match="rows for other words"):
        collect.word_collection(["random:bert", "random:gpt2"], text, model_options=TINY,
                                progress=False)


def test_attention_heads_collection_and_redundancy():
    from analysis_lib import collect
    from analysis_lib.book import plots
    from analysis_lib.similarity import attention as heads

    text = corpora.load_corpus("tweets", n=6, seed=1, max_words=12)
    att = collect.attention(["random:bert", "random:gpt2"], text, model_options=TINY,
                            progress=False)
    assert att.labels == ["random:bert L1", "random:bert L2", "random:gpt2 L1",
                          "random:gpt2 L2"]
    assert att.table.frame["layer"].tolist() == [1, 2, 1, 2]
    reps = [similarity.attention_representation(layer) for layer in att.layers]
    assert all(r.shape == (sum(len(s) ** 2 for s in text.sentences), TINY["heads"])
               for r in reps)
    red = heads.first_layer_matches(att.layers, att.owners, att.table.frame["layer"],
                                    threshold=0.5)
    assert len(red) == 4 * TINY["heads"] and set(red.layer) == {1, 2}
    # a head of layer 2 is compared with layer 1's heads, itself included for layer 1 only
    layer1 = att.of("random:bert")[0]
    S = heads.head_similarity(att.of("random:bert")[1], layer1, "js")
    got = red[(red.model == "random:bert") & (red.layer == 2)].best_in_L1.to_numpy()
    np.testing.assert_allclose(got, S.max(axis=1))
    S1 = heads.head_similarity(layer1, layer1, "js").copy()
    np.fill_diagonal(S1, -np.inf)
    got1 = red[(red.model == "random:bert") & (red.layer == 1)].best_in_L1.to_numpy()
    np.testing.assert_allclose(got1, S1.max(axis=1))
    assert (red.near_duplicate == ((red.best_in_L1 >= 0.5) & ~red.near_uniform)).all()
    counts = heads.head_counts(red)
    assert list(counts.columns) == [2] and counts.shape == (2, 1)
    # a deep model keeps layers spread over its depth; the tables name the real layers
    deep = collect.attention(["random:bert", "random:gpt2"], text, progress=False,
                             model_options={**TINY, "layers": 5}, layers_per_model=3)
    assert deep.table.frame["layer"].tolist() == [1, 3, 5, 1, 3, 5]
    red5 = heads.first_layer_matches(deep.layers, deep.owners, deep.table.frame["layer"],
                                     threshold=0.5)
    assert sorted(set(red5.layer)) == [1, 3, 5]
    assert list(heads.head_counts(red5).columns) == [3, 5]
    matches = heads.best_matches(att.layers, att.owners, att.labels)
    # the best match of a head lies in the other model, and is the best there
    assert (matches.match_model != matches.model).all()
    first = matches.iloc[0]
    other = [k for k, owner in enumerate(att.owners) if owner != first.model]
    best = max(heads.head_similarity(att.layers[0], att.layers[k], "js")[0].max()
               for k in other)
    assert first.similarity == pytest.approx(best)
    [shown] = plots.explorer_sentences(att.sentences, 1, min_words=1)
    assert len(text.sentences[shown]) == min(len(s) for s in text.sentences)
    frame = plots.explorer_frame(att.layers, att.labels, att.sentences, matches, [shown])
    n = len(text.sentences[shown])
    assert len(frame) == 2 * 4 * TINY["heads"]
    assert all(len(w) == n * n for w in frame.weights)


def test_across_within_reads_the_cells_of_each_group():
    """Known answer: two models of two layers; the cells across models and the off-diagonal
    cells within a model, their means and the rank overlap of the two groups."""
    same = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]], dtype=bool)
    M = np.array([[1.0, 0.8, 0.1, 0.2], [0.8, 1.0, 0.3, 0.4],
                  [0.1, 0.3, 1.0, 0.6], [0.2, 0.4, 0.6, 1.0]])
    got = structure.across_within(M, same)
    assert got["within a model"] == pytest.approx(0.7)
    assert got["across models"] == pytest.approx(0.25)
    assert got["overlap"] == 0.0  # every cell across lies below every cell within
    one = structure.across_within(M[:2, :2], same[:2, :2])
    assert np.isnan(one["across models"]) and np.isnan(one["overlap"])


def _jackknife(values: dict, spread: float, k: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    reps = pd.DataFrame({key: v + spread * rng.standard_normal(k) / np.sqrt(k)
                         for key, v in values.items()})
    return collection.Jackknife(dict(values), reps)


def _summary(within, across, lower=0.5, higher=0.5, adjacent=0.5, non_adjacent=0.5,
             encoders=0.5, mixed=0.5, overlap=0.2):
    return {"within_model": within, "across_models": across, "overlap": overlap,
            "lower_across": lower,
            "higher_across": higher, "adjacent": adjacent, "non_adjacent": non_adjacent,
            "encoders_across": encoders, "encoder_decoder": mixed}


def test_findings_are_keyed_by_claim_and_follow_the_numbers():
    cka = _summary(0.8, 0.3, lower=0.6, higher=0.3, adjacent=0.9, non_adjacent=0.5,
                   encoders=0.5, mixed=0.5)
    neuron = _summary(0.6, 0.1, overlap=0.05)
    summaries = {"linear_cka": cka, "neuronsim": neuron}
    jk = {"linear_cka": _jackknife(cka, 0.004), "neuronsim": _jackknife(neuron, 0.004)}
    found = _findings(summaries, jk, ["neuronsim", "linear_cka"])
    assert list(found.index) == [c.id for c in claims.of_chapter("representation")]
    assert found.loc["wu-within-model", "verdict"] == "holds"
    assert found.loc["wu-lower-layers", "verdict"] == "holds"
    assert found.loc["wu-adjacent", "verdict"] == "holds"
    assert found.loc["wu-family", "verdict"] == "equivalent"  # 0.5 against 0.5, tight
    assert "confounded" not in found.loc["wu-family", "what this run shows"]
    # two encoders that share a training stage: the confound is named on the row, the
    # verdict unchanged (one set of numbers cannot tell the stage from the family)
    shared = _findings(summaries, jk, ["neuronsim", "linear_cka"],
                       models=["minilm", "mpnet", "smollm2"]).loc["wu-family"]
    assert shared["verdict"] == "equivalent"
    assert "confounded: all-MiniLM-L6-v2 and all-mpnet-base-v2" in shared["what this run shows"]
    assert "wu-objective" in shared["what this run shows"]
    # CKA ranks its across cells higher among its within cells (0.2) than neuronsim (0.05)
    assert found.loc["wu-neurons-differ", "verdict"] == "holds"
    assert found.loc["wu-neurons-differ", "control"].startswith("condition:")
    # the same raw levels with the overlaps the other way round: the claim turns around
    turned = {"linear_cka": {**cka, "overlap": 0.05}, "neuronsim": {**neuron, "overlap": 0.2}}
    jk_t = {m: _jackknife(v, 0.004) for m, v in turned.items()}
    turned_found = _findings(turned, jk_t, ["neuronsim", "linear_cka"])
    assert turned_found.loc["wu-neurons-differ", "verdict"] == "opposite"
    assert "rank overlap" in turned_found.loc["wu-neurons-differ", "what this run shows"]
    # both measures put every across cell below every within cell: ranks cannot decide
    apart = {m: {**v, "overlap": 0.0} for m, v in summaries.items()}
    at_bound = _findings(apart, {m: _jackknife(v, 0.0) for m, v in apart.items()},
                         ["neuronsim", "linear_cka"])
    assert at_bound.loc["wu-neurons-differ", "verdict"] == "not measured"
    assert "cannot differ" in at_bound.loc["wu-neurons-differ", "what this run shows"]
    # reversed numbers give the opposite verdict
    flipped = {"linear_cka": _summary(0.3, 0.8), "neuronsim": neuron}
    jk2 = {"linear_cka": _jackknife(flipped["linear_cka"], 0.01), "neuronsim": jk["neuronsim"]}
    found2 = _findings(flipped, jk2, ["neuronsim", "linear_cka"])
    assert found2.loc["wu-within-model", "verdict"] == "opposite"


def _three_models(within):
    """A stand-in collection of three 3-layer models and a matrix whose within-model cells
    are ``within[model]`` and whose across-model cells are 0.3."""
    from types import SimpleNamespace

    names = ["a", "b", "c"]
    frame = pd.DataFrame({"model": np.repeat(names, 3), "family": np.repeat(names, 3),
                          "depth": np.tile([0.0, 0.5, 1.0], 3)})
    owners = frame["model"].to_numpy()
    M = np.full((9, 9), 0.3)
    for m in names:
        mine = owners == m
        M[np.ix_(mine, mine)] = within[m]
    np.fill_diagonal(M, 1.0)
    return M, SimpleNamespace(table=SimpleNamespace(frame=frame, owners=list(owners))), names


def test_contrasts_get_a_unit_over_models():
    """Within minus across per model, from the cells that involve that model; the claim
    holds only where the interval over models agrees with the one over sentences."""
    M, fake, names = _three_models({"a": 0.8, "b": 0.7, "c": 0.75})
    values = collection.per_model(M, fake, names, "within_model", "across_models")
    assert values == pytest.approx({"a": 0.5, "b": 0.4, "c": 0.45})
    cka = collection.summary(M, fake)
    jk = {"linear_cka": _jackknife(cka, 0.004)}
    found = _findings({"linear_cka": cka}, jk, ["linear_cka"], matrices={
        "linear_cka": M}, collection=fake, models=names)
    assert found.loc["wu-within-model", "verdict"] == "holds"
    assert "over 3 models" in found.loc["wu-within-model", "what this run shows"]
    # one model whose layers are no closer to each other than to other models': the
    # sentences' interval still holds, the models' does not
    M2, fake2, _ = _three_models({"a": 0.8, "b": 0.3, "c": 0.31})
    cka2 = collection.summary(M2, fake2)
    found2 = _findings({"linear_cka": cka2}, {"linear_cka": _jackknife(cka2, 0.004)},
                                 ["linear_cka"], matrices={"linear_cka": M2},
                                 collection=fake2, models=names)
    assert found2.loc["wu-within-model", "verdict"] != "holds"
    # fewer than three models: the sentences' unit alone
    alone = _findings({"linear_cka": cka}, jk, ["linear_cka"],
                                matrices={"linear_cka": M}, collection=fake, models=names[:2])
    assert "models" not in alone.loc["wu-within-model", "what this run shows"]


def test_neurons_claim_prints_each_pair_of_models():
    """Known answer: the CKA cells across a and b lie above every within-model cell, the
    other pairs' below; neuronsim's lie below everywhere. Per pair, the overlap is read on
    the two models alone, as the whole collection's would be with only them in it."""
    M, fake, names = _three_models({"a": 0.8, "b": 0.7, "c": 0.75})
    owners = fake.table.frame["model"].to_numpy()
    M[np.ix_(owners == "a", owners == "b")] = M[np.ix_(owners == "b", owners == "a")] = 0.9
    N, _, _ = _three_models({"a": 0.5, "b": 0.5, "c": 0.5})
    table = fake.table
    assert [collection.pair_overlap(M, table, a, b) for a, b in ("ab", "ac", "bc")] == [1, 0, 0]
    for a, b in ("ab", "ca", "bc"):
        assert collection.summary(M, fake, [a, b])["overlap"] == \
            collection.pair_overlap(M, table, a, b)
    summaries = {"linear_cka": collection.summary(M, fake),
                 "neuronsim": collection.summary(N, fake)}
    assert summaries["linear_cka"]["overlap"] == pytest.approx(1 / 3)
    jk = {m: _jackknife(v, 0.004) for m, v in summaries.items()}
    shown = _findings(summaries, jk, ["neuronsim", "linear_cka"],
                      matrices={"linear_cka": M, "neuronsim": N}, collection=fake,
                      models=names).loc["wu-neurons-differ", "what this run shows"]
    assert "per pair of models: a - b +1.000, a - c +0.000, b - c +0.000" in shown
    # without neuronsim's matrix, or with two models, no pairs are printed
    for kwargs in ({"matrices": {"linear_cka": M}, "models": names},
                   {"matrices": {"linear_cka": M, "neuronsim": N}, "models": names[:2]}):
        shown = _findings(summaries, jk, ["neuronsim", "linear_cka"], collection=fake,
                          **kwargs).loc["wu-neurons-differ", "what this run shows"]
        assert "per pair" not in shown


def test_family_claim_prints_the_pairs_its_groups_are_made_of():
    M, fake, names = _three_models({"a": 0.8, "b": 0.7, "c": 0.75})
    owners = fake.table.frame["model"].to_numpy()
    M[np.ix_(owners == "a", owners == "b")] = M[np.ix_(owners == "b", owners == "a")] = 0.9
    fake.table.frame["family"] = np.where(owners == "c", "llama", "bert")  # c: a decoder

    def shown(summary):
        return verdicts.judge([claims.get("wu-family")], {
            "summaries": {"linear_cka": summary},
            "jackknives": {"linear_cka": _jackknife(summary, 0.004)},
            "measures": ["linear_cka"], "without_outliers": None, "models": names,
        }).loc["wu-family", "what this run shows"]

    cka = collection.summary(M, fake)
    assert shown(cka).startswith("linear_cka: +0.600")  # the a - b pair against a - c, b - c
    assert ("mean across each pair of models: a - b 0.900, a - c 0.300, b - c 0.300"
            in shown(cka))
    assert "each pair" not in shown(collection.named(cka))  # no per-pair entries, nothing to print


def test_objective_claim_cancels_the_seed():
    """Each seed's mean similarity to the other seeds minus to the other objective's models:
    holds when the seeds are closer to each other, not when the other objective is as
    close as another seed; a model that did not learn gives no verdict, nor does one model
    of the other objective (one draw)."""
    from analysis_lib.claims.papers.wu import PairKey

    seeds, controls = ["s0", "s1", "s2", "s3", "s4"], ["c0", "c1", "c2"]

    def values(to_other):
        out = {PairKey("matched", a, b): 0.8 + 0.01 * i
               for i, (a, b) in enumerate((a, b) for k, a in enumerate(seeds)
                                          for b in seeds[k + 1:])}
        out.update({PairKey("matched", s, c): to_other + 0.005 * k + 0.002 * j
                    for k, s in enumerate(seeds) for j, c in enumerate(controls)})
        return out

    found = _objective(values(0.5), seeds, controls)
    assert found.loc["wu-objective", "verdict"] == "holds"
    shows = found.loc["wu-objective", "what this run shows"]
    assert "5 seed models against 3 of the other objective (c0, c1, c2)" in shows
    same = _objective(values(0.845), seeds, controls)
    assert same.loc["wu-objective", "verdict"] != "holds"
    gated = _objective(values(0.5), seeds, controls, not_learned=["c1"])
    assert gated.loc["wu-objective", "verdict"] == "not measured"
    # a seed model that did not learn stops the claim too, named: never left out quietly
    unlearnt = _objective(values(0.5), seeds, controls, not_learned=[seeds[2]])
    assert unlearnt.loc["wu-objective", "verdict"] == "not measured"
    assert f"{seeds[2]} did not learn" in unlearnt.loc["wu-objective", "what this run shows"]
    one = _objective(values(0.5), seeds, ["c0"])
    assert one.loc["wu-objective", "verdict"] == "not measured"
    assert "one draw" in one.loc["wu-objective", "what this run shows"]
    with pytest.raises(ValueError, match="no pair s0 - other"):
        _objective(values(0.5), seeds, ["other", "c0"])
    # a run without the zoo still records the claim, with the reason
    empty = _objective({}, [], [])
    assert empty.loc["wu-objective", "verdict"] == "not measured"
    assert "zoo_set" in empty.loc["wu-objective", "what this run shows"]


def test_objective_claim_leaves_out_a_control_of_the_seed_models_own_seed():
    """A causal model drawn from a masked model's own seed shares its initial weights and
    data order: the claim leaves it out of that model's mean, so that a planted pair of one
    seed, as alike as two copies, neither helps nor hides the objective. Its value for each
    seed model equals the plain mean over the controls of other seeds."""
    from analysis_lib.claims.papers.wu import PairKey, objective

    seeds, controls = ["m0", "m1", "m2"], ["c0", "c1", "c2"]
    draws = {"m0": 0, "m1": 1, "m2": 2, "c0": 0, "c1": 1, "c2": 2}
    rng = np.random.default_rng(3)
    values = {PairKey("matched", a, b): float(rng.uniform(0.7, 0.8))
              for k, a in enumerate(seeds) for b in seeds[k + 1:]}
    values.update({PairKey("matched", s, c): (0.99 if draws[s] == draws[c]
                                              else float(rng.uniform(0.4, 0.5)))
                   for s in seeds for c in controls})
    (evidence,) = objective(values, seeds, controls, draws, [], ["linear_cka"])
    expected = []
    for s in seeds:
        to_seeds = np.mean([values.get(PairKey("matched", s, t),
                                       values.get(PairKey("matched", t, s)))
                            for t in seeds if t != s])
        to_other = np.mean([values[PairKey("matched", s, c)] for c in controls
                            if draws[c] != draws[s]])
        expected.append(to_seeds - to_other)
    assert evidence.estimate == pytest.approx(np.mean(expected))
    assert "own seed is left out" in evidence.note
    # without the draws every control counts, and the planted same-seed pairs pull the
    # estimate down
    (plain,) = objective(values, seeds, controls, None, [], ["linear_cka"])
    assert plain.estimate < evidence.estimate - 0.1


def test_objective_claim_reads_each_training_length_of_the_controls():
    """Controls given by training length make one unit each, every unit the gap against
    that length's controls alone. A gap that only the most trained controls show (planted:
    the less trained causal models as close to the seeds as another seed is) is how much
    they learnt, not their objective: the claim no longer holds. A length with one control
    is one draw, and the claim is not measured."""
    from analysis_lib.claims.papers.wu import PairKey, objective

    seeds = ["m0", "m1", "m2", "m3"]
    lengths = {"at step 400": ["c0@400", "c1@400", "c2@400"], "trained": ["c0", "c1", "c2"]}

    def values(early_gap):
        rng = np.random.default_rng(5)
        out = {PairKey("matched", a, b): float(rng.uniform(0.79, 0.81))
               for k, a in enumerate(seeds) for b in seeds[k + 1:]}
        for s in seeds:
            out.update({PairKey("matched", s, c): float(rng.uniform(0.49, 0.51))
                        for c in lengths["trained"]})
            out.update({PairKey("matched", s, c): 0.8 - early_gap + float(rng.normal(0, 0.003))
                        for c in lengths["at step 400"]})
        return out

    for early_gap in (0.3, 0.0):
        found = objective(values(early_gap), seeds, lengths, None, [], ["linear_cka"])
        assert [e.unit.split(" (")[0] for e in found] == [
            "linear_cka, 4 seed models against 3 of the other objective at step 400",
            "linear_cka, 4 seed models against 3 of the other objective trained"]
        alone = objective(values(early_gap), seeds, lengths["at step 400"], None, [],
                          ["linear_cka"])
        assert found[0].estimate == pytest.approx(alone[0].estimate)
        assert found[0].estimate == pytest.approx(early_gap, abs=0.02)
        assert found[1].estimate == pytest.approx(0.3, abs=0.02)
    assert _objective(values(0.3), seeds, lengths).loc["wu-objective", "verdict"] == "holds"
    vanished = _objective(values(0.0), seeds, lengths).loc["wu-objective"]
    assert vanished["verdict"] == "mixed"  # holds against one length, opposite against the other
    one = _objective(values(0.3), seeds, {**lengths, "at step 100": ["c0@100"]})
    assert one.loc["wu-objective", "verdict"] == "not measured"
    assert "c0@100" in one.loc["wu-objective", "what this run shows"]
    gated = _objective(values(0.3), seeds, lengths, not_learned=["c2@400"])
    assert "c2@400 did not learn" in gated.loc["wu-objective", "what this run shows"]


def test_rank_overlap_matches_its_definition_with_ties_and_gaps():
    """The probability that an across cell is at least as similar as a within cell (ties
    half), against the plain count over every pair of cells; NaN cells are left out."""
    rng = np.random.default_rng(0)
    across = np.round(rng.random(40), 1)  # many ties
    within = np.round(rng.random(25) + 0.2, 1)
    count = ((across[:, None] > within[None, :])
             + 0.5 * (across[:, None] == within[None, :])).mean()
    assert structure.rank_overlap(across, within) == pytest.approx(count)
    with_gaps = structure.rank_overlap(np.append(across, np.nan), np.append(within, np.nan))
    assert with_gaps == pytest.approx(count)
    assert structure.rank_overlap([0.1, 0.2], [0.5, 0.6]) == 0.0
    assert structure.rank_overlap([0.5, 0.6], [0.5, 0.6]) == 0.5
    assert np.isnan(structure.rank_overlap([], [0.5]))


def test_neurons_claim_reads_ranks_so_no_scale_or_chance_level_sets_its_sign():
    """The overlap of a collection matrix is unchanged by any increasing transformation of
    the measure (its scale, an offset, a chance level added to every cell): two measures
    whose matrices order their cells alike give the same overlap however far apart their
    raw values, and the claim does not hold."""
    M, fake, names = _three_models({"a": 0.8, "b": 0.35, "c": 0.4})
    rng = np.random.default_rng(1)
    M = M + 0.1 * np.abs(rng.standard_normal(M.shape))
    M = (M + M.T) / 2
    base = collection.summary(M, fake)["overlap"]
    assert 0.0 < base < 0.5
    for transform in (lambda x: 3 * x + 0.2, lambda x: x ** 3, np.log):
        assert collection.summary(transform(M), fake)["overlap"] == pytest.approx(base)
    cka, neuron = collection.summary(M, fake), collection.summary(0.1 * M ** 2 - 0.05, fake)
    assert cka["across_models"] > 10 * neuron["across_models"]
    jk = {"linear_cka": _jackknife(cka, 0.005), "neuronsim": _jackknife(neuron, 0.005)}
    found = _findings({"linear_cka": cka, "neuronsim": neuron}, jk,
                      ["neuronsim", "linear_cka"])
    assert found.loc["wu-neurons-differ", "verdict"] == "equivalent"


def test_chance_levels_come_from_the_same_layers_and_not_from_a_width():
    """A measure's chance level on the page is its value on the same layers with the rows
    of one side shuffled. It has no width of its own to choose: widening both layers by
    repeating every neuron leaves each measure, and so the shuffled level, unchanged."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 12))
    Y = X @ rng.standard_normal((12, 16)) + 0.5 * rng.standard_normal((300, 16))
    for measure in ("linear_cka", "neuronsim"):
        narrow = similarity.permutation_test(X, Y, measure, n_perm=10, seed=3, progress=False)
        wide = similarity.permutation_test(np.hstack([X, X, X]), np.hstack([Y, Y]), measure,
                                           n_perm=10, seed=3, progress=False)
        np.testing.assert_allclose(wide.null, narrow.null, atol=1e-9)
        assert narrow.statistic > narrow.null.max()


def test_without_a_jackknife_no_verdict_is_decided():
    cka = _summary(0.8, 0.3)
    found = _findings({"linear_cka": cka}, {}, ["linear_cka"])
    assert set(found.verdict) <= {"inconclusive", "not measured"}


def test_jackknife_replicates_give_the_intervals(coll):
    c, _ = coll
    jk = collection.summary_jackknife("linear_cka", c, n_folds=5)
    assert len(jk.replicates) == 5
    iv = collection.summary_intervals("linear_cka", c, n_folds=5)
    assert iv.keys() == jk.intervals().keys()
    for key, bounds in jk.intervals().items():
        np.testing.assert_array_equal(iv[key], bounds)  # NaN where a cell is empty


def test_jackknives_of_several_measures_are_each_measures_own(coll, monkeypatch):
    """summary_jackknives computes several measures in one pass on the same folds: each
    measure's estimate and replicates are exactly what summary_jackknife gives it alone, on
    one path. The ``auto`` rule times a set of measures and each measure alone as shape
    classes of their own, and may send them to different paths (NumPy and torch agree to
    rounding, not to the bit), so the exact check fixes the path."""
    c, _ = coll
    free = collection.summary_jackknives(["neuronsim", "CKA"], c, n_folds=4, seed=2)
    monkeypatch.setenv(_backend.ENV, "numpy")
    for name, jk in free.items():  # whichever paths the rule took
        alone = collection.summary_jackknife(name, c, n_folds=4, seed=2)
        np.testing.assert_allclose(list(jk.estimate.values()), list(alone.estimate.values()),
                                   rtol=1e-12, atol=1e-12)
        pd.testing.assert_frame_equal(jk.replicates, alone.replicates, rtol=1e-12, atol=1e-12)
    both = collection.summary_jackknives(["neuronsim", "CKA"], c, n_folds=4, seed=2)
    assert list(both) == ["neuronsim", "linear_cka"]
    for name, jk in both.items():
        alone = collection.summary_jackknife(name, c, n_folds=4, seed=2)
        assert jk.estimate.keys() == alone.estimate.keys()
        np.testing.assert_array_equal(list(jk.estimate.values()),
                                      list(alone.estimate.values()))
        pd.testing.assert_frame_equal(jk.replicates, alone.replicates, check_exact=True)
    assert not both["neuronsim"].replicates.equals(both["linear_cka"].replicates)
    one = collection.summary_jackknives("linear_cka", c, n_folds=4, seed=2)  # one name, as a str
    pd.testing.assert_frame_equal(one["linear_cka"].replicates, both["linear_cka"].replicates)


def test_corpus_claim_reads_fisher_z():
    high = _corpus({"linear_cka": 0.95}, n_layers=40)
    assert high.loc["wu-other-corpus", "verdict"] == "holds"
    low = _corpus({"linear_cka": 0.1}, n_layers=40)
    assert low.loc["wu-other-corpus", "verdict"] == "equivalent"  # |r| reliably < 0.5


def test_attention_claim_compares_each_method_with_itself():
    from types import SimpleNamespace


    names = ["a", "b", "c"]
    table = LayerTable.concat([LayerTable.for_model(m, "bert", True, 3, kind="attention")
                               for m in names])
    same = table.same_model()

    def matrix(within, across, jitter, seed):
        rng = np.random.default_rng(seed)
        M = np.where(same, within, across) + jitter * rng.standard_normal(same.shape)
        return (M + M.T) / 2

    # heads as similar across models as within them (overlap near 0.5); distributed
    # methods lower across models than within (overlap 0): head-level closer, as reported
    heads = {m: matrix(0.9, 0.9, 0.002, k) for k, m in enumerate(attention.HEAD_LEVEL)}
    dist = {m: matrix(0.3, 0.12, 0.002, 9 + k) for k, m in enumerate(attention.DISTRIBUTED)}
    found = _attention({**heads, **dist}, SimpleNamespace(table=table))
    assert found.loc["wu-attention-heads", "verdict"] == "holds"
    assert found.loc["wu-attention-heads", "control"].startswith("condition:")
    # each pair of models is a distinct object: its value is printed by name, so that an
    # undecided verdict can say which pairs carry it
    shows = found.loc["wu-attention-heads", "what this run shows"]
    assert "per value: a - b +0." in shows and "b - c +0." in shows
    # near-uniform heads: raw values high across models (0.72), yet below every
    # within-model cell (0.9), while the distributed cells overlap: the claim turns around
    uniform = {m: matrix(0.9, 0.72, 0.002, k) for k, m in enumerate(attention.HEAD_LEVEL)}
    overlapping = {m: matrix(0.3, 0.3, 0.002, 9 + k) for k, m in enumerate(attention.DISTRIBUTED)}
    found = _attention({**uniform, **overlapping}, SimpleNamespace(table=table))
    assert found.loc["wu-attention-heads", "verdict"] == "opposite"
    # raw head values far above the distributed ones, the same order of cells: no claim
    same_order = {m: matrix(0.3, 0.12, 0.002, k) for k, m in enumerate(attention.HEAD_LEVEL)}
    found = _attention({**same_order, **dist}, SimpleNamespace(table=table))
    assert found.loc["wu-attention-heads", "verdict"] != "holds"
    assert found.loc["wu-attention-heads", "verdict"] == "not measured"  # all overlaps 0



def test_pair_entries_are_data_not_text(coll):
    """The per-pair entries carry their kind and models as fields: reordering or renaming
    models never needs a key to be parsed back."""
    c, _ = coll
    s = collection.summary(np.full((6, 6), 0.2), c)
    pairs = collection.pair_entries(s)
    assert list(pairs) == [K("pair", "random:bert", "random:gpt2")]
    assert str(next(iter(pairs))) == "pair: random:bert - random:gpt2"
    assert set(collection.pair_entries(s, "matched")) == {K("matched", "random:bert",
                                                            "random:gpt2")}
    assert all(isinstance(k, str) for k in collection.named(s))
    assert len(collection.named(s)) + 2 == len(s)


def test_uniform_heads_are_not_counted_as_duplicates():
    """Known answer: two heads that attend evenly match each other perfectly (JS 1) but
    share no preference; a head that copies a peaked first-layer head is a duplicate."""
    from analysis_lib.similarity import AttentionLayer
    from analysis_lib.similarity import attention as heads

    rng = np.random.default_rng(0)
    sizes = [4, 6, 5]
    peaked = [np.eye(t)[rng.permutation(t)] * 0.9 + 0.1 / t for t in sizes]
    even = [np.full((t, t), 1.0 / t) for t in sizes]
    first = AttentionLayer([np.stack([p, e]) for p, e in zip(peaked, even)])
    second = AttentionLayer([np.stack([e, p]) for p, e in zip(peaked, even)])
    red = heads.first_layer_matches([first, second], ["m", "m"], [1, 2], threshold=0.9
                                    ).set_index(["layer", "head"])
    assert red.loc[(2, 0), "near_uniform"] and not red.loc[(2, 0), "near_duplicate"]
    assert red.loc[(2, 0), "best_in_L1"] == pytest.approx(1.0)  # it matches the even head
    assert red.loc[(2, 1), "near_duplicate"] and not red.loc[(2, 1), "near_uniform"]
    assert heads.head_counts(red.reset_index()).loc["m", 2] == 1
    assert heads.head_counts(red.reset_index(), "near_uniform").loc["m"].tolist() == [1, 1]
    # a causal head that attends evenly to the words it can see is uniform for its model
    prefix = [np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None] for t in sizes]
    reference = heads.uniform_like(AttentionLayer([p[None] for p in prefix]))
    for got, want in zip(reference.maps, prefix):
        np.testing.assert_allclose(got[0], want)


def test_relative_depth_claim_reads_matched_cells_against_the_pairs_other_cells():
    from analysis_lib.claims.papers.wu import PairKey

    cka = _summary(0.8, 0.3)
    pairs = [("a", "b"), ("a", "c"), ("b", "c")]
    planted = {**cka, **{PairKey("pair", a, b): 0.30 + 0.01 * k for k, (a, b) in
                         enumerate(pairs)},
               **{PairKey("matched", a, b): 0.45 + 0.012 * k for k, (a, b) in
                  enumerate(pairs)}}
    found = _findings({"linear_cka": planted}, {}, ["linear_cka"])
    row = found.loc["wu-relative-depth"]
    assert row["verdict"] == "holds", row["what this run shows"]
    assert "3 pairs of models" in row["what this run shows"] and "+0.152" in \
        row["what this run shows"]
    flat = {**planted, **{PairKey("matched", a, b): 0.30 + 0.01 * k + 0.0005 * (-1) ** k
                          for k, (a, b) in enumerate(pairs)}}
    found = _findings({"linear_cka": flat}, {}, ["linear_cka"])
    assert found.loc["wu-relative-depth", "verdict"] == "equivalent"
    alone = _findings({"linear_cka": cka}, {}, ["linear_cka"])
    assert alone.loc["wu-relative-depth", "verdict"] == "not measured"


def test_localization_claim_compares_each_models_upper_and_lower_layers():
    rows = []
    for k, model in enumerate(("a", "b", "c")):
        for layer in range(7):
            depth = layer / 6
            rows.append({"model": model, "layer": layer, "depth": depth,
                         "value": 0.1 * depth + 0.002 * k, "variant": "paper (plain)"})
            rows.append({"model": model, "layer": layer, "depth": depth,
                         "value": -depth, "variant": "released code (z-scored)"})
    local = pd.DataFrame(rows)
    found = _localization(local, ["a", "b", "c"])
    assert found.loc["wu-localization-depth", "verdict"] == "holds"  # +0.058 in each model
    # the same scores on ranks among the pretrained layers: a second unit, read alike
    ranked = pd.concat([local, local[local.variant == "paper (plain)"].assign(
        variant=collection.RANKED, value=lambda f: f.depth - 0.5)], ignore_index=True)
    both = _localization(ranked, ["a", "b", "c"]).loc["wu-localization-depth"]
    assert both["verdict"] == "holds"
    assert f"3 models, upper - lower half ({collection.RANKED})" in both["what this run shows"]
    against = pd.concat([local, local[local.variant == "paper (plain)"].assign(
        variant=collection.RANKED, value=lambda f: 0.5 - f.depth)], ignore_index=True)
    assert _localization(against, ["a", "b", "c"]).loc[
        "wu-localization-depth", "verdict"] == "mixed"  # the two readings disagree
    falling = local.assign(value=-local.value)
    assert _localization(falling, ["a", "b", "c"]).loc[
        "wu-localization-depth", "verdict"] == "opposite"
    one = _localization(local, ["a"])
    assert one.loc["wu-localization-depth", "verdict"] == "inconclusive"  # no spread


def _gaussian_collection(widths=(32, 32), n=400, seed=0):
    rng = np.random.default_rng(seed)
    table = LayerTable.concat([LayerTable.for_model(f"m{k}", "bert", True, 2)
                               for k in range(len(widths))])
    layers = [rng.standard_normal((n, w)) for w in widths for _ in range(3)]
    return collection.Collection(table, layers, np.arange(n), np.zeros((n, 3)),
                                 np.arange(n) // 5)


def test_outlier_neurons_are_named_by_their_spread_over_the_median_neuron():
    c = _gaussian_collection()
    assert collection.outlier_neurons(c).empty  # no neuron of a Gaussian layer stands out
    planted = [x.copy() for x in c.layers]
    planted[1][:, [3, 17]] *= 100.0  # two massive neurons in m0's middle layer
    planted[2][:, 3] *= 50.0  # and neuron 3 again at its top
    p = collection.Collection(c.table, planted, c.rows, c.covariates, c.sentence)
    found = collection.outlier_neurons(p)
    assert found[["model", "neuron", "layers"]].values.tolist() == [["m0", 3, 2],
                                                                    ["m0", 17, 1]]
    assert found.largest_share.iloc[0] > 0.45 and found.largest_ratio.iloc[0] > 80
    # the rule is relative to the layer's own median neuron: neither the scale of a layer
    # nor the width of the model moves it
    scaled = collection.Collection(c.table, [1e3 * x for x in planted], c.rows,
                                   c.covariates, c.sentence)
    pd.testing.assert_frame_equal(collection.outlier_neurons(scaled)[["model", "neuron"]],
                                  found[["model", "neuron"]])
    wide = collection.Collection(c.table, [np.hstack([x, x[:, 20:]]) for x in planted],
                                 c.rows, c.covariates, c.sentence)
    assert collection.outlier_neurons(wide).neuron.tolist() == [3, 17]
    # dropped from every layer of their model; the other model keeps its width
    trimmed = collection.drop_neurons(p, found)
    assert [x.shape[1] for x in trimmed.layers] == [30, 30, 30, 32, 32, 32]
    assert collection.outlier_neurons(trimmed).empty
    # CKA between m0's middle layer and its clean self reads the outliers, then not
    cka = similarity.linear_cka
    assert cka(p.layers[1], c.layers[1]) < 0.5
    assert cka(trimmed.layers[1], np.delete(c.layers[1], [3, 17], axis=1)) == \
        pytest.approx(1.0)
    with pytest.raises(ValueError, match="above 1"):
        collection.outlier_neurons(p, ratio=1.0)


def test_claims_driven_by_outlier_neurons_read_a_second_unit_without_them():
    """Planted: matched-depth cells stand out only with the outliers; the claim's unit
    without them says otherwise, and the verdict is no longer a plain "holds"."""
    def summaries(gap):
        values = {}
        for a, b in (("a", "b"), ("a", "c"), ("b", "c")):
            values[K("matched", a, b)] = 0.5 + gap
            values[K("pair", a, b)] = 0.5
        return {"linear_cka": values}

    def judged(without):
        return verdicts.judge([claims.get("wu-relative-depth")], {
            "summaries": summaries(0.2), "measures": ["linear_cka"],
            "without_outliers": without}).loc["wu-relative-depth"]

    plain = judged(None)
    assert plain["verdict"] == "holds" and "without outlier" not in plain["what this run shows"]
    outliers = pd.DataFrame({"model": ["c"], "neuron": [5]})
    # no model has outliers: no second unit, even if the results are given
    assert judged({"outliers": outliers.iloc[:0], "summaries": summaries(0.0)}
                  )["what this run shows"] == plain["what this run shows"]
    both = judged({"outliers": outliers, "summaries": summaries(0.0)})
    assert "linear_cka, 3 pairs of models, without outlier neurons: +0.000" in both[
        "what this run shows"]
    assert both["verdict"] != "holds"


def test_rematch_recomputes_only_the_changed_models_cells_and_agrees_with_a_full_pass():
    c = _gaussian_collection(widths=(24, 16, 20))
    c.layers[4] = c.layers[4] + 3 * c.layers[3]  # some similarity to read
    measures = ["linear_cka", "neuronsim"]
    before = collection.matrices(c, measures, progress=False)
    planted = [x.copy() for x in c.layers]
    for k in (3, 4, 5):
        planted[k][:, 2] *= 200.0
    p = collection.Collection(c.table, planted, c.rows, c.covariates, c.sentence)
    outliers = collection.outlier_neurons(p)
    assert outliers.model.unique().tolist() == ["m1"]
    trimmed = collection.drop_neurons(p, outliers)
    with_outliers = collection.matrices(p, measures, progress=False)
    fast = collection.rematch(with_outliers, trimmed, ["m1"])
    full = collection.matrices(trimmed, measures, progress=False)
    for name in measures:
        np.testing.assert_allclose(fast[name], full[name], atol=1e-10)
        # m0 and m2's cells never changed
        keep = np.flatnonzero(np.array(c.table.owners) != "m1")
        np.testing.assert_allclose(fast[name][np.ix_(keep, keep)],
                                   before[name][np.ix_(keep, keep)], atol=1e-10)
    assert not np.allclose(fast["linear_cka"], with_outliers["linear_cka"])
