import json

import numpy as np
import pytest

from analysis_lib.data import corpora
from analysis_lib.errors import OfflineError


def test_tweets_are_decoded_deduplicated_and_labelled():
    full = corpora.load_corpus("tweets")
    assert 36_000 < len(full) < 38_158  # duplicates removed from the 38,158 rows
    assert len(set(full.texts)) == len(full)
    assert full.label_names == ["negative", "neutral", "positive"]
    assert set(np.unique(full.labels)) == {0, 1, 2}
    assert all(len(s) >= 1 for s in full.sentences)


def test_bbc_sentences_have_five_topics_and_units():
    sents = corpora.load_corpus("bbc-news")
    heads = corpora.load_corpus("bbc-news", unit="headline")
    assert len(heads) == 2225
    assert len(sents) > 10 * len(heads)
    assert sents.label_names == corpora.BBC_TOPICS
    assert set(np.unique(sents.labels)) == set(range(5))


def test_sampling_is_deterministic_and_seeded():
    a = corpora.load_corpus("tweets", n=50, seed=3)
    b = corpora.load_corpus("tweets", n=50, seed=3)
    c = corpora.load_corpus("tweets", n=50, seed=4)
    assert a.texts == b.texts and a.fingerprint() == b.fingerprint()
    assert a.texts != c.texts
    assert np.array_equal(a.labels, b.labels)


def test_word_filters():
    c = corpora.load_corpus("bbc-news", n=30, min_words=5, max_words=12)
    assert all(5 <= len(s) <= 12 for s in c.sentences)


def test_words_of_keeps_urls_numbers_and_punctuation():
    assert corpora.words_of("Cost: $3.50 at http://x.co/a?b=1, isn't it?") == [
        "Cost", ":", "$", "3.50", "at", "http://x.co/a?b=1", ",", "isn't", "it", "?"]
    assert corpora.words_of("zero\u200bwidth  tab\tnew\nline") == ["zerowidth", "tab", "new",
                                                                    "line"]


def test_from_sentences_and_file(tmp_path):
    c = corpora.from_sentences(["a b", "c"], labels=["x", "y"])
    assert c.sentences == [["a", "b"], ["c"]] and c.label_names == ["x", "y"]
    assert list(c.labels) == [0, 1]
    pre = corpora.from_sentences([["New", "York"], ["is"]])
    assert pre.sentences == [["New", "York"], ["is"]]
    file = tmp_path / "mine.txt"
    file.write_text("first line .\n\nsecond one\n", encoding="utf-8")
    f = corpora.from_file(file)
    assert f.sentences == [["first", "line", "."], ["second", "one"]] and f.name == "mine"


@pytest.mark.parametrize("bad, error, match", [
    ([], ValueError, "empty"),
    ("one string", TypeError, "list of strings"),
    (["ok", "   "], ValueError, "no words"),
])
def test_from_sentences_bad_input(bad, error, match):
    with pytest.raises(error, match=match):
        corpora.from_sentences(bad)


def test_unknown_corpus_lists_valid_names():
    with pytest.raises(ValueError, match="unknown corpus 'nope'.*bbc-news.*tweets"):
        corpora.load_corpus("nope")


def test_too_many_sentences_requested():
    with pytest.raises(ValueError, match="too many"):
        corpora.load_corpus("bbc-news", unit="headline", n=5000)


def test_hub_corpus_offline_gives_offline_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    def refuse(*args, **kwargs):
        raise ConnectionError("Couldn't reach the Hugging Face Hub (offline mode is enabled)")

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    with pytest.raises(OfflineError, match="'ptb' is not available offline"):
        corpora.load_corpus("ptb", n=10)


def test_a_corpus_refuses_empty_sentences_and_words():
    import pytest

    with pytest.raises(ValueError, match="sentence 1 must be a non-empty list of words"):
        corpora.Corpus("x", [["a"], []], ["a", ""])
    with pytest.raises(ValueError, match="sentence 0 must be a non-empty list"):
        corpora.Corpus("x", ["a b"], ["a b"])
    with pytest.raises(ValueError, match="empty or non-string word"):
        corpora.Corpus("x", [["a", ""]], ["a"])


