import pytest
import torch

from analysis_lib import models
from analysis_lib.errors import OfflineError
from tests.conftest import TINY


def test_minilm_loads_offline_with_eager_attention():
    model, tokenizer, info = models.load("minilm")
    assert (info.family, info.n_layers, info.hidden_size, info.n_heads) == ("bert", 7, 384, 12)
    assert not model.training and not info.causal
    enc = tokenizer(["a short test"], return_tensors="pt")
    with torch.inference_mode():
        out = model(**enc, output_attentions=True, output_hidden_states=True)
    assert len(out.attentions) == 6 and len(out.hidden_states) == 7


@pytest.mark.parametrize("family", models.FAMILIES)
def test_random_family_metadata_and_tokenizer_kind(tiny_models, family):
    model, tokenizer, info = tiny_models[family]
    assert info.family == family and info.n_layers == TINY["layers"] + 1
    assert info.hidden_size == TINY["hidden"] and info.n_heads == TINY["heads"]
    assert info.causal == (family in ("gpt2", "llama"))
    pieces = tokenizer.tokenize("unbelievably")
    kind = models.TOKENIZER_KIND[family]
    if kind == "wordpiece":
        assert any(p.startswith("##") for p in pieces)
    elif kind == "bytelevel-bpe":
        assert pieces[0].startswith("Ġ")
    else:
        assert pieces[0].startswith("▁")


def test_random_models_are_seeded():
    a = models.load("random:bert", seed=1, **TINY).model.state_dict()
    b = models.load("random:bert", seed=1, **TINY).model.state_dict()
    c = models.load("random:bert", seed=2, **TINY).model.state_dict()
    key = "encoder.layer.0.attention.self.query.weight"
    assert torch.equal(a[key], b[key]) and not torch.equal(a[key], c[key])


def test_seed_does_not_touch_global_rng():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    models.load("random:gpt2", seed=5, **TINY)
    assert torch.equal(torch.rand(3), expected)


def test_unknown_family_lists_valid_ones():
    with pytest.raises(ValueError, match="unknown model family 'bart'.*bert, gpt2"):
        models.load("random:bart")


def test_unknown_name_is_explained():
    with pytest.raises(ValueError, match="unknown model 'no such model!'.*minilm"):
        models.load("no such model!")


def test_hub_id_offline_names_the_model_and_the_fixes():
    with pytest.raises(OfflineError) as caught:
        models.load("bert-base-cased", local_files_only=True)
    text = str(caught.value)
    assert "'bert-base-cased'" in text and "internet" in text and "local folder" in text


def test_local_folder_round_trip(tmp_path, tiny_models):
    model, tokenizer, info = tiny_models["roberta"]
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    again = models.load(str(tmp_path))
    assert again.info.source == "local" and again.info.family == "roberta"
    ids = tokenizer(["hello there"], return_tensors="pt")
    with torch.inference_mode():
        assert torch.allclose(model(**ids).last_hidden_state,
                              again.model(**ids).last_hidden_state)


def test_weights_a_checkpoint_lacks_are_the_same_on_every_load(tmp_path):
    """A masked-LM checkpoint (the zoo's models, many hub models) has no pooler; loading it
    as an encoder initialises one, from a fixed seed, so that two loads are one model and a
    task model fine-tuned from it is the same run every time."""
    from transformers import BertConfig, BertForMaskedLM

    base = models.load("random:bert", **TINY)
    config = BertConfig(**{**base.model.config.to_dict(), "architectures": None})
    BertForMaskedLM(config).save_pretrained(tmp_path)
    base.tokenizer.save_pretrained(tmp_path)
    torch.manual_seed(1)
    first = models.load(str(tmp_path)).model.state_dict()
    torch.manual_seed(2)
    state = torch.random.get_rng_state()
    second = models.load(str(tmp_path)).model.state_dict()
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's stream untouched
    assert any(k.startswith("pooler.") for k in first)
    for key in first:
        assert torch.equal(first[key], second[key]), key


@pytest.mark.parametrize("bad, message", [(dict(layers=0), r"layers must lie in \[1, 128\]"),
                                          (dict(heads=5), "divisible by heads=5")])
def test_bad_sizes(bad, message):
    with pytest.raises(ValueError, match=message):
        models.load("random:bert", **{**TINY, **bad})


