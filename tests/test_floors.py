"""The floor rule, the cause of an undecided verdict and the seed as the unit of seed pairs,
with planted floors, ceilings, sample sizes and seed effects: a statistic read on a variable
at its floor is refused and named, an undecided claim says which of the causes keeps it
undecided, and an interval over pairs of seeds covers a second draw of the seeds."""

import itertools

import numpy as np
import pandas as pd
import pytest

from analysis_lib import claims, readout
from analysis_lib.claims import verdicts
from analysis_lib.claims.claim import Claim, Evidence, Level, per_value
from analysis_lib.claims.papers import merchant, phang, ren
from analysis_lib.claims.verdicts import UNDECIDED_CAUSES, decide


def _claim(direction="greater", delta=0.02, fisher_z=False):
    return Claim("planted", "Wu", "§1", "a planted claim", "yes", "a planted statistic",
                 direction, delta, "planted", control=("baseline", "none"),
                 paper_effect="none", fisher_z=fisher_z)


# ---------------------------------------------------------------------- the Level record


def test_a_level_counts_the_values_clear_of_a_floor_or_a_ceiling():
    floor = Level("accuracy", [0.45, 0.46, 0.50, 0.80], 0.45, 0.02, "floor", needed=2)
    assert (floor.clear, floor.at_level, floor.stuck) == (2, 2, False)
    assert Level("accuracy", [0.45, 0.46, 0.50], 0.45, 0.02, needed=2).stuck
    # a value below a floor is at it too (a head worse than the majority class)
    assert Level("accuracy", [0.30], 0.45, 0.02).stuck
    # within the resolution above the floor is not clear of it
    assert Level("accuracy", [0.465], 0.45, 0.02).clear == 0
    ceiling = Level("identity", [0.66, 0.60, 0.67], [0.67, 0.67, 0.67], 0.02, "ceiling")
    assert (ceiling.clear, ceiling.stuck) == (1, False)
    assert Level("identity", [0.66, 0.66], 0.67, 0.02, "ceiling", needed=2).stuck
    # one bound per value
    one_each = Level("x", [0.49, 0.9], [0.48, 0.5], 0.02)
    assert one_each.clear == 1 and one_each.at_level == 1
    text = Level.accuracy("UNTUNED", [0.45, 0.452, 0.6], 0.45, needed=3).describe()
    assert text == "UNTUNED at its floor (0.450, within 0.02) in 2 of 3 values"


@pytest.mark.parametrize("kwargs, match", [
    ({"kind": "middle"}, "kind must be one of"),
    ({"bound": [0.1, 0.2, 0.3]}, "3 bounds for 2 values"),
    ({"values": [0.5, np.nan]}, "finite"),
    ({"resolution": -0.1}, "resolution"),
    ({"needed": 0}, "needed"),
    ({"needed": True}, "needed"),
])
def test_a_level_no_statistic_can_have_is_refused_with_its_fix(kwargs, match):
    given = {"variable": "v", "values": [0.5, 0.6], "bound": 0.4, "resolution": 0.02,
             **kwargs}
    with pytest.raises(ValueError, match=match):
        Level(**given)


def test_evidence_takes_levels_and_nothing_else():
    e = Evidence.from_values("u", [0.1, 0.2, 0.3])
    level = Level("v", [0.5], 0.4, 0.02)
    assert e.reading(level).levels == (level,) and e.levels == ()
    assert e.reading(level).reading(level).levels == (level, level)
    with pytest.raises(TypeError, match="Level records"):
        Evidence("u", 0.1, 0.01, levels=("at floor",))


# ------------------------------------------------------------------------ the floor rule


def test_a_correlation_read_on_a_variable_at_its_floor_is_refused_and_named():
    """Phang's CKA link: UNTUNED at the majority baseline in four of five layers gives a
    strong correlation from one layer's difference; the rule refuses it."""
    claim = _claim("less", 0.3, fisher_z=True)
    strong = Evidence.from_correlation("tweets", -0.95, 5)
    assert decide(claim, strong).outcome == "holds"  # without its level: read as a finding
    floor = Level.accuracy("UNTUNED's accuracy", [0.45, 0.451, 0.452, 0.455, 0.60], 0.45,
                           needed=3)
    refused = decide(claim, strong.reading(floor))
    assert refused.outcome == "not measured"
    assert refused.shown.startswith("not measured: the floor rule: tweets: UNTUNED's accuracy "
                                    "at its floor (0.450, within 0.02) in 4 of 5 values")
    assert "needs 3 clear of it" in refused.shown
    # three layers clear of the floor: the correlation is read
    clear = Level.accuracy("UNTUNED's accuracy", [0.45, 0.451, 0.55, 0.58, 0.60], 0.45,
                           needed=3)
    assert decide(claim, strong.reading(clear)).outcome == "holds"
    # a ceiling never refuses: it explains
    ceiling = Level("x", [0.5] * 5, 0.5, 0.02, "ceiling")
    assert decide(claim, strong.reading(ceiling)).outcome == "holds"


