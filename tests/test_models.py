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
    assert info.causal == (family == "gpt2")
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


@pytest.mark.parametrize("bad", [dict(layers=0), dict(heads=5)])
def test_bad_sizes(bad):
    with pytest.raises(ValueError):
        models.load("random:bert", **{**TINY, **bad})
