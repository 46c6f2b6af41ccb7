"""Truncation: the own head on cached first-token vectors, head re-fitting, the skip grid and
models cut before fine-tuning."""

import numpy as np
import pytest
import torch

from analysis_lib import corpora, extract, finetune, models, tasks
from analysis_lib.studies import truncation as study
from analysis_lib.training import surgery
from analysis_lib.training.heads import FirstTokenHead, fit_head, head_logits
from tests.conftest import TINY


@pytest.fixture(scope="module")
def task():
    texts = [f"{'good' if i % 2 else 'bad'} thing number {i % 7}" for i in range(120)]
    corpus = corpora.from_sentences(texts, labels=[i % 2 for i in range(120)])
    return tasks.task_from_corpus(corpus, n_train=80, n_val=20, n_test=20)


@pytest.mark.parametrize("family", ["bert", "albert", "roberta", "electra", "distilbert"])
def test_own_head_on_first_token_vectors_reproduces_the_model(family, task):
    base = models.load(f"random:{family}", **TINY)
    model = finetune._task_model(base, 2, False, 0).eval()
    corpus = study.split_corpus(task.test)
    # the encoder inside the task model, read through the library's extraction
    encoder = models.LoadedModel(model.base_model, base.tokenizer, base.info)
    first = extract.extract(encoder, corpus, cache=False, progress=False).sentence_first
    logits = finetune.predict(model, base.tokenizer, task.test)
    head = FirstTokenHead(model)
    np.testing.assert_allclose(head_logits(head, first[-1]), logits, atol=1e-4)
    # and on a lower layer it is what the truncated model predicts
    cut = finetune.predict(model, base.tokenizer, task.test, layer=1)
    np.testing.assert_allclose(head_logits(head, first[1]), cut, atol=1e-4)


def test_heads_that_do_not_read_the_first_token_are_refused():
    base = models.load("random:gpt2", **TINY)
    model = finetune._task_model(base, 2, False, 0)
    with pytest.raises(ValueError, match="does not read the first token.*probe"):
        FirstTokenHead(model)


def test_fit_head_learns_and_is_deterministic():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 16)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    base = models.load("random:bert", **{**TINY, "hidden": 16, "heads": 2})
    weights = []
    for _ in range(2):
        head = FirstTokenHead(finetune._task_model(base, 2, False, 0))
        info = fit_head(head, X[:150], y[:150], X[150:], y[150:], epochs=40, seed=3)
        weights.append(head.classifier.weight.detach().clone())
    assert info["validation_accuracy"] >= 0.9
    assert torch.equal(weights[0], weights[1])


def test_skip_grid_is_the_upper_triangle(task):
    base = models.load("random:bert", **TINY)
    model = finetune._task_model(base, 2, False, 0).eval()
    result = finetune.FineTuned(None, model, base.tokenizer,
                                {"config": {"max_length": 32}, "metrics": {}})
    grid = study.skip_scores(result, task)
    n = TINY["layers"]
    assert len(grid) == n * (n + 1) // 2 - 1  # all spans but the one removing every layer
    assert (grid["first"] <= grid["last"]).all()
    assert (grid.single == (grid["first"] == grid["last"])).all()
    assert grid.accuracy.between(0, 1).all()


def test_truncated_copy_keeps_the_bottom_layers_exactly(tmp_path):
    full = models.load("random:bert", **{**TINY, "layers": 3})
    folder = surgery.truncated_copy("random:bert", 2, cache_dir=tmp_path, **{**TINY, "layers": 3})
    assert surgery.truncated_copy("random:bert", 2, cache_dir=tmp_path,
                                  **{**TINY, "layers": 3}) == folder  # made once
    cut = models.load(folder)
    assert cut.info.n_attention_layers == 2
    ids = full.tokenizer(["some words here"], return_tensors="pt")
    with torch.inference_mode():
        a = full.model(**ids, output_hidden_states=True).hidden_states
        b = cut.model(**ids, output_hidden_states=True).hidden_states
    assert len(b) == 3
    for x, y in zip(a[:3], b):
        torch.testing.assert_close(x, y)