def test_a_refused_unit_leaves_the_others_judged_and_is_named_in_the_reason():
    floor = Level.accuracy("TUNEDORIG's accuracy", [0.5, 0.5, 0.5], 0.5, needed=3)
    units = [Evidence.from_values("tweets", [0.10, 0.11, 0.12]).reading(floor),
             Evidence.from_values("bbc", [0.10, 0.11, 0.12])]
    v = decide(_claim(), units)
    assert v.outcome == "holds" and v.units.unit.tolist() == ["bbc"]
    assert "the floor rule leaves out 1 unit (tweets: TUNEDORIG's accuracy" in v.reason
    # alone, the same refused unit is no verdict
    assert decide(_claim(), units[:1]).outcome == "not measured"


# ---------------------------------------------------------------- why undecided, by rule


def _cause(evidence, direction="greater", delta=0.02):
    v = decide(_claim(direction, delta), evidence)
    assert v.outcome in ("inconclusive", "mixed"), v.outcome
    return v


def test_each_cause_of_an_undecided_verdict_is_found_in_a_planted_case():
    # too few units: three values whose spread leaves the interval wider than the effect
    few = _cause(Evidence.from_values("u", [0.0, 0.08, 0.04]))
    assert few.units.cause.iloc[0].startswith("too few units: a one-sided bound of ")
    assert few.reason.startswith("undecided: too few units in 1 of 1 units (")
    # one value: no spread at all
    one = _cause(Evidence.from_values("u", [0.05]))
    assert one.units.cause.iloc[0].startswith("too few units: no spread from one value")
    # an error of its own (a bootstrap over sentences), not over counted values
    own = _cause(Evidence("u", 0.033, 0.021))
    assert own.units.cause.iloc[0].startswith(
        "too few units: a one-sided bound of 0.041 from its own standard error")
    assert "(its own standard error)" in own.reason and "0 values" not in own.reason
    single = _cause(Evidence("u", 0.05, float("nan")))  # one number, no error and no count
    assert single.units.cause.iloc[0].startswith("too few units: no spread from a single "
                                                 "estimate")
    # values that agree to a step coarser than the smallest effect (ranks among 7 layers):
    # their lack of spread is the scale's, so more of them would not show "no change"
    ranks = _cause(Evidence.from_values("u", [0.0, 0.0, 0.0]).in_steps(1 / 6))
    assert ranks.units.cause.iloc[0] == ("too coarse: its values move in steps of 0.167, "
                                         "larger than the smallest effect 0.02; estimate "
                                         "+0.000, one-sided bound 0.000")
    assert "whose values move in steps of 0.167, larger than the smallest effect" in \
        ranks.reason
    # a narrow interval that straddles the smallest effect: more units would decide it, but
    # the interval is not what is short
    near = _cause(Evidence("u", 0.021, 0.002, 30.0, 31))
    assert near.units.cause.iloc[0].startswith("near the smallest effect: +0.021")
    # a control at its ceiling: the target seed's own accuracy leaves no room for 0.02
    ceiling = Level("identity's accuracy", [0.658, 0.660, 0.655], [0.669, 0.668, 0.670],
                    0.02, "ceiling", needed=2)
    room = _cause(Evidence.from_values("u", [0.0, 0.03, 0.015]).reading(ceiling))
    assert room.units.cause.iloc[0].startswith("no headroom: identity's accuracy at its "
                                               "ceiling")
    # a variable partly at its floor (not enough to refuse the unit): the floor is named
    floor = Level.accuracy("decoder accuracy", [0.5, 0.5, 0.7], 0.5, needed=1)
    low = _cause(Evidence.from_values("u", [0.11, 0.004, 0.008]).reading(floor))
    assert low.units.cause.iloc[0].startswith("at its floor: decoder accuracy at its floor "
                                              "(0.500, within 0.02) in 2 of 3 values")
    # the rule tries the causes in order: a floor before a ceiling before the sample size
    both = _cause(Evidence.from_values("u", [0.0, 0.03, 0.015]).reading(ceiling, floor))
    assert both.units.cause.iloc[0].startswith("at its floor")
    # distinct objects that part: one pair of models clears the effect, the two pairs with
    # the decoder sit at chance; more pairs of the same kind would not decide it
    pairs = {"minilm - mpnet": 0.110, "minilm - smollm2": 0.004, "mpnet - smollm2": 0.008}
    parted = _cause(Evidence.from_named("3 pairs of models", pairs))
    assert parted.units.cause.iloc[0] == (
        "its objects part: 1 of 3 clear the smallest effect 0.02 (minilm - mpnet +0.110) and "
        "2 do not (minilm - smollm2 +0.004, mpnet - smollm2 +0.008)")
    assert parted.reason.startswith("undecided: its objects part in 1 of 1 units")
    # the same numbers as exchangeable draws (seeds) ask for more draws instead
    drawn = _cause(Evidence.from_values("3 seeds", list(pairs.values())))
    assert drawn.units.cause.iloc[0].startswith("too few units")
    # a claim of a decrease reads the objects the other way round
    down = _cause(Evidence.from_named("3 models", {k: -v for k, v in pairs.items()}), "less")
    assert down.units.cause.iloc[0].startswith("its objects part: 1 of 3")
    # objects that all clear the effect, or all fall short, do not part
    for same_side in ({"a": 0.05, "b": 0.20, "c": 0.03}, {"a": 0.01, "b": -0.08, "c": 0.0}):
        v = decide(_claim(), Evidence.from_named("3 models", same_side))
        assert not v.units.cause.iloc[0].startswith("its objects part"), same_side
    # two units whose own intervals each clear the smallest effect (one-sided p 0.018 each),
    # which Holm's adjustment over the two leaves undecided: the adjustment is the cause,
    # not the sample or the nearness of the effect
    pair = decide(_claim(), [Evidence(f"u{k}", 0.062, 0.02) for k in (0, 1)])
    assert pair.outcome == "inconclusive" and (pair.units.low > 0.02).all()
    assert pair.units.cause.iloc[0] == ("held back by the adjustment: its 95% interval "
                                        "[+0.023, +0.101] alone reads holds, and Holm's "
                                        "adjustment over the claim's units asks more of it")
    assert pair.reason.startswith("undecided: held back by the adjustment in 2 of 2 units")
    # alone, the same unit holds; with a stricter unit beside it, Holm's first step passes
    assert decide(_claim(), pair_unit := Evidence("u", 0.062, 0.02)).outcome == "holds"
    assert decide(_claim(), [pair_unit, Evidence("v", 0.2, 0.02)]).outcome == "holds"
    # a cost whose interval ends below the smallest effect in both units: the same cause
    costs = decide(_claim("at_most"), [Evidence(f"u{k}", -0.022, 0.02) for k in (0, 1)])
    assert costs.outcome == "inconclusive"
    assert costs.units.cause.iloc[0].startswith("held back by the adjustment")
    for v in (few, one, own, single, ranks, near, room, low, both, parted, drawn, down, pair,
              costs):
        assert v.units.cause.iloc[0].split(":")[0] in UNDECIDED_CAUSES


