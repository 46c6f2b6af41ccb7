import unicodedata
import warnings

import numpy as np
import pytest

from analysis_lib import extract, models
from analysis_lib.data import corpora
from analysis_lib.extract import _encode
from tests.conftest import TINY, TRICKY

FAMILIES = models.FAMILIES


def _decoded_word(tokenizer, ids):
    text = tokenizer.decode(ids, clean_up_tokenization_spaces=False)
    return "".join(text.split())


@pytest.mark.parametrize("family", FAMILIES)
def test_subwords_align_to_words(tiny_models, tricky_corpus, family):
    model, tokenizer, info = tiny_models[family]
    encoded, n_cut = _encode(tokenizer, tricky_corpus, info.max_length)
    assert n_cut == 0
    unk = tokenizer.unk_token
    for sentence, enc in zip(tricky_corpus.sentences, encoded):
        assert enc.n_words == len(sentence)
        wids = np.array([-1 if w is None else w for w in enc.word_ids])
        real = wids[wids >= 0]
        assert np.all(np.diff(real) >= 0)  # words appear in order, subwords contiguous
        for j, word in enumerate(sentence):
            ids = [i for i, w in zip(enc.ids, enc.word_ids) if w == j]
            got = _decoded_word(tokenizer, ids)
            expected = unicodedata.normalize("NFKC", word)
            assert unicodedata.normalize("NFKC", got) == expected or unk in got, (got, word)
    assert sum(len(s) for s in tricky_corpus.sentences) == tricky_corpus.n_words


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_extracts_rows_in_corpus_order(tiny_models, tricky_corpus, family):
    result = extract.extract(tiny_models[family], tricky_corpus, attention=True, cache=False,
                             progress=False, batch_size=2)
    n_words = tricky_corpus.n_words
    assert result.words.shape == (TINY["layers"] + 1, n_words, TINY["hidden"])
    assert result.words.dtype == np.float32 and np.isfinite(result.words).all()
    expected_sentence = np.repeat(np.arange(len(TRICKY)), [len(s) for s in
                                                           tricky_corpus.sentences])
    assert np.array_equal(result.word_sentence, expected_sentence)
    assert result.sentence_first.shape == result.sentence_mean.shape == (
        TINY["layers"] + 1, len(TRICKY), TINY["hidden"])
    # a repeated word in one sentence gets different contextual rows but the same
    # embedding-layer row up to position: check rows are not all identical (no misalignment
    # to one token)
    assert np.unique(result.words[-1].round(5), axis=0).shape[0] == n_words
    assert len(result.attention) == len(TRICKY)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("special", ["drop", "keep"])
def test_attention_rows_sum_to_one(tiny_models, tricky_corpus, family, special):
    result = extract.extract(tiny_models[family], tricky_corpus, attention=True,
                             special_tokens=special, cache=False, progress=False)
    causal = tiny_models[family].info.causal
    n_specials = 0 if causal else 2
    for maps, words in zip(result.attention, tricky_corpus.sentences):
        w = len(words)
        extra = n_specials if special == "keep" else 0
        assert maps.shape == (TINY["layers"], TINY["heads"], w, w + extra)
        assert np.abs(maps.sum(axis=-1) - 1).max() < 1e-5
        assert (maps >= 0).all()
    if causal:  # left to right: no attention to later words
        for maps in result.attention:
            assert np.abs(np.triu(maps, k=1)).max() < 1e-6


def test_word_attention_closed_form():
    # one layer, one head, tokens: [CLS] a1 a2 b [SEP]; word 0 = a1+a2, word 1 = b
    att = np.array([[[[.2, .2, .2, .2, .2],
                      [.1, .3, .2, .3, .1],
                      [.0, .5, .1, .2, .2],
                      [.25, .25, .25, .25, .0],
                      [.2, .2, .2, .2, .2]]]])
    wids = [None, 0, 0, 1, None]
    keep = extract.word_attention(att, wids, "keep")[0, 0]
    # from word 0: mean of rows 1 and 2; to word 0: sum of cols 1 and 2
    np.testing.assert_allclose(keep[0], [(.5 + .6) / 2, (.3 + .2) / 2, (.1 + 0) / 2,
                                         (.1 + .2) / 2], atol=1e-7)
    np.testing.assert_allclose(keep[1], [.5, .25, .25, 0], atol=1e-7)
    drop = extract.word_attention(att, wids, "drop")[0, 0]
    np.testing.assert_allclose(drop[1], [.5 / .75, .25 / .75], atol=1e-7)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("pooling", extract.WORD_POOLING)
