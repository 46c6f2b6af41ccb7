"""Alignment methods against known answers (Ren et al. Table 3), their determinism, and bad
input."""

import itertools

import numpy as np
import pytest

from analysis_lib import alignment, claims
from analysis_lib.alignment import flows
from analysis_lib.alignment import pairs as seed_pairs
from analysis_lib.claims import causes, tables, verdicts
from analysis_lib.claims.papers import ren
from analysis_lib.similarity import structure
from analysis_lib.training import heads


def test_linear_regression_recovers_a_linear_map():
    X, Y = flows.synthetic_pair(1500, 8, "linear", seed=0)
    assert alignment.held_out(X, Y, "linreg", seed=0)["test"] < 0.05
    for method in ("cca", "svcca", "pwcca"):  # exact in the canonical space as well
        assert alignment.held_out(X, Y, method, seed=0)["test"] < 0.05


@pytest.mark.slow
def test_the_inn_recovers_an_invertible_flow_far_better_than_linear_methods():
    X, Y = flows.synthetic_pair(3000, 8, "flow", seed=0)
    inn = alignment.held_out(X, Y, "inn", seed=0)["test"]
    linear = alignment.held_out(X, Y, "linreg", seed=0)["test"]
    assert inn < 0.7 * linear, (inn, linear)
    assert alignment.held_out(X, Y, "inn", seed=0)["test"] == inn  # same seed, same number


def test_procrustes_undoes_a_rotation_and_distances_are_relative():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((200, 6))
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    fitted = alignment.fit(X, X @ Q + 5.0, "procrustes")
    assert fitted.distance(X, X @ Q + 5.0) < 1e-20
    np.testing.assert_allclose(fitted.transform(X), X @ Q + 5.0, atol=1e-10)
    # the relative distance: predicting the mean scores 1, whatever the scale
    Y = rng.standard_normal((200, 6)) * 1000
    assert alignment.relative_distance(np.tile(Y.mean(0), (200, 1)), Y) == pytest.approx(1.0)


def test_trained_maps_are_deterministic_for_a_seed_and_differ_across_seeds():
    X, Y = flows.synthetic_pair(400, 4, "flow", seed=2)
    options = dict(epochs=15, hidden=16)
    a = alignment.fit(X, Y, "mlp", seed=0, **options).transform(X)
    b = alignment.fit(X, Y, "mlp", seed=0, **options).transform(X)
    c = alignment.fit(X, Y, "mlp", seed=1, **options).transform(X)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_the_coupling_flow_is_invertible():
    import torch

    from analysis_lib.alignment.flows import CouplingFlow

    flow = CouplingFlow(6, layers=4, hidden=8, seed=0)
    for block in flow.blocks:
        torch.nn.init.normal_(block.net[-1].weight, std=0.5)
    x = torch.randn(50, 6)
    with torch.no_grad():
        torch.testing.assert_close(flow.inverse(flow(x)), x, atol=1e-5, rtol=1e-5)


def test_bad_input_is_explained():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((20, 30)), rng.standard_normal((20, 30))
    with pytest.raises(ValueError, match="linreg with 30 and 30 columns needs at least 32 rows"):
        alignment.fit(X, Y, "linreg")
    with pytest.raises(ValueError, match="unknown alignment method 'nope'"):
        alignment.fit(X, Y, "nope")
    with pytest.raises(TypeError, match=r"option\(s\) \['variance'\] are not taken by linreg"):
        alignment.fit(X, Y, "linreg", variance=0.9)
    with pytest.raises(ValueError, match="invertible map needs equal widths"):
        alignment.fit(X[:, :4], Y[:, :5], "inn", epochs=1)
    with pytest.raises(ValueError, match="same rows"):
        alignment.fit(X, Y[:10], "procrustes")
    with pytest.raises(ValueError, match="test=0.99 leaves"):
        alignment.held_out(X[:, :2], Y[:, :2], "procrustes", test=0.99)


def test_pair_distances_count_each_pair_once_and_never_a_model_with_itself():
    rng = np.random.default_rng(3)
    base = [rng.standard_normal((60, 4)) for _ in range(3)]
    layers = {f"seed {s}": [x + 0.1 * s * rng.standard_normal(x.shape) for x in base]
              for s in range(4)}
    frame = seed_pairs.pair_distances(layers, "procrustes")
    assert len(frame) == 6 * 3  # C(4, 2) pairs x 3 layers
    assert frame.groupby("layer").size().tolist() == [6, 6, 6]
    pairs = [p.split(" / ") for p in frame.pair.unique()]
    assert all(a != b for a, b in pairs) and len({tuple(sorted(p)) for p in pairs}) == 6
    summary = tables.spread_table(frame)
    assert (summary.pairs == 6).all() and (summary.q1 <= summary["median"]).all()