def test_hub_corpora_respect_the_offline_switch(monkeypatch):
    import datasets
    import pytest

    from analysis_lib.errors import OfflineError

    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append(a))
    monkeypatch.setenv("ANALYSIS_LIB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="'ptb' is not available offline"):
        corpora.load_corpus("ptb", n=5)
    assert not calls  # refused at once, never tried


def test_own_sentences_never_lose_words_or_merge_labels_silently():
    with pytest.raises(ValueError, match=r"words \[1\].*no longer match"):
        corpora.from_sentences([["a", " ", "b"]])
    with pytest.raises(ValueError, match="print the same"):
        corpora.from_sentences([["a"], ["b"]], labels=[1, "1"])
    ok = corpora.from_sentences([["a", "b"], ["c"]], labels=["x", "y"])
    assert ok.n_words == 3 and list(ok.label_names) == ["x", "y"]


def test_a_sample_needs_a_seed():
    with pytest.raises(TypeError, match="seed"):
        corpora.load_corpus("tweets", n=5, seed=None)
    with pytest.raises(ValueError, match="seed"):
        corpora.load_corpus("tweets", n=5, seed=-1)


def test_a_sample_owns_its_words_and_tokenises_like_words_of():
    """The packaged corpora are tokenised once per process; a sample gets its own lists, so
    changing one changes neither the shared tokens nor the next sample."""
    first = corpora.load_corpus("tweets", n=20, seed=3)
    assert first.sentences == [corpora.words_of(t) for t in first.texts]
    first.sentences[0].append("EXTRA")
    again = corpora.load_corpus("tweets", n=20, seed=3)
    assert again.sentences[0][-1] != "EXTRA"
    assert again.sentences == [corpora.words_of(t) for t in again.texts]


def test_the_books_task_split_is_drawn_once_and_each_caller_gets_a_copy():
    from analysis_lib.data import tasks
    from analysis_lib.training.grid import task_for

    one = task_for("tweets-sentiment", 50, 40)
    fresh = tasks.load_task("tweets-sentiment", n_train=50, n_val=40, n_test=40, seed=0)
    assert one.fingerprint() == fresh.fingerprint()
    one.train.labels[:] = 0
    one.train.texts[0] = "changed"
    two = task_for("tweets-sentiment", 50, 40)
    assert two.fingerprint() == fresh.fingerprint()
    assert two is not one


@pytest.mark.parametrize("sentences, match", [
    (["a b", None], "sentence 1 is NoneType"),
    (["a b", float("nan")], "sentence 1 is float"),
    ([["a", None], ["b"]], "sentence 0 is a word list with a NoneType"),
    (["a b", 3], "sentence 1 is int"),
    (None, "got NoneType"),
    (5, "got int"),
    ({"a": "first sentence"}, "whose keys would be read"),
])
def test_sentences_that_are_not_text_are_refused_where_they_enter(sentences, match):
    with pytest.raises(TypeError, match=match):
        corpora.from_sentences(sentences)


def test_a_text_file_is_a_corpus_wherever_a_corpus_name_is(tmp_path):
    """load_corpus takes the path of one's own file and samples it like a registered
    corpus; the notebooks' parameter rule and a sweep spec take it too."""
    from analysis_lib.book import params
    from analysis_lib.sweep.spec import SweepSpec, check_spec

    path = tmp_path / "mine.txt"
    path.write_text("\n".join(f"sentence number {k} is here" for k in range(30)))
    whole = corpora.load_corpus(str(path))
    assert len(whole) == 30 and whole.sentences[3] == ["sentence", "number", "3", "is", "here"]
    sample = corpora.load_corpus(str(path), n=10, seed=1)
    assert sample.sentences == corpora.load_corpus(str(path), n=10, seed=1).sentences
    assert len(sample) == 10 and sample.fingerprint() != whole.fingerprint()
    spec = params.declared("representation")
    params.validate({"corpus": str(path)}, spec, partial=True)
    with pytest.raises(params.ParameterError, match="corpus file .* does not exist"):
        params.validate({"corpus": str(tmp_path / "none.txt")}, spec, partial=True)
    with pytest.raises(params.ParameterError, match="or the path of a text file"):
        params.validate({"corpus": "tweet"}, spec, partial=True)
    two = {"models": ["random:bert", "random:gpt2"], "measures": ["cka"]}
    check_spec(SweepSpec(name="own", corpus=str(path), **two))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_spec(SweepSpec(name="own", corpus=str(tmp_path / "none.txt"), **two))


def test_overlap_is_the_share_of_the_second_corpus_found_in_the_first():
    first = corpora.from_sentences(["The cat sat.", "A dog ran", "Birds fly"])
    assert corpora.overlap(first, first) == 1.0
    # case and spacing folded; a sample of the first is all in it
    again = corpora.from_sentences(["the  CAT sat.", "Birds fly"])
    assert corpora.overlap(first, again) == 1.0
    part = corpora.from_sentences(["A dog ran", "Fish swim", "Cows moo", "Hens lay"])
    assert corpora.overlap(first, part) == 0.25
    assert corpora.overlap(part, first) == pytest.approx(1 / 3)  # not symmetric
    assert corpora.overlap(first, corpora.from_sentences(["Nothing shared here"])) == 0.0


def test_the_same_text_twice_is_not_another_corpus(tmp_path):
    """wu-other-corpus with a second corpus that repeats the first (the same file twice)
    reads "not measured" with the reason, never a "holds" at r = 1; a small overlap is named
    on the row."""
    from analysis_lib import claims
    from analysis_lib.claims import verdicts

    path = tmp_path / "mine.txt"
    path.write_text("\n".join(f"sentence number {i} of my own text" for i in range(40)))
    first, second = corpora.from_file(path), corpora.from_file(path)
    results = {"agreements": {"linear_cka": 0.999, "svcca": 0.998}, "n_layers": 42,
               "corpus_overlap": corpora.overlap(first, second)}
    claim = [claims.get("wu-other-corpus")]
    row = verdicts.judge(claim, results).iloc[0]
    assert row.verdict == "not measured"
    assert "100% of the second corpus's sentences are also in the first" in \
        row["what this run shows"] and "second_corpus" in row["what this run shows"]
    some = verdicts.judge(claim, {**results, "corpus_overlap": 0.1}).iloc[0]
    assert some.verdict == "holds" and "share 10% of their sentences" in \
        some["what this run shows"]
    none = verdicts.judge(claim, {**results, "corpus_overlap": 0.0}).iloc[0]
    assert none.verdict == "holds" and "share" not in none["what this run shows"]


def _fresh_parse(monkeypatch, cache, names=("tweets", "bbc-news")):
    """The packaged corpora read in this process as a new process would, from ``cache``."""
    monkeypatch.setenv("ANALYSIS_LIB_CACHE", str(cache))
    corpora._parsed.cache_clear()
    return {name: corpora._parsed(name, "sentence") for name in names}


def test_packaged_corpora_read_back_from_the_cache_as_parsed(tmp_path, monkeypatch):
    """The parsed rows are kept in the cache; read back, they are the rows a parse gives:
    every text, label and word, in order, for both corpora and for BBC's other units."""
    parsed = _fresh_parse(monkeypatch, tmp_path)  # an empty cache: parsed here
    assert len(list((tmp_path / "corpora").iterdir())) == 2
    again = _fresh_parse(monkeypatch, tmp_path)
    for name, (texts, labels, words) in again.items():
        assert (texts, labels, words) == parsed[name]
        assert all(type(label) is int for label in labels)
        assert words[:50] == tuple(tuple(corpora.words_of(t)) for t in texts[:50])
    corpora._parsed.cache_clear()
    heads = corpora.read_bbc("headline")
    corpora._parsed.cache_clear()
    assert corpora.read_bbc("headline") == heads
    assert len(heads[0]) == 2225
    corpora._parsed.cache_clear()


def test_a_damaged_corpus_entry_is_parsed_again(tmp_path, monkeypatch):
    """A damaged entry (a changed byte, or a line too many) is named in a warning, removed and
    parsed again; a cache that cannot be written still gives the corpus."""
    from analysis_lib.runtime.cache import ArrayCache

    planted = ["Hello, world!", "naïve café — see https://x.org/a.", "@you #tag it's 3.5"]
    monkeypatch.setattr(corpora, "_tweet_rows", lambda: (list(planted), [0, 2, 1]))
    tweets = ("tweets",)
    first = _fresh_parse(monkeypatch, tmp_path, tweets)["tweets"]
    entry = ArrayCache("corpora").path(corpora._parse_key("tweets", "sentence"))
    data = bytearray((entry / "texts.npy").read_bytes())
    data[-5] ^= 0x01
    assert first[0] == tuple(planted) and first[2][1][-2:] == ("https://x.org/a", ".")
    (entry / "texts.npy").write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="damaged"):
        assert _fresh_parse(monkeypatch, tmp_path, tweets)["tweets"] == first
    assert _fresh_parse(monkeypatch, tmp_path, tweets)["tweets"] == first  # whole again

    manifest = json.loads((entry / "manifest.json").read_text())
    manifest["meta"]["n"] += 1  # a valid file that does not hold what it says
    (entry / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(RuntimeWarning, match="damaged"):
        assert _fresh_parse(monkeypatch, tmp_path, tweets)["tweets"] == first

    def refuse(*args, **kwargs):
        raise PermissionError("read-only")

    monkeypatch.setattr(ArrayCache, "save", refuse)
    assert _fresh_parse(monkeypatch, tmp_path / "elsewhere", tweets)["tweets"] == first
    corpora._parsed.cache_clear()


def test_a_changed_source_file_or_parser_makes_a_new_entry(tmp_path, monkeypatch):
    """The entry's key follows the files (name, size, time of change) and the parsing
    code: an edited file, or edited code, is parsed anew."""
    source = tmp_path / "tweets.csv"
    source.write_text("text,sentiment\nhello,positive\n")
    monkeypatch.setattr(corpora, "_source_files", lambda name: [source])
    before = corpora._parse_key("tweets", "sentence")
    assert corpora._parse_key("tweets", "sentence") == before
    assert corpora._parse_key("bbc-news", "sentence") != before
    source.write_text("text,sentiment\nhello there,positive\n")
    assert corpora._parse_key("tweets", "sentence") != before
    changed = corpora._parse_key("tweets", "sentence")
    monkeypatch.setattr("analysis_lib.runtime.cache._read_source",
                        lambda file: file.read_bytes() + b"# edited")
    assert corpora._parse_key("tweets", "sentence") != changed