def test_padding_never_changes_results(tiny_models, tricky_corpus, family, pooling):
    loaded = tiny_models[family]
    together = extract.extract(loaded, tricky_corpus, word_pooling=pooling, attention=True,
                               cache=False, progress=False, batch_size=len(TRICKY))
    start = 0
    for i, sentence in enumerate(tricky_corpus.sentences):
        alone = extract.extract(loaded, tricky_corpus.subset([i]), word_pooling=pooling,
                                attention=True, cache=False, progress=False)
        rows = slice(start, start + len(sentence))
        start += len(sentence)
        np.testing.assert_allclose(together.words[:, rows], alone.words[:, :], atol=1e-5)
        np.testing.assert_allclose(together.sentence_mean[:, i], alone.sentence_mean[:, 0],
                                   atol=1e-5)
        np.testing.assert_allclose(together.sentence_first[:, i], alone.sentence_first[:, 0],
                                   atol=1e-5)
        np.testing.assert_allclose(together.attention[i], alone.attention[0], atol=1e-5)


def test_pooling_options_relate(tiny_models):
    corpus = corpora.from_sentences(["unbelievably antidisestablishmentarianism ."])
    loaded = tiny_models["bert"]
    got = {p: extract.extract(loaded, corpus, word_pooling=p, cache=False, progress=False).words
           for p in extract.WORD_POOLING}
    # "." is one subword: every pooling agrees; the long words differ between first and last
    np.testing.assert_allclose(got["first"][:, 2], got["last"][:, 2])
    np.testing.assert_allclose(got["mean"][:, 2], got["last"][:, 2], atol=1e-6)
    assert not np.allclose(got["first"][:, 0], got["last"][:, 0])


def test_minilm_extracts_with_attention():
    corpus = corpora.load_corpus("tweets", n=6, seed=1)
    result = extract.extract("minilm", corpus, attention=True, cache=False, progress=False)
    assert result.words.shape == (7, corpus.n_words, 384)
    assert len(result.attention_layer(6)) == 6
    assert result.attention_layer(1)[0].shape[0] == 12
    # the first-token vector of the embedding layer is the same for every input
    first = result.sentence_first[0]
    assert np.allclose(first, first[0], atol=1e-5)


def test_over_long_sentences_are_reported_once_by_the_library_not_by_the_tokenizer(
        tiny_models, capfd, caplog):
    """A sentence over the model's own limit is the library's to report (found by
    over_limit, then refused, dropped or cut and counted): the tokenizer's "longer than the
    specified maximum ... indexing errors" warning, about a sequence that never reaches the
    model, is not shown."""
    import logging

    loaded = tiny_models["bert"]
    long_text = "word " * (loaded.info.max_length + 50)
    corpus = corpora.from_sentences([long_text, "short one", long_text + " more"])
    loaded.tokenizer.deprecation_warnings.clear()  # the tokenizer warns once per instance
    with caplog.at_level(logging.WARNING):
        assert list(extract.over_limit(loaded, corpus)) == [0, 2]
        with pytest.warns(UserWarning, match="2 of 3 sentences are longer"):
            result = extract.extract(loaded, corpus, cache=False, progress=False)
    assert result.n_truncated == 2
    said = caplog.text + "".join(capfd.readouterr())
    assert "indexing errors" not in said and "Token indices sequence length" not in said