def test_a_ridge_lifts_the_row_limit_of_linear_fits():
    """Without a ridge a linear map needs more rows than columns (else it fits anything
    exactly); with one it fits few rows and generalises better than no map at all."""
    rng = np.random.default_rng(5)
    W = rng.standard_normal((30, 30)) / np.sqrt(30)
    X = rng.standard_normal((40, 30))
    Y = X @ W + 0.1 * rng.standard_normal((40, 30))
    assert alignment.rows_needed("linreg", 30, 30) == 32
    assert alignment.rows_needed("linreg", 30, 30, ridge=0.1) == 3
    assert alignment.rows_needed("procrustes", 30, 30) == 3
    assert alignment.fit_rows(40) == 32 and alignment.fit_rows(40, 0.5) == 20
    fitted = alignment.fit(X[:20], Y[:20], "linreg", ridge=0.1)
    assert fitted.distance(X[20:], Y[20:]) < 0.9


def test_the_identity_baseline_is_the_plain_distance():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((50, 6))
    Y = X + 0.3 * rng.standard_normal((50, 6))
    fitted = alignment.fit(X, Y, "identity")
    assert fitted.distance(X, Y) == pytest.approx(alignment.relative_distance(X, Y), rel=1e-12)
    with pytest.raises(ValueError, match="identity map needs equal widths, got 6 and 5"):
        alignment.fit(X, Y[:, :5], "identity")


def _loo_error(X, Y, ridge):
    """Leave-one-out squared error of linreg with this ridge, refitted (means included)
    without each row in turn: the slow reference of the ridge method's choice. The ridge's
    scale is the mean eigenvalue of all rows' covariance, as the method sets it."""
    Xc = X - X.mean(0)
    lam = ridge * np.sum(Xc**2) / X.shape[1]
    error = 0.0
    for i in range(len(X)):
        keep = np.arange(len(X)) != i
        mx, my = X[keep].mean(0), Y[keep].mean(0)
        A = X[keep] - mx
        W = np.linalg.solve(A.T @ A + lam * np.eye(X.shape[1]), A.T @ (Y[keep] - my))
        error += np.sum(((X[i] - mx) @ W + my - Y[i]) ** 2)
    return error


@pytest.mark.parametrize("n, noise", [(25, 1.0), (60, 0.05)])
def test_the_ridge_method_picks_the_ridge_that_predicts_left_out_rows_best(n, noise):
    """The ridge chosen by scikit-learn's efficient leave-one-out is the one a refit per
    left-out row prefers, and the map is linreg's with that ridge; fewer rows than columns
    and heavy noise want a larger ridge than many clean rows."""
    rng = np.random.default_rng(8)
    X = rng.standard_normal((n, 12)) * np.geomspace(1, 100, 12)  # anisotropic columns
    Y = X @ rng.standard_normal((12, 5)) / 30 + noise * rng.standard_normal((n, 5))
    grid = (1e-3, 1e-2, 1e-1, 1.0, 10.0)
    fitted = alignment.fit(X, Y, "ridge", ridges=grid)
    want = grid[int(np.argmin([_loo_error(X, Y, r) for r in grid]))]
    assert fitted.info["ridge"] == want
    same = alignment.fit(X, Y, "linreg", ridge=want)
    np.testing.assert_allclose(fitted.transform(X), same.transform(X), rtol=1e-10, atol=1e-10)


def test_ridge_prefers_a_larger_ridge_on_few_noisy_rows():
    rng = np.random.default_rng(9)
    W = rng.standard_normal((40, 40)) / np.sqrt(40)
    X = rng.standard_normal((400, 40))
    Y = X @ W + 0.05 * rng.standard_normal((400, 40))
    few = alignment.fit(X[:30], Y[:30] + rng.standard_normal((30, 40)), "ridge")
    many = alignment.fit(X, Y, "ridge")
    assert few.info["ridge"] > many.info["ridge"]
    assert many.distance(X, Y) < 0.01


def test_methods_that_cannot_be_fitted_on_few_rows_are_reported_not_raised(linear_heads):
    """Ren et al.'s Table 4 on fewer rows than a linear map needs: the linear methods come
    back as not fitted, with the reason, and the others with their numbers; the claim that
    needs linreg is then inconclusive rather than the page stopping."""
    rng = np.random.default_rng(6)
    base = [rng.standard_normal((20, 24)) for _ in range(2)]
    layers = {f"seed {s}": [x + 0.1 * rng.standard_normal(x.shape) for x in base]
              for s in range(3)}
    long = seed_pairs.method_distances(layers, ["linreg", "procrustes", "cca"])
    table = tables.interval_columns(long).set_index("method")
    for method in ("linreg", "cca"):
        assert np.isnan(table.loc[method, "test"])
        assert table.loc[method, "note"].startswith(f"not fitted: {method} at 24 columns "
                                                    "needs 26 rows to fit, this split has 16")
    assert np.isfinite(table.loc["procrustes", "test"]) and table.loc["procrustes", "note"] == ""
    assert ren.inn_real(long, None, None, None, None) == []
    feats = {name: {"train": rng.standard_normal((20, 24)).astype(np.float32),
                    "test": rng.standard_normal((10, 24)).astype(np.float32)}
             for name in ("a", "b")}
    injected = heads.injection(feats, {"a": linear_heads(24, 0), "b": linear_heads(24, 1)},
                               {"test": rng.integers(0, 2, 10)}, ["linreg", "procrustes"])
    linreg = injected[injected.method == "linreg"]
    assert linreg.accuracy.isna().all() and linreg.note.str.startswith("not fitted").all()
    assert injected[injected.method == "procrustes"].accuracy.notna().all()
    assert ren.injection(injected, None, None, None, None) == []  # no INN, the proposed map