def fingerprints(cache_dir) -> dict[str, object]:
    """Every family's random model (its tokenizer's ids and vocabulary, its word vectors)
    and the tokenizers at the zoo's sizes, as digests."""
    import hashlib
    import json

    import numpy as np

    from analysis_lib import extract
    from analysis_lib.data import corpora

    text = corpora.from_sentences(["Self-driving cars are naïve, aren't they?",
                                   "Hello world 42"])
    out: dict[str, object] = {}
    for family in models.FAMILIES:
        loaded = models.load(f"random:{family}", layers=2, hidden=32, heads=2,
                             vocab_size=2000, seed=3, cache_dir=cache_dir)
        ids = loaded.tokenizer(text.texts)["input_ids"]
        vocab = sorted(loaded.tokenizer.get_vocab().items())
        result = extract.extract(loaded, text, cache=False, progress=False)
        out[family] = [hashlib.sha256(json.dumps([ids, vocab]).encode()).hexdigest(),
                       hashlib.sha256(np.ascontiguousarray(result.words).tobytes()).hexdigest()]
    # at the zoo's and the random models' vocabulary sizes the trainers meet ties between
    # equally frequent merges
    for family, size in (("bert", 4000), ("bert", 8000), ("albert", 8000)):
        tokenizer = models.train_tokenizer(family, size, cache_dir)
        out[f"{family}-{size}"] = hashlib.sha256(
            tokenizer.backend_tokenizer.to_str().encode()).hexdigest()
    return out


@pytest.mark.slow
def test_random_models_are_identical_in_fresh_processes_with_empty_caches(tmp_path):
    """A fresh interpreter with an empty cache trains every family's tokenizer and draws its
    weights; this test's process does the same in the session's cache, where the session's
    own processes trained the tokenizers from an empty cache: the tokenizers, ids and
    weights are the same."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    fresh = subprocess.Popen(  # (it runs while this process computes its own)
        [sys.executable, "-c", "import json, sys; from tests.test_models import fingerprints;"
         " print(json.dumps(fingerprints(sys.argv[1])))", str(tmp_path / "fresh")],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ours = json.loads(json.dumps(fingerprints(None)))  # (lists, as the other's JSON)
        out, err = fresh.communicate(timeout=600)
    finally:
        if fresh.poll() is None:
            fresh.kill()
    assert fresh.returncode == 0, err[-2000:]
    theirs = json.loads(out.strip().splitlines()[-1])
    assert set(theirs) == {*models.FAMILIES, "bert-4000", "bert-8000", "albert-8000"}
    for family in theirs:
        assert theirs[family] == ours[family], family


def test_families_with_one_kind_and_the_same_special_tokens_share_one_tokenizer(tmp_path):
    """BERT, ELECTRA and DistilBERT learn one WordPiece vocabulary, GPT-2 and Llama one
    byte-level BPE: trained once, kept in one file; MPNet's other special tokens keep its own."""
    vocab = {f: models.train_tokenizer(f, 300, tmp_path).get_vocab()
             for f in ("bert", "electra", "distilbert", "mpnet", "gpt2", "llama")}
    assert vocab["bert"] == vocab["electra"] == vocab["distilbert"] != vocab["mpnet"]
    assert vocab["gpt2"] == vocab["llama"]
    files = sorted(p.name.split("-")[0] for p in (tmp_path / "tokenizers").glob("*.json"))
    assert files == ["bert", "gpt2", "mpnet"]


def test_wordpiece_continuations_are_ordinary_tokens(tiny_models):
    tokenizer = tiny_models["bert"][1]
    special = set(tokenizer.all_special_tokens)
    assert set(tokenizer.backend_tokenizer.get_added_tokens_decoder().values()) == {
        t for t in tokenizer.backend_tokenizer.get_added_tokens_decoder().values()
        if t.content in special}
    text = "Unbelievably, the players were interviewed"
    pieces = tokenizer.tokenize(text)
    assert any(p.startswith("##") for p in pieces) and tokenizer.unk_token not in pieces
    assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == text


def test_unigram_coverage_tail_is_found_whatever_the_hash_order():
    from analysis_lib.models.random_init import _coverage_tail, canonical_ids

    # the trainer gives the k-th character it adds the lowest learnt score + k * 0.0001;
    # "long" is learnt at that lowest score, "zz" happens to sit on the grid
    learnt = {"▁the": -3.0, "ab": -9.5, "x": -4.0, "long": -12.0004, "zz": -12.0002}
    grid = [-12.0004 + k * 1e-4 for k in range(4)]
    chars = ["é", "ß", "~", "{"]
    for order in (chars, chars[::-1], ["~", "é", "{", "ß"]):
        scores = {**learnt, **dict(zip(order, grid))}
        assert sorted(_coverage_tail(scores, ["<pad>"])) == sorted(chars)
    assert _coverage_tail({"<pad>": 0.0}, ["<pad>"]) == []

    from tokenizers import Tokenizer
    from tokenizers import models as tm

    def canonical(order):
        vocab = [("<pad>", 0.0), *learnt.items(), *zip(order, grid)]
        return canonical_ids(Tokenizer(tm.Unigram(vocab, unk_id=None)), ["<pad>"]).to_str()

    assert canonical(chars) == canonical(chars[::-1]) == canonical(["~", "é", "{", "ß"])


