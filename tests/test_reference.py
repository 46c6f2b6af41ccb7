"""Every measure of the registry against its reference definition (similarity.reference), in
the regimes where fast paths go wrong: large offsets, a few huge neurons, rows that nearly
point one way, tied canonical correlations, rank deficiency, and float32."""

import numpy as np
import pytest

from analysis_lib import similarity as S
from analysis_lib.similarity import reference as R
from analysis_lib.similarity.registry import REGISTRY


def _base(seed=0, n=240, d1=14, d2=10):
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal((n, 5))
    X = shared @ rng.standard_normal((5, d1)) + 0.7 * rng.standard_normal((n, d1))
    Y = shared @ rng.standard_normal((5, d2)) + 0.9 * rng.standard_normal((n, d2))
    return X, Y


def regime(name: str, seed: int = 0):
    """Two layers (float64) that exercise one hard case."""
    rng = np.random.default_rng(100 + seed)
    X, Y = _base(seed)
    if name == "random":
        return X, Y
    if name == "rank_deficient":
        X = np.column_stack([X, X[:, :3] @ rng.standard_normal((3, 4)), np.full(len(X), 2.0)])
        Y = np.column_stack([Y, Y[:, 0], Y[:, 1] - Y[:, 2]])
        return X, Y
    if name == "tied":
        # a block shared exactly (rotated): canonical correlations tied at 1, beside
        # distinct ones; the PWCCA weights of the tied block depend on their rotation
        Q = np.linalg.qr(rng.standard_normal((4, 4)))[0]
        A = rng.standard_normal((len(X), 4))
        return np.column_stack([A, X]), np.column_stack([A @ Q, Y])
    if name == "offset":
        return (X + 1e5 * rng.standard_normal(X.shape[1]),
                Y + 3e4 * rng.standard_normal(Y.shape[1]))
    if name == "massive":
        X, Y = X.copy(), Y.copy()
        X[:, 0] += 1e4          # a neuron that sits near 1e4 (a decoder's massive activation)
        X[0, 1:3] = 1e4         # and one stimulus (the first token) far out on two neurons
        Y[:, -1] = 1e4 + 50 * Y[:, -1]
        return X, Y
    if name == "anisotropic":
        # every row near one direction: mean cosine between stimuli about 0.99
        u, v = rng.standard_normal(X.shape[1]), rng.standard_normal(Y.shape[1])
        return X + 9 * np.linalg.norm(X, axis=1).mean() / np.linalg.norm(u) * u, \
            Y + 9 * np.linalg.norm(Y, axis=1).mean() / np.linalg.norm(v) * v
    raise KeyError(name)


REGIMES = ("random", "rank_deficient", "tied", "offset", "massive", "anisotropic")

#: (measure, options) pairs: every cross-product measure of the registry, with its options
CROSS_CASES = [
    ("neuronsim", {}), ("neuronsim", {"top_k": 3}),
    ("mixedsim", {}),
    ("svcca", {}), ("svcca", {"variance": None}), ("svcca", {"cut": "below"}),
    ("svcca", {"standardize": True}),
    ("pwcca", {}), ("pwcca", {"variance": None}), ("pwcca", {"standardize": True}),
    ("linear_cka", {}), ("linear_cka", {"debiased": True}),
    ("procrustes", {}),
    ("cca", {}), ("cca", {"reg": 0.1}),
]


def _fast(name, X, Y, backend="torch", **options):
    if name == "cca":
        return S.cca(X, Y, backend=backend, warn=False, **options).mean
    return getattr(S, name)(X, Y, backend=backend, **options)


def _ref(name, X, Y, **options):
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    return REGISTRY[name].reference(X, Y, **options)


def test_every_registered_measure_has_a_reference_in_the_reference_module():
    for record in REGISTRY.values():
        assert record.reference.__module__ == R.__name__, record.name
        assert callable(record.kernel), record.name


@pytest.mark.parametrize("name,options", CROSS_CASES,
                         ids=[f"{n}-{'-'.join(map(str, o.values())) or 'default'}"
                              for n, o in CROSS_CASES])
@pytest.mark.parametrize("case", REGIMES)
def test_cross_product_measures_equal_reference_float64(name, options, case):
    X, Y = regime(case)
    want = _ref(name, X, Y, **options)
    for backend in ("torch", "numpy"):
        got = _fast(name, X, Y, backend=backend, **options)
        assert got == pytest.approx(want, abs=1e-8), (backend, got, want)


@pytest.mark.parametrize("name,options", CROSS_CASES,
                         ids=[f"{n}-{'-'.join(map(str, o.values())) or 'default'}"
                              for n, o in CROSS_CASES])