@pytest.mark.parametrize("method, variance", [("cca", None), ("svcca", 0.99), ("pwcca", 0.9)])
def test_alignment_cca_family_keeps_the_measures_directions(method, variance):
    """The fitted CCA family uses the measures' rank and variance cuts: its canonical
    correlations are those of similarity.reference on the same rows."""
    from analysis_lib.similarity import reference

    rng = np.random.default_rng(4)
    Z = rng.standard_normal((300, 5))
    X = np.column_stack([Z @ rng.standard_normal((5, 8)), Z[:, 0] * 2])  # rank 5 of 9
    Y = Z @ rng.standard_normal((5, 7)) + 0.5 * rng.standard_normal((300, 7))
    options = {} if method == "cca" else {"variance": variance}
    fitted = alignment.fit(X, Y, method, **options)
    want = reference.canonical_correlations(X, Y, variance)
    np.testing.assert_allclose(fitted.info["correlations"], want, atol=1e-8)


def _pairs(values_by_layer, pairs=("a / b", "a / c", "b / c"), noise=0.002, task=None,
           kind=None, method="procrustes", seed=0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = [{"layer": layer, "pair": p, "method": method,
             "test": value + noise * rng.standard_normal(), "train": value}
            for layer, value in values_by_layer.items() for p in pairs]
    frame = pd.DataFrame(rows)
    if task is not None:
        frame = frame.assign(task=task, kind=kind)
    return frame


def _ren(synthetic=None, methods=None, injected=None, **results):
    """The seeds chapter's findings: Ren et al.'s claims judged on these results."""
    return verdicts.judge(claims.of_chapter("seeds"), {
        "synthetic": synthetic, "methods": methods, "injected": injected, **results})


def _lines(accuracies, frozen, task="t"):
    """Adequacy lines (``tables.adequacy_lines``) of one run per model: its test accuracy
    against the head on its frozen encoder."""
    import pandas as pd

    return tables.adequacy_lines(pd.DataFrame({
        "model": list(accuracies), "task": task, "mean": list(accuracies.values()), "n": 1,
        "frozen_head": [frozen[name] for name in accuracies]}))


def test_seed_claims_read_the_adequacy_of_the_runs_they_read():
    """A fine-tuned run no better than the head on its frozen encoder was not trained enough
    for a claim about what fine-tuning does. The claims over pairs of fine-tuned pretraining
    seeds leave out the pairs of such a seed model, naming it with its figures, and read
    the others (three seeds at least); a unit over fine-tuning seeds reads the grid's line
    of the model and task its table names, and the adequacy rule sets it aside."""
    import pandas as pd

    # every claim read from the fine-tuned pretraining seeds reads their lines, and no other
    for claim in claims.CLAIMS.values():
        reads = claims.results_read(claim)
        assert ("untrained_pretraining" in reads) == ("adequacy_pretraining" in reads), claim.id
    four = ("a", "b", "c", "d")
    pairs4 = tuple(f"{x} / {y}" for x, y in itertools.combinations(four, 2))
    rising = {k: 0.1 + 0.1 * k for k in range(5)}
    clear = _lines(dict.fromkeys(four, 0.45), dict.fromkeys(four, 0.35))
    short = _lines({**dict.fromkeys(four, 0.45), "c": 0.36}, dict.fromkeys(four, 0.35))
    assert "(test accuracy, one run, against" in short["c, t"].variable
    # fine-tuning drifts every pair apart but c's, whose fine-tuning did not take
    before = _pairs(rising, pairs=pairs4)
    drifted = pd.concat([_pairs({**rising, 4: rising[4] + (0.0 if "c" in p else 0.3)},
                                pairs=(p,), seed=k) for k, p in enumerate(pairs4)])
    apart = {"finetuned_before": before, "pretraining_finetuned": drifted}
    with_c = _ren(**apart, adequacy_pretraining=clear).loc["ren-finetune-apart"]
    assert with_c["verdict"] != "holds" and "6 pairs" in with_c["what this run shows"]
    read = _ren(**apart, adequacy_pretraining=short).loc["ren-finetune-apart"]
    assert read["verdict"] == "holds"  # the seeds fine-tuning took
    shown = read["what this run shows"]
    assert "L4, fine-tuned - pretrained, 3 pairs" in shown
    assert ("c left out, fine-tuned no better than the head on the frozen encoder (c "
            "fine-tuned on t (test accuracy, one run, against the head on its frozen "
            "encoder): 0.360, not above 0.350") in shown
    assert "3 of 4 seeds read" in shown and "a fine-tuned" not in shown
    # a seed model the pairs do not hold is not read, however short its run
    other = {**clear, **_lines({"e": 0.30}, {"e": 0.35})}
    assert "6 pairs" in _ren(**apart, adequacy_pretraining=other).loc[
        "ren-finetune-apart", "what this run shows"]
    # fewer than three seeds left: not measured, with the reason
    three = {"finetuned_before": _pairs(rising),
             "pretraining_finetuned": _pairs({**rising, 4: rising[4] + 0.3}, seed=1)}
    refused = _ren(**three, adequacy_pretraining=short).loc["ren-finetune-apart"]
    assert refused["verdict"] == "not measured"
    assert ("2 of 3 fine-tuned seed models cleared the head on their frozen encoder, fewer "
            "than the 3 an interval over seeds needs") in refused["what this run shows"]
    same = pd.concat([_pairs(rising, task="t", kind="hidden states", pairs=pairs4),
                      _pairs({k: 0.01 for k in range(1, 5)}, task="t", kind="attention",
                             pairs=pairs4)], ignore_index=True)
    initial = pd.concat([_pairs({k: 0.6 for k in range(5)}, task="t", kind="hidden states",
                                seed=4, pairs=pairs4),
                         _pairs({k: 0.6 for k in range(1, 5)}, task="t", kind="attention",
                                seed=5, pairs=pairs4)], ignore_index=True)
    attention = {"finetuned_attention": same, "finetuned_initial_attention": initial}
    assert "6 pairs of 4 seeds" in _ren(**attention, adequacy_pretraining=clear).loc[
        "ren-finetune-attention", "what this run shows"]
    kept = _ren(**attention, adequacy_pretraining=short).loc["ren-finetune-attention"]
    assert kept["verdict"] == "holds" and "3 pairs of 3 seeds" in kept["what this run shows"]
    assert "c left out" in kept["what this run shows"]
    # the pretrained seeds' attention claim reads no fine-tuned run: no line reaches it
    assert "left out" not in _ren(pretraining_attention=same, initial_attention=initial,
                                  adequacy_pretraining=short).loc[
        "ren-attention", "what this run shows"]
    # Table 4: the fine-tuning seeds' table names its run and reads the grid's line; the
    # pretraining seeds' unit reads its seeds' lines (three seeds: one short leaves it out)
    methods = pd.concat([_pairs({3: 0.5}, method="ridge"), _pairs({3: 0.3}, method="inn")])
    tables4 = {"methods": methods.assign(model="m", task="t"), "pretraining_methods": methods}
    grid_clear, grid_short = _lines({"m": 0.70}, {"m": 0.60}), _lines({"m": 0.61}, {"m": 0.60})
    both = _ren(**tables4, adequacy=grid_clear, adequacy_pretraining=clear).loc["ren-inn-real"]
    assert both["verdict"] == "holds"
    assert "fine-tuning seeds of m on t, ridge - inn" in both["what this run shows"]
    assert "pretraining seeds, ridge - inn" in both["what this run shows"]
    row = _ren(**tables4, adequacy=grid_short, adequacy_pretraining=clear).loc["ren-inn-real"]
    assert row["verdict"] == "holds" and "pretraining seeds, ridge" in row["what this run shows"]
    assert "the adequacy rule leaves out 1 unit" in row["how"] and "m fine-tuned on t" in row[
        "how"]
    row = _ren(**tables4, adequacy=grid_clear, adequacy_pretraining=short).loc["ren-inn-real"]
    assert row["verdict"] == "holds" and "pretraining seeds, ridge" not in row[
        "what this run shows"]
    assert "pretraining seeds left out: 2 of 3 fine-tuned seed models" in row[
        "what this run shows"]
    # Table 5: an injection table holds its seeds in its from and to columns
    injected = pd.DataFrame([
        {"from": x, "to": y, "method": m, "accuracy": acc + 0.002 * i}
        for i, (x, y) in enumerate(itertools.permutations(four, 2))
        for m, acc in (("own", 0.8), ("identity", 0.6), ("ridge", 0.6), ("inn", 0.75))])
    row = _ren(injected=injected.assign(model="m", task="t"), pretraining_injected=injected,
               adequacy=grid_clear, adequacy_pretraining=short).loc["ren-injection"]
    assert "fine-tuning seeds of m on t, inn - identity" in row["what this run shows"]
    assert "pretraining seeds, inn - identity, 6 ordered pairs" in row["what this run shows"]
    assert "c left out" in row["what this run shows"]
    # a fine-tuning seeds' table that names no run is not matched to any line
    assert "m fine-tuned" not in _ren(methods=methods, adequacy=grid_short).loc[
        "ren-inn-real", "how"]


def test_seed_findings_follow_planted_distances():
    import pandas as pd

    synthetic = pd.DataFrame([
        {"g": g, "method": m, "seed": s, "rows": 3000, "test": v + 0.001 * s, "train": v}
        for s in (0, 1, 2)
        for g, m, v in (("flow", "linreg", 0.36), ("flow", "inn", 0.09),
                        ("linear", "linreg", 0.0), ("linear", "inn", 0.01))])
    rising = {k: 0.1 + 0.1 * k for k in range(5)}
    hidden = _pairs(rising, task="t", kind="hidden states")
    attention = _pairs({k: 0.01 for k in range(1, 5)}, task="t", kind="attention")
    # Fig. 4 on the pretraining seeds: attention and hidden states of the same sentences
    same = pd.concat([hidden, attention], ignore_index=True)
    # the same seeds untrained: attention rows and word vectors equally far apart (no gap)
    initial = pd.concat([_pairs({k: 0.6 for k in range(5)}, task="t", kind="hidden states",
                                seed=4),
                         _pairs({k: 0.6 for k in range(1, 5)}, task="t", kind="attention",
                                seed=5)], ignore_index=True)
    # linreg over-fits (0.9); the claim reads the INN against ridge, the best simple map
    methods = pd.concat([_pairs({3: 0.9}, method="linreg"), _pairs({3: 0.5}, method="ridge"),
                         _pairs({3: 0.3}, method="inn")])

    def injected_with(inn):
        return pd.DataFrame([
            {"from": a, "to": b, "method": m, "accuracy": acc + 0.002 * i}
            for i, (a, b) in enumerate(itertools.permutations("xyz", 2))
            for m, acc in (("own", 0.8), ("random", 0.5), ("identity", 0.6), ("ridge", 0.7),
                           ("linreg", 0.79), ("inn", inn))])

    injected = injected_with(0.75)
    # after fine-tuning the top layer of every pair is 0.3 further apart
    drifted = _pairs({**rising, 4: rising[4] + 0.3}, seed=1)
    # Fig. 3: within each seed model the distance grows with the layers' distance apart
    gaps = np.abs(np.subtract.outer(np.arange(5), np.arange(5)))
    within = {f"seed {s}": 0.05 * gaps + 0.002 * s for s in range(5)}
    maps = {"procrustes": _pairs(rising), "ridge": _pairs(rising, method="ridge", seed=3)}
    found = _ren(synthetic, methods, injected, pretraining_maps=maps,
                           pretraining_attention=same, pretraining_finetuned=drifted,
                           pretraining_within=within, finetuned_attention=same,
                           initial_attention=initial, finetuned_before=_pairs(rising),
                           finetuned_initial_attention=initial)
    assert list(found.index) == [c.id for c in claims.of_chapter("seeds")]
    for claim_id in found.index:
        assert found.loc[claim_id, "verdict"] == "holds", claim_id
    assert "L4, fine-tuned - pretrained, 3 pairs: +0.30" in found.loc[
        "ren-finetune-apart", "what this run shows"]
    # each data seed's value and each seed model's mean over its pairs are printed
    assert "per seed: 0 +0.270, 1 +0.270, 2 +0.270" in found.loc[
        "ren-inn-synthetic", "what this run shows"]
    assert "per seed, the mean of its pairs: " in found.loc["ren-depth", "what this run shows"]
    # no drift: not "holds"; a fine-tuned seed that did not train: no verdict
    still = _ren(synthetic, finetuned_before=_pairs(rising),
                           pretraining_finetuned=_pairs(rising, seed=2))
    assert still.loc["ren-finetune-apart", "verdict"] != "holds"
    gated = _ren(synthetic, finetuned_before=_pairs(rising),
                           pretraining_finetuned=drifted,
                           untrained_pretraining={"zoo:mlm on t": "loss did not fall"})
    assert gated.loc["ren-finetune-apart", "verdict"] == "not measured"
    assert "zoo:mlm on t" in gated.loc["ren-finetune-apart", "what this run shows"]
    # a pretraining seed model that did not learn its language model: every claim read
    # from the seed models gets no verdict and names it; the fine-tuning seeds' claims and
    # their units stand, the pretraining seeds' units of Tables 4-5 are left out
    why = "its held-out perplexity is 0.93 of the unigram baseline's"
    unlearnt = _ren(synthetic, methods, injected, pretraining_maps=maps,
                    pretraining_attention=same, pretraining_finetuned=drifted,
                    pretraining_within=within, finetuned_attention=same,
                    initial_attention=initial, finetuned_before=_pairs(rising),
                    finetuned_initial_attention=initial, pretraining_methods=methods,
                    pretraining_injected=injected,
                    unlearned_pretraining={"zoo:mlm-seed-3": why})
    on_seed_models = {"ren-depth", "ren-attention", "ren-finetune-apart",
                      "ren-finetune-attention", "ren-layer-gradient"}
    for claim_id in unlearnt.index:
        shown = unlearnt.loc[claim_id, "what this run shows"]
        if claim_id in on_seed_models:
            assert unlearnt.loc[claim_id, "verdict"] == "not measured", claim_id
            assert "zoo:mlm-seed-3" in shown and why in shown, claim_id
        else:
            assert unlearnt.loc[claim_id, "verdict"] == "holds", claim_id
    for claim_id in ("ren-inn-real", "ren-injection"):
        shown = unlearnt.loc[claim_id, "what this run shows"]
        assert "pretraining seeds," not in shown, claim_id
        assert "pretraining seeds left out: zoo:mlm-seed-3 did not learn" in shown, claim_id
    # flat pretraining seeds: no depth effect; without them, not measured
    level = _pairs({k: 0.3 for k in range(5)}, noise=0.0005)
    flat = _ren(synthetic, methods, injected,
                pretraining_maps={"procrustes": level})
    assert flat.loc["ren-depth", "verdict"] == "equivalent"
    # one unit per map: a depth effect that one map shows and another reverses is mixed,
    # never the verdict of whichever map the page drew
    falling = _pairs({k: 0.5 - 0.1 * k for k in range(5)}, method="ridge")
    torn = _ren(synthetic, pretraining_maps={"procrustes": _pairs(rising), "ridge": falling})
    assert torn.loc["ren-depth", "verdict"] == "mixed"
    shown = torn.loc["ren-depth", "what this run shows"]
    assert "pretraining seeds, procrustes (L1 - L4, 3 pairs)" in shown
    assert "pretraining seeds, ridge (L1 - L4, 3 pairs)" in shown
    assert ren.depth(_pairs(rising), "step 400")[0].unit == "step 400 (L1 - L4, 3 pairs)"
    # attention no closer than hidden states: not "holds"; no same-sentence table: not
    # measured (the fine-tuning seeds never stand in for it)
    alike = pd.concat([hidden, _pairs(rising, task="t", kind="attention")],
                      ignore_index=True)
    assert _ren(synthetic, pretraining_attention=alike, initial_attention=initial).loc[
        "ren-attention", "verdict"] != "holds"
    assert flat.loc["ren-attention", "verdict"] == "not measured"
    # the null: untrained seeds whose attention already sits as far below their word
    # vectors as the trained seeds' does leave nothing to training; never "holds"
    start = pd.concat([_pairs(rising, task="t", kind="hidden states", seed=6),
                       _pairs({k: 0.01 for k in range(1, 5)}, task="t", kind="attention",
                              seed=7)], ignore_index=True)
    for claim_id, table, null in (
            ("ren-attention", "pretraining_attention", "initial_attention"),
            ("ren-finetune-attention", "finetuned_attention", "finetuned_initial_attention")):
        nulled = _ren(synthetic, **{table: same, null: start}).loc[claim_id]
        assert nulled["verdict"] == "equivalent", claim_id
        assert "the raw gap -0.3" in nulled["what this run shows"], claim_id
        # no untrained seeds to read the null from: no verdict, and the page says why
        bare = _ren(synthetic, **{table: same}).loc[claim_id]
        assert bare["verdict"] == "not measured" and "@0" in bare["what this run shows"]
    # Fig. 5b reads the fine-tuned seeds' table, and never the pretrained one in its place
    assert _ren(synthetic, finetuned_attention=alike, finetuned_initial_attention=initial).loc[
        "ren-finetune-attention", "verdict"] != "holds"
    assert _ren(synthetic, pretraining_attention=same, initial_attention=initial,
                finetuned_initial_attention=initial).loc[
        "ren-finetune-attention", "verdict"] == "not measured"
    # the fine-tuned seeds are read on the sentences of the task they learnt: each claim
    # reads its own null and its own before-table, never those of section 3b's sentences
    assert _ren(synthetic, finetuned_attention=same, initial_attention=initial,
                finetuned_initial_attention=start).loc[
        "ren-finetune-attention", "verdict"] == "equivalent"
    assert _ren(synthetic, finetuned_attention=same, initial_attention=start,
                finetuned_initial_attention=initial).loc[
        "ren-finetune-attention", "verdict"] == "holds"
    assert _ren(synthetic, pretraining_maps={"procrustes": drifted},
                finetuned_before=_pairs(rising), pretraining_finetuned=drifted).loc[
        "ren-finetune-apart", "verdict"] == "holds"
    assert _ren(synthetic, pretraining_maps=maps, finetuned_before=drifted,
                pretraining_finetuned=drifted).loc[
        "ren-finetune-apart", "verdict"] != "holds"
    assert _ren(synthetic, finetuned_attention=same, finetuned_initial_attention=initial,
                untrained_pretraining={"zoo:mlm on t": "it did not learn"}).loc[
        "ren-finetune-attention", "verdict"] == "not measured"
    # the INN against the controls, not against a random map or the best map after the fact:
    # ridge as good as the INN leaves the claim short of "holds"; so does a map that only
    # matches no map at all
    inn_real = found.loc["ren-inn-real", "what this run shows"]
    assert inn_real.startswith("fine-tuning seeds, ridge - inn") and "+0.200" in inn_real
    # Ren et al.'s Tables 4-5 read fine-tuned models of different pretraining seeds: their
    # tables are a unit of their own beside the fine-tuning seeds', dropped (and said so)
    # when one of those fine-tuned runs did not train
    both = _ren(synthetic, methods, injected, pretraining_methods=methods,
                pretraining_injected=injected_with(0.60))
    shown = both.loc["ren-inn-real", "what this run shows"]
    assert "fine-tuning seeds, ridge - inn" in shown and "pretraining seeds, ridge - inn" in shown
    assert both.loc["ren-inn-real", "verdict"] == "holds"
    assert "pretraining seeds, inn - ridge" in both.loc["ren-injection", "what this run shows"]
    assert both.loc["ren-injection", "verdict"] == "mixed"  # no gain on the pretraining seeds
    left = _ren(synthetic, methods, injected, pretraining_methods=methods,
                pretraining_injected=injected_with(0.60),
                untrained_pretraining={"zoo:mlm on t": "it did not learn"})
    for claim_id in ("ren-inn-real", "ren-injection"):
        shown = left.loc[claim_id, "what this run shows"]
        assert "pretraining seeds," not in shown and "pretraining seeds left out" in shown
        assert left.loc[claim_id, "verdict"] == "holds"
    close = _ren(synthetic, methods, injected_with(0.70))
    assert close.loc["ren-injection", "verdict"] == "mixed"  # beats identity, not ridge
    units = close.loc["ren-injection", "what this run shows"]
    assert "inn - identity" in units and "inn - ridge" in units
    level = _ren(synthetic, methods, injected_with(0.60))
    assert level.loc["ren-injection", "verdict"] != "holds"
    linreg_only = methods[methods.method != "ridge"]
    assert _ren(synthetic, linreg_only).loc[
        "ren-inn-real", "verdict"] == "not measured"
    none = _ren(synthetic)
    assert none.loc["ren-depth", "what this run shows"] == "not measured in this run"
    assert none.loc["ren-inn-real", "verdict"] == "not measured"


def test_the_layer_gradient_reads_distance_growing_away_from_the_diagonal():
    import pandas as pd

    nothing = pd.DataFrame()  # no synthetic table: only the layer-gradient claim is judged
    gaps = np.abs(np.subtract.outer(np.arange(6), np.arange(6))).astype(float)
    # far minus adjacent over transformer layers 1..5 (the embedding row and column are
    # left out, so a huge value there changes nothing)
    M = 0.1 * gaps
    assert structure.layer_gradient(M) == pytest.approx(0.1 * (gaps[1:, 1:][gaps[1:, 1:] >= 2]
                                                           .mean() - 1))
    M[0, :] = M[:, 0] = 100.0
    assert structure.layer_gradient(M) == pytest.approx(structure.layer_gradient(0.1 * gaps))
    assert structure.layer_gradient(np.ones((6, 6)) - np.eye(6)) == pytest.approx(0.0)
    assert np.isnan(structure.layer_gradient(np.zeros((3, 3))))  # two layers: no far pair
    # on real alignments: a chain of layers, each the last plus noise, grows apart with
    # depth; independent layers do not
    rng = np.random.default_rng(0)
    chain = [rng.standard_normal((300, 16))]
    for _ in range(4):
        chain.append(chain[-1] + 0.7 * rng.standard_normal((300, 16)))
    walk = structure.layer_gradient(seed_pairs.layer_by_layer(chain, "procrustes"))
    independent = structure.layer_gradient(seed_pairs.layer_by_layer(
        [rng.standard_normal((300, 16)) for _ in range(5)], "procrustes"))
    assert walk > 0.1
    assert abs(independent) < 0.05
    assert (_ren(nothing, pretraining_within={"a": 0.1 * gaps, "b": 0.1 * gaps
                                                           + 0.01})
            .loc["ren-layer-gradient", "verdict"] == "holds")
    flat = {f"s{k}": np.ones((6, 6)) - np.eye(6) + 0.001 * k for k in range(5)}
    assert _ren(nothing, pretraining_within=flat).loc[
        "ren-layer-gradient", "verdict"] == "equivalent"
    assert _ren(nothing).loc["ren-layer-gradient", "verdict"] == "not measured"


def test_the_depth_statistic_by_training_step_follows_planted_trends():
    """A depth pattern that grows with training: no difference early, the claimed direction
    late (shallow layers closer than deep ones), each step judged on its own."""
    early = _pairs({k: 0.3 for k in range(5)}, noise=0.0005)
    late = _pairs({k: 0.1 + 0.1 * k for k in range(5)})
    depth = claims.claim.claim_of(ren.depth)
    table = causes.by_setting(depth, {k: ren.depth(p, f"step {k}") for k, p in
                                      sorted({400: late, 100: early}.items())},
                              "step", "L1 - top")
    assert table.step.tolist() == [100, 400]
    assert table.verdict.tolist() == ["equivalent", "holds"]
    assert table["L1 - top"].iloc[1] == pytest.approx(0.2 - 0.5, abs=0.01)
    assert (table.low <= table["L1 - top"]).all() and (table["L1 - top"] <= table.high).all()
    assert (table.n == early.pair.nunique()).all()
    change = causes.first_to_last(table, "L1 - top")
    assert change.unit.tolist() == ["step 100 to 400"]
    assert change[["verdict_before", "verdict_after"]].values.tolist() == [["equivalent",
                                                                          "holds"]]
    # any setting in the given order, e.g. the width of the seed models
    by_width = causes.by_setting(depth, {64: ren.depth(late, "width 64"),
                                         128: ren.depth(early, "width 128")},
                                 "width", "L1 - top")
    assert by_width.width.tolist() == [64, 128]
    assert by_width.verdict.tolist() == ["holds", "equivalent"]
    assert by_width.drop(columns="width").equals(
        table.drop(columns="step").iloc[::-1].reset_index(drop=True))


def test_scaled_procrustes_meets_its_closed_form_and_ignores_each_sides_size():
    """With the best scale after the rotation, the distance on the fitted rows is
    ``1 - ||Xc^T Yc||_*^2 / (||Xc||^2 ||Yc||^2)``: at most 1, the same whichever side is
    mapped, and unchanged when either side is multiplied by any positive number. The plain
    map has none of this: a larger X lands further from Y than predicting Y's mean."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 6)) * np.array([5.0, 1, 1, 1, 0.1, 0.1]) + 100.0
    Y = np.hstack([X[:, :4] @ rng.standard_normal((4, 4)), rng.standard_normal((200, 2))])
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    nuclear = np.linalg.svd(Xc.T @ Yc, compute_uv=False).sum()
    closed = 1 - nuclear**2 / (np.sum(Xc**2) * np.sum(Yc**2))
    forward = alignment.fit(X, Y, "procrustes", scaled=True)
    assert forward.distance(X, Y) == pytest.approx(closed, rel=1e-9)
    assert 0 <= closed <= 1
    backward = alignment.fit(Y, X, "procrustes", scaled=True)
    assert backward.distance(Y, X) == pytest.approx(closed, rel=1e-9)
    for a, b in [(1e3, 1.0), (1.0, 1e-3), (7.0, 0.2)]:
        fitted = alignment.fit(a * X, b * Y, "procrustes", scaled=True)
        assert fitted.distance(a * X, b * Y) == pytest.approx(closed, rel=1e-9)
    plain = alignment.fit(10 * X, Y, "procrustes")
    assert plain.distance(10 * X, Y) > 1  # worse than predicting Y's mean
    with pytest.raises(ValueError, match="no variance"):
        alignment.fit(np.ones((20, 3)), Y[:20], "procrustes", scaled=True)


def test_held_out_both_ways_is_the_mean_of_the_two_directions():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 5))
    Y = X @ rng.standard_normal((5, 5)) + 0.3 * rng.standard_normal((120, 5))
    one = alignment.held_out(X, Y, "procrustes", seed=2, scaled=True)
    other = alignment.held_out(Y, X, "procrustes", seed=2, scaled=True)
    both = alignment.held_out(X, Y, "procrustes", seed=2, scaled=True, both_ways=True)
    for part in ("train", "test"):
        assert both[part] == pytest.approx((one[part] + other[part]) / 2)
    swapped = alignment.held_out(Y, X, "procrustes", seed=2, scaled=True, both_ways=True)
    assert swapped == pytest.approx(both)


def test_seed_distances_ignore_a_seeds_size_and_which_seed_is_mapped():
    """The figures' distance (``figure_options``): a seed whose activations are ten times
    larger is as far from the others as before, the pair gives the same number in either
    order, and unrelated seeds sit near 1 (no better than the mean), never above it on the
    fitted rows; the method table keeps Ren et al.'s one-way, unscaled fit."""
    rng = np.random.default_rng(4)
    base = [rng.standard_normal((200, 6)) for _ in range(2)]
    near = [x @ np.linalg.qr(rng.standard_normal((6, 6)))[0]
            + 0.3 * rng.standard_normal(x.shape) for x in base]
    layers = {"a": base, "b": near}
    frame = seed_pairs.pair_distances(layers, "procrustes", seed=1)
    grown = seed_pairs.pair_distances({"a": base, "b": [10 * x for x in near]}, "procrustes",
                                 seed=1)
    np.testing.assert_allclose(grown.test, frame.test, rtol=1e-9)
    swapped = seed_pairs.pair_distances({"b": near, "a": base}, "procrustes", seed=1)
    np.testing.assert_allclose(swapped.test, frame.test, rtol=1e-9)
    unrelated = seed_pairs.pair_distances(
        {"a": base, "c": [rng.standard_normal((200, 6)) for _ in range(2)]}, "procrustes")
    assert (unrelated.train <= 1).all() and (unrelated.test > 0.8).all()
    assert (frame.test < 0.3).all()
    # Ren et al.'s one-way plain fit moves with the size of the seed it maps
    plain = seed_pairs.method_distances({"a": [10 * x for x in base], "b": near}, ["procrustes"],
                                   seed=1)
    assert (plain.test > 1).all()
    # one way, the distance depends on which seed is the target; both ways, it does not
    maps, ab, ba = ["linreg", "ridge"], {"a": base, "b": near}, {"b": near, "a": base}
    forth = seed_pairs.method_distances(ab, maps, seed=1).test.to_numpy()
    back = seed_pairs.method_distances(ba, maps, seed=1).test.to_numpy()
    assert np.abs(forth - back).max() > 1e-3
    both = [seed_pairs.method_distances(order, maps, seed=1, both_ways=True).test
            for order in (ab, ba)]
    np.testing.assert_allclose(both[0], both[1], rtol=1e-9)
    np.testing.assert_allclose(both[0], (forth + back) / 2, rtol=1e-9)  # the two directions
    M = seed_pairs.layer_by_layer(base + near, "procrustes")
    np.testing.assert_allclose(M, M.T)