def test_over_long_sentences_are_cut_with_a_count(tiny_models):
    corpus = corpora.from_sentences(["word " * 40, "short one", "many " * 30])
    with pytest.warns(UserWarning, match="2 of 3 sentences are longer than 16 tokens"):
        result = extract.extract(tiny_models["bert"], corpus, max_length=16, cache=False,
                                 progress=False)
    assert result.n_truncated == 2
    counts = np.bincount(result.word_sentence)
    assert counts[1] == 2 and counts[0] <= 14 and counts[2] <= 14
    assert np.array_equal(result.word_position[: counts[0]], np.arange(counts[0]))


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_kept_layers_and_rows_equal_the_same_cells_of_a_full_extraction(
        tiny_models, tricky_corpus, family, tmp_path):
    loaded = tiny_models[family]
    full = extract.extract(loaded, tricky_corpus, cache=False, progress=False)
    rows = np.array([0, 3, 4, 11, tricky_corpus.n_words - 1])
    for cached in (False, True, True):  # computed, then written, then read back
        part = extract.extract(loaded, tricky_corpus, keep_layers=[0, 2], word_rows=rows,
                               cache=cached, cache_dir=tmp_path, progress=False)
        assert part.words.shape == (2, len(rows), full.words.shape[2])
        assert part.layer_ids.tolist() == [0, 2] and part.word_rows.tolist() == rows.tolist()
        for k in (0, 2):
            assert np.array_equal(part.layer(k), full.layer(k)[rows])
            assert np.array_equal(part.layer(k, "mean"), full.layer(k, "mean"))
        assert np.array_equal(part.word_sentence, full.word_sentence[rows])
        assert np.array_equal(part.word_position, full.word_position[rows])
        with pytest.raises(ValueError, match=r"layer 1 was not kept.*\[0, 2\]"):
            part.layer(1)
    assert part.from_cache
    assert full.layer_ids.tolist() == [0, 1, 2] and full.word_rows is None
    # what is kept is part of the key: other rows are another entry
    other = extract.extract(loaded, tricky_corpus, keep_layers=[0, 2], word_rows=rows[:-1],
                            cache_dir=tmp_path, progress=False)
    assert not other.from_cache and other.words.shape[1] == len(rows) - 1


def test_sentences_only_keeps_the_sentence_vectors_and_no_word_rows(tiny_models, tricky_corpus,
                                                                    tmp_path):
    loaded = tiny_models["bert"]
    full = extract.extract(loaded, tricky_corpus, cache=False, progress=False)
    for _ in range(2):  # computed, then read back
        only = extract.extract(loaded, tricky_corpus, word_rows=extract.SENTENCES_ONLY,
                               cache_dir=tmp_path / "a", progress=False)
        assert only.words.shape == (full.n_layers, 0, full.words.shape[2])
        assert len(only.word_sentence) == 0 and only.word_rows.tolist() == []
        for kind in ("first", "last", "mean"):
            for a, b in zip(only.layers(kind), full.layers(kind)):
                assert np.array_equal(a, b)
    assert only.from_cache
    # attention maps do not depend on the word rows kept
    maps = extract.extract(loaded, tricky_corpus, attention=True, cache=False, progress=False)
    alone = extract.extract(loaded, tricky_corpus, attention=True, word_rows=(), cache=False,
                            progress=False)
    for a, b in zip(alone.attention_layer(2), maps.attention_layer(2)):
        assert np.array_equal(a, b)
    # a model that cuts a sentence still gives every sentence's vectors (no word is named)
    cut = corpora.from_sentences(["word " * 40, "short one"])
    with pytest.warns(UserWarning, match="longer than 16 tokens"):
        short = extract.extract(loaded, cut, max_length=16, word_rows=(), cache=False,
                                progress=False)
    assert short.n_truncated == 1 and short.sentence_first.shape[1] == 2


def test_kept_sentence_poolings_equal_a_full_extraction_and_the_rest_is_refused(
        tiny_models, tricky_corpus, tmp_path):
    loaded = tiny_models["bert"]
    full = extract.extract(loaded, tricky_corpus, cache=False, progress=False)
    rows = np.array([1, 2, 7])
    for _ in range(2):  # computed, then read back
        first = extract.extract(loaded, tricky_corpus, word_rows=extract.SENTENCES_ONLY,
                                sentences=["first"], cache_dir=tmp_path, progress=False)
        assert first.sentences == ("first",)
        assert first.sentence_mean is None and first.sentence_last is None
        for a, b in zip(first.layers("first"), full.layers("first")):
            assert np.array_equal(a, b)
        with pytest.raises(ValueError, match=r"no 'mean' sentence vectors \(kept: first\).*"
                                             r"sentences=\['mean'\]"):
            first.layers("mean")
        words = extract.extract(loaded, tricky_corpus, word_rows=rows, keep_layers=[0, 2],
                                sentences=extract.NO_SENTENCES, cache_dir=tmp_path,
                                progress=False)
        assert words.sentences == () and words.sentence_first is None
        assert np.array_equal(words.layer(2), full.layer(2)[rows])
        with pytest.raises(ValueError, match=r"kept: none"):
            words.layer(2, "first")
    assert first.from_cache and words.from_cache
    # the kept poolings are part of the key; all three are the default's entry
    both = extract.extract(loaded, tricky_corpus, word_rows=(), sentences=["mean", "first"],
                           cache_dir=tmp_path, progress=False)
    assert not both.from_cache and both.sentences == ("first", "mean")
    every = extract.extract(loaded, tricky_corpus, word_rows=(), sentences=["last", "mean",
                                                                             "first"],
                            cache_dir=tmp_path, progress=False)
    default = extract.extract(loaded, tricky_corpus, word_rows=(), cache_dir=tmp_path,
                              progress=False)
    assert not every.from_cache and default.from_cache
    assert default.cache_key == every.cache_key
    with pytest.raises(ValueError, match=r"poolings among.*\['max'\].*pass \[\]"):
        extract.extract(loaded, tricky_corpus, sentences=["max", "first"], cache=False)


