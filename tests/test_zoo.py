"""The model zoo: pretraining here, deterministic, cached, one factor at a time."""

import hashlib
import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch

from analysis_lib import extract, models
from analysis_lib.__main__ import main
from analysis_lib.models import zoo
from analysis_lib.training import pretrain as pt
from analysis_lib.training import zoo as zoo_training

TINY = pt.PretrainConfig(layers=1, hidden=32, heads=2, data="tweets", steps=4, batch_size=4,
                         block=16, vocab_size=2000, warmup_steps=1, checkpoints=(2,))


@pytest.fixture(scope="module")
def tok():
    return pt.tokenizer(TINY.vocab_size)


def test_bad_settings_are_named_with_their_fix():
    with pytest.raises(ValueError, match=r"objective='gpt'.*clm, mlm.*data='wiki'.*"
                                         r"hidden=30 is not divisible by heads=4"):
        pt.check_config(replace(TINY, objective="gpt", data="wiki", hidden=30, heads=4))
    with pytest.raises(ValueError, match=r"checkpoints \[4\]"):
        pt.check_config(replace(TINY, checkpoints=(4,)))
    with pytest.raises(ValueError, match="mask_rate"):
        pt.check_config(replace(TINY, mask_rate=0.0))


def test_held_out_sentences_are_never_trained_on():
    train, held = pt.sentences("tweets")
    assert len(held) == pytest.approx(len(train) / (pt.HELD_OUT_EVERY - 1), rel=0.01)
    assert not set(held) & set(train)
    both_train, both_held = pt.sentences("both")
    assert set(held) <= set(both_held) and len(both_train) > len(train)


def test_token_blocks_keep_sentence_markers_in_order(tok):
    texts = ["a b c", "d e", *pt.sentences("bbc")[1][:200]]
    blocks = pt.token_blocks(tok, texts, block=3)
    stream = tok(texts)["input_ids"]  # the tokenizer's own call, with its template
    flat = [i for row in stream for i in row]
    assert blocks.ravel().tolist() == flat[: blocks.size] and len(flat) - blocks.size < 3
    assert blocks[0, 0] == tok.cls_token_id
    with pytest.raises(ValueError, match="no block"):
        pt.token_blocks(tok, ["a"], block=100)


def test_masking_follows_the_80_10_10_rule(tok):
    ids = torch.as_tensor(pt.token_blocks(tok, pt.sentences("bbc")[1][:400], 64))
    inputs, labels = pt.mask_tokens(ids, 0.3, tok, torch.Generator().manual_seed(0))
    chosen = labels != -100
    special = torch.as_tensor(np.isin(ids.numpy(), tok.all_special_ids))
    assert not (chosen & special).any()
    assert float(chosen.float().mean()) == pytest.approx(
        0.3 * float((~special).float().mean()), abs=0.01)
    assert torch.equal(labels[chosen], ids[chosen])
    masked = (inputs == tok.mask_token_id) & chosen
    kept = (inputs == ids) & chosen
    assert float(masked.sum() / chosen.sum()) == pytest.approx(0.8, abs=0.02)
    assert float(kept.sum() / chosen.sum()) == pytest.approx(0.1 + 0.1 / len(tok), abs=0.02)
    assert torch.equal(inputs[~chosen], ids[~chosen])


def test_unigram_loss_is_the_entropy_of_a_known_distribution(tok):
    train = np.array([[5, 5, 5, 6]])
    held = np.array([[9, 5, 6, 5]])
    config = replace(TINY, objective="clm")
    # add-one smoothing over a vocabulary of 10: p(5) = 4/14, p(6) = 2/14
    expected = -(np.log(4 / 14) * 2 + np.log(2 / 14)) / 3
    assert pt.unigram_loss(train, held, 10, config, tok) == pytest.approx(expected)