def test_check_name_classifies_without_loading(tmp_path):
    assert models.check_name("minilm") == "package"
    assert models.check_name("random:xlnet") == "random"
    (tmp_path / "config.json").write_text("{}")
    assert models.check_name(str(tmp_path)) == "local"
    assert models.check_name("google/multiberts-seed_0") == "hub"
    with pytest.raises(ValueError, match="model folder '/no/such/folder' does not exist"):
        models.check_name("/no/such/folder")
    with pytest.raises(ValueError, match="model folder './missing' does not exist"):
        models.check_name("./missing")
    with pytest.raises(ValueError, match="model folder '~no-such-user-0/m' does not exist"):
        models.check_name("~no-such-user-0/m")  # ~user of a user that does not exist
    with pytest.raises(TypeError, match="non-empty string"):
        models.check_name("")


def test_study_options_apply_to_random_models_only():
    from analysis_lib.models import random_options

    sizes = {"layers": 2, "hidden": 32}
    assert random_options("random:bert", sizes) == sizes
    assert random_options("random:bert", sizes) is not sizes  # a copy, safe to change
    assert random_options("minilm", sizes) == {}
    assert random_options("zoo:base", sizes) == {}
    assert random_options("random:bert", None) == {}


def test_hub_models_fail_at_once_without_a_network(monkeypatch):
    import time

    from analysis_lib.models import loading

    monkeypatch.setitem(loading._HUB, "answer", False)  # as on a machine without a network
    for flag in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "ANALYSIS_LIB_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    start = time.perf_counter()
    with pytest.raises(OfflineError, match="cannot be reached"):
        models.load("bert-base-cased")
    assert time.perf_counter() - start < 5  # no download retries
    assert loading.unavailable(["minilm", "random:bert", "bert-base-cased"]) == \
        ["bert-base-cased"]
    monkeypatch.setitem(loading._HUB, "answer", True)
    assert loading.unavailable(["bert-base-cased"]) == []


def test_a_profile_of_unreachable_hub_models_is_refused_before_it_runs(monkeypatch, tmp_path):
    from analysis_lib import book
    from analysis_lib.models import loading

    monkeypatch.setitem(loading._HUB, "answer", False)
    ran = []
    monkeypatch.setattr(book.builder, "execute", lambda *a, **k: ran.append(a))
    with pytest.raises(book.BuildError, match="needs models from the Hugging Face hub"):
        book.build("paper", echo=lambda m: None)
    assert not ran


def _folder(path, model, tokenizer, edit=None):
    """Save ``model`` and ``tokenizer`` into ``path``, then change its config.json."""
    import json

    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    if edit:
        config = json.loads((path / "config.json").read_text())
        edit(config)
        (path / "config.json").write_text(json.dumps(config))
    return str(path)


def _renamed(path, prefix="x."):
    from safetensors.torch import load_file, save_file

    weights = load_file(path / "model.safetensors")
    save_file({prefix + k: v for k, v in weights.items()}, path / "model.safetensors",
              metadata={"format": "pt"})
    return str(path)


def test_a_folder_whose_weights_do_not_fit_its_config_is_refused(tmp_path, tiny_models):
    """transformers fills what a checkpoint lacks at random and says so in a report the
    library reads: layers beyond those saved, names that match nothing and weights of
    another width are refused, naming them and the fix; a missing pooler (a masked-LM
    checkpoint) is not."""
    model, tokenizer, _ = tiny_models["bert"]
    deep = _folder(tmp_path / "deep", model, tokenizer,
                   lambda c: c.update(num_hidden_layers=4))
    with pytest.raises(ValueError, match=r"lacks 32 of .* \(layers 3, 4\).*"
                                         "save the model and its config together"):
        models.load(deep)
    _folder(tmp_path / "renamed", model, tokenizer)
    renamed = _renamed(tmp_path / "renamed")
    with pytest.raises(ValueError, match="lacks all .* the checkpoint holds names such as x."):
        models.load(renamed)
    wide = _folder(tmp_path / "wide", model, tokenizer,
                   lambda c: c.update(hidden_size=64, intermediate_size=256))
    with pytest.raises(ValueError, match=r"another shape .* checkpoint \(32,\), config \(64,\)"):
        models.load(wide)