@pytest.mark.parametrize("case", REGIMES)
def test_cross_product_measures_float32_within_1e4_of_float64(name, options, case):
    X, Y = (a.astype(np.float32) for a in regime(case))
    want = _ref(name, X, Y, **options)   # the float32 numbers, computed in float64
    got = _fast(name, X, Y, **options)
    assert got == pytest.approx(want, abs=1e-4), (got, want)


@pytest.mark.parametrize("case", REGIMES)
def test_pairwise_suite_equals_reference(case):
    X, Y = regime(case)
    Z = X[:, :6] + np.random.default_rng(3).standard_normal((len(X), 6))
    layers = [X, Y, Z]
    names = ["neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka", "procrustes", "cca"]
    suite = S.pairwise_suite(layers, measures=names)
    for name in names:
        want = np.array([[_ref(name, a, b) for b in layers] for a in layers])
        np.testing.assert_allclose(suite[name], want, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("case", ["random", "offset", "anisotropic", "massive"])
@pytest.mark.parametrize("kernel", ["cosine", "correlation", "euclidean"])
@pytest.mark.parametrize("compare", ["pearson", "spearman"])
def test_rsa_equals_reference(case, kernel, compare):
    X, Y = (a[:90] for a in regime(case))
    want = R.rsa(X, Y, kernel, compare)
    assert S.rsa(X, Y, kernel, compare) == pytest.approx(want, abs=1e-9)
    M = S.pairwise([X, Y], measure="rsa", kernel=kernel, compare=compare)
    assert M[0, 1] == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("kernel", ["cosine", "correlation"])
@pytest.mark.parametrize("cosine", [0.89, 0.99])
def test_rsa_float32_anisotropic_within_1e5(kernel, cosine):
    """Rows sharing one large direction (mean cosine 0.89 or 0.99), float32, with and without
    bootstrap weights: the float64 reference on the same float32 numbers within 1e-5."""
    rng = np.random.default_rng(7)
    n, d = 150, 48
    u, v = rng.standard_normal(d), rng.standard_normal(d)
    shared = rng.standard_normal((n, 6))
    X = shared @ rng.standard_normal((6, d)) + rng.standard_normal((n, d))
    Y = shared @ rng.standard_normal((6, d)) + rng.standard_normal((n, d))
    scale = np.sqrt(cosine / (1 - cosine) * 7 * d)  # each row has squared norm near 7 d
    X = (X + scale * u / np.linalg.norm(u)).astype(np.float32)
    Y = (Y + scale * v / np.linalg.norm(v)).astype(np.float32)
    Sx = R.similarity_matrix(X)
    assert 1 + Sx[np.triu_indices(n, 1)].mean() == pytest.approx(cosine, abs=0.02)
    w = rng.multinomial(n, np.full(n, 1.0 / n))
    assert S.rsa(X, Y, kernel) == pytest.approx(R.rsa(X, Y, kernel), abs=1e-5)
    assert S.rsa(X, Y, kernel, weights=w) == pytest.approx(R.rsa(X, Y, kernel, weights=w),
                                                           abs=1e-5)


@pytest.mark.parametrize("debiased", [False, True])
@pytest.mark.parametrize("case", ["random", "offset", "massive", "anisotropic"])
def test_rbf_cka_equals_reference(case, debiased):
    X, Y = (a[:80] for a in regime(case))
    want = R.rbf_cka(X, Y, 0.8, debiased)
    assert S.rbf_cka(X, Y, 0.8, debiased=debiased) == pytest.approx(want, abs=1e-9)
    M = S.pairwise([X, Y], measure="rbf_cka", threshold=0.8, debiased=debiased)
    assert M[0, 1] == pytest.approx(want, abs=1e-9)


def _attention(seed, heads, lengths, peaked=1.0):
    rng = np.random.default_rng(seed)
    maps = []
    for t in lengths:
        logits = peaked * rng.standard_normal((heads, t, t + 1))
        P = np.exp(logits)
        maps.append(P / P.sum(axis=-1, keepdims=True))
    return maps


@pytest.mark.parametrize("method", ["js", "pearson", "frobenius"])
def test_attention_measures_equal_reference(method):
    A = _attention(0, 3, [4, 6, 2])
    B = _attention(1, 4, [4, 6, 2], peaked=3.0)
    B[1][2] = A[1][0]  # one head that copies one of A's on one sentence
    for x, y in ((A, B), (B, A), (A, A)):
        want = R.attention_similarity(x, y, method)
        assert S.attention_similarity(x, y, method) == pytest.approx(want, abs=1e-10)
        M = S.pairwise([x, y], measure=f"attention_{method}")
        assert M[0, 1] == pytest.approx(want, abs=1e-10)
    np.testing.assert_allclose(S.attention_representation(A), R.attention_representation(A),
                               atol=1e-7)


@pytest.mark.parametrize("method", ["js", "pearson", "frobenius"])
def test_attention_measures_equal_reference_on_ragged_causal_maps(method):
    """Sentences of very different lengths (a one-word sentence, whose row has one column,
    beside a 30-word one), a causal layer whose rows are exactly zero beyond their own word,
    and a head that equals another layer's: the unpadded fast path reads each sentence's own
    entries and nothing else, as the reference's loops do."""
    lengths = [1, 30, 3, 12]
    rng = np.random.default_rng(7)
    causal = []
    for t in lengths:
        logits = 2.0 * rng.standard_normal((2, t, t))
        logits[:, np.triu(np.ones((t, t), dtype=bool), 1)] = -np.inf
        P = np.exp(logits - logits.max(axis=-1, keepdims=True))
        causal.append(P / P.sum(axis=-1, keepdims=True))
    square = [m[:, :, :-1] / m[:, :, :-1].sum(axis=-1, keepdims=True)
              for m in _attention(8, 3, lengths, peaked=2.0)]
    for m, c in zip(square, causal):
        m[1] = c[0]  # the same head in both layers
    for x, y in ((causal, square), (square, causal), (causal, causal)):
        want = R.attention_similarity(x, y, method)
        assert S.attention_similarity(x, y, method) == pytest.approx(want, abs=1e-10)
    assert S.attention_similarity(causal, causal, method) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("method", ["js", "pearson", "frobenius"])
def test_head_similarity_has_the_same_bits_on_one_thread_and_on_several(method, monkeypatch):
    from analysis_lib.similarity import attention
    A, B = _attention(9, 5, [7, 3, 11]), _attention(10, 4, [7, 3, 11], peaked=2.0)
    found = {}
    for count in (1, 3):
        monkeypatch.setattr(attention, "cores", lambda count=count: count)
        found[count] = attention.head_similarity(
            attention.AttentionLayer(attention.check_maps(A, "A")),
            attention.AttentionLayer(attention.check_maps(B, "B")), method)
    np.testing.assert_array_equal(found[1], found[3])


@pytest.mark.parametrize("method", ["js", "pearson", "frobenius"])
def test_head_similarity_is_kept_once_per_pair_of_layers(method):
    """Each pair's head matrix is computed once and kept: the reverse order reads its
    transpose, and a kept matrix equals a fresh computation and the reference."""
    from analysis_lib.similarity.attention import AttentionLayer, check_maps, head_similarity
    A, B = _attention(4, 3, [4, 6]), _attention(5, 2, [4, 6], peaked=2.0)
    a, b = AttentionLayer(check_maps(A, "A")), AttentionLayer(check_maps(B, "B"))
    first = head_similarity(a, b, method)
    assert len(a.similarities) == 1 and not b.similarities
    assert head_similarity(a, b, method) is first
    np.testing.assert_array_equal(head_similarity(b, a, method), first.T)
    assert not b.similarities  # read from a's, not computed again
    fresh = head_similarity(AttentionLayer(check_maps(A, "A")),
                            AttentionLayer(check_maps(B, "B")), method)
    np.testing.assert_array_equal(fresh, first)
    want = [[R.attention_head_similarity([m[h] for m in A], [m[g] for m in B], method)
             for g in range(2)] for h in range(3)]
    np.testing.assert_allclose(first, want, atol=1e-10)
    with pytest.raises(ValueError, match="read-only"):
        first[0, 0] = 0.0  # a kept matrix cannot be changed by a caller


def test_attention_js_in_nats_equals_reference():
    A, B = _attention(2, 2, [5, 3]), _attention(3, 2, [5, 3])
    assert S.attention_similarity(A, B, "js", base=np.e) == pytest.approx(
        R.attention_similarity(A, B, "js", base=np.e), abs=1e-10)


def test_localization_equals_reference():
    rng = np.random.default_rng(0)
    N, V = rng.uniform(0, 1, (5, 5)), rng.uniform(0, 1, (5, 5))
    np.testing.assert_allclose(S.localization(N, V), R.localization(N, V), atol=1e-12)


def test_ranked_localization_equals_reference_and_ignores_each_measures_scale():
    rng = np.random.default_rng(1)
    N, V = rng.uniform(0, 1, (7, 7)), rng.uniform(0, 1, (7, 7))
    np.testing.assert_allclose(S.ranked_localization(N, V), R.ranked_localization(N, V),
                               atol=1e-12)
    # ties share their mean rank
    tied = np.ones((4, 4))
    np.testing.assert_allclose(S.ranked_localization(tied, V[:4, :4]),
                               R.ranked_localization(tied, V[:4, :4]), atol=1e-12)
    # a change of either measure's scale moves the plain score, not the ranked one
    np.testing.assert_allclose(S.ranked_localization(3 * N + 1, 10 * V + 5),
                               S.ranked_localization(N, V), atol=1e-12)
    assert not np.allclose(S.localization(3 * N + 1, 10 * V + 5), S.localization(N, V))
    # measures that order the layers alike: no layer is localized, whatever their scales;
    # a layer unlike all others under both measures gains nothing by construction
    apart = 0.9 - 0.5 * np.eye(7)[6][:, None] - 0.5 * np.eye(7)[6][None, :]
    np.testing.assert_allclose(S.ranked_localization(apart ** 4, apart), 0, atol=1e-12)
    assert S.localization(apart ** 4, apart)[6] < -0.1


def test_reference_known_values():
    """The reference definitions themselves, on inputs whose answers are known."""
    X, Y = regime("random")
    Q = np.linalg.qr(np.random.default_rng(0).standard_normal((14, 14)))[0]
    for name in ("svcca", "pwcca", "linear_cka", "procrustes"):
        assert REGISTRY[name].reference(X, 3 * X @ Q + 5) == pytest.approx(1.0, abs=1e-10), name
    assert R.neuronsim(X, X[:, ::-1] * -2) == pytest.approx(1.0)
    assert R.mixedsim(X, X @ np.random.default_rng(1).standard_normal((14, 20))) == \
        pytest.approx(1.0)
    # CKA of independent Gaussian layers: the biased estimate sits near d/(n - 1 + d),
    # the debiased one near 0
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((400, 20)), rng.standard_normal((400, 20))
    assert R.linear_cka(A, B) == pytest.approx(20 / 419, abs=0.02)
    assert abs(R.linear_cka(A, B, debiased=True)) < 0.02
    # the RSA of a multiset leaves out the pairs of two copies of one stimulus
    w = np.array([2] + [1] * (len(X) - 1))
    assert R.rsa(X, Y, weights=w) != pytest.approx(R.rsa(X, Y), abs=1e-12)
    assert R.rsa(X, Y, weights=np.ones(len(X), int)) == pytest.approx(R.rsa(X, Y), abs=1e-12)


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_views_of_any_layout_give_the_contiguous_answer(backend):
    """Reversed (negative-stride), transposed and strided views are read as their values."""
    X, Y = regime("random")
    views = {"reversed": Y[:, ::-1], "fortran": np.asfortranarray(Y), "strided": Y[::1, ::1]}
    for name, view in views.items():
        for measure in ("linear_cka", "svcca", "pwcca", "neuronsim", "mixedsim"):
            got = getattr(S, measure)(X, view, backend=backend)
            assert got == pytest.approx(getattr(S, measure)(X, view.copy()), abs=1e-10), name
        M = S.pairwise_suite([X, view], measures=["linear_cka", "pwcca"], backend=backend)
        assert M["linear_cka"][0, 1] == pytest.approx(R.linear_cka(X, Y), abs=1e-8)


def test_a_layer_constant_up_to_rounding_is_constant_not_noise():
    """A repeated row leaves rounding noise after centring (about 1e-16 of its values):
    every measure must call that layer constant, not compare the noise (it gave 1.0)."""
    rng = np.random.default_rng(0)
    A = np.tile(rng.standard_normal(8), (100, 1))
    B = np.tile(rng.standard_normal(8), (100, 1))
    for measure in ("linear_cka", "neuronsim", "svcca", "pwcca", "procrustes"):
        with pytest.raises(ValueError, match="constant"):
            S.pairwise([A], [B], measure=measure, progress=False)
    assert not np.abs(R.centred(A)).any()
    # a float32 neuron that varies by one float32 step at 1e5 is signal, and stays
    x = np.full(50, 1e5, dtype=np.float32)
    x[::2] = np.nextafter(np.float32(1e5), np.float32(2e5))
    X = np.column_stack([x, rng.standard_normal(50).astype(np.float32)])
    assert np.abs(R.centred(X)[:, 0]).max() > 0
    value = S.pairwise([X], [X], measure="neuronsim", progress=False)[0, 0]
    assert value == pytest.approx(1.0)


@pytest.mark.parametrize("case", REGIMES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name, options", [("linear_cka", {}), ("neuronsim", {}),
                                           ("neuronsim", {"top_k": 3})])