@pytest.mark.parametrize("objective", ["clm", "mlm"])
def test_held_out_loss_is_the_whole_models_loss_at_the_predicted_tokens(tok, objective):
    """held_out_loss computes the output layer at the predicted positions only; the plain
    way computes the whole model's scores everywhere and reads the same positions."""
    config = replace(TINY, objective=objective, checkpoints=())
    torch.manual_seed(3)
    model = pt._model(config, tok).eval()
    held = pt._data_blocks(config.vocab_size, str(pt.default_root(None)), config.data,
                           config.block)[1][:70]  # two batches, the second short
    generator = torch.Generator().manual_seed(12345)  # the masks the function draws
    total, count = 0.0, 0
    with torch.inference_mode():
        for start in (0, 64):
            batch = pt._batch(held[start:start + 64], config, tok, generator)
            logits, labels = model(input_ids=batch["input_ids"]).logits, batch["labels"]
            if objective == "clm":
                logits, labels = logits[:, :-1], labels[:, 1:]
            keep = labels != -100
            total += float(torch.nn.functional.cross_entropy(
                logits[keep].double(), labels[keep], reduction="sum"))
            count += int(keep.sum())
    assert count < held.size if objective == "mlm" else count == 70 * (config.block - 1)
    assert pt.held_out_loss(model, held, config, tok) == pytest.approx(total / count,
                                                                       rel=1e-6)


_TRAIN = """
import json, sys
from dataclasses import replace
from analysis_lib.training import pretrain as pt
from tests.test_zoo import TINY, _digest
config = replace(TINY, seed=int(sys.argv[2]))
result = pt.pretrain(config, cache_dir=sys.argv[1], progress=False)
print(json.dumps({"digest": _digest(result.path), "eval": result.record["evaluation"]}))
"""


