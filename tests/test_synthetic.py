"""The synthetic representations of the primer: each transform does what it says."""

import numpy as np
import pytest

from analysis_lib import similarity as sim
from analysis_lib.data import synthetic


@pytest.fixture(scope="module")
def X():
    return synthetic.representation(400, 12, seed=0)


def test_representation_has_the_decaying_spectrum(X):
    sd = np.sqrt(np.linalg.eigvalsh(np.cov(X.T))[::-1])
    expected = np.arange(1, 13) ** -0.7
    np.testing.assert_allclose(sd / sd[0], expected / expected[0], rtol=0.25)
    np.testing.assert_array_equal(X, synthetic.representation(400, 12, seed=0))
    assert not np.allclose(X, synthetic.representation(400, 12, seed=1))


def test_orthogonal_transforms_keep_the_gram_matrix(X):
    for Y in (synthetic.random_rotation(X), synthetic.rotate_pairs(X, np.pi / 5),
              synthetic.permute_neurons(X)):
        np.testing.assert_allclose(Y @ Y.T, X @ X.T, atol=1e-9)
    R = synthetic.rotate_pairs(X, np.pi / 4)
    # at 45 degrees each neuron is an equal blend of two: weights +-1/sqrt(2), twice
    Q, *_ = np.linalg.lstsq(X, R, rcond=None)
    big = np.abs(Q) > 1e-6
    assert (big.sum(axis=0) == 2).all()
    np.testing.assert_allclose(np.abs(Q[big]), 1 / np.sqrt(2), atol=1e-8)


def test_scaling_maps_and_noise(X):
    S = synthetic.scale_neurons(X, spread=10.0)
    ratio = S.std(0) / X.std(0)
    assert ratio.min() >= 0.1 - 1e-9 and ratio.max() <= 10 + 1e-9 and ratio.std() > 0.5
    A = synthetic.invertible_map(X)
    coef, *_ = np.linalg.lstsq(X, A, rcond=None)
    np.testing.assert_allclose(X @ coef, A, atol=1e-8)
    assert np.linalg.cond(coef) < 100
    N = synthetic.add_noise(X, 0.5)
    assert (N - X).var(axis=0).sum() == pytest.approx(0.5 * X.var(axis=0).sum(), rel=0.15)
    W = synthetic.warp(X)
    assert np.all(np.abs(W) <= 0.5 + 1e-12)  # tanh(2 z) / 2


def test_shared_subspace_shares_exactly_k_directions():
    X, Y = synthetic.shared_subspace(2000, 8, 3, seed=0)
    rho = sim.canonical_correlations(X, Y, None)
    assert np.all(rho[:3] > 0.999) and np.all(rho[3:] < 0.15)
    with pytest.raises(ValueError, match="k must be between 0 and d=8"):
        synthetic.shared_subspace(10, 8, 9)


def test_compare_equals_the_single_measures(X):
    Y = synthetic.add_noise(X, 0.3)
    out = synthetic.compare(X, Y, ("linear_cka", "svcca", "neuronsim"))
    assert out["linear_cka"] == pytest.approx(sim.linear_cka(X, Y), abs=1e-9)
    assert out["svcca"] == pytest.approx(sim.svcca(X, Y), abs=1e-9)
    assert out["neuronsim"] == pytest.approx(sim.neuronsim(X, Y), abs=1e-9)
