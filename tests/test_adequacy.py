"""Trained enough for the claim: the adequacy rule and the stopping rule, with planted runs.

A claim about fine-tuning reads a (model, task)'s fine-tuned models only where their mean
test accuracy clears the head on the frozen encoder by the smallest accuracy effect; a unit
that reads an under-trained (model, task) is set aside and named, and a claim left with no
unit reads "not measured" with the reason. A run stops on its plateau only when it is not
still climbing."""

import numpy as np
import pandas as pd
import pytest

from analysis_lib import claims
from analysis_lib.claims import tables, training_gate, verdicts
from analysis_lib.claims.claim import Evidence, Level
from analysis_lib.training import plateau
from analysis_lib.training.grid import Runs


def _scores(means, frozen):
    """An accuracy table's columns for model ``m`` (task -> mean), beside its frozen head."""
    return pd.DataFrame({"model": "m", "task": list(means), "mean": list(means.values()),
                         "n": 3, "frozen_head": [frozen[t] for t in means]})


LINES = tables.adequacy_lines(_scores({"t1": 0.80, "t2": 0.71}, {"t1": 0.70, "t2": 0.70}))


def test_the_adequacy_line_is_the_frozen_head_plus_the_smallest_accuracy_effect():
    assert training_gate.ABOVE_FROZEN_HEAD == 0.02
    assert not LINES["m, t1"].stuck  # 0.10 above its frozen head
    assert LINES["m, t2"].stuck  # 0.01 above: within the smallest effect
    assert LINES["m, t2"].kind == "adequacy"
    # just clear of the line, and below the frozen head
    lines = tables.adequacy_lines(_scores({"a": 0.7201, "b": 0.60}, {"a": 0.70, "b": 0.70}))
    assert not lines["m, a"].stuck and lines["m, b"].stuck
    said = LINES["m, t2"].describe()
    assert "m fine-tuned on t2" in said and "0.710, not above 0.700 by more than 0.02" in said
    with pytest.raises(ValueError, match="lacks the columns \\['frozen_head'\\]"):
        tables.adequacy_lines(_scores({"t1": 0.8}, {"t1": 0.7}).drop(columns="frozen_head"))


def test_adequacy_lines_come_from_the_accuracy_table_of_the_runs():
    class Run:
        record = {"history": [{"epoch": 1, "steps": 10}]}

    rows = [{"model": "m", "task": task, "seed": seed, "accuracy": acc, "majority": 0.4}
            for task, accs in (("t1", [0.78, 0.80, 0.82]), ("t2", [0.70, 0.71, 0.72]))
            for seed, acc in enumerate(accs)]
    runs = Runs(pd.DataFrame(rows), {(r["model"], r["task"], r["seed"]): Run() for r in rows})
    heads = pd.DataFrame({"model": "m", "task": ["t1", "t2"], "frozen_head": 0.70})
    lines = tables.adequacy(runs, heads)
    assert lines["m, t1"].values == pytest.approx((0.80,)) and not lines["m, t1"].stuck
    assert lines["m, t2"].values == pytest.approx((0.71,)) and lines["m, t2"].stuck


@pytest.mark.parametrize("label, reads", [
    ("m, t2, rsa (L1 - L6)", ["t2"]),
    ("m, t1, rsa (L1 - L6)", ["t1"]),
    ("t2: skip L4-L5 (mean) - skip L1", ["other t2", "t2"]),  # no model named: all
    ("m, t1 against t1:pos, L1-L5", ["t1"]),  # a tagging task on t1's inputs
    ("m, t1 and t2 crossed, top layer", ["t1", "t2"]),  # a unit over both tasks
    ("m, t1 and t2 models on t1's words", ["t1", "t2"]),
    ("other, t2, rsa", ["other t2"]),  # another model's unit: its own line
    ("other, t1, rsa", []),  # a model with no line for the task
    ("3 of 6 layers kept", []),  # names no task
    ("m, t22, rsa", []),  # a longer name is not the name
    ("m, at2, rsa", []),
])
def test_a_unit_reads_the_lines_of_the_tasks_it_names(label, reads):
    other = Level("other t2", [0.9], 0.7, 0.02, "adequacy")
    lines = {**LINES, "other, t2": other}
    unit = verdicts.with_adequacy([Evidence(label, 0.1, 0.01)], lines)[0]
    found = sorted(level.variable.split(" fine-tuned on ")[-1].split(" ")[0]
                   if level is not other else "other t2" for level in unit.levels)
    assert found == reads
    assert verdicts.with_adequacy([Evidence(label, 0.1, 0.01)], None)[0].levels == ()


def test_the_adequacy_rule_sets_aside_the_units_of_an_under_trained_model():
    depth = claims.get("merchant-depth")
    units = [Evidence.from_values("m, t1, rsa (L1 - L6)", [0.50, 0.52, 0.48]),
             Evidence.from_values("m, t2, rsa (L1 - L6)", [0.50, 0.52, 0.48])]
    found = verdicts.decide(depth, verdicts.with_adequacy(units, LINES))
    assert found.outcome == "holds" and list(found.units.unit) == ["m, t1, rsa (L1 - L6)"]
    assert "the adequacy rule leaves out 1 unit (m, t2, rsa (L1 - L6): not trained enough" \
        in found.reason
    # every unit reads an under-trained model: no verdict, and why
    alone = verdicts.decide(depth, verdicts.with_adequacy(units[1:], LINES))
    assert alone.outcome == "not measured"
    assert alone.reason.startswith("the adequacy rule: m, t2, rsa (L1 - L6): not trained "
                                   "enough for it: m fine-tuned on t2")
    # the same evidence with adequate models: both units judged
    fine = tables.adequacy_lines(_scores({"t1": 0.80, "t2": 0.80}, {"t1": 0.70, "t2": 0.70}))
    assert len(verdicts.decide(depth, verdicts.with_adequacy(units, fine)).units) == 2