def test_decided_units_have_no_cause_and_a_mixed_claim_names_its_undecided_units():
    v = decide(_claim(), [Evidence.from_values("a", [0.10, 0.11, 0.12]),
                          Evidence.from_values("b", [-0.10, -0.11, -0.12]),
                          Evidence.from_values("c", [0.0, 0.08, 0.04])])
    assert v.outcome == "mixed"
    assert v.units.cause.tolist()[:2] == ["", ""]
    assert v.units.cause.iloc[2].startswith("too few units")
    assert v.reason.startswith("undecided: too few units in 1 of 3 units")
    # every unit decided: no cause, the reason as before
    decided = decide(_claim(), [Evidence.from_values("a", [0.10, 0.11, 0.12])])
    assert decided.outcome == "holds" and not decided.reason.startswith("undecided")


def test_the_causes_and_the_floor_rule_are_the_same_for_both_directions():
    floor = Level.accuracy("p", [0.5, 0.5, 0.5], 0.5)
    for direction in ("greater", "less", "none", "at_most"):
        refused = decide(_claim(direction), Evidence.from_values("u", [0.1, 0.2, 0.3])
                         .reading(floor))
        assert refused.outcome == "not measured" and "the floor rule" in refused.shown


# ------------------------------------------------------------ the claims that read levels