@pytest.mark.slow
def test_fresh_processes_train_bit_identical_weights(tmp_path):
    from tests.conftest import session_inputs  # (here: _TRAIN imports this module alone)

    # fresh interpreters side by side, each with a cache of its own that holds no model
    started = [subprocess.Popen([sys.executable, "-c", _TRAIN,
                                 str(session_inputs(tmp_path / f"c{k}")), "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for k in range(2)]
    other = pt.pretrain(replace(TINY, seed=1), progress=False)  # (the session's cache)
    runs = []
    for process in started:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-2000:]
        runs.append(json.loads(out.strip().splitlines()[-1]))
    assert runs[0] == runs[1]  # same config, empty caches: the same bits
    assert runs[0]["digest"] != _digest(other.path)  # another seed: other weights


def _digest(folder) -> str:
    """The digest ``_TRAIN`` prints, of the weights saved in ``folder``."""
    from safetensors.torch import load_file

    state = load_file(str(folder / "model.safetensors"))
    digest = hashlib.sha256()
    for k in sorted(state):
        digest.update(k.encode())
        digest.update(state[k].numpy().tobytes())
    return digest.hexdigest()


def test_pretrain_records_curve_checkpoints_and_is_cached(tmp_path):
    first = pt.pretrain(TINY, cache_dir=tmp_path, progress=False)
    record = first.record
    assert [s for s, _ in record["curve"]] == [1, 2, 3, 4]
    assert set(record["evaluation"]) >= {"perplexity", "unigram_perplexity", "ratio",
                                         "learned"}
    assert record["evaluation"]["unigram_perplexity"] > 100
    assert list(record["checkpoint_evaluation"]) == ["2"]
    assert first.checkpoint(2).is_dir()
    with pytest.raises(ValueError, match=r"keeps \[0, 2\]"):
        first.checkpoint(3)
    again = pt.pretrain(TINY, cache_dir=tmp_path, progress=False)
    assert again.from_cache and again.path == first.path
    weights = first.path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    with pytest.warns(RuntimeWarning, match="damaged"):
        retrained = pt.pretrain(TINY, cache_dir=tmp_path, progress=False)
    assert not retrained.from_cache
    assert retrained.record["evaluation"] == record["evaluation"]


def test_every_run_keeps_its_initial_weights_as_step_0(tmp_path):
    """Step 0 holds the weights the run started from: those of a model of the same config
    drawn from the same seed, not the trained ones, and another seed's start differs."""
    import torch
    from safetensors.torch import load_file

    result = pt.pretrain(TINY, cache_dir=tmp_path, progress=False)
    start = load_file(result.checkpoint(0) / "model.safetensors")
    trained = load_file(result.path / "model.safetensors")
    tok = pt.tokenizer(TINY.vocab_size, tmp_path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY.seed)
        drawn = pt._model(TINY, tok).state_dict()
    assert start.keys() == trained.keys()
    for name, value in start.items():
        assert torch.equal(value, drawn[name]), name
    assert any(not torch.equal(start[k], trained[k]) for k in start)
    other = load_file(pt.pretrain(replace(TINY, seed=1), cache_dir=tmp_path,
                                  progress=False).checkpoint(0) / "model.safetensors")
    assert any(not torch.equal(start[k], other[k]) for k in start)
    assert "0" not in result.record["checkpoint_evaluation"]  # kept, not evaluated


def test_mlm_objective_trains_a_bidirectional_model(tmp_path):
    result = pt.pretrain(replace(TINY, objective="mlm", checkpoints=()), cache_dir=tmp_path,
                         progress=False)
    from transformers import AutoConfig

    assert not AutoConfig.from_pretrained(result.path).is_decoder
    clm = pt.pretrain(TINY, cache_dir=tmp_path, progress=False)
    assert AutoConfig.from_pretrained(clm.path).is_decoder


def test_zoo_models_load_by_name_and_read_left_to_right(tmp_path, monkeypatch, tricky_corpus):
    monkeypatch.setitem(zoo.ZOO, "base", TINY)
    # loading reads the cache and never trains: an untrained model names how to train it
    with pytest.raises(zoo.NotTrainedError, match=r"zoo --train.*training\.zoo\.train"):
        models.load("zoo:base", cache_dir=tmp_path)
    assert zoo.table(["base"], cache_dir=tmp_path)["perplexity"].isna().all()
    trained = zoo_training.train(["zoo:base@2"], cache_dir=tmp_path, progress=False)
    assert list(trained) == ["base"] and not trained["base"].from_cache
    loaded = models.load("zoo:base", cache_dir=tmp_path)
    assert loaded.info.source == "zoo" and loaded.info.pretrained and loaded.info.causal
    assert loaded.info.n_layers == 2
    early = models.load("zoo:base@2", cache_dir=tmp_path)
    assert early.info.fingerprint != loaded.info.fingerprint
    # the initial weights load by name too: the same architecture and tokenizer, untrained
    start = models.load("zoo:base@0", cache_dir=tmp_path)
    assert len({start.info.fingerprint, early.info.fingerprint, loaded.info.fingerprint}) == 3
    assert start.info.n_layers == loaded.info.n_layers and start.info.causal
    assert start.tokenizer.get_vocab() == loaded.tokenizer.get_vocab()
    result = extract.extract(loaded, tricky_corpus, attention=True, cache=False,
                             progress=False)
    for maps in result.attention:
        assert np.abs(np.triu(maps, k=1)).max() < 1e-6
    frame = zoo.table(["base"], cache_dir=tmp_path)
    assert frame["model"].tolist() == ["base", "base@2"]
    assert frame["perplexity"].notna().all()
    # the chapters leave out a model that did not learn: the table's flag, by name
    learned = bool(frame.learned.iloc[0])
    assert zoo.not_learned(["zoo:base"], cache_dir=tmp_path) == ([] if learned else
                                                                   ["zoo:base"])
    # the reason a claim gives reads the same record: the table's perplexity, to one decimal
    problems = zoo.learning_problems(["zoo:base"], cache_dir=tmp_path)
    assert list(problems) == ([] if learned else ["zoo:base"])
    assert all(f"{frame.perplexity.iloc[0]:.1f}," in why for why in problems.values())
    monkeypatch.setitem(zoo.ZOO, "mlm", replace(TINY, objective="mlm", checkpoints=()))
    with pytest.raises(zoo.NotTrainedError):
        zoo.not_learned(["zoo:mlm"], cache_dir=tmp_path)
    with pytest.raises(ValueError, match="not a checkpoint"):
        zoo.not_learned(["zoo:base@2"], cache_dir=tmp_path)
    # the data page's table is written from the cache by the build, never typed
    from analysis_lib.book import builder

    monkeypatch.setitem(zoo.SETS, "default", ("base",))
    written = builder.zoo_table("default", cache_dir=tmp_path).splitlines()
    assert [line.split(" | ")[0] for line in written[2:]] == ["| `base`", "| `base@2`"]
    assert f"{frame.perplexity.iloc[0]:.0f}" in written[2]
    assert "trained in this cache yet" in builder.zoo_table("default",
                                                            cache_dir=tmp_path / "empty")
    assert "no zoo models" in builder.zoo_table("")


def test_zoo_names_factors_and_cli(capsys):
    for factor, pairs in zoo.FACTORS.items():
        for a, b in pairs:
            ca, cb = zoo.ZOO[zoo.parse(a)[0]], zoo.ZOO[zoo.parse(b)[0]]
            diff = {f for f in pt.PretrainConfig.__dataclass_fields__
                    if getattr(ca, f) != getattr(cb, f)} - {"checkpoints"}
            if factor == "training length":
                assert not diff and zoo.parse(a)[1] is not None
            else:  # exactly one setting differs
                assert len(diff) == 1, (factor, a, b, diff)
    assert set(zoo.SETS["default"]) <= set(zoo.ZOO)
    # a set's factors hold only pairs of its own models (checkpoints of them included)
    for pairs in zoo.factors(set_name="default").values():
        for a, b in pairs:
            assert {zoo.parse(a[4:])[0], zoo.parse(b[4:])[0]} <= set(zoo.SETS["default"])
    assert "data" not in zoo.factors(set_name="default")
    assert zoo.factors(set_name="zoo") == zoo.factors()
    with pytest.raises(ValueError, match="no zoo model 'nope'"):
        models.check_name("zoo:nope")
    with pytest.raises(ValueError, match="keeps steps"):
        models.check_name("zoo:base@7")
    assert main(["zoo"]) == 0
    out = capsys.readouterr().out
    assert f"base@{zoo.BASE.checkpoints[0]}" in out and "depth-2" in out


def test_the_replica_set_draws_every_default_model_again_from_seeds_no_other_model_uses():
    replica, default = zoo.SETS["replica"], zoo.SETS["default"]
    assert [zoo.role(n) for n in replica] == list(default)
    others = {zoo.ZOO[n].seed for n in zoo.ZOO if n not in replica}
    for name in replica:
        config, original = zoo.ZOO[name], zoo.ZOO[zoo.role(name)]
        # the same model in everything but its seed, and that seed used by no other model
        assert replace(config, seed=original.seed) == original
        assert config.seed not in others
    assert len({zoo.ZOO[n].seed for n in replica if zoo.role(n).startswith("mlm")}) == \
        len(zoo.seed_models("replica"))
    # every question the default set asks, the replica asks of its own models
    assert zoo.seed_models("replica") == [f"zoo:replica-{m[4:]}" for m in zoo.seed_models()]
    assert zoo.causal_base("replica") == "zoo:replica-base"
    assert zoo.causal_base() == "zoo:base"
    # the other objective's draws: causal models that differ from the base only by seed,
    # each of a seed that one masked-LM seed model shares (its seed-matched pair)
    causal = zoo.causal_seed_models()
    assert causal[0] == "zoo:base" and len(causal) == zoo.CAUSAL_SEEDS >= 2
    assert zoo.causal_seed_models("replica") == [f"zoo:replica-{m[4:]}" for m in causal]
    for name in causal:
        config = zoo.ZOO[name[4:]]
        assert replace(config, seed=zoo.BASE.seed) == zoo.BASE
    drawn = zoo.draws(causal + zoo.seed_models())
    assert len(set(drawn[c] for c in causal)) == len(causal)
    assert {drawn[c] for c in causal} <= {drawn[m] for m in zoo.seed_models()}
    assert zoo.draws(["zoo:replica-seed-2", "zoo:base@400"]) == {
        "zoo:replica-seed-2": 2 + zoo.REPLICA_OFFSET, "zoo:base@400": zoo.BASE.seed}
    mapped = {f: [(a.replace("zoo:", "zoo:replica-"), b.replace("zoo:", "zoo:replica-"))
                  for a, b in pairs] for f, pairs in zoo.factors(set_name="default").items()}
    assert zoo.factors(set_name="replica") == mapped
    assert [n.replace("replica-", "") for n in zoo.names("replica")] == zoo.names("default")
    for name in zoo.names("replica"):
        models.check_name(name)  # each loads by its name (checkpoints included)
    assert zoo.role("zoo:replica-mlm-seed-3@400") == "mlm-seed-3@400"
    with pytest.raises(ValueError, match="no zoo set 'nope'"):
        zoo.causal_base("nope")
    assert main(["zoo", "--set", "replica"]) == 0


# the shapes of the zoo's models: small enough for a test, large enough that torch splits the
# products between threads
THREADED = replace(TINY, hidden=64, batch_size=32, block=64, checkpoints=())


def test_cpu_pretraining_does_not_depend_on_the_thread_count(tmp_path):
    before = torch.get_num_threads()
    digests = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            done = pt.pretrain(THREADED, cache_dir=tmp_path / str(threads), progress=False,
                               device="cpu")
            assert torch.get_num_threads() == threads  # set back afterwards
            digests.append(done.record["checksums"])
    finally:
        torch.set_num_threads(before)
    assert digests[0] == digests[1]


@pytest.mark.slow
def test_models_trained_side_by_side_equal_those_trained_one_by_one(tmp_path):
    # five models on two workers: a worker trains several in a row (after a model of the
    # other objective, other data, another seed), each as if it were its first
    configs = {"a": TINY, "b": replace(TINY, seed=1, checkpoints=()),
               "c": replace(TINY, objective="mlm", checkpoints=()),
               "d": replace(TINY, data="bbc", checkpoints=()), "e": replace(TINY, seed=2)}
    apart = {n: pt.pretrain(c, cache_dir=tmp_path / "apart", progress=False, device="cpu")
             for n, c in reversed(configs.items())}  # here, in the other order
    together = pt.pretrain_many(configs, cache_dir=tmp_path / "together", progress=False,
                                device="cpu", workers=2)
    assert set(together) == set(configs)
    for name in configs:
        assert together[name].from_cache  # trained by a worker, read back here
        assert together[name].record["checksums"] == apart[name].record["checksums"]
        assert together[name].record["evaluation"] == apart[name].record["evaluation"]
    assert together["a"].record["checksums"] != together["b"].record["checksums"]


#: the pretraining worker, with a training function that also writes to standard output
#: (from Python and below it), as a library might
NOISY_WORKER = """
import os, runpy, sys
from analysis_lib.training import pretrain

trained = pretrain.pretrain

def noisy(*args, **kwargs):
    print("stray from Python")
    os.write(1, b"stray from C\\n")
    return trained(*args, **kwargs)

pretrain.pretrain = noisy
sys.argv[0] = "worker"
runpy.run_module("analysis_lib.training._pretrain_worker", run_name="__main__")
"""


def test_a_worker_answers_each_model_with_its_name_alone(tmp_path):
    """The worker's protocol: one model's settings per input line, its name alone on the
    output once trained; whatever else the worker prints goes to its error stream, and a
    model it cannot train ends it with that model's error, after the names of those before."""
    pt.tokenizer(TINY.vocab_size, tmp_path)  # as pretrain_many does before the workers
    specs = [json.dumps({"name": n, "config": pt.asdict(c)})
             for n, c in (("a", TINY), ("b", replace(TINY, seed=3, checkpoints=())))]
    bad = json.dumps({"name": "c", "config": {**pt.asdict(TINY), "layers": 0}})
    command = [sys.executable, "-c", NOISY_WORKER, str(tmp_path)]
    done = subprocess.run(command, input="\n".join([*specs, bad]) + "\n",
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert done.stdout == "a\nb\n"
    assert done.stderr.count("stray from Python") == 2
    assert done.stderr.count("stray from C") == 2
    assert "layers=0 (a positive integer)" in done.stderr
    assert all(pt.cached(c, str(tmp_path), torch.device("cpu")) is not None
               for c in (TINY, replace(TINY, seed=3, checkpoints=())))


def test_a_failing_worker_is_reported_with_its_error(tmp_path, monkeypatch):
    # the worker reads its settings from its input; a wrong one fails in the worker, and the
    # first worker to fail is named with its own error
    monkeypatch.setattr(pt, "asdict", lambda config: {"layers": 0})
    with pytest.raises(RuntimeError, match=r"(?s)pretraining '[ab]' failed in its worker "
                                           r"process \(exit 1\).*layers=0 \(a positive"):
        pt.pretrain_many({"a": TINY, "b": replace(TINY, seed=1)}, cache_dir=tmp_path,
                         progress=False, device="cpu", workers=2)


def test_seed_models_name_their_checkpoints():
    names = zoo.seed_models("default")
    assert names[0] == "zoo:mlm" and all(n.startswith("zoo:mlm-seed-") for n in names[1:])
    assert len(names) == zoo.SEEDS >= 5  # Ren et al.'s claims need five seeds or more
    assert {zoo.ZOO[n[4:]].objective for n in names} == {"mlm"}  # masked LMs, like BERT
    step = zoo.BASE.checkpoints[0]
    assert zoo.seed_models("default", step) == [f"{n}@{step}" for n in names]
    for name in zoo.seed_models("zoo", step):  # every seed model keeps the base's steps
        assert zoo.parse(name[len("zoo:"):]) == (name[4:].split("@")[0], step)
    assert zoo.seed_models("default", 0) == [f"{n}@0" for n in names]  # initial weights
    assert zoo.parse("depth-2@0") == ("depth-2", 0)  # every model keeps its start
    with pytest.raises(ValueError, match="keeps steps"):
        zoo.seed_models("default", 7)
    with pytest.raises(ValueError, match="keeps steps"):
        zoo.parse("depth-2@400")  # the base's checkpoints are not every model's
    with pytest.raises(ValueError, match="no zoo set"):
        zoo.seed_models("nope")


def test_masked_only_training_loss_is_the_models_own():
    """Training a masked LM computes the output layer at the masked positions only: the
    loss and every gradient equal those of the model's own loss over all positions."""
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=32,
                                       hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0))
    ids = torch.randint(5, 50, (3, 12))
    labels = torch.where(torch.rand(3, 12) < 0.4, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]  # at least one label
    full = model(input_ids=ids, labels=labels).loss
    full.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    sparse = pt.MaskedOnly(model)(input_ids=ids, labels=labels).loss
    sparse.backward()
    assert sparse.item() == pytest.approx(full.item(), abs=1e-6)
    for name, grad in want.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad, grad,
                                   atol=1e-6, rtol=1e-5)