def test_a_tokenizer_that_is_not_the_models_is_refused(tmp_path, tiny_models):
    model, _, _ = tiny_models["bert"]
    bigger = models.load("random:bert", **{**TINY, "vocab_size": 8000}).tokenizer
    with pytest.raises(ValueError, match="8000 entries but the model's embedding only 2000"):
        models.load(_folder(tmp_path / "big", model, bigger))
    byte_level = models.load("random:gpt2", **TINY).tokenizer
    with pytest.raises(ValueError, match="bert model, pretrained with a WordPiece tokenizer, "
                                         "but its folder holds a BPE tokenizer"):
        models.load(_folder(tmp_path / "bpe", model, byte_level))


def test_an_encoder_decoder_is_refused_before_its_weights_load(tmp_path, tiny_models):
    from transformers import T5Config, T5Model

    t5 = T5Model(T5Config(vocab_size=2000, d_model=16, d_kv=8, d_ff=32, num_layers=2,
                          num_heads=2))
    folder = _folder(tmp_path / "t5", t5, tiny_models["bert"][1])
    with pytest.raises(ValueError, match="encoder-decoder .*T5EncoderModel"):
        models.load(folder)


def test_a_decoder_of_a_new_family_is_read_as_causal(tmp_path):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from analysis_lib.models import causal_family

    qwen = Qwen3ForCausalLM(Qwen3Config(vocab_size=2000, hidden_size=16, intermediate_size=32,
                                        num_hidden_layers=2, num_attention_heads=2,
                                        num_key_value_heads=1, head_dim=8))
    tokenizer = models.load("random:gpt2", **TINY).tokenizer
    assert models.load(_folder(tmp_path / "qwen3", qwen, tokenizer)).info.causal
    assert [causal_family(f) for f in ("qwen3", "gemma3_text", "gpt2", "llama")] == [True] * 4
    assert [causal_family(f) for f in ("bert", "roberta", "electra", "xlnet", "mpnet")] == \
        [False] * 5


def test_the_families_the_library_names_read_as_transformers_builds_them():
    """The named sets answer without transformers what its tables answer: a causal family
    is built as a causal language model and not as a masked one, an encoder family as a
    masked one (XLNet, the exception, has a causal head and reads both directions)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as CAUSAL,
    )
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_MASKED_LM_MAPPING_NAMES as MASKED,
    )

    from analysis_lib import families

    assert families.ENCODER_FAMILIES <= set(MASKED)
    known = [f for f in families.CAUSAL_FAMILIES if f in CAUSAL]
    assert len(known) >= 10 and not set(known) & set(MASKED)
    assert families.BIDIRECTIONAL_FAMILIES <= set(CAUSAL) - set(MASKED)
    assert not (families.CAUSAL_FAMILIES & families.ENCODER_FAMILIES)


def test_a_damaged_weights_file_is_named_with_the_fix(tmp_path, tiny_models):
    model, tokenizer, _ = tiny_models["bert"]
    folder = tmp_path / "cut"
    _folder(folder, model, tokenizer)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:500])
    with pytest.raises(ValueError, match="weights file .* cannot be read .* save the model"):
        models.load(str(folder))


class _Buffers(torch.nn.Module):
    """A module with the kinds of state a digest meets: a matrix, a bfloat16 vector and a
    zero-dimensional integer buffer (as BatchNorm's step count)."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.arange(12, dtype=torch.float32).reshape(3, 4))
        self.register_buffer("scale", torch.linspace(-1, 1, 5).to(torch.bfloat16))
        self.register_buffer("steps", torch.tensor(7))


def test_the_weights_digest_reads_every_bit_name_shape_and_type():
    m = _Buffers()
    first = models.weights_digest(m)
    assert first == models.weights_digest(_Buffers()), "the same weights, the same digest"
    assert len(first) == 32 and int(first, 16) >= 0
    with torch.no_grad():  # one bit of one weight
        m.weight.view(torch.int32)[1, 2] ^= 1
    assert models.weights_digest(m) != first
    m = _Buffers()
    m.steps += 1  # the zero-dimensional buffer is read
    assert models.weights_digest(m) != first
    m = _Buffers()  # the same bytes under another shape
    m.weight = torch.nn.Parameter(m.weight.detach().reshape(4, 3))
    assert models.weights_digest(m) != first
    m = _Buffers()  # the same bytes as another type
    m.weight = torch.nn.Parameter(m.weight.detach().view(torch.int32), requires_grad=False)
    assert models.weights_digest(m) != first


def test_the_weights_digest_of_a_strided_tensor_is_that_of_its_copy():
    a, b = _Buffers(), _Buffers()
    with torch.no_grad():
        a.weight = torch.nn.Parameter(torch.randn(4, 3).t())  # not contiguous
        b.weight = torch.nn.Parameter(a.weight.detach().contiguous().clone())
    assert not a.weight.is_contiguous()
    assert models.weights_digest(a) == models.weights_digest(b)
