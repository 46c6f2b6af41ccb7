"""Arguments are checked at the public entry points before any work: the wrong kind of value
or a value out of range is refused with the argument named, never turned into another value
(seed=1.5 into seed 1) or into a late error from deep inside."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis_lib import alignment, models
from analysis_lib.runtime import checks


@settings(max_examples=80, deadline=None, derandomize=True)
@given(value=st.one_of(st.booleans(), st.floats(allow_nan=True), st.text(max_size=3),
                       st.integers(-5, 5), st.none()))
def test_integer_accepts_only_integers_in_range(value):
    """Known answer: an int in range comes back unchanged; anything else is refused with the
    argument's name."""
    good = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if good:
        assert checks.integer(value, "seed", 0) == value
    else:
        with pytest.raises((TypeError, ValueError), match="seed"):
            checks.integer(value, "seed", 0)


def test_numbers_and_choices():
    assert checks.integer(np.int64(3), "n", 1) == 3
    assert checks.number(0.5, "test", 0, 1, open_low=True, open_high=True) == 0.5
    for bad in (1.5, 0.0, float("nan"), True, "0.2"):
        with pytest.raises((TypeError, ValueError), match="test"):
            checks.number(bad, "test", 0, 1, open_low=True, open_high=True)
    with pytest.raises(ValueError, match=r"did you mean 'linreg'"):
        checks.choice("linreg2", "alignment method", ["linreg", "cca"])


def _pair(n=60, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, X @ rng.standard_normal((d, d)) + 0.1 * rng.standard_normal((n, d))


@pytest.mark.parametrize("method, options, match", [
    ("linreg", {"ridge": -1.0}, "ridge"),
    ("linreg", {"ridge": float("nan")}, "ridge"),
    ("cca", {"ridge": "a"}, "ridge"),
    ("svcca", {"variance": 1.5}, "variance"),
    ("mlp", {"epochs": 0}, "epochs"),
    ("mlp", {"batch_size": 0}, "batch_size"),
    ("inn", {"learning_rate": 0.0}, "learning_rate"),
    ("mlp", {"epochs": 2.5}, "epochs"),
    ("linreg", {"seed": 1.5}, "seed"),
    ("linreg", {"seed": True}, "seed"),
])
def test_alignment_options_are_checked_before_fitting(method, options, match):
    X, Y = _pair()
    with pytest.raises((TypeError, ValueError), match=match):
        alignment.fit(X, Y, method, **options)


def test_alignment_split_and_widths_are_checked():
    X, Y = _pair()
    for test in (1.5, 0.0, 1.0, -0.2):
        with pytest.raises(ValueError, match="test"):
            alignment.held_out(X, Y, "linreg", test=test)
    fitted = alignment.fit(X, Y, "linreg")
    with pytest.raises(ValueError, match="fitted on rows of 4 columns"):
        fitted.transform(X[:, :3])
    assert fitted.distance(X, Y) == pytest.approx(alignment.fit(X, Y).distance(X, Y))


@pytest.mark.parametrize("options, match", [
    ({"seed": 1.5}, "seed"), ({"seed": -1}, "seed"), ({"seed": "a"}, "seed"),
    ({"layers": True}, "layers"), ({"intermediate": 0}, "intermediate"),
    ({"vocab_size": 0}, "vocab_size"), ({"vocab_size": 40}, "vocab_size=40 is smaller"),
])
def test_random_model_options_are_checked(options, match, tmp_path):
    base = dict(layers=2, hidden=32, heads=2, vocab_size=2000, cache_dir=tmp_path)
    with pytest.raises((TypeError, ValueError), match=match):
        models.load("random:bert", **{**base, **options})


def test_resampling_settings_are_checked_before_any_work():
    import numpy as np

    from analysis_lib.similarity import stats

    X = np.random.default_rng(0).standard_normal((20, 3))
    with pytest.raises(TypeError, match="n_boot"):
        stats.bootstrap(X, X, n_boot=2.5)
    with pytest.raises(TypeError, match="seed"):
        stats.bootstrap(X, X, n_boot=10, seed="a")
    with pytest.raises(ValueError, match="level"):
        stats.bootstrap(X, X, n_boot=10, level=1.5)
    with pytest.raises(TypeError, match="n_perm"):
        stats.permutation_test(X, X, n_perm=10.0)
    with pytest.raises(ValueError, match="n_perm"):
        stats.permutation_test(X, X, n_perm=0)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), masked=st.integers(0, 5))