def test_learning_problems_name_the_ratio_against_the_target(monkeypatch):
    """A zoo model counts as having learnt at a held-out perplexity of at most
    LEARNED_RATIO of the unigram baseline's; one that misses it is named with its figures,
    the reason a claim read from it gives for having no verdict."""
    from types import SimpleNamespace

    evaluations = {
        "mlm": {"perplexity": 21.0, "unigram_perplexity": 40.0, "ratio": 0.525,
                "learned": True},
        "mlm-seed-1": {"perplexity": 34.0, "unigram_perplexity": 40.0, "ratio": 0.85,
                       "learned": False}}
    monkeypatch.setattr(zoo, "trained", lambda name, cache_dir=None: SimpleNamespace(
        record={"evaluation": evaluations[name]}))
    found = zoo.learning_problems(["zoo:mlm", "zoo:mlm-seed-1"])
    assert list(found) == ["zoo:mlm-seed-1"]
    assert "34.0" in found["zoo:mlm-seed-1"] and "0.85" in found["zoo:mlm-seed-1"]
    assert f"above the {zoo.LEARNED_RATIO}" in found["zoo:mlm-seed-1"]
    assert zoo.not_learned(["zoo:mlm", "zoo:mlm-seed-1"]) == ["zoo:mlm-seed-1"]
    with pytest.raises(ValueError, match="not a checkpoint"):
        zoo.learning_problems(["zoo:mlm@400"])
