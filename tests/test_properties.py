"""Generated bad input at every boundary: the library answers with its own errors (a
ValueError or TypeError that names the problem), never a bare IndexError, KeyError or
ZeroDivisionError deep inside, and never a NaN or out-of-range similarity.

Each property runs under :func:`accepting_some`, which fails the test when every generated
input was refused: a library that refused everything would otherwise pass them all."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from analysis_lib import models, similarity
from analysis_lib.book import params
from analysis_lib.data import corpora
from analysis_lib.data.tasks import Split, Task
from analysis_lib.layers import check_layer
from analysis_lib.training.surgery import kept_layers

LIBRARY_ERRORS = (ValueError, TypeError)
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


class Outcomes:
    """How many generated inputs a property accepted and refused."""

    def __init__(self):
        self.accepted = self.refused = 0


def accepting_some(prop):
    """Run the hypothesis property ``prop(seen, ...)`` and fail when it accepted no input."""
    def test():
        seen = Outcomes()
        prop(seen)
        assert seen.accepted > 0, f"every one of {seen.refused} generated inputs was refused"
    test.__name__ = prop.__name__
    test.__doc__ = prop.__doc__
    return test

REPRESENTATION = ["neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka", "procrustes",
                  "cca", "rsa", "rbf_cka"]
RANGES = {"rsa": (-1.0, 1.0)}


def arrays(min_rows=0, max_rows=12, rows=None):
    dtype = st.sampled_from([np.float32, np.float64, np.int64])
    shape = st.tuples(st.integers(min_rows, max_rows) if rows is None else st.just(rows),
                      st.integers(1, 5))
    values = st.one_of(st.floats(-1e6, 1e6, allow_nan=False, width=32),
                       st.sampled_from([0.0, 1.0, math.nan, math.inf, -math.inf, 1e30]))
    return dtype.flatmap(lambda dt: hnp.arrays(
        dt, shape, elements=values if dt != np.int64 else st.integers(-5, 5)))


@accepting_some
@SETTINGS
@given(XY=st.integers(0, 12).flatmap(lambda n: st.tuples(arrays(rows=n), arrays(rows=n))),
       measure=st.sampled_from(REPRESENTATION))
def test_measures_return_a_number_in_range_or_a_library_error(seen, XY, measure):
    X, Y = XY
    try:
        with np.errstate(all="ignore"):
            value = similarity.pairwise([X], [Y], measure=measure)[0, 0]
    except LIBRARY_ERRORS:
        seen.refused += 1
        return
    seen.accepted += 1
    low, high = RANGES.get(measure, (-1e-6, 1.0 + 1e-6))
    assert np.isfinite(value), (measure, X, Y)
    assert low - 1e-6 <= value <= high + 1e-6, (measure, value)


@SETTINGS
@given(name=st.text(max_size=12), value=st.one_of(st.integers(), st.floats(), st.text()))
def test_an_unknown_option_is_refused_by_name(name, value):
    assume(name not in {o for m in similarity.REGISTRY.values() for o in m.options})
    X = np.random.default_rng(0).standard_normal((10, 3))
    with pytest.raises(TypeError, match="is not taken by"):
        similarity.pairwise([X], measure="linear_cka", **{name: value})


@accepting_some
@SETTINGS
@given(sentences=st.lists(st.one_of(st.text(max_size=15), st.integers(), st.none(),
                                    st.lists(st.text(max_size=5), max_size=3)), max_size=5),
       labels=st.one_of(st.none(), st.lists(st.one_of(st.text(max_size=3), st.integers(),
                                                      st.floats(), st.none()), max_size=5)))
def test_from_sentences_builds_a_valid_corpus_or_refuses(seen, sentences, labels):
    try:
        corpus = corpora.from_sentences(sentences, labels=labels)
    except LIBRARY_ERRORS:
        seen.refused += 1
        return
    seen.accepted += 1
    assert len(corpus) == len(sentences) and all(corpus.sentences)
    assert all(w for s in corpus.sentences for w in s)
    if labels is not None:
        assert len(corpus.labels) == len(sentences)


@accepting_some
@SETTINGS
@given(name=st.one_of(st.text(max_size=30), st.integers(), st.none()))
def test_model_names_are_classified_or_refused(seen, name):
    try:
        kind = models.check_name(name)
    except LIBRARY_ERRORS:
        seen.refused += 1
        return
    seen.accepted += 1
    assert kind in ("package", "random", "local", "hub")


@accepting_some
@SETTINGS
@given(text=st.text(max_size=60))
def test_yaml_reads_plain_values_or_refuses(seen, text):
    try:
        value = params.read_yaml(text)
    except ValueError:
        seen.refused += 1
        return
    seen.accepted += 1

    def plain(v):
        if isinstance(v, dict):
            return all(plain(k) and plain(x) for k, x in v.items())
        if isinstance(v, list):
            return all(plain(x) for x in v)
        return v is None or isinstance(v, (str, int, float, bool))

    assert plain(value)


@accepting_some
@SETTINGS
@given(layer=st.one_of(st.integers(-3, 10), st.floats(), st.booleans(), st.text(max_size=2)),
       n=st.integers(1, 6))
def test_layer_indices_are_checked(seen, layer, n):
    try:
        got = check_layer(layer, n)
    except LIBRARY_ERRORS:
        seen.refused += 1
        return
    seen.accepted += 1
    assert 0 <= got <= n


@accepting_some
@SETTINGS
@given(n=st.integers(1, 6), layer=st.one_of(st.none(), st.integers(-2, 8)),
       skip=st.one_of(st.none(), st.tuples(st.integers(-1, 8), st.integers(-1, 8)),
                      st.just(())))
def test_truncation_and_skips_leave_valid_layers_or_refuse(seen, n, layer, skip):
    try:
        kept = kept_layers(n, layer, skip)
    except LIBRARY_ERRORS:
        seen.refused += 1
        return
    seen.accepted += 1
    assert kept and all(1 <= k <= n for k in kept) and kept == sorted(set(kept))


@accepting_some
@SETTINGS
@given(labels=st.lists(st.one_of(st.integers(-3, 4), st.floats(allow_nan=True)),
                       min_size=2, max_size=6),
       names=st.lists(st.text(min_size=1, max_size=3), max_size=4, unique=True))
def test_tasks_accept_only_usable_labels(seen, labels, names):
    split = Split([f"t{i}" for i in range(len(labels))], np.asarray(labels, dtype=float))
    try:
        task = Task("t", split, split, split, names)
    except LIBRARY_ERRORS:
        seen.refused += 1
        return
    seen.accepted += 1
    values = task.train.labels
    assert np.isfinite(values).all() and (values >= 0).all()
    assert (values < len(names)).all() and (values == np.round(values)).all()
    assert len(np.unique(values)) >= 2