def test_masked_arrays_are_refused_or_read_as_their_data(seed, masked):
    """Known answer: a masked array with masked entries is refused with the argument named
    (a measure would compare the hidden values); with none masked it gives the number of its
    plain data."""
    from analysis_lib import similarity

    X, Y = _pair(seed=seed)
    mask = np.zeros(X.shape, bool)
    mask.flat[:masked] = True
    MX = np.ma.masked_array(X, mask=mask)
    if masked:
        with pytest.raises(ValueError, match=r"X is a masked array with \d+ masked values"):
            similarity.linear_cka(MX, Y)
        with pytest.raises(ValueError, match=r"layers_a\[0\] is a masked array"):
            similarity.pairwise([MX, Y])
    else:
        assert similarity.linear_cka(MX, Y) == similarity.linear_cka(X, Y)


def test_complex_values_are_refused_not_cast():
    from analysis_lib import similarity

    X, Y = _pair()
    with pytest.raises(TypeError, match="X has complex values"):
        similarity.linear_cka(X + 0j, Y)
    rng = np.random.default_rng(0)
    A = rng.random((2, 5, 5))
    A /= A.sum(-1, keepdims=True)
    with pytest.raises(TypeError, match=r"A\[0\] has complex values"):
        similarity.attention_similarity([A.astype(complex)], [A], "js")
    with pytest.raises(TypeError, match="complex"):
        alignment.relative_distance(X + 1j, Y)


def test_a_layer_list_that_is_one_layer_is_named():
    """A 2-D array, or a list of rows, given where a list of layers is meant."""
    from analysis_lib import similarity

    X, Y = _pair()
    for rows in (X, [list(r) for r in X], list(X)):
        with pytest.raises(ValueError, match="looks like the rows of one layer.*pass \\[X\\]"):
            similarity.pairwise(rows)
    assert similarity.pairwise([X, Y]).shape == (2, 2)
    assert similarity.pairwise(np.stack([X, Y])).shape == (2, 2)  # layers x rows x neurons


@pytest.mark.parametrize("measure", ["linear_cka", "neuronsim", "svcca", "procrustes",
                                     "rbf_cka"])
def test_a_constant_layer_is_named_by_its_index(measure):
    from analysis_lib import similarity

    X, Y = _pair()
    constant = np.tile(X[:1], (len(X), 1))  # every row the same
    with pytest.raises(ValueError, match=r"layers_b\[2\]"):
        similarity.pairwise([X, Y], [X, Y, constant], measure=measure)


def test_files_and_folders_confused_are_named(tmp_path):
    from analysis_lib.data import corpora
    from analysis_lib.sweep import spec

    folder, file = tmp_path / "folder", tmp_path / "file.txt"
    folder.mkdir()
    file.write_text("one sentence\n")
    with pytest.raises(IsADirectoryError, match="is a folder, not a file"):
        corpora.from_file(folder)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        corpora.from_file(tmp_path / "missing.txt")
    with pytest.raises(IsADirectoryError, match="sweep spec .* is a folder, not a file"):
        spec.load_spec(folder)
    with pytest.raises(ValueError, match="is a file, not a folder"):
        models.load(str(file))
    with pytest.raises(ValueError, match="has no config.json"):
        models.load(str(folder))


@pytest.mark.parametrize("options, match", [
    ({"max_length": "abc"}, "max_length"), ({"max_length": 2.5}, "max_length"),
    ({"batch_size": True}, "batch_size"), ({"attention": "yes"}, "attention"),
    ({"word_pooling": "lats"}, "did you mean 'last'"), ({"storage": "int8"}, "storage"),
])
def test_extraction_options_are_checked_before_loading(options, match):
    """Checked before the model is loaded: the name given here does not exist, and the
    option's error comes first."""
    from analysis_lib import extract
    from analysis_lib.data import corpora

    corpus = corpora.from_sentences(["a b c"])
    with pytest.raises((TypeError, ValueError), match=match):
        extract.extract("./no-such-model", corpus, progress=False, **options)


def test_the_unknown_task_message_points_to_functions_that_exist():
    import importlib
    import re

    from analysis_lib.data import tasks

    with pytest.raises(ValueError, match="unknown task") as raised:
        tasks.load_task("nosuch")
    path = re.search(r"use ([\w.]+)\.(task_from_corpus)", str(raised.value))
    assert path, raised.value
    assert hasattr(importlib.import_module(path.group(1)), path.group(2))
