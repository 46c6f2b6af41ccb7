"""The book's one verdict rule and its claims: known answers for every outcome, Holm's
adjustment, agreement with the interval form, and claims that notebooks name."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis_lib import claims
from analysis_lib.claims import causes, tables, training_gate, verdicts
from analysis_lib.claims import claim as records
from analysis_lib.claims.verdicts import Evidence, decide
from analysis_lib.training import learning

ROOT = Path(__file__).resolve().parents[1]


def _claim(direction, delta=0.1):
    return records.Claim("test-claim", "Wu", "nowhere", "a test", "yes", "a number",
                       direction, delta, "because", ("baseline", "zero"), "none reported")


def test_every_claim_names_its_control_and_the_findings_show_it():
    for claim in claims.CLAIMS.values():
        kind, what = claim.control
        assert kind in records.CONTROL_KINDS and len(what) > 10, claim.id
    found = tables.table([decide("ren-inn-real", [Evidence("u", 0.1, 0.01)])])
    assert found.loc["ren-inn-real", "control"].startswith("baseline: ridge")
    with pytest.raises(ValueError, match="control must name its kind"):
        records.Claim("x", "Wu", "", "", "", "", "greater", 0.1, "")


def test_every_smallest_effect_lets_the_papers_own_effect_pass():
    """Where a paper states its effect on the statistic's scale, its own data must reach the
    claim's verdict: beyond the smallest effect in the claimed direction, or inside it for a
    claim of no difference. A smallest effect larger than the papers' effects would reject
    the papers themselves."""
    stated = [c for c in claims.CLAIMS.values() if c.paper_value is not None]
    assert len(stated) >= 10
    for c in claims.CLAIMS.values():
        assert len(c.paper_effect) > 15, c.id
        if c.paper_value is None:
            continue
        if c.direction == "greater":
            assert c.paper_value > c.smallest_effect, c.id
        elif c.direction == "less":
            assert c.paper_value < -c.smallest_effect, c.id
        else:
            assert abs(c.paper_value) < c.smallest_effect, c.id
    with pytest.raises(ValueError, match="paper_effect must quote"):
        records.Claim("x", "Wu", "", "", "", "", "greater", 0.1, "", ("baseline", "zero"))


def test_there_are_enough_claims_from_every_paper():
    assert len(claims.CLAIMS) >= 20
    for paper in records.PAPERS:
        assert claims.of_paper(paper), paper
    for c in claims.CLAIMS.values():
        assert c.id and c.where and c.claim and c.statistic and c.why and c.reported
        assert c.direction in records.DIRECTIONS and c.smallest_effect >= 0


def test_every_claim_names_its_evidence_and_each_chapter_judges_its_claims_once():
    """Each claim's record names the function, in its paper's module, that computes its
    evidence from one chapter's results; each chapter's notebook judges its claims with one
    call (the notebooks name no claim ids: they state and record whole findings tables)."""
    for claim in claims.CLAIMS.values():
        assert callable(claim.evidence) and claim.chapter in records.CHAPTERS, claim.id
        assert claim.evidence.__module__ == f"analysis_lib.claims.papers.{claim.paper.lower()}"
        assert claim.reads, claim.id  # every claim reads some result
    assert sum(len(claims.of_chapter(c)) for c in records.CHAPTERS) == len(claims.CLAIMS)
    for chapter in records.CHAPTERS:
        cells = json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text())["cells"]
        calls = ["".join(c["source"]).count(f'judge(claims.of_chapter("{chapter}")')
                 for c in cells if c["cell_type"] == "code"]
        assert sum(calls) == 1, chapter


def test_an_unknown_claim_names_the_closest():
    with pytest.raises(KeyError, match="wu-adjacent"):
        claims.get("wu-adjacnet")
    with pytest.raises(ValueError, match="direction"):
        records.Claim("x", "Wu", "", "", "", "", "up", 0.1, "")
    with pytest.raises(ValueError, match="paper"):
        records.Claim("x", "Smith", "", "", "", "", "greater", 0.1, "")


@pytest.mark.parametrize("direction,estimate,se,expected", [
    ("greater", 0.50, 0.05, "holds"),          # far above +delta
    ("greater", -0.50, 0.05, "opposite"),      # far below -delta
    ("greater", 0.00, 0.01, "equivalent"),     # tightly inside +-delta
    ("greater", 0.12, 0.10, "inconclusive"),   # straddles +delta
    ("greater", 0.50, float("nan"), "inconclusive"),  # one seed: no spread
    ("less", -0.50, 0.05, "holds"),
    ("less", 0.50, 0.05, "opposite"),
    ("none", 0.00, 0.01, "equivalent"),
    ("none", 0.60, 0.05, "opposite"),
    ("none", -0.60, 0.05, "opposite"),
    ("none", 0.09, 0.05, "inconclusive"),
    ("greater", 0.2, 0.0, "holds"),            # an exact number (no sampling error)
    ("greater", 0.05, 0.0, "equivalent"),
    ("at_most", 0.00, 0.01, "holds"),          # a cost tightly below +delta
    ("at_most", -0.60, 0.05, "holds"),         # doing better costs nothing
    ("at_most", 0.60, 0.05, "opposite"),       # a cost far beyond +delta
    ("at_most", 0.09, 0.05, "inconclusive"),   # straddles +delta
])
def test_each_outcome_on_a_case_with_a_known_answer(direction, estimate, se, expected):
    v = decide(_claim(direction), [Evidence("u", estimate, se)])
    assert v.outcome == expected
    assert v.units.outcome.iloc[0] == expected


def test_the_margin_matters_not_only_the_sign():
    # clearly positive, but not clearly beyond the smallest effect
    v = decide(_claim("greater", 0.1), [Evidence("u", 0.11, 0.01)])
    assert v.outcome == "inconclusive"
    assert decide(_claim("greater", 0.0), [Evidence("u", 0.11, 0.01)]).outcome == "holds"


def test_holm_adjustment_has_known_values_and_matters():
    p = [0.01, 0.04, 0.03, float("nan"), 0.005]
    adj = verdicts.holm(p)
    np.testing.assert_allclose(adj[[4, 0, 2, 1]], [0.02, 0.03, 0.06, 0.06])
    assert np.isnan(adj[3])
    # one unit at p ~ 0.015 holds alone; five such units do not all survive Holm
    z = 2.17  # one-sided p = 0.015
    one = decide(_claim("greater", 0.0), [Evidence("u", z, 1.0)])
    assert one.outcome == "holds"
    five = decide(_claim("greater", 0.0), [Evidence(f"u{k}", z, 1.0) for k in range(5)])
    assert five.outcome == "inconclusive"
    assert (five.units.p_holds > 0.025).all()


@pytest.mark.parametrize("direction", ["greater", "less", "at_most", "none"])
def test_a_unit_decides_exactly_where_its_printed_interval_clears_the_smallest_effect(
        direction):
    # each one-sided test is at alpha / 2: a lone unit is decided exactly where its printed
    # 95% interval lies wholly beyond (or, for equivalence, wholly inside) the smallest
    # effect, so a reader can check any verdict against the interval beside it
    delta = 0.02
    sign = -1.0 if direction == "less" else 1.0
    rng = np.random.default_rng(7)
    for est, se, df in zip(rng.normal(0.0, 0.05, 400), rng.uniform(0.001, 0.03, 400),
                           rng.choice([2.0, 4.0, np.nan], 400)):
        unit = Evidence("u", float(est), float(se), df=None if np.isnan(df) else df)
        row = decide(_claim(direction, delta), [unit]).units.iloc[0]
        low, high = sorted((sign * row.low, sign * row.high))
        if direction == "at_most":
            expected = ("holds" if high < delta else "opposite" if low > delta
                        else "inconclusive")
        elif direction == "none":
            expected = ("opposite" if low > delta or high < -delta else "equivalent"
                        if -delta < low and high < delta else "inconclusive")
        else:
            expected = ("holds" if low > delta else "opposite" if high < -delta
                        else "equivalent" if -delta < low and high < delta
                        else "inconclusive")
        assert row.outcome == expected, (direction, est, se, df, row.low, row.high)
    # a one-sided p of 0.03 decided under a one-sided 5% test, whose 95% interval reaches
    # across zero: it is not decided
    z = 1.88
    assert decide(_claim("greater", 0.0), [Evidence("u", z, 1.0)]).outcome == "inconclusive"
    assert Evidence("u", z, 1.0).interval()[0] < 0


@pytest.mark.parametrize("estimates, outcome", [
    ([0.5, -0.5], "mixed"),          # holds and opposite: a contradiction, not "inconclusive"
    ([-0.5, 0.0], "mixed"),          # opposite in one unit, equivalent in the other
    ([-0.5, 0.05], "mixed"),         # opposite in one unit, undecided in the other
    ([0.5, 0.0], "mixed"),           # two different decided outcomes
    ([0.5, 0.05], "inconclusive"),   # holds in one, undecided in the other: no contradiction
    ([0.5, 0.6], "holds"),
])
def test_units_that_disagree_are_mixed_unless_none_contradicts(estimates, outcome):
    # smallest effect 0.02: 0.05 +- 0.2 is undecided, 0.0 +- 0.001 is equivalent
    se = {0.05: 0.2, 0.0: 0.001}
    v = decide(_claim("greater"), [Evidence(f"u{k}", e, se.get(e, 0.01))
                                   for k, e in enumerate(estimates)])
    assert v.outcome == outcome, v.units.outcome.tolist()
    if outcome == "mixed":
        assert "units disagree" in v.reason and " in 1" in v.reason
    assert outcome in records.VERDICTS


def test_an_undecided_claim_says_how_many_estimates_run_against_the_paper():
    # two undecided units, both below zero for a claim that predicts "greater"
    v = decide(_claim("greater", 0.02), [Evidence("a", -0.03, 0.05), Evidence("b", -0.01, 0.05)])
    assert v.outcome == "inconclusive"
    assert "2 of 2 estimates run against the paper (on the other side of zero)" in v.reason
    # for "less" the other side is above zero; undecided estimates on the paper's side: silent
    v = decide(_claim("less", 0.02), [Evidence("a", 0.03, 0.05), Evidence("b", -0.01, 0.05)])
    assert "1 of 2 estimates run against the paper" in v.reason
    assert "against" not in decide(_claim("greater", 0.02),
                                   [Evidence("a", 0.01, 0.05)]).reason
    # a claim of no difference: against the paper means beyond the smallest effect
    v = decide(_claim("none", 0.02), [Evidence("a", 0.05, 0.05), Evidence("b", 0.01, 0.05)])
    assert v.outcome == "inconclusive"
    assert "1 of 2 estimates run against the paper (beyond the smallest effect)" in v.reason
    # a decided claim needs no such count
    assert "against" not in decide(_claim("greater", 0.02), [Evidence("a", 0.5, 0.01)]).reason


def test_a_cost_claim_holds_when_the_cheaper_setting_does_better_and_names_a_cost():
    """A claim that one setting does as well as another (freezing "costs little") is a
    one-sided claim on the cost: a setting that does better satisfies it, where a claim of
    no difference would read that as the opposite."""
    better = [Evidence.from_values("k = 3", [-0.05, -0.04, -0.06])]  # freezing helped
    assert decide(_claim("at_most", 0.02), better).outcome == "holds"
    assert decide(_claim("none", 0.02), better).outcome == "opposite"
    costly = [Evidence.from_values("k = 3", [0.10, 0.11, 0.09])]
    assert decide(_claim("at_most", 0.02), costly).outcome == "opposite"
    mixed = decide(_claim("at_most", 0.02), costly + better)
    assert mixed.outcome == "mixed" and "1 of 2 estimates run against the paper" in mixed.reason
    wide = decide(_claim("at_most", 0.02), [Evidence("u", 0.0, 0.02, df=2)])
    assert wide.outcome == "inconclusive" and "a cost below it is out of reach" in wide.reason
    for claim_id in ("merchant-freeze-bottom", "merchant-truncate", "merchant-no-forgetting",
                     "phang-untuned", "phang-tuned"):
        assert claims.get(claim_id).direction == "at_most", claim_id


def test_nothing_measured_reads_not_measured_not_an_error():
    v = decide(_claim("greater"), [])
    assert v.outcome == "not measured" and "not measured" in v.shown


@pytest.mark.parametrize("direction", ["greater", "less", "none", "at_most"])
def test_the_p_value_form_agrees_with_the_interval_form(direction):
    rng = np.random.default_rng(0)
    for _ in range(400):
        est, se, delta = rng.normal(0, 0.3), abs(rng.normal(0, 0.1)) + 1e-3, 0.1
        df = None if rng.random() < 0.5 else float(rng.integers(1, 10))
        fast = decide(_claim(direction, delta), [Evidence("u", est, se, df)]).outcome
        assert fast == verdicts.reference_decide(direction, est, se, delta, df=df), \
            (direction, est, se, df)


@pytest.mark.parametrize("make, fix", [
    (lambda: Evidence("u", 0.3, -0.1), "never negative"),
    (lambda: Evidence("u", float("inf"), 0.1), "no statistic"),
    (lambda: Evidence("u", 0.3, 0.1, df=0), "degrees of freedom"),
    (lambda: Evidence("u", 0.3, 0.1, df=-2.0), "degrees of freedom"),
    (lambda: Evidence("u", 0.3, 0.1, n=-1), "a count"),
    (lambda: Evidence("u", 0.3, None), "standard error must be a number"),
    (lambda: Evidence("u", "0.3", 0.1), "estimate must be a number"),
    (lambda: Evidence("u", 0.3, 0.1, "2"), "df must be a number"),
    (lambda: Evidence.from_values("u", [0.1, float("inf"), 0.2]), "infinite"),
    (lambda: Evidence.from_values("u", [0.1, -float("inf")]), "infinite"),
    (lambda: Evidence.from_correlation("u", 1.5, 30), "impossible"),
    (lambda: Evidence.from_jackknife("u", 0.1, [0.1, float("inf"), 0.2]), "infinite"),
    (lambda: Evidence.from_samples("u", 0.1, [0.1, float("inf"), 0.2]), "infinite"),
    (lambda: Evidence.from_correlation("u", -1.01, 30), "impossible"),
    (lambda: Evidence.from_proportions("u", 80.0, 100, 0.7, 100), "not a proportion"),
    (lambda: Evidence.from_proportions("u", 0.8, 0, 0.7, 100), "count of test examples"),
    (lambda: _claim("greater", -0.1), "smallest_effect must be >= 0"),
    (lambda: _claim("greater", float("nan")), "smallest_effect must be >= 0"),
    (lambda: decide(_claim("greater", float("inf")), [Evidence("u", 0.3, 0.1)]),
     "smallest effect"),
    (lambda: decide(_claim("greater"), [(0.3, 0.1)]), "Evidence records"),
    (lambda: verdicts.reference_decide("greater", 0.3, -0.1, 0.1), "never negative"),
    (lambda: verdicts.reference_decide("greater", 0.3, 0.1, -0.1), "smallest effect"),
])
def test_evidence_no_estimate_can_give_is_refused_by_both_forms_of_the_rule(make, fix):
    with pytest.raises((ValueError, TypeError), match=fix):
        make()


def test_a_nan_value_is_left_out_with_a_note_and_a_correlation_at_one_is_kept():
    e = Evidence.from_values("seeds", [0.1, float("nan"), 0.3])
    assert e.n == 2 and e.estimate == pytest.approx(0.2)
    assert "1 of 3 values not measured" in e.note
    assert Evidence.from_values("seeds", [0.1, 0.3]).note == ""
    assert np.isfinite(Evidence.from_correlation("r", 1.0 + 1e-12, 30).estimate)


def test_the_two_forms_of_the_rule_agree_at_the_edges():
    """Zero and tiny errors, estimates exactly at the smallest effect, a smallest effect of
    zero, one degree of freedom, no spread: one unit, both forms, the same outcome."""
    for direction in ("greater", "less", "none", "at_most"):
        for est in (-0.2, -0.1, -1e-12, 0.0, 1e-12, 0.1, 0.2):
            for se in (0.0, 1e-12, 0.05, 1.0, float("nan"), float("inf")):
                for delta in (0.0, 0.1):
                    for df in (None, 1.0, 2.0):
                        fast = decide(_claim(direction, delta),
                                      [Evidence("u", est, se, df)]).outcome
                        slow = verdicts.reference_decide(direction, est, se, delta, df=df)
                        assert fast == slow, (direction, est, se, delta, df)


def test_evidence_constructors():
    e = Evidence.from_values("seeds", [1.0, 2.0, 3.0])
    assert e.estimate == 2.0 and e.df == 2 and math.isclose(e.se, 1 / math.sqrt(3))
    assert math.isnan(Evidence.from_values("one", [1.0]).se)
    # jackknife of the mean equals the classical standard error of the mean
    x = np.random.default_rng(1).normal(size=12)
    loo = [(x.sum() - xi) / 11 for xi in x]
    jk = Evidence.from_jackknife("jk", x.mean(), loo)
    assert math.isclose(jk.se, x.std(ddof=1) / math.sqrt(12), rel_tol=1e-12)
    p = Evidence.from_proportions("acc", 0.8, 500, 0.7, 400)
    assert math.isclose(p.estimate, 0.1)
    assert math.isclose(p.se, math.sqrt(0.8 * 0.2 / 500 + 0.7 * 0.3 / 400))
    c = Evidence.from_correlation("r", 0.5, 28)
    assert math.isclose(c.estimate, math.atanh(0.5)) and math.isclose(c.se, 0.2)


def test_paired_evidence_takes_the_differences_of_shared_keys():
    pairs = Evidence.from_paired("gap", {0: 0.80, 1: 0.70, 2: 0.75}, {0: 0.75, 1: 0.66, 3: 0.1})
    assert pairs.n == 2 and pairs.estimate == pytest.approx((0.05 + 0.04) / 2)
    assert pairs.se == pytest.approx(0.005) and pairs.df == 1
    assert np.isnan(Evidence.from_paired("one", {0: 0.8}, {0: 0.7}).se)
    # the note prints each seed's difference, so that one run carrying the mean shows
    assert pairs.note == "per seed: 0 +0.050, 1 +0.040"
    noted = Evidence.from_paired("gap", {0: 0.8, 1: 0.5}, {0: 0.7, 1: 0.6}, "1 run failed")
    assert noted.note == "1 run failed; per seed: 0 +0.100, 1 -0.100"


def test_evidence_over_seeds_names_each_seeds_value():
    """A unit over seeds is :meth:`Evidence.from_values` of its values (the same mean,
    error and degrees of freedom), with each seed's value in the note; a seed that was not
    measured is named as such and left out of the mean."""
    values = {2: 0.12, 0: -0.03, 5: 0.07}
    found = Evidence.from_seeds("u", values, "context")
    plain = Evidence.from_values("u", list(values.values()))
    assert (found.estimate, found.se, found.df, found.n) == (plain.estimate, plain.se,
                                                             plain.df, plain.n)
    assert found.note == "context; per seed: 2 +0.120, 0 -0.030, 5 +0.070"
    missing = Evidence.from_seeds("u", {0: 0.1, 1: float("nan"), 2: None, 3: 0.3})
    assert missing.n == 2 and missing.estimate == pytest.approx(0.2)
    assert missing.note == ("2 of 4 values not measured (NaN); per seed: 0 +0.100, "
                            "1 not measured, 2 not measured, 3 +0.300")
    with pytest.raises(TypeError, match="values must be numbers"):
        Evidence.from_seeds("u", {0: "0.1", 1: 0.2})
    named = Evidence.from_named("m", {"a": 0.1, "b": None, "c": 0.3})
    assert named.named == (("a", 0.1), ("c", 0.3))
    assert named.note.endswith("per value: a +0.100, b not measured, c +0.300")


def test_permutation_floor_is_below_the_adjusted_level():
    for tests in (1, 3, 7, 12):
        n = verdicts.permutations_for(0.05, tests)
        assert tests / (n + 1) < 0.05 <= tests / n


def test_findings_table_is_keyed_by_claim_id():
    c = claims.get("wu-adjacent")
    frame = tables.table([decide(c, [Evidence("m", 0.3, 0.01)])])
    assert list(frame.index) == ["wu-adjacent"]
    assert tables.outcome_of(frame, "wu-adjacent") == "holds"
    with pytest.raises(KeyError, match="holds no claim"):
        tables.outcome_of(frame, "wu-family")
    assert isinstance(frame, pd.DataFrame)



def test_side_by_side_puts_each_settings_verdict_on_the_claims_row():
    short = tables.table([verdicts.decide("phang-untuned", [
        verdicts.Evidence.from_values("t", [0.30, 0.31, 0.29])])])
    longer = tables.table([verdicts.decide("phang-untuned", [
        verdicts.Evidence.from_values("t", [0.001, -0.001, 0.0])])])
    both = tables.side_by_side({"default": short, "larger": longer}, ["phang-untuned"])
    assert both.loc["phang-untuned", "default: verdict"] == "opposite"
    assert both.loc["phang-untuned", "larger: verdict"] == "holds"  # a cost below 0.02
    assert both.loc["phang-untuned", "larger: shows"] == longer.loc["phang-untuned",
                                                                   "what this run shows"]
    with pytest.raises(KeyError, match="holds no claim 'phang-tuned'"):
        tables.side_by_side({"default": short}, ["phang-tuned"])


@pytest.mark.parametrize("before, after, cause", [
    (["opposite"], ["holds"], "the cause"),
    (["inconclusive"], ["equivalent"], "the cause"),
    (["opposite", "holds"], ["holds", "holds"], "the cause"),
    (["holds"], ["equivalent"], "shows either way"),
    (["opposite"], ["inconclusive"], "a cause"),
    (["opposite", "opposite"], ["inconclusive", "holds"], "a cause"),
    (["opposite"], ["opposite"], "not the cause"),
    (["inconclusive"], ["opposite"], "brings the contradiction"),
    (["holds"], ["opposite"], "brings the contradiction"),
    (["holds", "not measured"], ["opposite", "opposite"], "brings the contradiction"),
    (["mixed"], ["opposite"], "not the cause"),
    (["inconclusive"], ["inconclusive"], "no contradiction"),
    (["holds", "inconclusive"], ["holds", "inconclusive"], "no contradiction"),
    (["opposite", "opposite"], ["opposite", "holds"], "undecided"),
    (["opposite"], ["opposite", "inconclusive"], "undecided"),
    (["mixed"], ["holds"], "the cause"),
    (["mixed"], ["inconclusive"], "a cause"),
    (["opposite"], ["mixed"], "undecided"),
    (["holds"], ["mixed"], "no contradiction"),
    (["not measured"], ["not measured"], "no contradiction"),
])
def test_a_setting_is_named_the_cause_only_where_the_verdicts_move(before, after, cause):
    assert causes.setting_cause(before, after) == cause
    assert cause in causes.CAUSES


def test_setting_cause_reads_verdicts_and_refuses_anything_else():
    # an unchanged verdict never names the setting as the cause
    for outcome in records.OUTCOMES:
        assert causes.setting_cause([outcome], [outcome]) not in ("the cause", "a cause")
    with pytest.raises(ValueError, match="'0.3' is not a verdict"):
        causes.setting_cause(["holds"], [0.3])
    with pytest.raises(ValueError, match="at least one verdict"):
        causes.setting_cause([], ["holds"])


def test_claim_change_and_its_sentence_quote_both_settings():
    from analysis_lib.book import prose

    def found(values):
        return tables.table([verdicts.decide("merchant-truncate", [
            verdicts.Evidence.from_values("3 of 6 layers kept", values)])])

    opposite = found([0.15, 0.16, 0.14])
    shown = found([0.001, -0.001, 0.0])
    unclear = found([0.10, -0.02, 0.04])
    assert (opposite.loc["merchant-truncate", "verdict"], shown.loc["merchant-truncate",
            "verdict"], unclear.loc["merchant-truncate", "verdict"]) == \
        ("opposite", "holds", "inconclusive")

    def said(before, after):
        return prose.cause_sentence(causes.claim_change(before, after, "merchant-truncate"),
                                    factor="the short schedule", varied="the longer schedule")

    text = said(opposite, shown)
    assert "so the short schedule is the cause" in text and "With the longer schedule" in text
    assert "+0.150" in text and "as the page has it" in text  # each setting's statistic
    assert "is a cause; more units" in said(opposite, unclear)
    assert "is not the cause" in said(opposite, opposite)
    brings = said(shown, opposite)
    assert "brings the contradiction" in brings and "still contradicted" not in brings
    assert "no cause to name" in said(unclear, unclear)
    with pytest.raises(KeyError, match="holds no claim"):
        causes.claim_change(opposite.drop("merchant-truncate"), shown, "merchant-truncate")


def test_changes_match_units_and_an_empty_change_is_not_measured():
    from analysis_lib.book import prose

    before = pd.DataFrame({"task": ["a", "b"], "x": [0.3, 0.2], "low": [0.2, 0.1],
                           "high": [0.4, 0.3], "verdict": ["opposite", "opposite"]})
    after = pd.DataFrame({"task": ["b", "a", "c"], "x": [0.0, 0.01, 0.5],
                          "low": [-0.01, 0.0, 0.4], "high": [0.01, 0.02, 0.6],
                          "verdict": ["equivalent", "equivalent", "opposite"]})
    change = causes.changes(before, after, ["task"], "x")
    assert change.unit.tolist() == ["a", "b"]  # c is judged on one side only
    assert change.before.tolist() == [0.3, 0.2] and change.after.tolist() == [0.01, 0.0]
    assert change.low.tolist() == [0.0, -0.01]
    text = prose.cause_sentence(change, factor="depth", varied="more depth")
    assert "a: +0.010 [+0.000, +0.020], equivalent (as the page has it: +0.300" in text
    assert text.endswith("so depth is the cause.")
    empty = causes.changes(before.iloc[:0], after, ["task"], "x")
    assert empty.empty and "not measured" in prose.cause_sentence(empty, factor="depth",
                                                                   varied="more depth")


def _record(accuracy, majority, curve=(0.60, 0.80, 0.80, 0.79), losses=(1.1, 0.7, 0.5),
            n=500):
    """A run's record: final validation accuracy, its learning curve (validation accuracy
    after each epoch) and its loss curve."""
    return {"metrics": {"validation": {"accuracy": accuracy, "majority_baseline": majority,
                                       "n": n}},
            "history": [{"epoch": k + 1, "validation_accuracy": v}
                        for k, v in enumerate(curve)],
            "loss_curve": [{"step": k + 1, "train_loss": v} for k, v in enumerate(losses)]}


def test_the_training_gate_passes_a_run_that_plateaued_and_names_one_that_did_not_learn():
    # plateaued: the last two epochs add nothing to the best before them
    assert training_gate.training_problem(_record(0.79, 0.40)) == ""
    # a hard task learnt with a small loss drop passes: no fixed share of drop is asked
    assert training_gate.training_problem(
        _record(0.62, 0.48, (0.55, 0.61, 0.62, 0.61), losses=(1.06, 1.04, 1.03))) == ""
    # did not learn: the truncation page's old cut models, accuracy at the majority
    flat = training_gate.training_problem(_record(0.41, 0.40, (0.40, 0.41, 0.41, 0.41)))
    assert ("it did not learn: validation accuracy 0.410 is not 0.02 above the majority "
            "baseline 0.400") in flat
    # at the margin: 0.02 above the majority passes
    assert training_gate.training_problem(_record(0.52, 0.50, (0.5, 0.52, 0.52, 0.52))) == ""
    found = tables.table([verdicts.untrained("merchant-truncate", {"seed 0": flat})])
    assert found.loc["merchant-truncate", "verdict"] == records.NOT_MEASURED
    assert found.loc["merchant-truncate", "what this run shows"].startswith(
        "not measured: did not train (seed 0: it did not learn")
    # a claim not measured names no cause either way
    assert causes.setting_cause(["not measured"], ["opposite"]) == "not the cause"
    assert causes.setting_cause(["opposite"], ["not measured"]) == "a cause"


def test_the_training_gate_stops_a_run_still_learning_however_far_it_got():
    """A slow learner beats its baseline, but its curve still rises by more than the
    validation set resolves: a claim about the trained model would read it half-way."""
    slow = (0.50, 0.55, 0.60, 0.66)  # +0.11 in the last two epochs; 500 examples resolve 0.042
    said = training_gate.training_problem(_record(0.66, 0.40, slow))
    assert said.startswith("it was still learning: validation accuracy rose 0.110 in its "
                           "last 2 epochs, more than the 0.042 its 500 validation examples")
    # the same curve on a validation set too small to resolve the rise has plateaued
    assert training_gate.training_problem(_record(0.66, 0.40, slow, n=50)) == ""
    # two epochs give no plateau to judge by (the default of the book's old schedule)
    short = training_gate.training_problem(_record(0.70, 0.40, (0.6, 0.7)))
    assert "its learning curve has 2 points: no plateau to judge by" in short
    # the plateau half alone, which the fine-tuning grid asks to train a run again: the same
    # words, whatever the accuracy; nothing for a curve too short or broken to judge
    assert learning.still_learning(_record(0.66, 0.40, slow)) == said
    assert learning.still_learning(_record(0.41, 0.40, slow)) == said
    for settled in (_record(0.79, 0.40), _record(0.66, 0.40, slow, n=50),
                    _record(0.70, 0.40, (0.6, 0.7)), _record(0.8, 0.4, (0.6, float("nan"), 0.8)),
                    _record(0.8, 0.4, n=None), {}, None):
        assert learning.still_learning(settled) == ""


@pytest.mark.parametrize("record, why", [
    ({}, "record is empty"),
    (None, "record is empty"),
    ({"metrics": {}}, "no validation accuracy"),
    (_record(0.8, 0.4, (0.8,)), "1 point"),
    (_record(0.8, 0.4, ()), "0 points"),
    (_record(0.8, 0.4, (0.6, 0.8, float("nan"), 0.8)), "not a number"),
    (_record(0.8, 0.4, n=None), "validation size is missing"),
    (_record(float("nan"), 0.4), "not a share"),
    (_record(0.8, float("nan")), "not a share"),
    (_record(1.5, 0.4), "not a share"),
    (_record(0.8, -0.1), "not a share"),
    (_record(0.8, 0.4, losses=(1.0, -0.5)), "never negative"),
    (_record(0.8, 0.4, losses=(1.0, float("nan"))), "diverged"),
    ({"history": [{"train_loss": 1.0}, {"train_loss": 0.5}]}, "no validation accuracy"),
])
def test_the_training_gate_passes_only_on_evidence_that_the_run_trained(record, why):
    assert why in training_gate.training_problem(record)


def test_the_plateau_rule_reads_the_resolution_of_the_validation_set():
    from analysis_lib.training import plateau

    # two binomial standard errors: p = 0.5 on 100 examples gives 2 * 0.05
    assert plateau.resolution(0.5, 100) == pytest.approx(0.1)
    assert plateau.resolution(1.0, 100) == pytest.approx(0.01)  # never below one example
    assert plateau.last_rise([0.5, 0.7, 0.6, 0.65]) == pytest.approx(-0.05)
    assert np.isnan(plateau.last_rise([0.5, 0.6], patience=2))
    assert plateau.plateaued([0.5, 0.7, 0.6, 0.65], 100)
    assert not plateau.plateaued([0.5, 0.6, 0.7, 0.74], 100)  # +0.14 over two epochs
    assert plateau.plateaued([0.5, 0.6, 0.7, 0.74], 100, patience=1)  # +0.04 in the last
    # one noisy dip does not end a run that is still learning (two epochs of patience)
    assert not plateau.plateaued([0.5, 0.7, 0.6], 500)
    assert plateau.plateaued([0.5, 0.7, 0.6], 500, patience=1)
    assert not plateau.plateaued([0.5, float("nan"), 0.6, 0.6], 500)
    for bad in (lambda: plateau.resolution(0.5, 0), lambda: plateau.resolution(1.2, 10),
                lambda: plateau.last_rise([0.5, 0.6], 0)):
        with pytest.raises(ValueError):
            bad()


def test_the_gate_stops_exactly_the_claims_read_from_runs_that_did_not_train():
    """The fine-tuning chapter's grid claims read the grid's runs (gated by ``untrained``);
    its freezing claims read their own runs, which the gate leaves alone (the backward pass's
    cost trains nothing)."""
    chapter = claims.of_chapter("finetuning")
    found = verdicts.judge(chapter, {"untrained": {"m, t, seed 1": "loss flat"}})
    for claim in chapter:
        shown = found.loc[claim.id, "what this run shows"]
        assert found.loc[claim.id, "verdict"] == "not measured"
        assert ("m, t, seed 1: loss flat" in shown) == ("untrained" in claim.gates), claim.id
    assert {c.id for c in chapter if not c.gates} == {"merchant-freeze-bottom",
                                                     "wu-freeze-order", "wu-freeze-saves"}
    trained = verdicts.judge(chapter, {"untrained": {}})  # every run trained: no stop
    assert not trained["what this run shows"].str.contains("did not train").any()


def test_an_undecided_claim_says_when_equivalence_was_out_of_reach():
    """Known values: with three seeds (2 degrees of freedom) t(0.975) = 4.303, so an error
    of 0.005 gives a bound of 0.0215, outside a smallest effect of 0.02: no estimate could
    have shown equivalence. With an error of 0.004 the bound (0.0172) fits."""
    wide = decide(_claim("none", 0.02), [Evidence("u", 0.0, 0.005, df=2)])
    assert wide.outcome == "inconclusive"
    assert wide.units.reach.iloc[0] == pytest.approx(4.303 * 0.005, rel=1e-3)
    assert wide.units.reach.iloc[0] == pytest.approx(wide.units.high.iloc[0], rel=1e-12)
    assert "equivalence is out of reach in 1 of 1 units" in wide.reason
    tight = decide(_claim("none", 0.02), [Evidence("u", 0.0, 0.004, df=2)])
    assert tight.outcome == "equivalent" and "out of reach" not in tight.reason
    # the bound is the best case (Holm's last step, at alpha / 2 itself): 0.0215 is out of
    # reach for any number of units, and a unit inside the bound may still fail Holm's
    # earlier steps (here the first, at alpha / 4: t(0.9875) = 6.21, 0.0248)
    two = decide(_claim("none", 0.02), [Evidence(f"u{k}", 0.0, 0.004, df=2) for k in (0, 1)])
    assert two.units.reach.iloc[0] == pytest.approx(4.303 * 0.004, rel=1e-3)
    assert "out of reach" not in two.reason and two.outcome == "inconclusive"
    one_seed = decide(_claim("none", 0.02), [Evidence("u", 0.0, float("nan"))])
    assert np.isinf(one_seed.units.reach.iloc[0]) and "out of reach" in one_seed.reason
    # the reason names how many values an interval is over, never assuming they are seeds
    models = decide(_claim("none", 0.02), [Evidence.from_values("3 models", [0.0, 0.02, -0.02])])
    assert "(3 values)" in models.reason and "seeds are needed" not in models.reason


def test_a_chapter_summary_line_gives_the_verdict_with_its_numbers():
    found = tables.table([decide("phang-blocks", [Evidence("m, t", 0.3, 0.01)])])
    (line,) = tables.verdict_lines(found, ["phang-blocks"])
    assert line.startswith("- holds: the layers of a fine-tuned model form blocks")
    assert line.endswith("(phang-blocks); this run: m, t: +0.300 [+0.280, +0.320]")
    with pytest.raises(KeyError, match="holds no claim 'phang-ft-orig'"):
        tables.verdict_lines(found, ["phang-ft-orig"])


def test_judge_reads_each_claims_results_by_name_and_stops_it_where_it_cannot_be_judged():
    """judge calls each claim's evidence function with the results its parameters name,
    stops a claim at the first gate holding a run that did not train, turns NotMeasured and
    DidNotTrain into 'not measured' with the reason, and refuses a result no claim reads."""
    paper = records.Paper("Wu")
    seen = {}

    def fields(gates=()):
        return dict(chapter="seeds", gates=gates, control=("baseline", "zero"),
                    paper_effect="none reported")

    @paper.claim("t-ok", "here", "c", "yes", "s", "greater", 0.1, "w", **fields(("gate",)))
    def ok(values, label="unit"):  # a parameter with a default is a setting, not a result
        seen["label"] = label
        return [Evidence.from_values(label, values)]

    @paper.claim("t-none", "here", "c", "yes", "s", "greater", 0.1, "w", **fields())
    def nothing(other):
        raise records.NotMeasured("not measured: the section did not run")

    @paper.claim("t-train", "here", "c", "yes", "s", "greater", 0.1, "w", **fields())
    def failed(other):
        raise records.DidNotTrain({"run 1": "loss did not fall"})

    ok_claim, none_claim, train_claim = paper.claims
    assert ok_claim.reads == ("values",) and ok_claim.evidence is ok
    found = verdicts.judge(paper.claims, {"values": [0.5, 0.6, 0.55], "other": 1})
    assert list(found.index) == ["t-ok", "t-none", "t-train"]
    assert found.loc["t-ok", "verdict"] == "holds" and seen["label"] == "unit"
    assert found.loc["t-none", "verdict"] == "not measured"
    assert "the section did not run" in found.loc["t-none", "what this run shows"]
    assert found.loc["t-train", "verdict"] == "not measured"
    assert "run 1: loss did not fall" in found.loc["t-train", "what this run shows"]
    gated = verdicts.judge(paper.claims[:1], {"values": [0.5, 0.6], "gate": {"r": "flat"}})
    assert gated.loc["t-ok", "verdict"] == "not measured"
    assert "r: flat" in gated.loc["t-ok", "what this run shows"]
    assert verdicts.judge(paper.claims[:1], {"values": [0.5, 0.6, 0.55], "gate": {}}).loc[
        "t-ok", "verdict"] == "holds"  # an empty gate stops nothing
    with pytest.raises(KeyError, match="no claim reads the results .'valeus'."):
        verdicts.judge(paper.claims, {"valeus": [0.5]})
    with pytest.raises(ValueError, match="two claims share the id"):
        paper.claim("t-ok", "here", "c", "yes", "s", "greater", 0.1, "w", **fields())(ok)


def test_a_claim_whose_factor_is_not_controlled_reads_not_measured_with_what_it_would_read():
    """An evidence function that cannot separate its claim's factor from another without a
    control condition raises Uncontrolled with the units it could read: the claim reads not
    measured whatever they show (a clear effect, none, the opposite), and its reason gives
    the confound and what the units alone would read, by the same rule as any verdict; the
    same claim given its control reads its verdict as usual."""
    paper = records.Paper("Wu")

    def fields():
        return dict(chapter="seeds", gates=(), control=("condition", "a control run"),
                    paper_effect="none reported")

    @paper.claim("t-ctl", "here", "c", "yes", "s", "greater", 0.1, "w", **fields())
    def factor(values, control):
        units = [Evidence.from_values("against the plain condition", values)]
        if control is None:
            raise records.Uncontrolled("not measured: the two conditions differ twice over",
                                       units)
        return units + [Evidence.from_values("against the control", control)]

    assert issubclass(records.Uncontrolled, records.NotMeasured)
    for values, alone in (([0.5, 0.6, 0.55], "holds"), ([-0.5, -0.6, -0.55], "opposite"),
                          ([0.001, -0.002, 0.0005], "equivalent")):
        found = verdicts.judge(paper.claims, {"values": values, "control": None})
        assert found.loc["t-ctl", "verdict"] == "not measured"
        shown = found.loc["t-ctl", "what this run shows"]
        assert shown.startswith("not measured: the two conditions differ twice over; "
                                "without that control, this claim's statistic would read "
                                f"{alone}, against the plain condition: ")
        expected = decide(paper.claims[0], [Evidence.from_values(
            "against the plain condition", values)])
        assert shown.endswith(expected.shown)
    controlled = verdicts.judge(paper.claims, {"values": [0.5, 0.6, 0.55],
                                               "control": [0.4, 0.45, 0.5]})
    assert controlled.loc["t-ctl", "verdict"] == "holds"
    assert "would read" not in controlled.loc["t-ctl", "what this run shows"]


def test_a_correlation_claim_compares_fisher_z_with_the_atanh_of_its_smallest_effect():
    z = records.Claim("t-z", "Wu", "here", "c", "yes", "s", "greater", 0.5, "w",
                      ("baseline", "zero"), "none", fisher_z=True)
    assert z.delta == pytest.approx(np.arctanh(0.5))
    # r = 0.6 on 400 points: z = 0.693 with se 0.050, reliably above atanh(0.5) = 0.549;
    # r = 0.52 (z = 0.576) is not
    unit = Evidence.from_correlation("u", 0.6, 400)
    assert decide(z, [unit]).outcome == "holds"
    assert decide(z, [Evidence.from_correlation("u", 0.52, 400)]).outcome == "inconclusive"
    with pytest.raises(ValueError, match="below 1"):
        records.Claim("t-z", "Wu", "here", "c", "yes", "s", "greater", 1.0, "w",
                      ("baseline", "zero"), "none", fisher_z=True)


def test_answerable_keeps_the_claims_a_partial_run_can_judge():
    for chapter in records.CHAPTERS:
        mine = claims.of_chapter(chapter)
        every = {name for c in mine for name in claims.results_read(c)}
        assert claims.answerable(mine, dict.fromkeys(every)) == mine
        assert claims.answerable(mine, {}) == [c for c in mine
                                               if not claims.evidence_reads(c)]
        for name in sorted(every):
            part = {k: None for k in every if k != name}
            kept = claims.answerable(mine, part)
            # a claim is kept when its evidence, and its precondition's, read only the part
            needs = {c.id: set(claims.evidence_reads(c)) for c in mine}
            assert all(needs[c.id] <= set(part) for c in kept)
            assert [c for c in mine if c not in kept] == [c for c in mine
                                                          if name in needs[c.id]]
    # the UNTUNED claim presupposes the block structure: it also needs the views
    assert claims.evidence_reads(claims.get("phang-untuned")) == ("scores", "views")


def test_describe_names_every_run_that_failed_the_gate_and_why():
    said = training_gate.describe({"a, seed 0": "loss rose", "b, seed 1": "no curve"})
    assert said == "did not train (a, seed 0: loss rose; b, seed 1: no curve)"
    verdict = verdicts.untrained("phang-untuned", {"a, seed 0": "loss rose"})
    assert verdict.reason == "did not train (a, seed 0: loss rose)"


def test_the_bound_an_out_of_reach_reason_quotes_is_that_of_the_units_it_counts():
    """"Out of reach in k units: their one-sided bound (at least b)" names the smallest bound
    among those k units, never a unit whose bound is inside the smallest effect (a unit
    whose seeds agree exactly has a bound of zero, and a reason that quoted it would say
    that 0.000 is not inside 0.02)."""
    # a cost claim: one unit decided (narrow), one undecided and out of reach (wide)
    narrow = Evidence.from_values("narrow", [-0.001, -0.001, 0.003])
    wide = Evidence.from_values("wide", [0.012, 0.002, 0.019])
    v = decide(_claim("at_most", 0.02), [narrow, wide])
    assert v.outcome == "inconclusive"
    reach = dict(zip(v.units.unit, v.units.reach))
    assert reach["narrow"] < 0.02 <= reach["wide"]
    assert (f"a cost below it is out of reach in 1 of 2 units: their one-sided bound (at "
            f"least {reach['wide']:.3f})") in v.reason
    # a directional claim with a unit whose values are all equal (no spread: a bound of 0)
    same = Evidence.from_values("same", [0.0, 0.0, 0.0])
    spread = Evidence.from_values("spread", [0.05, -0.02, 0.01])
    v = decide(_claim("greater", 0.02), [same, spread])
    reach = dict(zip(v.units.unit, v.units.reach))
    assert reach["same"] == 0 and reach["spread"] >= 0.02
    assert f"(at least {reach['spread']:.3f})" in v.reason
    assert "(at least 0.000)" not in v.reason


def test_an_out_of_reach_reason_counts_only_the_units_left_undecided():
    """A unit that holds (or reads opposite) is decided: whether it could have shown no
    difference is no part of why the claim is undecided, so the reason's "out of reach"
    count names the undecided units alone, and says nothing when every undecided unit
    could have been decided."""
    holds = Evidence.from_values("holds", [0.13, 0.12, 0.11])  # wide, but wholly above
    undecided = Evidence.from_values("undecided", [0.13, 0.07, -0.02])
    v = decide(_claim("greater", 0.02), [holds, undecided])
    outcome = dict(zip(v.units.unit, v.units.outcome))
    reach = dict(zip(v.units.unit, v.units.reach))
    assert outcome == {"holds": "holds", "undecided": "inconclusive"}
    assert reach["holds"] >= 0.02 and reach["undecided"] >= 0.02
    assert (f"equivalence is out of reach in 1 of 2 units: their one-sided bound (at least "
            f"{reach['undecided']:.3f})") in v.reason
    # an undecided unit whose bound is inside the smallest effect: nothing out of reach
    tight = Evidence.from_values("tight", [0.021, 0.022, 0.020])
    v = decide(_claim("greater", 0.02), [holds, tight])
    assert v.outcome == "inconclusive" and "out of reach" not in v.reason


def test_a_measured_claim_reads_its_verdict_at_half_and_twice_its_smallest_effect():
    """The findings' reason of a measured claim ends with what the same rule reads with the
    smallest effect halved and doubled: "the same" where neither moves it, else both
    readings, each equal to decide() on the claim with that smallest effect."""
    steady = [Evidence.from_values("u", [0.50, 0.52, 0.51])]  # far beyond 0.05, 0.1 and 0.2
    assert verdicts.at_other_effects(_claim("greater", 0.1), steady) == (
        "; the same at half and at twice the smallest effect")
    near = [Evidence.from_values("u", [0.15, 0.16, 0.14])]  # beyond 0.1, inside 0.2
    assert decide(_claim("greater", 0.1), near).outcome == "holds"
    assert decide(_claim("greater", 0.2), near).outcome == "equivalent"
    assert verdicts.at_other_effects(_claim("greater", 0.1), near) == (
        "; half the smallest effect (0.05) reads holds, twice the smallest effect (0.2) "
        "reads equivalent")
    # a correlation claim is scaled on Fisher's z: half of r = 0.5 is 0.268, twice 0.8
    z = records.Claim("t-z", "Wu", "here", "c", "yes", "s", "greater", 0.5, "w",
                      ("baseline", "zero"), "none", fisher_z=True)
    unit = [Evidence.from_correlation("u", 0.6, 400)]
    assert decide(z, unit).outcome == "holds"
    assert verdicts.at_other_effects(z, unit) == (
        "; half the smallest effect (0.268) reads holds, twice the smallest effect (0.8) "
        "reads equivalent")
    # judge ends each measured claim's reason with it, and leaves a claim it cannot
    # measure without it
    paper = records.Paper("Wu")
    fields = dict(chapter="seeds", control=("baseline", "zero"), paper_effect="none reported")

    @paper.claim("t-near", "here", "c", "yes", "s", "greater", 0.1, "w", **fields)
    def close(values):
        return [Evidence.from_values("u", values)]

    @paper.claim("t-none", "here", "c", "yes", "s", "greater", 0.1, "w", **fields)
    def nothing(other):
        raise records.NotMeasured("not measured: the section did not run")

    found = verdicts.judge(paper.claims, {"values": [0.15, 0.16, 0.14], "other": 1})
    assert found.loc["t-near", "how"].endswith("twice the smallest effect (0.2) reads "
                                               "equivalent")
    assert "smallest effect" not in found.loc["t-none", "how"]


@pytest.mark.parametrize("direction", ["greater", "less", "none", "at_most"])
def test_a_verdict_moves_with_its_smallest_effect_only_the_way_the_rule_allows(direction):
    """Halving the smallest effect can only help a verdict that needs its units beyond it
    (holds for a directional claim, opposite), doubling it only one that needs them inside
    it (equivalent, a cost that holds): drawn units, one and three per claim."""
    rng = np.random.default_rng(7)
    beyond = {"holds"} if direction in ("greater", "less") else set()
    beyond |= {"opposite"}
    inside = {"equivalent"} | ({"holds"} if direction == "at_most" else set())
    claims_at = {f: _claim(direction, 0.1 * f) for f in (0.5, 1.0, 2.0)}
    for _ in range(100):
        units = [Evidence.from_values(f"u{k}", rng.normal(rng.normal(0, 0.2), 0.05, 3))
                 for k in range(rng.choice([1, 3]))]
        read = {f: decide(c, units).outcome for f, c in claims_at.items()}
        if read[1.0] in beyond:
            assert read[0.5] == read[1.0], (read, [u.estimate for u in units])
        if read[1.0] in inside:
            assert read[2.0] == read[1.0], (read, [u.estimate for u in units])


def test_the_clause_at_half_and_twice_is_found_again_in_a_reason():
    """The findings page shows a decided verdict's readings at half and at twice its smallest
    effect by finding the clause at_other_effects wrote at the end of its reason."""
    near = [Evidence.from_values("u", [0.15, 0.16, 0.14])]
    for units in (near, [Evidence.from_values("u", [0.50, 0.52, 0.51])]):
        clause = verdicts.at_other_effects(_claim("greater", 0.1), units)
        assert verdicts.other_effects_clause("Holm over 2 units" + clause) == clause[2:]
        assert verdicts.other_effects_clause(clause[2:]) == clause[2:]  # the reason alone
    assert verdicts.other_effects_clause("Holm over 2 units") == ""
    assert verdicts.other_effects_clause("half the smallest effect (0.05) reads holds") == ""
    assert verdicts.other_effects_clause("x; the same at half and at twice the smallest "
                                         "effect; more") == ""