def test_leave_out_matrices_from_moments_equal_recomputing_each_subset(case, dtype, name,
                                                                       options):
    """The grouped jackknife's matrices read from per-group moments against the definition
    (the matrix recomputed on the rows outside each group), in every hard regime; groups of
    unequal sizes."""
    from analysis_lib.similarity.leave_out import leave_out_matrices, leave_out_matrices_plain

    X, Y = regime(case)
    rng = np.random.default_rng(7)
    layers = [a.astype(dtype) for a in (X, Y, np.column_stack([X[:, :5], Y[:, :4] ** 2]))]
    groups = rng.choice(5, size=len(X), p=[0.1, 0.15, 0.2, 0.25, 0.3])
    fast = leave_out_matrices(layers, groups, name, **options)
    plain = leave_out_matrices_plain(layers, groups, name, **options)
    assert len(fast) == 5
    tol = 1e-9 if dtype == np.float64 else 2e-5
    for a, b in zip(fast, plain):
        np.testing.assert_allclose(a, b, atol=tol, rtol=0)
    # the group that is left out matters: the replicates are not all the same matrix
    assert max(np.abs(a - fast[0]).max() for a in fast[1:]) > 10 * tol


def test_leave_out_suite_gives_each_measure_exactly_its_own_matrices():
    """Several measures from one pass over shared per-group moments: each measure's
    matrices are exactly (to the bit) those it gets alone, options reach only the measures
    that take them, a measure moments cannot serve (svcca) takes its plain path beside the
    others, and the result is keyed by canonical name in the order asked."""
    from analysis_lib.similarity.leave_out import leave_out_matrices, leave_out_suite

    X, Y = regime("offset")
    rng = np.random.default_rng(3)
    layers = [X, Y, np.column_stack([X[:, :5], Y[:, :4] ** 2])]
    groups = rng.choice(4, size=len(X))
    suite = leave_out_suite(layers, groups, ["NeuronSim", "linear_cka", "svcca"], top_k=3)
    assert list(suite) == ["neuronsim", "linear_cka", "svcca"]
    alone = {"neuronsim": leave_out_matrices(layers, groups, "neuronsim", top_k=3),
             "linear_cka": leave_out_matrices(layers, groups, "linear_cka"),
             "svcca": leave_out_matrices(layers, groups, "svcca", top_k=3)}
    for name, matrices in alone.items():
        assert len(suite[name]) == 4
        for a, b in zip(suite[name], matrices):
            np.testing.assert_array_equal(a, b)
    # top_k changes neuronsim's numbers, so it did reach it (linear CKA takes no top_k)
    assert not np.array_equal(suite["neuronsim"][0],
                              leave_out_matrices(layers, groups, "neuronsim")[0])
    with pytest.raises(TypeError, match="not taken by"):
        leave_out_suite(layers, groups, ["linear_cka"], top_k=3)
    with pytest.raises(ValueError, match="measures is empty"):
        leave_out_suite(layers, groups, [])