def _truncation(scores):
    return verdicts.judge([claims.get("phang-tuned-orig")],
                          {"scores": scores, "untrained": None})


def _scores(orig, majority=0.5, seeds=(0, 1, 2), layers=6):
    rng = np.random.default_rng(0)
    rows = []
    for seed in seeds:
        for layer in range(1, layers + 1):
            for config, value in (("UNTUNED", 0.8), ("TUNED", 0.8), ("TUNEDORIG", orig)):
                rows.append({"model": "m", "task": "t", "seed": seed, "config": config,
                             "layer": layer, "full": 0.8, "majority": majority,
                             "accuracy": value + 0.002 * rng.standard_normal()})
    return pd.DataFrame(rows)


def test_tunedorig_at_the_majority_baseline_refuses_the_tuned_orig_claim():
    clear = _truncation(_scores(orig=0.7))
    assert clear.loc["phang-tuned-orig", "verdict"] == "holds"
    stuck = _truncation(_scores(orig=0.5)).loc["phang-tuned-orig"]
    assert stuck["verdict"] == "not measured"
    assert "the floor rule" in stuck["what this run shows"]
    assert "TUNEDORIG's test accuracy (t, per layer and seed) at its floor" in \
        stuck["what this run shows"]
    # heads stuck at the majority class in two layers: left out of the mean and named; the
    # gain is read on the layers whose head learnt (0.8 - 0.7), not inflated by the stuck ones
    partial = _scores(orig=0.7)
    partial.loc[(partial.config == "TUNEDORIG") & (partial.layer <= 2), "accuracy"] = 0.5
    [unit] = phang.tuned_orig(partial)
    assert unit.estimate == pytest.approx(0.1, abs=0.005)
    assert "6 of 18 TUNEDORIG heads at the majority class left out of the mean" in unit.note
    assert _truncation(partial).loc["phang-tuned-orig", "verdict"] == "holds"
    # the unit reads the heads it keeps, all clear of the floor: where it stays undecided
    # (seeds far apart), the floor it set aside is not named as the cause
    assert unit.levels[0].values and unit.levels[0].at_level == 0
    assert len(unit.levels[0].values) == 12
    spread = partial.copy()
    spread.loc[(spread.config == "TUNED") & (spread.seed == 0), "accuracy"] += 0.15
    row = _truncation(spread).loc["phang-tuned-orig"]
    assert row["verdict"] == "inconclusive"
    assert "too few units" in row["how"] and "at its floor" not in row["how"]
    # a scores table without the baseline reads as before
    assert _truncation(_scores(orig=0.5).drop(columns="majority")).loc[
        "phang-tuned-orig", "verdict"] == "holds"


def test_the_cka_link_is_refused_when_untuned_sits_at_its_floor():
    summary = pd.DataFrame([{"model": "m", "task": "t", "config": "UNTUNED", "layer": layer,
                             "mean": value, "full": 0.8, "majority": 0.45}
                            for layer, value in enumerate([0.45, 0.452, 0.451, 0.46, 0.8], 1)])
    ft_ft = {"t": np.eye(6) * 0.5 + 0.5 * np.linspace(0, 1, 6)[None, :]}
    link = readout.cka_and_loss(ft_ft, summary, "m")
    assert link.columns.tolist() == ["task", "layer", "cka_to_last", "accuracy_lost",
                                     "untuned", "majority"]
    [evidence] = phang.cka_predicts(link)
    assert evidence.levels[0].at_level == 4 and evidence.levels[0].needed == 3
    assert verdicts.at_floor(evidence)
    # a summary without the baseline: no level, the correlation as before
    plain = readout.cka_and_loss(ft_ft, summary.drop(columns="majority"), "m")
    assert "majority" not in plain and not phang.cka_predicts(plain)[0].levels


def test_probes_at_their_majority_class_leave_nothing_to_forget():
    def frame(pos, dep, majority=0.3):
        return pd.DataFrame([{"layer": 1, "labels": "pos", "accuracy": pos,
                              "majority": majority},
                             {"layer": 1, "labels": "dep", "accuracy": dep,
                              "majority": majority}])
    probes = {("m", "t"): (frame(0.30, 0.31), {s: frame(0.30, 0.30) for s in range(3)})}
    [evidence] = merchant.no_forgetting(probes)
    assert ("the base model's best probe accuracy (t, per label set) against the majority "
            "class at its floor") in verdicts.at_floor(evidence)
    # the note shows the floor it sits on (a table without the embedding layer's probe
    # names the majority class alone)
    assert ("the base model's best: dep 0.310 at L1 (majority class 0.300), pos 0.300 at L1 "
            "(majority class 0.300)") in evidence.note
    learnt = {("m", "t"): (frame(0.80, 0.70), {s: frame(0.79, 0.70) for s in range(3)})}
    assert not verdicts.at_floor(merchant.no_forgetting(learnt)[0])