def test_the_floor_rule_and_the_adequacy_rule_are_named_apart():
    floor = Level("probe accuracy", [0.45], 0.45, 0.02)
    units = [Evidence("m, t1, x", 0.3, 0.01).reading(floor),
             Evidence("m, t2, x", 0.3, 0.01), Evidence("m, t1, y", 0.3, 0.01)]
    found = verdicts.decide(claims.get("merchant-depth"),
                            verdicts.with_adequacy(units, LINES))
    assert "the adequacy rule leaves out 1 unit (m, t2, x:" in found.reason
    assert "the floor rule leaves out 1 unit (m, t1, x:" in found.reason
    assert list(found.units.unit) == ["m, t1, y"]


def _change(tasks=("t1", "t2"), seeds=(0, 1, 2), layers=7):
    rng = np.random.default_rng(3)
    return pd.DataFrame([{"model": "m", "task": task, "seed": seed, "layer": layer,
                          **{k: 1 - 0.05 * layer + 0.002 * rng.standard_normal()
                             for k in ("linear_cka", "neuronsim", "rsa")},
                          "attention_js": 0.5 if layer else np.nan}
                         for task in tasks for seed in seeds for layer in range(layers)])


def test_every_claim_that_reads_the_grid_names_its_adequacy_and_a_planted_run_stops_it():
    """The fine-tuning chapter's claims that read the grid's models read its adequacy lines
    (and no other claim does); a (model, task) planted below its frozen head turns the claims
    that read only it "not measured", with the reason, and leaves the others' units out."""
    chapter = claims.of_chapter("finetuning")
    for claim in claims.CLAIMS.values():
        reads = training_gate.ADEQUACY in claims.results_read(claim)
        assert reads == (training_gate.GRID in claim.gates), claim.id
    results = {"change": _change(), "views": {}, "frozen": None, "untrained": {}}
    both = verdicts.judge(chapter, {**results, "adequacy": LINES})
    assert both.loc["merchant-depth", "verdict"] == "holds"
    assert "the adequacy rule leaves out" in both.loc["merchant-depth", "how"]
    assert "m, t2" not in both.loc["merchant-depth", "what this run shows"]
    only_t2 = verdicts.judge(chapter, {**results, "change": _change(tasks=("t2",)),
                                       "adequacy": LINES})
    for claim_id in ("merchant-depth", "wu-ft-top-change"):
        row = only_t2.loc[claim_id]
        assert row["verdict"] == "not measured", claim_id
        assert "not trained enough for it: m fine-tuned on t2" in row["what this run shows"]
    # the freezing claims read their own runs, not the grid's: no adequacy line
    assert not any(training_gate.GRID in c.gates for c in chapter
                   if c.id in ("wu-freeze-order", "merchant-freeze-bottom"))
    # a chapter whose claims do not read the grid refuses the result by name
    with pytest.raises(KeyError, match="adequacy"):
        verdicts.judge(claims.of_chapter("representation"), {"adequacy": LINES})


def test_the_stopping_rule_does_not_end_a_run_still_climbing():
    """0.754, 0.730, 0.776 on 500 examples rose 0.022 over its last two epochs, inside the
    0.037 two standard errors resolve; but its last epoch beat the best before it by more
    than one error (0.019), so it is still climbing. A last epoch below the best, or above
    it by less than one error, is on the plateau."""
    climbing = [0.754, 0.730, 0.776]
    assert plateau.rising(climbing, 500) and not plateau.plateaued(climbing, 500)
    assert plateau.plateaued([0.754, 0.730, 0.760], 500)  # +0.006: inside one error
    assert plateau.plateaued([0.754, 0.776, 0.730], 500)  # the last epoch fell
    assert not plateau.rising([0.7], 500)
    why = training_gate.training_problem({
        "metrics": {"validation": {"accuracy": 0.776, "majority_baseline": 0.4, "n": 500}},
        "history": [{"validation_accuracy": v, "train_loss": 1.0} for v in climbing]})
    assert "its last epoch beat every earlier one by 0.022" in why


def test_a_run_that_trained_its_whole_schedule_is_read_by_the_plateau_window_alone():
    """A run trained to the end of its schedule (``until_plateau`` false: the learning rate
    decayed to zero) whose last epoch is its best by more than one error has finished its
    schedule, not been cut short: the gate reads its last two epochs' rise against the two
    errors the validation set resolves. The same curve from a run that stopped on its
    plateau (or a record that does not say) is read by the stopping rule, and a fixed run
    whose window rose more than the resolution still fails."""
    def record(curve, **config):
        return {"metrics": {"validation": {"accuracy": curve[-1], "majority_baseline": 0.4,
                                           "n": 500}},
                "history": [{"validation_accuracy": v, "train_loss": 1.0} for v in curve],
                **({"config": config} if config else {})}

    annealed = [0.622, 0.71, 0.692, 0.702, 0.742]  # +0.032 over the window, resolution 0.039
    assert plateau.rising(annealed, 500) and not plateau.plateaued(annealed, 500)
    assert training_gate.training_problem(record(annealed, until_plateau=False)) == ""
    for stopped in (record(annealed, until_plateau=True), record(annealed)):
        assert "its last epoch beat every earlier one" in training_gate.training_problem(stopped)
    steep = [0.6, 0.62, 0.64, 0.68, 0.71]  # +0.07 over the window
    why = training_gate.training_problem(record(steep, until_plateau=False))
    assert "rose 0.070 in its last 2 epochs" in why