def test_kept_layers_and_rows_are_checked(tiny_models, tricky_corpus):
    loaded = tiny_models["bert"]
    n = tricky_corpus.n_words
    for rows, message in [([3, 1], "increase strictly"), ([1, 1], "increase strictly"),
                          ([0, n], rf"0\.\.{n - 1}"), ([-1, 2], "increase strictly"),
                          ([0.5], "ints"), ([[0, 1]], "1-D")]:
        with pytest.raises(ValueError, match=message):
            extract.extract(loaded, tricky_corpus, word_rows=rows, cache=False)
    with pytest.raises(ValueError, match="out of range"):
        extract.extract(loaded, tricky_corpus, keep_layers=[0, 3], cache=False)
    with pytest.raises(ValueError, match="increasing"):
        extract.extract(loaded, tricky_corpus, keep_layers=[2, 0], cache=False)
    cut = corpora.from_sentences(["word " * 40, "short one"])
    with pytest.raises(ValueError, match="cut 1 sentences.*without word_rows"), \
            pytest.warns(UserWarning, match="longer than 16 tokens"):
        extract.extract(loaded, cut, max_length=16, word_rows=[0, 1], cache=False,
                        progress=False)


def test_bad_options(tiny_models, tricky_corpus):
    loaded = tiny_models["bert"]
    with pytest.raises(ValueError, match="word_pooling"):
        extract.extract(loaded, tricky_corpus, word_pooling="max", cache=False)
    with pytest.raises(ValueError, match="special_tokens"):
        extract.extract(loaded, tricky_corpus, special_tokens="some", cache=False)
    with pytest.raises(TypeError, match="from_sentences"):
        extract.extract(loaded, ["a sentence"], cache=False)
    empty = corpora.Corpus(name="empty", sentences=[], texts=[])
    with pytest.raises(ValueError, match="empty"):
        extract.extract(loaded, empty, cache=False)


def test_sort_by_length_does_not_change_results(tiny_models, tricky_corpus):
    kw = dict(cache=False, progress=False, batch_size=2)
    a = extract.extract(tiny_models["xlnet"], tricky_corpus, sort_by_length=True, **kw)
    b = extract.extract(tiny_models["xlnet"], tricky_corpus, sort_by_length=False, **kw)
    np.testing.assert_allclose(a.words, b.words, atol=1e-5)


def test_no_warning_for_normal_sentences(tiny_models, tricky_corpus):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extract.extract(tiny_models["gpt2"], tricky_corpus, cache=False, progress=False)


def test_a_very_short_token_limit_keeps_what_fits(tiny_models):
    corpus = corpora.from_sentences(["one two three four five six", "a b"])
    with pytest.warns(UserWarning, match="longer than 3 tokens"):
        result = extract.extract(tiny_models["bert"], corpus, max_length=3, cache=False,
                                 progress=False)
    # [CLS] w [SEP]: one word of each sentence survives, none is split across the cut
    assert result.words.shape[1] == 2
    assert result.word_sentence.tolist() == [0, 1] and result.word_position.tolist() == [0, 0]
    with pytest.raises(ValueError, match="max_length must be at least 3"):
        extract.extract(tiny_models["bert"], corpus, max_length=2, cache=False, progress=False)