def test_injection_names_a_control_at_the_target_seeds_own_accuracy_as_no_headroom():
    rows = []
    for a, b in [("s0", "s1"), ("s1", "s0"), ("s0", "s2"), ("s2", "s0")]:
        for method, acc in (("own", 0.669), ("identity", 0.660), ("inn", 0.662),
                            ("ridge", 0.60)):
            rows.append({"from": a, "to": b, "method": method, "accuracy": acc})
    units = ren.injection(pd.DataFrame(rows), None, None, None, None)
    identity = next(u for u in units if "identity" in u.unit)
    ridge = next(u for u in units if "ridge" in u.unit)
    assert identity.levels[0].kind == "ceiling" and identity.levels[0].stuck
    assert not ridge.levels[0].stuck  # ridge leaves 0.069 of room below the ceiling


def test_collection_units_print_their_values_one_by_one():
    text = per_value({"minilm - mpnet": 0.110, "minilm - smollm2": 0.004})
    assert text == "per value: minilm - mpnet +0.110, minilm - smollm2 +0.004"


# ------------------------------------------------------------- the seed as the unit of pairs


def _slow_seed_pairs(values):
    """The grouped jackknife over seeds written out: leave one seed out, average the pairs
    left, and scale the spread of those means by (K - 1) / K."""
    seeds = sorted({s for pair in values for s in pair})
    means = [np.mean([v for pair, v in values.items() if s not in pair]) for s in seeds]
    k = len(seeds)
    return np.mean(list(values.values())), np.sqrt((k - 1) / k * np.sum(
        (np.array(means) - np.mean(means)) ** 2)), k - 1


def test_seed_pairs_take_the_seed_as_the_unit_and_agree_with_the_written_out_jackknife():
    rng = np.random.default_rng(3)
    effect = rng.normal(size=6)
    values = {(a, b): effect[a] + effect[b] + 0.1 * rng.normal()
              for a, b in itertools.combinations(range(6), 2)}
    e = Evidence.from_seed_pairs("u", values)
    estimate, se, df = _slow_seed_pairs(values)
    assert (e.n, e.df) == (6, df) and "15 pairs of 6 seeds" in e.note
    np.testing.assert_allclose([e.estimate, e.se], [estimate, se], rtol=1e-12)
    # ordered pairs (a map from a to b, and back) are pairs of the same two seeds
    ordered = {**values, **{(b, a): v for (a, b), v in values.items()}}
    np.testing.assert_allclose(Evidence.from_seed_pairs("u", ordered).se, se, rtol=1e-12)
    # relabelling the seeds changes nothing; a NaN pair is left out
    names = dict(zip(range(6), "fedcba"))
    relabelled = {(names[a], names[b]): v for (a, b), v in values.items()}
    assert Evidence.from_seed_pairs("u", relabelled).se == pytest.approx(se, rel=1e-12)
    with_nan = {**values, (0, 1): float("nan")}
    assert Evidence.from_seed_pairs("u", with_nan).note.startswith("14 pairs of 6 seeds")
    # two seeds are one pair: no spread; a pair of one seed with itself is refused
    assert np.isnan(Evidence.from_seed_pairs("u", {(0, 1): 0.3}).se)
    with pytest.raises(ValueError, match="two different seeds"):
        Evidence.from_seed_pairs("u", {(0, 0): 0.3})


