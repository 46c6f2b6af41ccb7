"""Reliability across entry points: consent to run code is never inferred from a value,
preconditions hold down a whole chain, the findings reader names a chapter it cannot read,
sizes a user types are bounded, and the documented input forms work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis_lib import similarity as sim
from analysis_lib.claims import claim as records
from analysis_lib.claims import training_gate, verdicts
from analysis_lib.claims.verdicts import Evidence

ROOT = Path(__file__).resolve().parent.parent
NOT_BOOLEANS = ["false", "False", "no", "", 0, 1, None, [False]]


# ----------------------------------------------------------------- consent to run code


@pytest.fixture(scope="module")
def remote_code_folder(tmp_path_factory):
    """A model folder whose config asks for its own code, which would write a marker file
    when imported."""
    folder = tmp_path_factory.mktemp("remote") / "model"
    folder.mkdir()
    marker = folder.parent / "code-ran"
    (folder / "config.json").write_text(json.dumps({
        "model_type": "planted", "auto_map": {"AutoConfig": "configuration_planted.C",
                                              "AutoModel": "modeling_planted.M"}}))
    code = f"open({str(marker)!r}, 'w').write('ran')\n"
    (folder / "configuration_planted.py").write_text(code)
    (folder / "modeling_planted.py").write_text(code)
    return folder, marker


def _entry_points():
    """Every public function that forwards ``trust_remote_code`` to the model loader."""
    from analysis_lib import extract, models
    from analysis_lib.data import corpora
    from analysis_lib.training import finetune as training
    from analysis_lib.training import surgery

    text = corpora.from_sentences(["a short sentence"], name="one")
    return {
        "models.load": lambda name, **kw: models.load(name, **kw),
        "extract.extract": lambda name, **kw: extract.extract(name, text, **kw),
        "training.finetune": lambda name, **kw: training.finetune(name, "tweets-sentiment",
                                                                  **kw),
        "training.lookup": lambda name, **kw: training.lookup(name, "tweets-sentiment", **kw),
        "surgery.truncated_copy": lambda name, **kw: surgery.truncated_copy(name, 1, **kw),
    }


@pytest.mark.parametrize("entry", list(_entry_points()))
def test_every_entry_point_refuses_a_flag_that_is_not_a_boolean(entry, remote_code_folder):
    folder, marker = remote_code_folder
    call = _entry_points()[entry]
    for value in NOT_BOOLEANS:
        with pytest.raises(TypeError, match="trust_remote_code must be True or False"):
            call(str(folder), trust_remote_code=value)
        with pytest.raises(TypeError, match="local_files_only must be True or False"):
            call("minilm", local_files_only=value if value is not None else "none")
    assert not marker.exists()  # the folder's code never ran


def test_a_sweep_spec_cannot_grant_code_execution():
    from analysis_lib.extract import check_spec_options

    for value in (True, "true", "false", 1):
        with pytest.raises(ValueError, match="trust_remote_code cannot be set from a file"):
            check_spec_options({"trust_remote_code": value})


def test_no_notebook_parameter_grants_code_execution():
    from analysis_lib.book import params

    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert not {"trust_remote_code", "local_files_only"} & set(params.declared(path)), path


# ------------------------------------------------------------- preconditions down a chain


def _paper_of(outcomes: dict[str, str], requires: dict[str, str]) -> list[records.Claim]:
    """Claims ``c0..`` whose evidence reads ``holds`` or ``opposite`` as planted, each
    presupposing the claim ``requires`` names."""
    values = {"holds": [0.5, 0.52, 0.51], "opposite": [-0.5, -0.52, -0.51],
              "inconclusive": [0.5, -0.5, 0.0]}
    found = []
    for cid, outcome in outcomes.items():
        def evidence(outcome=outcome):
            return [Evidence.from_values("unit", values[outcome])]

        found.append(records.Claim(cid, "Wu", "here", "c", "yes", "s", "greater", 0.1, "w",
                                   ("baseline", "zero"), "none", chapter="seeds",
                                   evidence=evidence, requires=requires.get(cid, "")))
    return found


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_verdict_stands_only_where_its_whole_chain_of_preconditions_holds(data):
    n = data.draw(st.integers(1, 6))
    ids = [f"c{k}" for k in range(n)]
    outcomes = {cid: data.draw(st.sampled_from(["holds", "opposite", "inconclusive"]))
                for cid in ids}
    requires = {cid: data.draw(st.sampled_from(["", *ids, "missing-claim"])) for cid in ids}
    claims = _paper_of(outcomes, requires)

    def chain(cid):
        seen, out = [cid], []
        while requires.get(cid):
            cid = requires[cid]
            if cid in seen or cid not in outcomes:
                return None  # a cycle or a missing link
            seen.append(cid)
            out.append(cid)
        return out

    chains = {cid: chain(cid) for cid in ids}
    if any(c is None for c in chains.values()):
        with pytest.raises(ValueError, match="cycle|no claim"):
            verdicts.judge(claims, {})
        return
    found = verdicts.judge(claims, {})
    for cid in ids:
        blocked = [c for c in chains[cid] if outcomes[c] != "holds"]
        verdict = found.loc[cid, "verdict"]
        if blocked:
            assert verdict == "not measured", (cid, chains[cid], outcomes)
            assert f"{blocked[0]} (" in found.loc[cid, "what this run shows"]
        else:
            assert verdict == outcomes[cid], (cid, chains[cid], outcomes)


def test_a_two_step_chain_blocks_where_only_the_far_precondition_fails():
    claims = _paper_of({"a": "holds", "b": "holds", "c": "opposite"}, {"a": "b", "b": "c"})
    found = verdicts.judge(claims, {})
    assert list(found.verdict) == ["not measured", "not measured", "opposite"]
    assert "c (" in found.loc["a", "what this run shows"]


def test_decide_reads_a_generator_and_evidence_refuses_text():
    claim = _paper_of({"g": "holds"}, {})[0]
    units = (Evidence.from_values(f"u{k}", [0.5, 0.52, 0.51]) for k in range(2))
    assert verdicts.decide(claim, units).outcome == "holds"
    assert verdicts.decide(claim, Evidence.from_values("u", [0.5, 0.52, 0.51])).outcome == \
        "holds"
    for bad in (["0.5", "0.6"], [True, False], [0.5, "0.6"], [{"a": 1}]):
        with pytest.raises(TypeError, match="values must be numbers"):
            Evidence.from_values("u", bad)
    assert Evidence.from_values("u", [0.5, None, 0.7]).n == 2  # None: not measured


# --------------------------------------------------------- the findings reader, damaged


def _record_cell(nb) -> int:
    from analysis_lib.book.findings import MIME

    return next(k for k, c in enumerate(nb.cells) if any(
        MIME in o.get("data", {}) for o in c.get("outputs", [])))


def _chapter_with_a_record(tmp_path, chapter="seeds"):
    """An executed chapter holding one findings record (as the build writes it)."""
    from analysis_lib.book.findings import MIME, RECORD

    nb = nbformat.v4.new_notebook()
    record = nbformat.v4.new_code_cell("record_findings(findings)")
    record.outputs = [nbformat.v4.new_output(
        "display_data", data={MIME: json.dumps({"rows": [
            {"claim id": "ren-depth", "what this run shows": "x", "verdict": "holds",
             "units": []}]})},
        metadata={"scrapbook": {"name": RECORD}})]
    other = nbformat.v4.new_code_cell("print(1)")
    other.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nb.cells = [nbformat.v4.new_markdown_cell("# x"), other, record]
    path = tmp_path / f"{chapter}.ipynb"
    nbformat.write(nb, str(path))
    return path


@pytest.mark.parametrize("damage", ["record cell removed", "record output removed",
                                    "all outputs cleared", "other cell removed",
                                    "other output removed"])
def test_a_present_chapter_without_its_record_is_named_never_silent(tmp_path, damage):
    from analysis_lib.book import findings

    path = _chapter_with_a_record(tmp_path)
    nb = nbformat.read(str(path), as_version=4)
    k = _record_cell(nb)
    if damage == "record cell removed":
        del nb.cells[k]
    elif damage == "record output removed":
        nb.cells[k].outputs = []
    elif damage == "all outputs cleared":
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
    elif damage == "other cell removed":
        del nb.cells[1]
    else:
        nb.cells[1].outputs = []
    nbformat.write(nb, str(path))
    table = findings.collect([path])
    unread = table.attrs["unread"]
    if damage.startswith("other"):
        assert not unread and table.set_index("claim id").loc["ren-depth", "verdict"] == "holds"
    else:
        assert "seeds" in unread and "no findings record" in unread["seeds"]
        mine = table[table["claim id"].str.startswith("ren-")]
        assert mine["what this run shows"].str.contains("could not be read: seeds").all()


def test_the_findings_command_exits_non_zero_naming_a_chapter_without_its_record(tmp_path,
                                                                                  capsys):
    from analysis_lib.__main__ import main

    path = _chapter_with_a_record(tmp_path)
    nb = nbformat.read(str(path), as_version=4)
    nb.cells[_record_cell(nb)].outputs = []
    nbformat.write(nb, str(path))
    assert main(["findings", "--executed", str(tmp_path), "--format", "csv"]) == 1
    said = capsys.readouterr().err
    assert "seeds" in said and "no findings record" in said


# ------------------------------------------------------------------ sizes a user types


def test_findings_width_is_bounded_and_the_table_never_pads_past_its_text(tmp_path, capsys):
    from analysis_lib.__main__ import main
    from analysis_lib.book import findings

    path = _chapter_with_a_record(tmp_path)
    for width in ("1000000000", "5", "-3"):
        assert main(["findings", "--executed", str(tmp_path), "--width", width]) == 2
        assert "--width must lie in [40, 1000]" in capsys.readouterr().err
    table = findings.collect([path])
    longest = max(len(line) for line in findings.text_table(table, 1000).splitlines())
    text = max(len(s) for s in table["what this run shows"])
    assert longest <= text + max(len(s) for s in table["claim id"]) + 40


def test_resample_and_worker_counts_are_bounded():
    from analysis_lib.sweep import run_sweep

    X = np.random.default_rng(0).standard_normal((30, 4))
    with pytest.raises(ValueError, match=r"n_boot must lie in \[2, 100000\]"):
        sim.bootstrap(X, X + 1, n_boot=10**9)
    with pytest.raises(ValueError, match=r"n_perm must lie in \[1, 100000\]"):
        sim.permutation_test(X, X + 1, n_perm=10**9)
    spec = {"name": "tiny", "models": ["random:bert", "random:gpt2"], "corpus": "tweets",
            "n_sentences": 10,
            "measures": ["linear_cka"]}
    with pytest.raises(ValueError, match="more than this machine can run"):
        run_sweep(spec, workers=10**6)


# ------------------------------------------------------------ documented input forms


def test_a_hugging_face_output_is_read_by_its_hidden_states(tiny_models):
    import torch

    loaded = tiny_models["bert"]
    ids = torch.randint(5, 500, (1, 24))
    with torch.no_grad():
        out = loaded.model(ids, output_hidden_states=True)
    assert "pooler_output" in out  # a mapping with more than the layers
    M = sim.pairwise(out, measure="linear_cka")
    expected = sim.pairwise([h[0].numpy() for h in out.hidden_states], measure="linear_cka")
    np.testing.assert_allclose(M, expected, atol=1e-6)
    with torch.no_grad():
        bare = loaded.model(ids)
    with pytest.raises(ValueError, match="output_hidden_states=True"):
        sim.pairwise(bare)


def test_a_measure_that_reads_neurons_by_pairs_is_refused_before_it_allocates(monkeypatch):
    import importlib

    engine = importlib.import_module("analysis_lib.similarity.pairwise")

    monkeypatch.setattr(engine, "_memory_bytes", lambda: 8 * 2000 * 2000)  # 32 MB here
    rng = np.random.default_rng(0)
    wide = rng.standard_normal((20, 3000)).astype(np.float32)
    narrow = rng.standard_normal((20, 5)).astype(np.float32)
    for measures in (["mixedsim"], ["svcca", "mixedsim"], ["neuronsim"]):
        layers = [wide, wide + 1] if measures == ["neuronsim"] else [wide, narrow]
        with pytest.raises(ValueError, match=r"3,000 x 3,000 matrix.*PCA.*svcca"):
            sim.pairwise_suite(layers, measures=measures)
    # what reads the row space still runs, and so does neuronsim against a narrow layer
    assert np.isfinite(sim.pairwise_suite([wide, narrow], measures=["svcca", "linear_cka",
                                                                     "neuronsim"])["svcca"]).all()


def test_a_checkpoint_with_more_layers_than_its_config_is_refused(tmp_path):
    from analysis_lib import models

    loaded = models.load("random:bert", layers=4, hidden=32, heads=2, vocab_size=2000)
    folder = tmp_path / "deeper"
    loaded.model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config["num_hidden_layers"] = 2
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"2 more layers \(layers 3..4\) than its config "
                                         r"builds \(2\)"):
        models.load(str(folder))


def _record(**changes):
    history = [{"epoch": k, "validation_accuracy": a, "train_loss": l}
               for k, (a, l) in enumerate([(0.6, 1.0), (0.7, 0.8), (0.71, 0.7), (0.71, 0.65)])]
    base = {"metrics": {"validation": {"accuracy": 0.71, "majority_baseline": 0.4, "n": 400}},
            "history": history, "loss_curve": [{"step": k, "train_loss": 1.0 - 0.1 * k}
                                               for k in range(5)]}
    return {**base, **changes}


def test_the_training_gate_names_a_damaged_loss_record():
    assert training_gate.training_problem(_record()) == ""
    empty = training_gate.training_problem(_record(loss_curve=[]))
    assert "loss curve is empty" in empty and "diverged" not in empty
    points = [{"step": k} for k in range(5)]
    lacking = training_gate.training_problem(_record(loss_curve=points))
    assert "5 of the 5 points of its loss curve have no train_loss" in lacking
    assert "diverged" not in lacking
    text = training_gate.training_problem(_record(loss_curve=[{"train_loss": "low"}]))
    assert "not a number" in text


# ------------------------------------------------------------- messages that stop short


def test_findings_without_the_book_names_what_to_pass(tmp_path, monkeypatch, capsys):
    """An installation without the book's sources (the wheel) has no build to read by
    profile: the command says to pass --executed, and reads a folder given that way."""
    import analysis_lib.book as book_package
    from analysis_lib import __main__ as cli

    monkeypatch.setattr(book_package, "ROOT", tmp_path / "no-book")
    assert cli.main(["findings", "--profile", "default"]) == 2
    said = capsys.readouterr().err
    assert "holds no book" in said and "--executed FOLDER" in said
    _chapter_with_a_record(tmp_path)
    assert cli.main(["findings", "--executed", str(tmp_path), "--format", "csv"]) == 0
    assert "ren-depth" in capsys.readouterr().out


def test_sweep_without_dask_names_the_extra_without_a_traceback(tmp_path):
    spec = tmp_path / "spec.yml"
    spec.write_text("name: tiny\nmodels: [random:bert, random:gpt2]\ncorpus: tweets\n"
                    "n_sentences: 10\nmeasures: [linear_cka]\n")
    code = ("import sys, builtins\n"
            "real = builtins.__import__\n"
            "def blocked(name, *a, **k):\n"
            "    if name.split('.')[0] in ('distributed', 'dask'):\n"
            "        raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = blocked\n"
            "from analysis_lib.__main__ import main\n"
            f"sys.exit(main(['sweep', {str(spec)!r}, '--workers', '2', '--out', "
            f"{str(tmp_path / 'out')!r}]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert 'pip install "analysis_lib[sweep]"' in done.stderr
    assert "Traceback" not in done.stderr


def test_a_misspelt_model_names_the_close_name_and_the_command_at_once():
    import time

    from analysis_lib import models

    start = time.perf_counter()
    for typo, meant in (("minilmm", "minilm"), ("mpnett", "mpnet"), ("smolm2", "smollm2")):
        with pytest.raises(ValueError, match=f"did you mean '{meant}'.*python -m analysis_lib "
                                             "models"):
            models.load(typo)
    assert time.perf_counter() - start < 10  # refused before any attempt to reach the hub
    for hub_id in ("bert-base-cased", "gpt2", "google/multiberts-seed_0"):
        assert models.check_name(hub_id) == "hub"


def test_command_errors_name_the_fix_without_a_traceback(tmp_path, capsys):
    from analysis_lib.__main__ import main

    empty = tmp_path / "empty.txt"
    empty.write_text("")
    cases = {("extract", "--model", "minilmm"): "did you mean 'minilm'",
             ("extract", "--corpus", str(empty), "--model", "random:bert"): "has no text",
             ("extract", "--corpus", str(tmp_path / "gone.txt")): "does not exist"}
    for argv, said in cases.items():
        assert main(list(argv)) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and said in err and "Traceback" not in err, err


def test_every_misspelt_name_on_the_command_line_names_the_closest_one(tmp_path, capsys):
    """Corpora, profiles, built profiles and an option's choices: the closest valid value
    and where the valid ones are listed, with no traceback."""
    from analysis_lib.__main__ import main

    cases = {("extract", "--corpus", "tweetz"): ["did you mean 'tweets'",
                                                 "python -m analysis_lib corpora"],
             ("book", "--profile", "defualt"): ["did you mean 'default'", "smoke"],
             ("findings", "--executed", str(tmp_path)): ["no executed notebooks"]}
    for argv, said in cases.items():
        assert main(list(argv)) in (1, 2), argv
        err = capsys.readouterr().err
        assert "error: " in err and all(s in err for s in said), err
        assert "Traceback" not in err
    for argv, said in ((("zoo", "--set", "zo"), "did you mean 'zoo'"),
                       (("findings", "--format", "mdd"), "did you mean 'md'")):
        with pytest.raises(SystemExit) as stop:
            main(list(argv))
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "invalid choice" in err and said in err and "Traceback" not in err


def test_a_misspelt_keyword_names_the_argument_it_was_meant_for():
    X = np.random.default_rng(0).standard_normal((30, 4))
    with pytest.raises(TypeError, match="did you mean 'as_frame'"):
        sim.pairwise([X, X + 1], as_fram=True)
    with pytest.raises(TypeError, match="did you mean 'variance'"):
        sim.pairwise([X, X + 1], measure="svcca", varience=0.9)


def test_a_missing_corpus_file_is_named_as_a_path_not_a_list(tmp_path):
    from analysis_lib.rules import _corpus_problems

    (problem,) = _corpus_problems("corpus", [str(tmp_path / "gone.txt")])
    assert f"corpus file {tmp_path / 'gone.txt'} does not exist" in problem and "[" not in problem