def test_leave_out_matrices_take_the_plain_path_where_moments_cannot_decide():
    """A neuron constant outside one group (it varies only inside it) is zeroed by the plain
    path's rounding rule on those rows; the moment path hands such layers to the plain path,
    and so do measures it does not read from moments. Bad groups are named."""
    from analysis_lib.similarity.leave_out import leave_out_matrices, leave_out_matrices_plain

    X, Y = regime("random")
    groups = np.arange(len(X)) % 4
    X = X.copy()
    X[:, 0] = np.where(groups == 2, X[:, 0], 1.5)
    for name, options in [("linear_cka", {}), ("neuronsim", {}), ("procrustes", {}),
                          ("linear_cka", {"debiased": True}), ("svcca", {})]:
        fast = leave_out_matrices([X, Y], groups, name, **options)
        plain = leave_out_matrices_plain([X, Y], groups, name, **options)
        for a, b in zip(fast, plain):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="one label per row"):
        leave_out_matrices([X, Y], groups[1:])
    with pytest.raises(ValueError, match="at least two groups"):
        leave_out_matrices([X, Y], np.zeros(len(X)))
    with pytest.raises(ValueError, match="at least 2 rows"):
        leave_out_matrices([X[:3], Y[:3]], [0, 0, 1])
    with pytest.raises(ValueError, match="no variance"):  # a layer constant outside group 1
        leave_out_matrices([X, np.where((groups == 1)[:, None], Y, 0.0)], groups)
    with pytest.raises(ValueError, match=r"layers\[1\] has no variance"):
        leave_out_matrices([regime("random")[0], np.ones_like(Y)], groups, "neuronsim")