def test_seed_pairs_print_each_seed_mean_over_its_pairs():
    """The note names each seed with the mean of the pairs it is in: a planted seed c far
    from the others (its pairs 0.9, the third pair 0.1) reads as the seed that carries the
    mean; ordered pairs count each unordered pair twice and give the same means."""
    values = {("a", "b"): 0.1, ("a", "c"): 0.9, ("b", "c"): 0.9}
    e = Evidence.from_seed_pairs("u", values)
    assert e.note == ("3 pairs of 3 seeds, the seed the unit; per seed, the mean of its "
                      "pairs: a +0.500, b +0.500, c +0.900")
    both = {**values, **{(b, a): v for (a, b), v in values.items()}}
    assert Evidence.from_seed_pairs("u", both).note.endswith("a +0.500, b +0.500, c +0.900")
    # a NaN pair is left out of its seeds' means; two seeds print no means (one pair)
    four = {**values, ("a", "d"): 0.5, ("b", "d"): 0.5, ("c", "d"): 0.2}
    with_nan = Evidence.from_seed_pairs("u", {**four, ("a", "b"): float("nan")})
    assert with_nan.note.endswith("a +0.700, c +0.667, b +0.700, d +0.400")  # pairs' order
    assert "per seed" not in Evidence.from_seed_pairs("u", {(0, 1): 0.3}).note
    # three seeds whose third pair was not measured: no replicate without seed c
    lost = Evidence.from_seed_pairs("u", {**values, ("a", "b"): float("nan")})
    assert np.isnan(lost.se) and lost.n == 3
    assert lost.note.endswith("every pair measured holds c, so leaving it out leaves none: "
                              "no spread to judge by")


def test_the_seed_interval_covers_a_second_draw_where_a_t_over_pairs_does_not():
    """Pairs of 6 seeds with a seed effect: a t interval over the 15 pairs counts them as
    independent and is far too narrow; the jackknife over seeds matches the spread of the
    estimate over draws of the seeds."""
    rng = np.random.default_rng(0)
    estimates, over_seeds, over_pairs = [], [], []
    for _ in range(400):
        effect = rng.normal(size=6)
        values = {(a, b): effect[a] + effect[b] + 0.5 * rng.normal()
                  for a, b in itertools.combinations(range(6), 2)}
        e = Evidence.from_seed_pairs("u", values)
        estimates.append(e.estimate)
        over_seeds.append(e.se)
        over_pairs.append(Evidence.from_values("u", list(values.values())).se)
    spread = np.std(estimates)
    assert 0.8 < np.sqrt(np.mean(np.square(over_seeds))) / spread < 1.25
    assert np.sqrt(np.mean(np.square(over_pairs))) / spread < 0.5


def test_values_in_steps_coarser_than_the_smallest_effect_never_read_equivalent():
    """Three seeds whose top layer keeps its rank read exactly 0 with no spread: on a
    continuous scale that would be "equivalent", but a rank among seven layers moves by
    1/6, so a change eight times the smallest effect could hide between two steps."""
    zeros = Evidence.from_values("ranks", [0.0, 0.0, 0.0])
    assert decide(_claim(), zeros).outcome == "equivalent"
    assert decide(_claim(), zeros.in_steps(1 / 6)).outcome == "inconclusive"
    assert decide(_claim(), zeros.in_steps(0.01)).outcome == "equivalent"  # finer than 0.02
    assert decide(_claim("none"), zeros.in_steps(1 / 6)).outcome == "inconclusive"
    # a step every seed takes the claim's way is still a change in that direction
    down = Evidence.from_values("ranks", [2 / 6, 2 / 6, 3 / 6]).in_steps(1 / 6)
    assert decide(_claim(), down).outcome == "holds"
    # a coarse unit beside a decided continuous one leaves the claim undecided, not mixed
    plain = Evidence.from_values("plain", [0.07, 0.06, 0.08])
    v = decide(_claim(), [plain, zeros.in_steps(1 / 6)])
    assert v.outcome == "inconclusive" and v.units.outcome.tolist() == ["holds",
                                                                       "inconclusive"]
    assert decide(_claim(), [plain, zeros]).outcome == "mixed"
    # the interval form of the rule agrees, unit by unit
    for direction in ("greater", "less", "none", "at_most"):
        for est in (-0.3, -0.01, 0.0, 0.01, 0.3):
            for se in (0.0, 0.005, 0.2):
                for step in (0.0, 0.01, 1 / 6):
                    e = Evidence("u", est, se, 2.0, 3).in_steps(step)
                    assert decide(_claim(direction), e).outcome == \
                        verdicts.reference_decide(direction, est, se, 0.02, df=2.0,
                                                  step=step), (direction, est, se, step)


@pytest.mark.parametrize("step", [-0.1, float("nan"), float("inf"), "1/6", True])
def test_a_step_that_no_scale_has_is_refused(step):
    with pytest.raises(ValueError, match="step must be a finite number >= 0"):
        Evidence("u", 0.0, 0.0, step=step)
