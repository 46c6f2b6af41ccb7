"""Properties every similarity measure must have: known values, invariances, symmetric cases,
agreement of the fast all-pairs path with the per-pair functions and with slow explicit
formulas, and clear errors on bad input."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ortho_group, pearsonr, spearmanr

from analysis_lib import similarity as sim
from analysis_lib.similarity import reference
from analysis_lib.similarity.rsa import ConstantSimilarity

SINGLE = {
    "neuronsim": sim.neuronsim,
    "mixedsim": sim.mixedsim,
    "svcca": sim.svcca,
    "pwcca": sim.pwcca,
    "linear_cka": sim.linear_cka,
    "procrustes": sim.procrustes,
    "cca": lambda X, Y: sim.cca(X, Y, warn=False).mean,
    "rsa": sim.rsa,
    "rbf_cka": sim.rbf_cka,
}
SYMMETRIC = ["svcca", "linear_cka", "procrustes", "cca", "rsa", "rbf_cka"]


def data(n=80, d1=6, d2=5, seed=0, shared=0.8):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, max(d1, d2)))
    X = Z[:, :d1] @ rng.standard_normal((d1, d1)) + 0.3 * rng.standard_normal((n, d1))
    Y = shared * Z[:, :d2] @ rng.standard_normal((d2, d2)) + rng.standard_normal((n, d2))
    return X, Y


# --------------------------------------------------------------------------- known values

def test_kornblith_demo_values():
    # the legacy global generator is what Kornblith et al.'s demo seeds
    np.random.seed(1337)  # noqa: NPY002
    X = np.random.randn(100, 10)  # noqa: NPY002
    Y = np.random.randn(100, 10) + X  # noqa: NPY002
    assert round(sim.linear_cka(X, Y), 5) == 0.55761
    assert round(sim.linear_cka(X, Y, debiased=True), 5) == 0.51346
    assert round(sim.rbf_cka(X, Y, threshold=0.5), 5) == 0.65483


def test_independent_gaussians_hit_the_documented_null_floor():
    rng = np.random.default_rng(0)
    n, d = 400, 50
    biased, debiased = [], []
    for _ in range(20):
        X, Y = rng.standard_normal((n, d)), rng.standard_normal((n, d))
        biased.append(sim.linear_cka(X, Y))
        debiased.append(sim.linear_cka(X, Y, debiased=True))
    assert abs(np.mean(biased) - d / (n - 1 + d)) < 0.01
    assert abs(np.mean(debiased)) < 0.01


# --------------------------------------------------------------------------- self and symmetry

@pytest.mark.parametrize("name", list(SINGLE))
def test_self_similarity_is_one(name):
    X, _ = data()
    assert abs(SINGLE[name](X, X) - 1) < 1e-6


@pytest.mark.parametrize("name", SYMMETRIC)
def test_symmetric_measures_are_symmetric(name):
    X, Y = data()
    assert abs(SINGLE[name](X, Y) - SINGLE[name](Y, X)) < 1e-9


@pytest.mark.parametrize("name", ["neuronsim", "mixedsim", "pwcca"])
def test_asymmetric_measures_are_documented_as_such(name):
    X, Y = data(d1=8, d2=3)
    a, b = SINGLE[name](X, Y), SINGLE[name](Y, X)
    assert a != pytest.approx(b, abs=1e-6)
    assert 0 <= a <= 1 and 0 <= b <= 1


# --------------------------------------------------------------------------- invariances

def test_cka_family_invariances():
    X, Y = data(n=60, d1=7, d2=7, seed=3)
    Q = ortho_group.rvs(7, random_state=1)
    base = {f: f(X, Y) for f in (sim.linear_cka, sim.rbf_cka, sim.procrustes, sim.rsa)}
    for f, value in base.items():
        assert f(X @ Q, Y) == pytest.approx(value, abs=1e-9), f.__name__
        assert f(3.7 * X, Y) == pytest.approx(value, abs=1e-9), f.__name__
        if f is not sim.rsa:  # RSA's cosine kernel is not translation invariant, by design
            assert f(X + 5.0, Y - 2.0) == pytest.approx(value, abs=1e-9), f.__name__
    assert sim.linear_cka(X + 5, Y, debiased=True) == pytest.approx(
        sim.linear_cka(X, Y, debiased=True), abs=1e-9)


def test_cca_family_invariant_to_invertible_maps():
    X, Y = data(n=200, d1=6, d2=4, seed=4)
    rng = np.random.default_rng(7)
    Ax, Ay = rng.standard_normal((6, 6)), rng.standard_normal((4, 4))
    Xt, Yt = X @ Ax + 4.0, Y @ Ay - 1.0
    assert sim.cca(Xt, Yt, warn=False).mean == pytest.approx(sim.cca(X, Y, warn=False).mean,
                                                              abs=1e-9)
    assert sim.svcca(Xt, Yt, variance=None) == pytest.approx(sim.svcca(X, Y, variance=None),
                                                             abs=1e-9)
    np.testing.assert_allclose(sim.canonical_correlations(Xt, Yt, None),
                               sim.canonical_correlations(X, Y, None), atol=1e-9)
    # PWCCA's weights depend on X's neurons: scaling and translation only
    assert sim.pwcca(2 * X + 1, Y) == pytest.approx(sim.pwcca(X, Y), abs=1e-9)


def test_neuronsim_invariant_to_neuron_permutation_and_per_neuron_affine():
    X, Y = data()
    perm = np.random.default_rng(0).permutation(X.shape[1])
    scale = np.linspace(0.5, 3, X.shape[1]) * np.where(np.arange(X.shape[1]) % 2, -1, 1)
    assert sim.neuronsim(X[:, perm] * scale + 9, Y) == pytest.approx(sim.neuronsim(X, Y))
    assert sim.mixedsim(X, Y @ np.random.default_rng(1).standard_normal((5, 5))) == \
        pytest.approx(sim.mixedsim(X, Y), abs=1e-9)


shapes = st.tuples(st.integers(4, 30), st.integers(1, 12), st.integers(1, 12),
                   st.integers(0, 2**16))


@settings(max_examples=60, deadline=None)
@given(shapes)
def test_properties_over_shapes(shape):
    n, d1, d2, seed = shape
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((n, d1)), rng.standard_normal((n, d2))
    Q = ortho_group.rvs(d1, random_state=seed) if d1 > 1 else np.array([[-1.0]])
    cka = sim.linear_cka(X, Y)
    assert 0 <= cka <= 1 + 1e-12
    assert sim.linear_cka(X @ Q * 2 + 1, Y) == pytest.approx(cka, abs=1e-8)
    assert sim.linear_cka(X, Y, form="gram") == pytest.approx(
        sim.linear_cka(X, Y, form="feature"), abs=1e-9)
    assert sim.linear_cka(X, Y, debiased=True, form="gram") == pytest.approx(
        sim.linear_cka(X, Y, debiased=True, form="feature"), abs=1e-7)
    for name in ("neuronsim", "mixedsim", "svcca", "pwcca", "procrustes"):
        value = SINGLE[name](X, Y)
        assert np.isfinite(value) and -1e-9 <= value <= 1 + 1e-9, name
    if min(d1, d2) > 1:
        assert -1 - 1e-9 <= sim.rsa(X, Y) <= 1 + 1e-9  # a correlation
    else:  # one neuron: cosine similarities are all +-1, possibly all equal
        try:
            assert -1 - 1e-9 <= sim.rsa(X, Y) <= 1 + 1e-9
        except ValueError as error:
            assert "constant" in str(error)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = sim.cca(X, Y).correlations
    if n - 1 <= min(d1, d2):  # more dimensions than centred points: correlations are 1
        assert np.allclose(rho[: n - 1 - max(0, n - 1 - min(d1, d2))], 1, atol=1e-6)
    assert np.all((rho >= 0) & (rho <= 1))


# --------------------------------------------------------------------------- fast vs slow

def _explicit_cka(X, Y):
    n = X.shape[0]
    H = np.eye(n) - 1.0 / n
    K, L = X @ X.T, Y @ Y.T
    hsic = lambda A, B: np.trace(A @ H @ B @ H)  # noqa: E731
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


def _explicit_svcca(X, Y, variance):
    def basis(A):
        A = A - A.mean(0)
        U, s, _ = np.linalg.svd(A, full_matrices=False)
        frac = np.cumsum(s ** 2) / np.sum(s ** 2)
        k = int(np.searchsorted(frac, variance) + 1)
        return U[:, :k]
    return np.linalg.svd(basis(X).T @ basis(Y), compute_uv=False)


def _explicit_pwcca(X, Y, variance):
    def basis(A):
        A = A - A.mean(0)
        U, s, _ = np.linalg.svd(A, full_matrices=False)
        frac = np.cumsum(s ** 2) / np.sum(s ** 2)
        return U[:, : int(np.searchsorted(frac, variance) + 1)]
    X0, Y0 = basis(X), basis(Y)
    u, rho, _ = np.linalg.svd(X0.T @ Y0, full_matrices=False)
    H = X0 @ u
    alpha = np.abs(H.T @ (X - X.mean(0))).sum(axis=1)
    return (alpha / alpha.sum()) @ rho


def _explicit_mixedsim(X, Y):
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    coef, *_ = np.linalg.lstsq(Yc, Xc, rcond=None)
    return np.mean(np.linalg.norm(Yc @ coef, axis=0) / np.linalg.norm(Xc, axis=0))


def _explicit_neuronsim(X, Y):
    d1 = X.shape[1]
    R = np.corrcoef(X.T, Y.T)[:d1, d1:]
    return np.abs(R).max(axis=1).mean()


def test_measures_equal_explicit_formulas():
    X, Y = data(n=150, d1=9, d2=6, seed=11)
    assert sim.linear_cka(X, Y) == pytest.approx(_explicit_cka(X, Y), abs=1e-10)
    np.testing.assert_allclose(sim.canonical_correlations(X, Y, 0.9),
                               _explicit_svcca(X, Y, 0.9), atol=1e-10)
    assert sim.pwcca(X, Y, 0.9) == pytest.approx(_explicit_pwcca(X, Y, 0.9), abs=1e-10)
    assert sim.pwcca(Y, X, 0.9) == pytest.approx(_explicit_pwcca(Y, X, 0.9), abs=1e-10)
    assert sim.mixedsim(X, Y) == pytest.approx(_explicit_mixedsim(X, Y), abs=1e-10)
    assert sim.neuronsim(X, Y) == pytest.approx(_explicit_neuronsim(X, Y), abs=1e-10)


@pytest.mark.parametrize("kernel", ["cosine", "correlation", "euclidean"])
@pytest.mark.parametrize("compare", ["pearson", "spearman"])
def test_rsa_equals_correlation_of_explicit_matrices(kernel, compare):
    X, Y = data(n=40, seed=5)
    X, Y = X + 0.5, Y - 0.2

    def matrix(A):
        if kernel == "euclidean":
            return -np.linalg.norm(A[:, None] - A[None], axis=2)
        if kernel == "correlation":
            A = A - A.mean(1, keepdims=True)
        A = A / np.linalg.norm(A, axis=1, keepdims=True)
        return A @ A.T

    iu = np.triu_indices(40, k=1)
    a, b = matrix(X)[iu], matrix(Y)[iu]
    expected = (pearsonr if compare == "pearson" else spearmanr)(a, b)[0]
    assert sim.rsa(X, Y, kernel, compare) == pytest.approx(expected, abs=1e-10)


def test_rsa_at_five_thousand_stimuli_stays_linear_in_memory():
    import tracemalloc

    rng = np.random.default_rng(0)
    X = rng.standard_normal((5000, 64)).astype(np.float32)
    Y = X + rng.standard_normal((5000, 64)).astype(np.float32)
    tracemalloc.start()
    value = sim.rsa(X, Y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # one dense 5000 x 5000 float64 similarity matrix alone would be 200 MB
    assert peak < 20e6, f"peak {peak / 1e6:.0f} MB"
    iu = np.triu_indices(1500, k=1)
    sub = sim.rsa(X[:1500], Y[:1500])
    Xh = X[:1500] / np.linalg.norm(X[:1500], axis=1, keepdims=True)
    Yh = Y[:1500] / np.linalg.norm(Y[:1500], axis=1, keepdims=True)
    assert sub == pytest.approx(pearsonr((Xh @ Xh.T)[iu], (Yh @ Yh.T)[iu])[0], abs=1e-6)
    assert 0.3 < value < 1


ALL_REP = ["neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka", "procrustes", "cca", "rsa",
           "rbf_cka"]


@pytest.mark.parametrize("name", ALL_REP)
def test_pairwise_equals_per_pair_loop(name):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((120, 5))
    layers = [base @ rng.standard_normal((5, d)) + 0.5 * rng.standard_normal((120, d))
              for d in (4, 6, 5)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        M = sim.pairwise(layers, measure=name)
        other = sim.pairwise(layers[:2], layers, measure=name)
        for i, X in enumerate(layers):
            for j, Y in enumerate(layers):
                expected = SINGLE[name](X, Y)
                assert M[i, j] == pytest.approx(expected, abs=1e-9), (i, j)
                if i < 2:
                    assert other[i, j] == pytest.approx(expected, abs=1e-9), (i, j)


def test_suite_equals_single_measures_float32():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((600, 40))
    layers = [(base @ rng.standard_normal((40, 32)) + rng.standard_normal((600, 32)) + 50)
              .astype(np.float32) for _ in range(4)]
    names = ["neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka"]
    suite = sim.pairwise_suite(layers, measures=names)
    for name in names:
        for i in range(4):
            for j in range(4):
                assert suite[name][i, j] == pytest.approx(
                    SINGLE[name](layers[i], layers[j]), abs=1e-6), (name, i, j)


# --------------------------------------------------------------------------- hard inputs

def test_rank_deficient_y_mixedsim_matches_lstsq():
    rng = np.random.default_rng(8)
    Z = rng.standard_normal((100, 3))
    Y = Z @ rng.standard_normal((3, 7))  # 7 neurons, rank 3
    X = Z[:, :2] @ rng.standard_normal((2, 4)) + 0.5 * rng.standard_normal((100, 4))
    assert sim.mixedsim(X, Y) == pytest.approx(_explicit_mixedsim(X, Y), abs=1e-8)
    assert sim.mixedsim(X, Y) < 0.99


def test_svcca_pwcca_handle_repeated_and_zero_variance_directions():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((80, 5))
    Xr = np.hstack([X, X[:, :2], np.zeros((80, 2)), np.full((80, 1), 3.0)])
    Y = X @ rng.standard_normal((5, 5)) + 0.1 * rng.standard_normal((80, 5))
    for f in (sim.svcca, sim.pwcca):
        for v in (0.99, None):
            a, b = f(Xr, Y, v), f(Y, Xr, v)
            assert np.isfinite(a) and np.isfinite(b) and 0 < a <= 1 and 0 < b <= 1
    assert sim.svcca(Xr, Y, None) == pytest.approx(sim.svcca(X, Y, None), abs=1e-8)


def test_constant_neurons_are_left_out_by_definition():
    X, Y = data()
    Xk = np.hstack([X, np.full((X.shape[0], 1), 2.0)])
    assert sim.neuronsim(Xk, Y) == pytest.approx(sim.neuronsim(X, Y))
    assert sim.mixedsim(Xk, Y) == pytest.approx(sim.mixedsim(X, Y))
    assert sim.neuronsim(Y, Xk) == pytest.approx(sim.neuronsim(Y, X))
    assert sim.linear_cka(Xk, Y) == pytest.approx(sim.linear_cka(X, Y))
    with pytest.raises(ValueError, match="constant"):
        sim.neuronsim(np.ones((10, 3)), Y[:10])
    with pytest.raises(ValueError, match="no variance"):
        sim.linear_cka(np.ones((10, 3)), Y[:10])


@pytest.mark.parametrize("name", list(SINGLE))
def test_bad_inputs_raise_clear_errors(name):
    f = SINGLE[name]
    X, Y = data()
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        f(bad, Y)
    inf = X.copy()
    inf[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        f(X, inf) if name != "rsa" else f(inf, Y)
    with pytest.raises(ValueError, match="same rows"):
        f(X, Y[:-1])
    with pytest.raises(ValueError, match="rows"):
        f(X[:1], Y[:1])
    with pytest.raises(ValueError, match="2-D"):
        f(X[:, 0], Y)
    with pytest.raises(TypeError, match="numeric"):
        f(np.array([["a", "b"], ["c", "d"]]), Y[:2])


def test_float32_with_large_means_matches_float64():
    rng = np.random.default_rng(12)
    X64 = 1000 + rng.standard_normal((500, 20))
    Y64 = -500 + X64 @ rng.standard_normal((20, 15)) * 0.1 + rng.standard_normal((500, 15))
    X32, Y32 = X64.astype(np.float32), Y64.astype(np.float32)
    X64, Y64 = X32.astype(np.float64), Y32.astype(np.float64)  # same numbers
    for name in ("neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka", "procrustes", "rsa"):
        assert SINGLE[name](X32, Y32) == pytest.approx(SINGLE[name](X64, Y64), abs=2e-5), name


def test_cca_warns_and_regularises_when_n_is_small():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((30, 20)), rng.standard_normal((30, 20))
    with pytest.warns(UserWarning, match="over-fits"):
        plain = sim.cca(X, Y)
    ridge = sim.cca(X, Y, reg=1.0)
    assert np.allclose(plain.correlations[:9], 1.0)  # 29 centred points, 40 dimensions
    assert ridge.mean < plain.mean - 0.2
    assert ridge.r2 == pytest.approx(np.mean(ridge.correlations ** 2))


def test_released_code_options_differ_from_the_paper_definition():
    rng = np.random.default_rng(13)
    X = rng.standard_normal((300, 12)) * np.linspace(0.2, 5, 12)
    Y = X @ rng.standard_normal((12, 10)) + 2 * rng.standard_normal((300, 10))
    paper = sim.canonical_correlations(X, Y, 0.9)
    below = sim.canonical_correlations(X, Y, 0.9, cut="below")
    assert len(below) == len(paper) - 1
    assert sim.svcca(X, Y, 0.9, standardize=True) != pytest.approx(sim.svcca(X, Y, 0.9))
    assert sim.pwcca(X, Y, 0.9, standardize=True, cut="below") != pytest.approx(
        sim.pwcca(X, Y, 0.9))
    # standardising means every neuron counts the same: equals SVCCA on z-scored input
    Z = (X - X.mean(0)) / X.std(0)
    W = (Y - Y.mean(0)) / Y.std(0)
    assert sim.svcca(X, Y, 0.9, standardize=True) == pytest.approx(sim.svcca(Z, W, 0.9),
                                                                    abs=1e-9)


def test_pwcca_works_whichever_side_is_wider():
    X, Y = data(n=100, d1=12, d2=3)
    assert 0 < sim.pwcca(X, Y) <= 1 and 0 < sim.pwcca(Y, X) <= 1


def test_top_k_and_per_neuron():
    X, Y = data()
    per = sim.neuron_correlations(X, Y)
    assert per.shape == (X.shape[1],)
    assert sim.neuronsim(X, Y, top_k=2) == pytest.approx(np.sort(per)[-2:].mean())
    assert sim.neuronsim(X, Y, top_k=2) >= sim.neuronsim(X, Y)


# --------------------------------------------------------------------------- attention

def _random_maps(rng, heads, lengths, extra=0):
    maps = []
    for t in lengths:
        a = rng.random((heads, t, t + extra)) ** 3
        maps.append(a / a.sum(-1, keepdims=True))
    return maps


@pytest.mark.parametrize("method", ["js", "pearson", "frobenius"])
def test_identical_attention_scores_one(method):
    rng = np.random.default_rng(0)
    A = _random_maps(rng, 4, [5, 7, 3], extra=2)
    assert sim.attention_similarity(A, A, method) == pytest.approx(1.0, abs=1e-9)
    B = _random_maps(rng, 3, [5, 7, 3], extra=2)
    value = sim.attention_similarity(A, B, method)
    assert value < 1 - 1e-3 and (-1 <= value <= 1)


def test_js_uniform_against_one_hot_closed_form():
    t = 6
    uniform = [np.full((1, t, t), 1.0 / t)]
    one_hot = [np.tile(np.eye(t)[None], (1, 1, 1))]
    m1 = (1 / t + 1) / 2
    js = 0.5 * np.log2(1 / m1) + 0.5 * ((1 / t) * np.log2((1 / t) / m1) + (t - 1) / t)
    assert sim.attention_similarity(uniform, one_hot, "js") == pytest.approx(1 - js, abs=1e-12)
    nats = sim.attention_similarity(uniform, one_hot, "js", base=np.e)
    assert 1 - nats == pytest.approx(js * np.log(2), abs=1e-12)


def test_attention_methods_against_explicit_loops():
    rng = np.random.default_rng(4)
    A, B = _random_maps(rng, 3, [4, 6]), _random_maps(rng, 2, [4, 6])

    def best(score):
        return np.mean([max(score(h, g) for g in range(2)) for h in range(3)])

    def js(p, q):
        m = (p + q) / 2
        kl = lambda a, b: np.sum(a * np.log2(a / b))  # noqa: E731
        return (kl(p, m) + kl(q, m)) / 2

    js_sim = best(lambda h, g: 1 - np.mean([js(a[h, i], b[g, i]) for a, b in zip(A, B)
                                            for i in range(a.shape[1])]))
    pe_sim = best(lambda h, g: np.mean([np.corrcoef(a[h, i], b[g, i])[0, 1]
                                        for a, b in zip(A, B) for i in range(a.shape[1])]))
    fr_sim = best(lambda h, g: np.mean([1 - np.linalg.norm(a[h] - b[g]) / np.sqrt(2 * a.shape[1])
                                        for a, b in zip(A, B)]))
    assert sim.attention_similarity(A, B, "js") == pytest.approx(js_sim, abs=1e-12)
    assert sim.attention_similarity(A, B, "pearson") == pytest.approx(pe_sim, abs=1e-12)
    assert sim.attention_similarity(A, B, "frobenius") == pytest.approx(fr_sim, abs=1e-12)
    M = sim.pairwise([A, B], measure="attention_js")
    assert M[0, 1] == pytest.approx(js_sim, abs=1e-12)
    assert M[1, 0] == pytest.approx(sim.attention_similarity(B, A, "js"), abs=1e-12)


def test_attention_representation_shape_and_use():
    rng = np.random.default_rng(5)
    A = _random_maps(rng, 4, [3, 5])
    R = sim.attention_representation(A)
    assert R.shape == (9 + 25, 4)
    assert sim.linear_cka(R, R) == pytest.approx(1.0, abs=1e-6)


def test_attention_bad_input():
    rng = np.random.default_rng(6)
    A = _random_maps(rng, 2, [4])
    with pytest.raises(ValueError, match="probability"):
        sim.attention_similarity([A[0] * 2], A)
    with pytest.raises(ValueError, match="same sentences"):
        sim.attention_similarity(A, _random_maps(rng, 2, [5]))
    with pytest.raises(ValueError, match="method"):
        sim.attention_similarity(A, A, "cosine")


# --------------------------------------------------------------------------- localization, stats

def test_localization_plain_and_standardized():
    N = np.array([[1, .5, .3], [.5, 1, .7], [.1, .9, 1.]])
    S = np.array([[1, .6, .2], [.6, 1, .4], [.2, .4, 1.]])
    n_mean = np.array([(.5 + .1) / 2, (.5 + .9) / 2, (.3 + .7) / 2])
    s_mean = np.array([(.6 + .2) / 2, (.6 + .4) / 2, (.2 + .4) / 2])
    np.testing.assert_allclose(sim.localization(N, S), n_mean - s_mean)
    z = lambda x: (x - x.mean()) / x.std()  # noqa: E731
    np.testing.assert_allclose(sim.localization(N, S, standardize=True), z(n_mean) - z(s_mean))
    with pytest.raises(ValueError, match="square"):
        sim.localization(N[:2], S)


def test_bootstrap_interval_and_reproducibility():
    X, Y = data(n=100, d1=5, d2=5)
    r1 = sim.bootstrap(X, Y, "linear_cka", n_boot=200, seed=1)
    r2 = sim.bootstrap(X, Y, "linear_cka", n_boot=200, seed=1)
    assert r1.low < r1.estimate < r1.high and r1.low == r2.low
    assert r1.estimate == pytest.approx(sim.linear_cka(X, Y))
    layers = [X, Y, X + Y]
    R = sim.bootstrap(layers, measure="svcca", n_boot=30, seed=0, groups=np.arange(100) // 4)
    assert R.estimate.shape == R.low.shape == (3, 3)
    assert np.all(R.low <= R.estimate + 1e-9) and np.all(R.estimate <= R.high + 1e-9)


def test_basic_bootstrap_interval_reflects_the_percentile_one():
    X, Y = data(n=60, d1=5, d2=5)
    pct = sim.bootstrap(X, Y, "linear_cka", n_boot=100, seed=3, interval="percentile")
    basic = sim.bootstrap(X, Y, "linear_cka", n_boot=100, seed=3, interval="basic")
    normal = sim.bootstrap(X, Y, "linear_cka", n_boot=100, seed=3)
    np.testing.assert_array_equal(pct.samples, basic.samples)
    np.testing.assert_array_equal(pct.samples, normal.samples)
    assert basic.low == pytest.approx(2 * pct.estimate - pct.high)
    assert basic.high == pytest.approx(2 * pct.estimate - pct.low)
    half = 1.959964 * np.std(normal.samples, ddof=1)
    assert (normal.low, normal.high) == pytest.approx((normal.estimate - half,
                                                       normal.estimate + half))
    with pytest.raises(ValueError, match="interval must be one of"):
        sim.bootstrap(X, Y, n_boot=10, interval="bca")


def test_the_default_interval_holds_its_estimate_where_duplicates_shift_the_resamples():
    """500 x 64 unrelated layers: duplicated rows raise resampled CKA far above the
    estimate, so the percentile interval misses it; the default interval reads the spread
    around the estimate."""
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((500, 64)), rng.standard_normal((500, 64))
    pct = sim.bootstrap(X, Y, n_boot=60, seed=0, interval="percentile", backend="numpy")
    assert not pct.low <= pct.estimate <= pct.high
    default = sim.bootstrap(X, Y, n_boot=60, seed=0, backend="numpy")
    assert default.low < default.estimate < default.high


def test_the_default_interval_covers_a_known_value_at_its_nominal_rate():
    """Where the resampling shifts nothing (3 neurons, 300 rows), the default interval of
    linear CKA covers the population value (from 200,000 rows) in about 95% of samples:
    60 samples, so the rate must lie within about three binomial standard errors."""
    rng = np.random.default_rng(0)
    mix = rng.standard_normal((3, 3))

    def draw(n, gen):
        X = gen.standard_normal((n, 3))
        return X, X @ mix + 1.5 * gen.standard_normal((n, 3))

    truth = sim.linear_cka(*draw(200_000, rng))
    hits = 0
    for k in range(60):
        found = sim.bootstrap(*draw(300, np.random.default_rng(100 + k)), n_boot=60, seed=k,
                              backend="numpy")
        hits += found.low <= truth <= found.high
    assert 0.83 <= hits / 60 <= 1.0, hits


def test_grouped_bootstrap_resamples_whole_groups(monkeypatch):
    from analysis_lib.similarity import stats

    X, Y = data(n=40, d1=4, d2=4)
    groups = np.arange(40) // 5
    seen = []
    real = stats._compute
    monkeypatch.setattr(stats, "_compute",
                        lambda A, B, m, o: seen.append(len(A[0])) or real(A, B, m, o))
    sim.bootstrap(X, Y, "linear_cka", n_boot=20, seed=0, groups=groups)
    assert set(seen[1:]) == {40}  # eight groups of five rows, drawn with replacement
    # the resample is group_weights' (the one rule both group bootstraps draw by)
    drawn = []
    monkeypatch.setattr(stats, "_compute",
                        lambda A, B, m, o: drawn.append(A[0]) or real(A, B, m, o))
    sim.bootstrap(X, Y, "linear_cka", n_boot=3, seed=4, groups=groups)
    rng = np.random.default_rng(4)
    for resample in drawn[1:]:
        weights = stats.group_weights(groups, rng)
        np.testing.assert_array_equal(resample, X[np.repeat(np.arange(40), weights)])
    with pytest.raises(ValueError, match="one entry per row"):
        sim.bootstrap(X, Y, n_boot=5, groups=groups[:-1])


def test_group_permutation_moves_groups_as_wholes():
    from analysis_lib.similarity import stats

    groups = np.repeat(np.arange(6), [3, 3, 2, 2, 4, 4])
    index = stats._group_index(groups, len(groups))
    rows = stats._shuffle_groups(index, np.random.default_rng(0), len(groups))
    assert sorted(rows) == list(range(len(groups)))
    for members in index:  # each group lands on one group of the same size, in order
        target = rows[members]
        assert any(np.array_equal(target, other) for other in index)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((18, 3))
    with pytest.warns(RuntimeWarning, match="only 8 distinct shuffles"):
        result = sim.permutation_test(X, X + 0.1 * rng.standard_normal((18, 3)), n_perm=50,
                                      seed=0, groups=groups)
    # swapping only groups of equal size allows 2! * 2! * 2! = 8 arrangements, so the null
    # holds at most 8 values and the identity comes up about one time in eight
    assert len(np.unique(result.null.round(12))) <= 8
    assert result.p_value > 0.05


def test_permutation_test_detects_relation_and_its_absence():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 5))
    related = sim.permutation_test(X, X + rng.standard_normal((80, 5)), n_perm=99, seed=0)
    unrelated = sim.permutation_test(X, rng.standard_normal((80, 5)), n_perm=99, seed=0)
    assert related.p_value == pytest.approx(0.01)
    assert unrelated.p_value > 0.05
    M = sim.permutation_test([X, X + 0.1], n_perm=19, seed=0, measure="rsa")
    assert M.p_value.shape == (2, 2) and np.all(M.p_value == pytest.approx(0.05))


def test_unknown_measure_and_option():
    X, Y = data()
    with pytest.raises(ValueError, match="unknown measure 'cos'"):
        sim.pairwise([X], measure="cos")
    with pytest.raises(TypeError, match="option 'varianse' is not taken by svcca: did you "
                                        r"mean 'variance'\? no measure takes it"):
        sim.pairwise([X], measure="svcca", varianse=0.9)
    with pytest.raises(TypeError, match="option 'variance' is not taken by linear_cka: it "
                                        "applies to svcca, pwcca"):
        sim.pairwise([X], measure="linear_cka", variance=0.5)
    with pytest.raises(TypeError, match="pairwise_suite"):
        sim.pairwise([X], measure=["svcca", "linear_cka"])
    # in a suite an option goes to the measures that take it
    out = sim.pairwise_suite([X, Y], measures=["svcca", "linear_cka"], variance=0.5)
    assert out["svcca"][0, 1] == pytest.approx(sim.svcca(X, Y, 0.5))
    assert out["linear_cka"][0, 1] == pytest.approx(sim.linear_cka(X, Y))


@pytest.mark.parametrize("measure, options, single", [
    ("svcca", dict(standardize=True, cut="below", variance=0.9),
     lambda X, Y: sim.svcca(X, Y, 0.9, standardize=True, cut="below")),
    ("pwcca", dict(standardize=True, variance=0.8),
     lambda X, Y: sim.pwcca(X, Y, 0.8, standardize=True)),
    ("svcca", dict(top_k=3), lambda X, Y: sim.svcca(X, Y, top_k=3)),
    ("neuronsim", dict(top_k=2), lambda X, Y: sim.neuronsim(X, Y, top_k=2)),
    ("mixedsim", dict(top_k=2), lambda X, Y: sim.mixedsim(X, Y, top_k=2)),
    ("linear_cka", dict(debiased=True), lambda X, Y: sim.linear_cka(X, Y, debiased=True)),
    ("cca", dict(reg=0.1), lambda X, Y: sim.cca(X, Y, reg=0.1).mean),
    ("rsa", dict(kernel="correlation", compare="spearman"),
     lambda X, Y: sim.rsa(X, Y, "correlation", "spearman")),
    ("rsa", dict(kernel="euclidean"), lambda X, Y: sim.rsa(X, Y, "euclidean")),
    ("rbf_cka", dict(threshold=0.5), lambda X, Y: sim.rbf_cka(X, Y, 0.5)),
    ("rbf_cka", dict(debiased=True), lambda X, Y: sim.rbf_cka(X, Y, debiased=True)),
])
def test_pairwise_forwards_every_option(measure, options, single):
    X, Y = data(n=80, d1=10, d2=7)
    M = sim.pairwise([X, Y], measure=measure, **options)
    assert M[0, 1] == pytest.approx(single(X, Y), abs=1e-6)
    assert M[1, 0] == pytest.approx(single(Y, X), abs=1e-6)
    default = sim.pairwise([X, Y], measure=measure)
    assert not np.isclose(default[0, 1], M[0, 1])  # the option changed the number


def test_registry_records_every_measure():
    assert set(sim.REGISTRY) == set(sim.MEASURES)
    assert sim.canonical("ckasim") == "linear_cka" and sim.canonical("pwsim") == "pwcca"
    for name, record in sim.REGISTRY.items():
        X, Y = data(n=60, d1=6, d2=5)
        if not record.rows:  # attention maps
            continue
        M = sim.pairwise([X, Y], measure=name)
        if record.symmetric:
            assert M[0, 1] == pytest.approx(M[1, 0], abs=1e-9), name
        else:  # the asymmetric ones really are, on unequal widths
            assert M[0, 1] != pytest.approx(M[1, 0], abs=1e-9), name


def test_weighted_rsa_equals_the_resampled_multiset_without_copy_pairs():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((30, 6))
    Y = X + rng.standard_normal((30, 6))
    assert sim.rsa(X, Y, weights=np.ones(30, dtype=int)) == pytest.approx(sim.rsa(X, Y),
                                                                          abs=1e-12)
    w = rng.multinomial(30, np.full(30, 1 / 30))
    rows = np.repeat(np.arange(30), w)
    # explicit: similarity matrices of the resample, pairs of copies of one stimulus removed
    Xh = X[rows] / np.linalg.norm(X[rows], axis=1, keepdims=True)
    Yh = Y[rows] / np.linalg.norm(Y[rows], axis=1, keepdims=True)
    i, j = np.triu_indices(len(rows), k=1)
    distinct = rows[i] != rows[j]
    a = np.sum(Xh[i] * Xh[j], axis=1)[distinct]
    b = np.sum(Yh[i] * Yh[j], axis=1)[distinct]
    assert sim.rsa(X, Y, weights=w) == pytest.approx(np.corrcoef(a, b)[0, 1], abs=1e-10)
    # keeping the copy pairs would inflate it
    assert sim.rsa(X[rows], Y[rows]) > sim.rsa(X, Y, weights=w)
    with pytest.raises(ValueError, match="non-negative integers"):
        sim.rsa(X, Y, weights=np.full(30, 0.5))
    with pytest.raises(ValueError, match="cosine or correlation kernel with Pearson"):
        sim.rsa(X, Y, "euclidean", weights=w)


def test_prepared_weighted_rsa_serves_many_resamples_with_the_same_values():
    """One WeightedRSA, prepared once, gives every resample the value of ``rsa(weights=)``
    and of the explicit multiset; a resample of copies of rows that point one way is
    undefined (ConstantSimilarity), not a number."""
    rng = np.random.default_rng(8)
    X = rng.standard_normal((40, 7)) + 5.0  # an offset: the rows are far from centred
    Y = X @ rng.standard_normal((7, 9)) + rng.standard_normal((40, 9))
    prepared = sim.WeightedRSA(X, Y)
    for _ in range(5):
        w = rng.multinomial(40, np.full(40, 1 / 40))
        rows = np.repeat(np.arange(40), w)
        want = reference.rsa(X, Y, weights=w)
        assert prepared(w) == pytest.approx(want, abs=1e-10)
        assert prepared(w) == pytest.approx(sim.rsa(X, Y, weights=w), abs=1e-12)
        assert sim.rsa(X[rows], Y[rows]) > prepared(w)  # copy pairs left out
    same_way = X.copy()
    same_way[:3] = X[0] * np.array([[1.0], [2.0], [3.0]])
    w = np.zeros(40, dtype=np.int64)
    w[:3] = [2, 1, 1]
    with pytest.raises(ConstantSimilarity):
        sim.WeightedRSA(same_way, Y)(w)
    with pytest.raises(ValueError, match="40 non-negative integers"):
        prepared(np.ones(39, dtype=np.int64))


def test_a_prepared_side_shared_by_several_pairs_gives_each_pair_its_own_values():
    """A WeightedSide prepared once and paired with several Y gives, for every resample and
    for the plain RSA (no weights), exactly what a WeightedRSA prepared from the arrays
    gives; the plain call is the RSA of every stimulus once. Sides of another kernel or of
    another number of rows are refused by name."""
    from analysis_lib.similarity.rsa import WeightedSide

    rng = np.random.default_rng(12)
    X = rng.standard_normal((50, 6)) + 3.0
    side = WeightedSide(X)
    for k in range(3):
        Y = X @ rng.standard_normal((6, 8)) + (k + 1) * rng.standard_normal((50, 8))
        shared, own = sim.WeightedRSA(side, Y), sim.WeightedRSA(X, Y)
        assert shared() == own()
        assert shared() == pytest.approx(reference.rsa(X, Y), abs=1e-10)
        w = rng.multinomial(50, np.full(50, 1 / 50))
        assert shared(w) == own(w)
    with pytest.raises(ValueError, match="prepared with the cosine kernel"):
        sim.WeightedRSA(side, X, kernel="correlation")
    with pytest.raises(ValueError, match="rows"):
        sim.WeightedRSA(side, X[:40])
    with pytest.raises(ValueError, match="cosine or correlation kernel"):
        WeightedSide(X, kernel="euclidean")
    flat = np.tile(X[:1], (50, 1))
    with pytest.raises(ConstantSimilarity):
        sim.WeightedRSA(flat, X)()  # every stimulus alike: undefined, as rsa() says


@pytest.mark.parametrize("scale", [1e20, 1e-25])
def test_extreme_magnitudes_in_float32_give_the_same_numbers(scale):
    rng = np.random.default_rng(0)
    X0 = rng.standard_normal((100, 5))
    Y0 = X0 + 0.3 * rng.standard_normal((100, 5))
    X, Y = (X0 * scale).astype(np.float32), (Y0 * scale).astype(np.float32)
    for measure in ("linear_cka", "mixedsim", "svcca", "neuronsim", "pwcca", "procrustes",
                    "rsa"):
        M = sim.pairwise([X, Y], measure=measure)
        assert np.isfinite(M).all(), measure
        assert M[0, 1] == pytest.approx(sim.pairwise([X0, Y0], measure=measure)[0, 1],
                                        abs=1e-4), measure


def test_rsa_of_a_constant_similarity_matrix_is_an_error_at_any_size():
    rng = np.random.default_rng(0)
    for n in (50, 2000):
        # every stimulus the same direction: all cosines are 1
        X = np.tile(rng.standard_normal(8), (n, 1)) * rng.uniform(1, 2, (n, 1))
        Y = rng.standard_normal((n, 8))
        with pytest.raises(ValueError, match="similarity matrix is constant"):
            sim.rsa(X, Y)
        with pytest.raises(ValueError, match="similarity matrix is constant"):
            sim.pairwise([X, Y], measure="rsa")
    # a large common component is not constancy: the small differences still count
    Z = 1000 + rng.standard_normal((500, 20))
    assert np.isfinite(sim.rsa(Z, Z + 0.1 * rng.standard_normal((500, 20))))


def test_a_single_group_is_refused_not_given_a_zero_width_interval():
    X, Y = data(n=40, d1=3, d2=3)
    with pytest.raises(ValueError, match="single group"):
        sim.bootstrap(X, Y, n_boot=10, groups=np.zeros(40))
    with pytest.raises(ValueError, match="single group"):
        sim.permutation_test(X, Y, n_perm=10, groups=np.zeros(40))


def test_weighted_rsa_in_float32_agrees_with_float64():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((300, 16)).astype(np.float32)
    Y = (X + rng.standard_normal((300, 16))).astype(np.float32)
    w = rng.multinomial(300, np.full(300, 1 / 300))
    fast = sim.rsa(X, Y, weights=w)
    exact = sim.rsa(X.astype(np.float64), Y.astype(np.float64), weights=w)
    assert fast == pytest.approx(exact, abs=1e-5)
    mask = (np.arange(300) % 3 == 0).astype(np.int64)  # a 0/1 weight is a subset
    assert sim.rsa(X, Y, weights=mask) == pytest.approx(sim.rsa(X[::3], Y[::3]), abs=1e-5)


def test_pwcca_weights_do_not_depend_on_the_basis_of_tied_correlations():
    """Two exactly shared signals tie at canonical correlation 1: any rotation of their two
    canonical directions is a valid SVD. PWCCA must not depend on which one a solver (or a
    BLAS thread count) returns."""
    from analysis_lib.similarity import kernels
    from analysis_lib.similarity.core import LayerStats, cross

    rng = np.random.default_rng(0)
    n = 400
    shared = rng.standard_normal((n, 2))
    X = np.hstack([shared, rng.standard_normal((n, 4))]) @ rng.standard_normal((6, 6))
    Y = np.hstack([shared, rng.standard_normal((n, 4))]) @ rng.standard_normal((6, 6))
    a, b = LayerStats(X), LayerStats(Y)
    C = cross(a, b)
    u, rho, vt, ka, kb = kernels.canonical_svd(a, b, C, None, "reach")
    assert abs(rho[0] - rho[1]) < sim.core.TIE_TOL and rho[1] - rho[2] > 0.1
    base = kernels.pw_weights(a, ka, u, rho) @ rho
    for angle in (0.3, 1.1, 2.0):  # rotate the tied pair of directions
        c, s = np.cos(angle), np.sin(angle)
        turned = u.copy()
        turned[:, :2] = u[:, :2] @ np.array([[c, -s], [s, c]])
        assert kernels.pw_weights(a, ka, turned, rho) @ rho == pytest.approx(base, abs=1e-12)
    # without the canonical basis the weights would move: the check above is not vacuous
    lam, V = a.eig
    raw = np.abs((turned.T * np.sqrt(lam[:ka])) @ V[:, :ka].T).sum(axis=1)
    plain = np.abs((u.T * np.sqrt(lam[:ka])) @ V[:, :ka].T).sum(axis=1)
    assert abs((raw / raw.sum()) @ rho - (plain / plain.sum()) @ rho) > 1e-6
    assert sim.pwcca(X, Y, variance=None) == pytest.approx(base, abs=1e-12)


def test_pwcca_with_tied_correlations_is_invariant_to_rotating_the_other_side():
    """Rotating Y changes nothing PWCCA(X -> Y) is defined from, but it changes which basis
    of a tied group the solver returns; with weights read in that arbitrary basis the value
    moved by about 3e-4 here (the size of the thread-count variation it also caused)."""
    rng = np.random.default_rng(0)
    n = 2000
    shared = rng.standard_normal((n, 8))
    X = np.hstack([shared, rng.standard_normal((n, 56))]) @ rng.standard_normal((64, 64))
    Y = np.hstack([shared, rng.standard_normal((n, 56))]) @ rng.standard_normal((64, 64))
    Q = ortho_group.rvs(64, random_state=1)
    assert sim.pwcca(X, Y @ Q, variance=None) == pytest.approx(
        sim.pwcca(X, Y, variance=None), abs=1e-10)


def test_mixedsim_keeps_span_of_a_layer_with_massive_activations():
    # a decoder's first tokens: three neurons thousands of times larger on a few rows.
    # span(Y) is unchanged by them; a rank cut relative to the largest eigenvalue of the raw
    # neurons would drop nearly all of it in float32
    rng = np.random.default_rng(0)
    n, d = 2000, 64
    Z = rng.standard_normal((n, d))
    Y = (Z @ rng.standard_normal((d, d))).astype(np.float32)
    Y[::20, :3] += 3e4 * rng.standard_normal((n // 20, 3)).astype(np.float32)
    X = (Z[:, :32] + 0.5 * rng.standard_normal((n, 32))).astype(np.float32)
    exact = sim.mixedsim(X, Y, dtype=np.float64)
    assert sim.mixedsim(X, Y) == pytest.approx(exact, abs=1e-5)
    assert exact >= sim.neuronsim(X, Y)  # one neuron is one linear combination
    M = sim.pairwise_suite([X, Y], measures=["mixedsim", "neuronsim"])
    assert M["mixedsim"][0, 1] == pytest.approx(exact, abs=1e-5)
    assert (M["mixedsim"] >= M["neuronsim"] - 1e-6).all()


def test_p_greater_known_values_and_floor():
    from analysis_lib.similarity import stats

    null = np.array([[0.1, 0.5], [0.2, 0.6], [0.3, 0.7]])
    np.testing.assert_allclose(stats.p_greater(null, [0.25, 0.9]), [(1 + 1) / 4, 1 / 4])
    assert stats.p_greater(null[:, 0], 0.3) == pytest.approx(2 / 4)  # a tie counts


def test_group_weights_are_a_resample_of_whole_groups():
    from analysis_lib.similarity import stats

    groups = np.repeat([3, 1, 7, 5], [2, 3, 1, 4])
    rng = np.random.default_rng(0)
    for _ in range(20):
        w = stats.group_weights(groups, rng)
        per_group = {g: set(w[groups == g]) for g in np.unique(groups)}
        assert all(len(v) == 1 for v in per_group.values())  # one weight per group
        assert sum(v.pop() for v in per_group.values()) == 4  # as many draws as groups
    with pytest.raises(ValueError, match="single group"):
        stats.group_weights(np.zeros(5), rng)


def test_group_bootstrap_of_a_weighted_mean_matches_duplicated_rows_and_its_spread():
    """Known answer: each sample is the mean of the rows repeated by their weights; over
    many resamples of 40 groups of one row, the spread is the standard error of a mean."""
    from analysis_lib.similarity import stats

    x = np.random.default_rng(1).standard_normal(40)
    seen = []

    def mean(weights, rng):
        seen.append(weights)
        return np.average(x, weights=weights)

    samples = stats.group_bootstrap(mean, np.arange(40), n_boot=2000, seed=0)
    assert samples[0] == pytest.approx(np.repeat(x, seen[0]).mean())
    assert samples.std(ddof=1) == pytest.approx(x.std() / np.sqrt(40), rel=0.1)
    again = stats.group_bootstrap(mean, np.arange(40), n_boot=2000, seed=0)
    np.testing.assert_array_equal(samples, again)  # the same seed, the same samples


def test_two_sample_permutation_finds_a_shift_and_no_shift():
    from analysis_lib.similarity import stats

    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(30), 3)
    first = groups < 15
    values = rng.standard_normal(90)

    def gap(mask):  # second condition minus first
        return values[~mask].mean() - values[mask].mean()

    shifted = values + 2.0 * ~first
    test = stats.two_sample_permutation(lambda m: shifted[~m].mean() - shifted[m].mean(),
                                        groups, first, n_perm=199, seed=0)
    assert test.p_value == pytest.approx(1 / 200)  # the floor: no shuffle comes close
    null = stats.two_sample_permutation(gap, groups, first, n_perm=199, seed=0)
    assert null.p_value > 0.05
    # every shuffle keeps whole groups together and the first condition's group count
    masks = []
    stats.two_sample_permutation(lambda m: masks.append(m) or 0.0, groups, first, n_perm=5)
    for mask in masks:
        assert len(np.unique(groups[mask])) == 15
        assert not np.intersect1d(groups[mask], groups[~mask]).size
    with pytest.raises(ValueError, match="rows in both conditions"):
        stats.two_sample_permutation(gap, groups, np.arange(90) < 16, n_perm=5)


# ------------------------------------------------------------- layers wider than their rows

@pytest.mark.parametrize("shapes", [(300, 200), (300, 20), (20, 300)])
def test_a_wide_layer_gives_the_reference_value_through_its_row_space(shapes):
    """More neurons than rows: the measures that read a wide layer through its row space
    (SVCCA, PWCCA, Procrustes, RSA) give the definition's value, with z-scoring, a huge
    neuron and either side wide; the single pair and the matrix entry are one number."""
    rng = np.random.default_rng(3)
    d1, d2 = shapes
    X = rng.standard_normal((40, d1))
    Y = X[:, :10] @ rng.standard_normal((10, d2)) + rng.standard_normal((40, d2))
    X[:, 3] *= 1e4
    cases = [("svcca", {}), ("svcca", {"standardize": True}), ("pwcca", {}),
             ("pwcca", {"standardize": True}), ("procrustes", {}), ("rsa", {}),
             ("rsa", {"kernel": "correlation"})]
    for name, options in cases:
        fast = getattr(sim, name)(X, Y, **options)
        slow = getattr(reference, name)(X, Y, **options)
        assert fast == pytest.approx(slow, abs=1e-9), (name, options)
        matrix = sim.pairwise([X], [Y], measure=name, **options)
        assert matrix[0, 0] == fast, (name, options)
    for reg in (0.0, 0.1):  # full-space CCA, its ridge the mean over every neuron's direction
        assert sim.pairwise([X], [Y], measure="cca", reg=reg)[0, 0] == pytest.approx(
            reference.mean_cca(X, Y, reg=reg), abs=1e-9)
    # PWCCA weighs the first layer's own neurons, mapped back from its row space: with
    # canonical correlations that differ, both directions match the definition
    Z = rng.standard_normal((60, 5))
    X = Z @ rng.standard_normal((5, 200)) * 3 + rng.standard_normal((60, 200))
    Y = Z[:, :3] @ rng.standard_normal((3, 10)) + rng.standard_normal((60, 10))
    for first, second in ((X, Y), (Y, X)):
        assert sim.pwcca(first, second, variance=0.8) == pytest.approx(
            reference.pwcca(first, second, variance=0.8), abs=1e-9)


def test_measures_of_wide_layers_take_memory_that_grows_with_rows():
    """50 rows of 60,000 neurons: a d x d matrix would be 29 GB; the row-space path keeps
    the peak near the data's own size (on the NumPy backend, whose buffers tracemalloc
    sees)."""
    import tracemalloc

    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 60_000)).astype(np.float32)
    Y = rng.standard_normal((50, 60_000)).astype(np.float32)
    for name in ("svcca", "pwcca", "rsa", "procrustes", "linear_cka", "cca"):
        tracemalloc.start()
        value = sim.pairwise([X], [Y], measure=name, backend="numpy")[0, 0]
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert np.isfinite(value)
        assert peak < 400e6, (name, peak)


@pytest.mark.parametrize("name", ["linear_cka", "svcca", "pwcca", "neuronsim", "procrustes",
                                  "rbf_cka", "rsa", "mixedsim", "cca"])
def test_two_rows_are_refused_not_read_as_identical_layers(name):
    """Centred, two rows span one direction: every two-row layer is the same up to scale,
    and CKA would read 1 for any two of them."""
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="needs at least 3"):
        sim.pairwise([rng.standard_normal((2, 5))], [rng.standard_normal((2, 7))],
                     measure=name)
    assert np.isfinite(sim.linear_cka(rng.standard_normal((3, 5)),
                                             rng.standard_normal((3, 7))))


# ------------------------------------------------------------- the data people bring

def test_measure_names_are_read_in_any_case_and_a_typo_gets_the_closest():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((40, 6)), rng.standard_normal((40, 5))
    value = sim.pairwise([X], [Y])[0, 0]
    for name in ("CKA", "Linear-CKA", " linear_cka ", "CKASIM"):
        assert sim.pairwise([X], [Y], measure=name)[0, 0] == value
    with pytest.raises(ValueError, match="did you mean 'linear_cka'"):
        sim.pairwise([X], [Y], measure="linaer_cka")


def test_layers_come_as_dicts_stacks_and_hugging_face_hidden_states():
    """A dict names its layers (tuples become MultiIndex levels in a labelled result);
    Hugging Face's hidden states, (1, n, d) tensors that may require grad or be bfloat16,
    and a stack of layers give the same matrix as a list of 2-D arrays."""
    import torch

    rng = np.random.default_rng(1)
    layers = [rng.standard_normal((40, 8)).astype(np.float32) for _ in range(3)]
    plain = sim.pairwise(layers)
    named = {("minilm", k): x for k, x in enumerate(layers)}
    frame = sim.pairwise(named, as_frame=True)
    np.testing.assert_array_equal(frame.to_numpy(), plain)
    assert frame.index.nlevels == 2 and frame.loc[("minilm", 1), ("minilm", 2)] == plain[1, 2]
    np.testing.assert_array_equal(sim.pairwise(np.stack(layers)), plain)
    hidden = tuple(torch.tensor(x)[None].requires_grad_(True) for x in layers)
    np.testing.assert_array_equal(sim.pairwise(hidden), plain)

    class Output:
        hidden_states = hidden

    np.testing.assert_array_equal(sim.pairwise(Output()), plain)
    half = [torch.tensor(x).to(torch.bfloat16) for x in layers]
    widened = [t.float().numpy() for t in half]
    assert sim.linear_cka(half[0], half[1]) == sim.linear_cka(widened[0], widened[1])
    suite = sim.pairwise_suite(named, measures=["cka", "rsa"], as_frame=True)
    assert set(suite) == {"linear_cka", "rsa"} and suite["rsa"].shape == (3, 3)
    with pytest.raises(ValueError, match="a batch of 2 sequences"):
        sim.linear_cka(np.stack(layers[:2]), layers[0])


def test_the_package_reaches_its_modules_without_importing_them_all():
    import subprocess
    import sys

    code = ("import sys, analysis_lib; assert 'analysis_lib.similarity' not in sys.modules; "
            "import numpy as np; x = np.random.default_rng(0).standard_normal((20, 3)); "
            "print(analysis_lib.similarity.linear_cka(x, x)); "
            "assert 'similarity' in dir(analysis_lib)")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert float(ran.stdout) == pytest.approx(1.0)
    import analysis_lib

    with pytest.raises(AttributeError, match="its modules: alignment"):
        analysis_lib.similarty  # noqa: B018


def test_neuronsim_of_wide_layers_is_taken_in_blocks_with_the_same_values(monkeypatch):
    """A cross-product larger than CROSS_BLOCK is formed block by block of the second
    layer's neurons: the same values as the whole product (constant neurons left out the
    same way, both directions), and memory that does not grow with d1 x d2."""
    import tracemalloc

    from analysis_lib.similarity import kernels

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 300))
    Y = X[:, :50] @ rng.standard_normal((50, 200)) + rng.standard_normal((60, 200))
    Y[:, 5] = 1.0
    whole = [sim.pairwise([X], [Y], measure="neuronsim", top_k=k)[0, 0] for k in (None, 7)]
    whole_t = sim.neuronsim(Y, X)
    monkeypatch.setattr(kernels, "CROSS_BLOCK", 999)
    blocked = [sim.pairwise([X], [Y], measure="neuronsim", top_k=k)[0, 0] for k in (None, 7)]
    assert blocked == pytest.approx(whole, rel=1e-12)
    assert sim.neuronsim(Y, X) == pytest.approx(whole_t, rel=1e-12)
    monkeypatch.undo()
    A = rng.standard_normal((40, 9_000)).astype(np.float32)  # a whole C: 324 MB
    B = rng.standard_normal((40, 9_000)).astype(np.float32)
    tracemalloc.start()
    value = sim.neuronsim(A, B, backend="numpy")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert 0 < value <= 1 and peak < 250e6, peak


def test_undefined_layers_read_nan_when_asked_and_the_rest_is_unchanged():
    """``undefined="nan"``: a layer without variance gives NaN in its row and column; every
    other cell is the matrix of the defined layers alone, in both the symmetric and the
    two-collection forms; the default still names the layer."""
    from analysis_lib.errors import UndefinedMeasure

    rng = np.random.default_rng(5)
    good = [rng.standard_normal((60, 8)) for _ in range(3)]
    flat = np.tile(rng.standard_normal(8), (60, 1))
    layers = [good[0], flat, good[1], good[2]]
    M = sim.pairwise(layers, measure="linear_cka", undefined="nan")
    alone = sim.pairwise(good, measure="linear_cka")
    assert np.isnan(M[1]).all() and np.isnan(M[:, 1]).all()
    np.testing.assert_array_equal(M[np.ix_([0, 2, 3], [0, 2, 3])], alone)
    cross = sim.pairwise(layers, [flat, good[2]], measure="svcca", undefined="nan")
    assert np.isnan(cross[:, 0]).all() and np.isnan(cross[1]).all()
    assert cross[3, 1] == pytest.approx(sim.svcca(good[2], good[2]))
    with pytest.raises(UndefinedMeasure, match=r"layers_a\[1\] has no variance"):
        sim.pairwise(layers, measure="linear_cka")
    with pytest.raises(ValueError, match="undefined must be"):
        sim.pairwise(good, measure="linear_cka", undefined="skip")
