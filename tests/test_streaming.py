"""Layer comparisons streamed over minibatches of rows agree with the whole-array measures."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ortho_group

from analysis_lib import similarity as sim
from analysis_lib.similarity.streaming import stream_pairwise


def _layers(n=600, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, 6))
    return [Z @ rng.standard_normal((6, 8)) + 0.5 * rng.standard_normal((n, 8)) + 3.0,
            rng.standard_normal((n, 5)) * np.arange(1, 6) + Z[:, :1],
            np.tanh(Z @ rng.standard_normal((6, 12)))]


def _batches(layers, sizes):
    start = 0
    for size in sizes:
        yield [x[start:start + size] for x in layers]
        start += size


SPLITS = [[600], [100, 250, 7, 243], [1] * 5 + [595]]


@pytest.mark.parametrize("sizes", SPLITS)
@pytest.mark.parametrize("debiased", [False, True])
def test_exact_streaming_cka_equals_the_whole_array_cka(sizes, debiased):
    layers = _layers()
    whole = sim.pairwise(layers, measure="linear_cka", debiased=debiased, dtype=np.float64)
    streamed = stream_pairwise(_batches(layers, sizes), "linear_cka", debiased=debiased)
    np.testing.assert_allclose(streamed, whole, atol=1e-10)


@pytest.mark.parametrize("sizes", SPLITS)
def test_exact_streaming_neuronsim_equals_the_whole_array_neuronsim(sizes):
    layers = _layers()
    whole = sim.pairwise(layers, measure="neuronsim", dtype=np.float64)
    streamed = stream_pairwise(_batches(layers, sizes), "neuronsim")
    np.testing.assert_allclose(streamed, whole, atol=1e-10)
    assert not np.allclose(streamed, streamed.T)  # asymmetric, as neuronsim is


def test_minibatch_cka_is_debiased_cka_for_one_batch_and_close_for_many():
    layers = _layers(n=2000)
    debiased = sim.pairwise(layers, measure="linear_cka", debiased=True, dtype=np.float64)
    one = stream_pairwise(_batches(layers, [2000]), method="minibatch")
    np.testing.assert_allclose(one, debiased, atol=1e-12)
    many = stream_pairwise(_batches(layers, [200] * 10), method="minibatch")
    np.testing.assert_allclose(many, debiased, atol=0.03)
    np.testing.assert_allclose(np.diag(many), 1.0)


def test_streamed_cka_keeps_the_invariances():
    layers = _layers()
    Q = ortho_group.rvs(8, random_state=0)
    turned = [layers[0] @ Q * 3.0 + 1.0] + layers[1:]
    for method in ("exact", "minibatch"):
        a = stream_pairwise(_batches(layers, [300, 300]), method=method)
        b = stream_pairwise(_batches(turned, [300, 300]), method=method)
        np.testing.assert_allclose(a, b, atol=1e-10)


def test_streaming_errors_name_the_problem():
    layers = _layers()
    with pytest.raises(ValueError, match="measure must be one of"):
        stream_pairwise(_batches(layers, [600]), "svcca")
    with pytest.raises(ValueError, match="empty"):
        stream_pairwise(iter([]))
    bad = [[layers[0][:10], layers[1][:9]]]
    with pytest.raises(ValueError, match="different numbers of rows"):
        stream_pairwise(bad)
    widths = [[layers[0][:10], layers[1][:10]], [layers[0][:10, :3], layers[1][:10]]]
    with pytest.raises(ValueError, match="widths"):
        stream_pairwise(widths)
    with pytest.raises(ValueError, match="at least 4"):
        stream_pairwise(_batches(layers, [3, 597]), method="minibatch")
    nan = [[np.full((5, 2), np.nan), layers[1][:5]]]
    with pytest.raises(ValueError, match="NaN"):
        stream_pairwise(nan)
    with pytest.raises(ValueError, match="minibatch"):
        stream_pairwise(_batches(layers, [600]), "neuronsim", method="minibatch")


@pytest.mark.parametrize("offset", [1e3, 3e4])
@pytest.mark.parametrize("sizes", [[2000], [500, 500, 1000], [1, 1999]])
def test_exact_streaming_equals_the_reference_far_from_the_origin(offset, sizes):
    """Layers offset by a random vector times up to 3e4 (a decoder's massive activations sit
    thousands of units out): centring raw moments at the end returned a debiased CKA of 7.69
    here; the shifted moments give the reference definition to 1e-8."""
    from analysis_lib.similarity import reference as R

    rng = np.random.default_rng(11)
    Z = rng.standard_normal((2000, 4))
    layers = [Z @ rng.standard_normal((4, 24)) + rng.standard_normal((2000, 24))
              + offset * rng.standard_normal(24) for _ in range(2)]
    for debiased in (False, True):
        streamed = stream_pairwise(_batches(layers, sizes), "linear_cka", debiased=debiased,
                                   backend="numpy")
        want = R.linear_cka(layers[0], layers[1], debiased=debiased)
        assert streamed[0, 1] == pytest.approx(want, abs=1e-8)
    streamed = stream_pairwise(_batches(layers, sizes), "neuronsim", backend="numpy")
    assert streamed[0, 1] == pytest.approx(R.neuronsim(layers[0], layers[1]), abs=1e-8)
    assert streamed[1, 0] == pytest.approx(R.neuronsim(layers[1], layers[0]), abs=1e-8)
