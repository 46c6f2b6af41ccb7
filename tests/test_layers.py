"""The one layer-index convention (0 = embeddings, 1..L = transformer layers) at its edges,
for extraction, freezing, truncation, skipping and probes; and the layer table."""

import numpy as np
import pytest
import torch

from analysis_lib import extract, models
from analysis_lib.data import corpora, tasks
from analysis_lib.layers import LayerTable, check_layer, layer_label
from analysis_lib.training import finetune, probes, surgery
from tests.conftest import TINY

L = TINY["layers"]


def test_check_layer_edges():
    assert check_layer(0, L) == 0 and check_layer(L, L) == L
    with pytest.raises(ValueError, match=rf"layer=-1 is out of range: this model has layers "
                                         rf"0\.\.{L}"):
        check_layer(-1, L)
    with pytest.raises(ValueError, match=rf"layer={L + 1} is out of range"):
        check_layer(L + 1, L)
    with pytest.raises(ValueError, match="the embedding layer 0 has none"):
        check_layer(0, L, allow_embeddings=False)
    with pytest.raises(TypeError, match="integer layer index"):
        check_layer(1.0, L)
    with pytest.raises(TypeError, match="integer layer index"):
        check_layer(True, L)


def test_layer_table_rows_and_depth():
    table = LayerTable.concat([LayerTable.for_model("m", "bert", True, 4),
                               LayerTable.for_model("random:gpt2", "gpt2", False, 2,
                                                    kind="attention")])
    frame = table.frame
    assert frame["layer"].tolist() == [0, 1, 2, 3, 4, 1, 2]
    assert frame["depth"].tolist() == [0, .25, .5, .75, 1, .5, 1]
    assert table.models == ["m", "random:gpt2"]
    assert table.labels[-1] == layer_label("random:gpt2", 2) == "random:gpt2 L2"
    assert table.same_model().sum() == 5 * 5 + 2 * 2
    np.testing.assert_array_equal(table.rows_of("random:gpt2"), [5, 6])
    with pytest.raises(ValueError, match="not in this collection"):
        table.rows_of("other")
    with pytest.raises(ValueError, match="the embedding layer 0 has none"):
        LayerTable.for_model("m", "bert", True, 2, kind="attention", layers=[0, 1])
    with pytest.raises(ValueError, match="3 values for 7 layers"):
        table.attach([1, 2, 3])


def test_extraction_layers_and_attention_edges(tiny_models):
    corpus = corpora.from_sentences(["one two three", "four five"])
    out = extract.extract(tiny_models["bert"], corpus, attention=True, cache=False,
                          progress=False)
    np.testing.assert_array_equal(out.layer(0), out.words[0])
    np.testing.assert_array_equal(out.layer(L, "mean"), out.sentence_mean[L])
    with pytest.raises(ValueError, match=rf"layer={L + 1} is out of range"):
        out.layer(L + 1)
    assert out.attention_layer(1)[0].shape[0] == TINY["heads"]
    np.testing.assert_array_equal(out.attention_layer(L)[1], out.attention[1][L - 1])
    with pytest.raises(ValueError, match="the embedding layer 0 has none"):
        out.attention_layer(0)
    with pytest.raises(ValueError, match=rf"layer={L + 1} is out of range"):
        out.attention_layer(L + 1)


def task_model(family="bert"):
    return finetune.task_model(models.load(f"random:{family}", **TINY), 2, False, 0)


def test_freezing_edges():
    model = task_model()
    blocks = surgery.layer_list(model)
    first = {n for n, p in model.named_parameters()
             if any(p is q for q in blocks[0].parameters())}
    last = {n for n, p in model.named_parameters()
            if any(p is q for q in blocks[L - 1].parameters())}
    assert surgery.frozen_parameters(model, {1}) == first
    assert surgery.frozen_parameters(model, {L}) == last
    embeddings = surgery.frozen_parameters(model, {0})
    assert embeddings and all("embeddings" in n for n in embeddings)
    with pytest.raises(ValueError, match=rf"frozen layer={L + 1} is out of range"):
        surgery.frozen_parameters(model, {L + 1})
    config = finetune.FinetuneConfig(freeze_bottom=1, freeze_top=1)
    assert finetune.frozen_layers(config, L) == {1, L}
    assert finetune.frozen_layers(finetune.FinetuneConfig(freeze_top=L), L) == set(range(1, L + 1))
    with pytest.raises(ValueError, match="freeze_layers item=3 is out of range"):
        finetune.frozen_layers(finetune.FinetuneConfig(freeze_layers=(3,)), L)


def test_albert_freezing_says_why_single_layers_are_impossible():
    model = task_model("albert")
    with pytest.raises(ValueError, match="ALBERT shares one set of weights"):
        surgery.frozen_parameters(model, {1})
    shared = surgery.frozen_parameters(model, set(range(1, L + 1)))
    assert shared and all("albert_layer_groups" in n for n in shared)
    assert surgery.frozen_parameters(model, {0})


def test_truncation_and_skip_edges():
    assert surgery.kept_layers(4, layer=4) == [1, 2, 3, 4]
    assert surgery.kept_layers(4, layer=1) == [1]
    assert surgery.kept_layers(4, skip=(2, 3)) == [1, 4]
    assert surgery.kept_layers(4, skip=(4, 4)) == [1, 2, 3]
    assert surgery.kept_layers(4, layer=3, skip=(1, 1)) == [2, 3]
    with pytest.raises(ValueError, match="the embedding layer 0 has none"):
        surgery.kept_layers(4, layer=0)
    with pytest.raises(ValueError, match="layer=5 is out of range"):
        surgery.kept_layers(4, layer=5)
    with pytest.raises(ValueError, match="first skipped layer"):
        surgery.kept_layers(4, skip=(0, 1))
    with pytest.raises(ValueError, match="first <= last"):
        surgery.kept_layers(4, skip=(3, 2))
    with pytest.raises(ValueError, match="leave no transformer layer"):
        surgery.kept_layers(4, skip=(1, 4))


def test_predict_with_a_removed_layer_equals_a_model_built_without_it():
    task = tasks.task_from_corpus(corpora.from_sentences(
        [f"word{i % 7} and word{i % 3}" for i in range(60)], labels=[i % 2 for i in range(60)]),
        n_train=40, n_val=10, n_test=10)
    model = task_model()
    tok = models.load("random:bert", **TINY).tokenizer
    cut = finetune.predict(model, tok, task.test, layer=1)
    # the same by hand: drop the last layer from a copy
    import copy

    manual = copy.deepcopy(model)
    manual.bert.encoder.layer = torch.nn.ModuleList([manual.bert.encoder.layer[0]])
    np.testing.assert_allclose(cut, finetune.predict(manual, tok, task.test), atol=1e-6)


def test_probe_edges():
    task = tasks.task_from_corpus(corpora.from_sentences(
        [f"{'good' if i % 2 else 'bad'} thing {i % 5}" for i in range(80)],
        labels=[i % 2 for i in range(80)]), n_train=60, n_val=10, n_test=10)
    loaded = models.load("random:bert", **TINY)
    for layer in (0, L):
        assert probes.linear_probe(loaded, task, layer=layer, cache=False)["layer"] == layer
    with pytest.raises(ValueError, match=rf"layer={L + 1} is out of range"):
        probes.linear_probe(loaded, task, layer=L + 1, cache=False)
