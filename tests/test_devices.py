"""Devices: resolving a device, and the measures' torch path against their NumPy path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from analysis_lib import similarity as sim
from analysis_lib.runtime import device as devices
from analysis_lib.similarity.pairwise import timing_engine

#: the default device's name here: "cuda" on a machine with a GPU, else "cpu" (CI). The
#: tests that name it explicitly hold on both; tests/test_gpu.py compares the two devices.
HERE = devices.resolve(None).type

SUITE = ["neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka", "procrustes", "cca"]


def _layers(n=300, d=(24, 32, 16, 40), dtype=np.float64, seed=0):
    """Related layers of different widths, one rank-deficient and one with a constant
    neuron, so that every special case of the kernels is on the path."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, 12))
    out = []
    for k, width in enumerate(d):
        X = base @ rng.standard_normal((12, width)) + 0.5 * rng.standard_normal((n, width))
        if k == 1:
            X[:, -8:] = X[:, :8] @ rng.standard_normal((8, 8))  # rank 24 of 32
        if k == 2:
            X[:, 3] = 7.0  # a constant neuron
        out.append((X * (1 + 10 * k) + k).astype(dtype))
    return out


def test_resolve_defaults_to_cuda_when_available_else_cpu():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert devices.resolve(None).type == expected
    assert devices.resolve("CPU") == torch.device("cpu")
    assert devices.resolve(torch.device("cpu")) == torch.device("cpu")
    assert devices.available()[0] == "cpu"


@pytest.mark.parametrize("bad, words", [("tpu", "unknown device"), ("quantum:0", "unknown device"),
                                        ("meta", "not supported")])
def test_resolve_names_the_problem(bad, words):
    with pytest.raises(ValueError, match=words) as info:
        devices.resolve(bad)
    assert "cpu" in str(info.value)  # names what is available


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA GPU"):
        devices.resolve("cuda")
    with pytest.raises(ValueError, match="no CUDA GPU"):
        sim.linear_cka(np.eye(4), np.eye(4), device="cuda")


def test_precision_and_cache_key():
    cpu = torch.device("cpu")
    assert devices.key(cpu) == "cpu"
    assert devices.key(torch.device("cuda", 1), "bfloat16") == "cuda-bfloat16"
    with pytest.raises(ValueError, match="precision must be one of"):
        devices.check_precision("int8", cpu)
    with pytest.raises(ValueError, match="GPU"):
        devices.check_precision("float16", cpu)
    assert devices.check_precision("float32", cpu) == "float32"


def test_backend_argument_is_checked():
    X = np.eye(5)
    with pytest.raises(ValueError, match="backend must be one of"):
        sim.linear_cka(X, X, backend="jax")
    with pytest.raises(ValueError, match="backend must be one of"):
        sim.pairwise([X, X], backend="cupy")


@pytest.mark.parametrize("options", [{}, {"standardize": True, "cut": "below"},
                                     {"variance": None}, {"top_k": 5}, {"debiased": True},
                                     {"reg": 0.1}])
def test_torch_path_equals_numpy_path_on_the_whole_suite(options):
    """The same kernels on torch tensors and on NumPy arrays: every measure of the suite,
    every pair, both directions, within 1e-6 (float64 inputs: the two paths differ only in
    the BLAS/LAPACK library's rounding)."""
    layers = _layers()
    names = [x for x in SUITE if set(options) <= set(sim.REGISTRY[x].options)]
    assert names
    ref = sim.pairwise_suite(layers, measures=names, backend="numpy", **options)
    got = sim.pairwise_suite(layers, measures=names, device="cpu", **options)
    for name in names:
        assert np.isfinite(ref[name]).all(), name
        np.testing.assert_allclose(got[name], ref[name], rtol=0, atol=1e-6, err_msg=name)
    # and two collections (no symmetry)
    ref = sim.pairwise_suite(layers[:2], layers[1:], measures=names, backend="numpy", **options)
    got = sim.pairwise_suite(layers[:2], layers[1:], measures=names, **options)
    for name in names:
        np.testing.assert_allclose(got[name], ref[name], rtol=0, atol=1e-6, err_msg=name)


def test_torch_path_float32_inputs_agree_to_float32_rounding():
    layers = _layers(dtype=np.float32)
    ref = sim.pairwise_suite(layers, measures=SUITE[:5], backend="numpy")
    got = sim.pairwise_suite(layers, measures=SUITE[:5])
    for name in SUITE[:5]:
        np.testing.assert_allclose(got[name], ref[name], rtol=0, atol=2e-5, err_msg=name)


@pytest.mark.parametrize("fn", [sim.neuronsim, sim.mixedsim, sim.svcca, sim.pwcca,
                                sim.linear_cka, sim.procrustes])
def test_single_pair_functions_take_device_and_backend(fn):
    X, Y = _layers()[:2]
    a = fn(X, Y, device="cpu")
    b = fn(X, Y, backend="numpy")
    assert isinstance(a, float) and abs(a - b) < 1e-10
    assert abs(a - sim.pairwise([X], [Y], measure=fn.__name__)[0, 0]) < 1e-10


def test_value_functions_return_numpy():
    X, Y = _layers()[:2]
    for fn in (sim.neuron_correlations, sim.mixed_correlations, sim.canonical_correlations):
        values = fn(X, Y)
        assert isinstance(values, np.ndarray)
        np.testing.assert_allclose(values, fn(X, Y, backend="numpy"), atol=1e-10)
    result = sim.cca(X, Y, reg=0.1)
    assert isinstance(result.correlations, np.ndarray)


# --------------------------------------------------------------------------- extraction


def test_extraction_on_the_default_device_named_explicitly_equals_the_default(
        tiny_models, tricky_corpus):
    from analysis_lib import extract

    kw = dict(cache=False, progress=False, batch_size=3)
    a = extract.extract(tiny_models["bert"], tricky_corpus, **kw)
    b = extract.extract(tiny_models["bert"], tricky_corpus, device=HERE, **kw)
    for name in ("words", "sentence_first", "sentence_last", "sentence_mean"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_float16_storage_halves_the_arrays_and_keeps_three_digits(tiny_models, tricky_corpus,
                                                                  pooling):
    from analysis_lib import extract

    kw = dict(cache=False, progress=False, word_pooling=pooling)
    full = extract.extract(tiny_models["gpt2"], tricky_corpus, **kw)
    half = extract.extract(tiny_models["gpt2"], tricky_corpus, storage="float16", **kw)
    for name in ("words", "sentence_first", "sentence_last", "sentence_mean"):
        a, b = getattr(full, name), getattr(half, name)
        assert b.dtype == np.float16 and b.nbytes * 2 == a.nbytes
        np.testing.assert_allclose(b.astype(np.float32), a, rtol=2e-3, atol=2e-3)
    # the measures read float16 layers as float32 and give the float32 numbers closely
    X, Y = full.layer(1), full.layer(2)
    Xh, Yh = half.layer(1), half.layer(2)
    assert abs(sim.linear_cka(Xh, Yh) - sim.linear_cka(X, Y)) < 1e-3
    assert abs(sim.svcca(Xh, Yh) - sim.svcca(X, Y)) < 1e-2


def test_float16_storage_moves_representation_measures_of_a_real_model_below_1e4():
    """MiniLM's word rows stored in float16: the representation-level measures of every
    pair of layers move by less than 1e-4 (the figure the running page gives). The
    neuron-level ones move more (rounding noise changes the best partner of weakly varying
    neurons), which the page says too: the check below keeps that sentence true."""
    from analysis_lib import extract
    from analysis_lib.data import corpora

    corpus = corpora.load_corpus("tweets", 40, seed=0)
    kw = dict(cache=False, progress=False)
    full = extract.extract("minilm", corpus, **kw)
    half = extract.extract("minilm", corpus, storage="float16", **kw)
    level = ["svcca", "pwcca", "linear_cka", "procrustes", "rsa"]
    neuron = ["neuronsim", "mixedsim"]
    # the embedding layer, the middle and the top
    a = sim.pairwise_suite(list(full.words[::3]), measures=level + neuron, progress=False)
    b = sim.pairwise_suite(list(half.words[::3]), measures=level + neuron, progress=False)
    moved = {m: float(np.abs(a[m] - b[m]).max()) for m in level + neuron}
    assert all(moved[m] < 1e-4 for m in level), moved
    assert max(moved[m] for m in neuron) > 1e-4, moved


def test_extraction_options_are_checked_and_keyed(tiny_models, tricky_corpus, tmp_path):
    from analysis_lib import extract

    loaded = tiny_models["bert"]
    with pytest.raises(ValueError, match="unknown storage .int8.; valid: float32, float16"):
        extract.extract(loaded, tricky_corpus, storage="int8", cache=False)
    with pytest.raises(ValueError, match="on the CPU use precision='float32'"):
        extract.extract(loaded, tricky_corpus, device="cpu", precision="bfloat16", cache=False)
    kw = dict(cache_dir=tmp_path, progress=False)
    a = extract.extract(loaded, tricky_corpus, **kw)
    b = extract.extract(loaded, tricky_corpus, storage="float16", **kw)
    c = extract.extract(loaded, tricky_corpus, device=HERE, **kw)
    assert a.cache_key != b.cache_key and a.cache_key == c.cache_key
    assert c.from_cache and b.words.dtype == np.float16


# --------------------------------------------------------------------------- training


def test_finetuning_on_the_default_device_named_explicitly_is_the_default_run(tmp_path):
    from analysis_lib.training import finetune
    from tests.test_finetune import FAST, TINY, keyword_task

    task = keyword_task()
    quick = finetune.FinetuneConfig(**{**FAST.__dict__, "epochs": 1})
    a = finetune.finetune("random:bert", task, quick, progress=False, cache_dir=tmp_path,
                          **TINY)
    b = finetune.finetune("random:bert", task, quick, progress=False, cache_dir=tmp_path,
                          device=HERE, **TINY)
    assert a.record["device"] == HERE and a.path == b.path  # one cache entry
    for (name, p), (_, q) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(p, q), name


def test_pretraining_device_is_in_the_record_and_cpu_keeps_the_key(tmp_path):
    from analysis_lib.training import pretrain as pt
    from tests.test_zoo import TINY

    assert pt.key_of(TINY, "cpu") == pt.key_of(TINY, torch.device("cpu"))
    result = pt.pretrain(TINY, cache_dir=tmp_path, progress=False, device="cpu")
    assert result.record["device"] == "cpu"
    assert pt.cached(TINY, tmp_path, device="cpu") is not None


def test_alignment_networks_take_a_device():
    from analysis_lib import alignment

    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 4))
    Y = np.tanh(X @ rng.standard_normal((4, 4)))
    kw = dict(seed=1, epochs=5)
    a = alignment.fit(X, Y, "mlp", **kw)
    b = alignment.fit(X, Y, "mlp", device=HERE, **kw)
    assert a.distance(X, Y) == b.distance(X, Y)
    with pytest.raises(ValueError, match="unknown device"):
        alignment.fit(X, Y, "linreg", device="gpu0")
    result = alignment.held_out(X, Y, "mlp", device="cpu", **kw)
    assert set(result) == {"train", "test"}


# --------------------------------------------------------------------------- fast paths


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_cholesky_span_equals_the_eigendirections_span(backend):
    """mixedsim projects through a Cholesky factor when Y's z-scored G is safely full rank;
    the eigendecomposition path gives the same projection."""
    from analysis_lib.similarity import _backend
    from analysis_lib.similarity.core import LayerStats, _cholesky_whitener

    rng = np.random.default_rng(4)
    X = rng.standard_normal((500, 20))
    Y = X[:, :12] @ rng.standard_normal((12, 16)) + rng.standard_normal((500, 16)) * [
        10.0 ** k for k in np.linspace(-2, 2, 16)]  # neurons of very different scales
    bk = _backend.get("cpu", backend)
    a, b = LayerStats(X, backend=bk), LayerStats(Y, backend=bk)
    unit = b.standardized()
    assert _cholesky_whitener(unit.G, 1e-12, bk) is not None  # the fast path is taken
    C = a.Xc.T @ b.Xc
    via_eig = b.scales[:, None] * unit.whitener(unit.rank)
    r_fast = bk.host(((C @ b.span_whitener()) ** 2).sum(1) / a.sq_norms)
    r_eig = bk.host(((C @ via_eig) ** 2).sum(1) / a.sq_norms)
    np.testing.assert_allclose(r_fast, r_eig, rtol=0, atol=1e-10)
    # and rank-deficient layers take the eigendirections (the factor is refused)
    Z = LayerStats(np.hstack([X, X[:, :3]]), backend=bk).standardized()
    assert _cholesky_whitener(Z.G, 1e-12, bk) is None



@pytest.mark.parametrize("backend", ["torch", "numpy"])
@pytest.mark.parametrize("route", ["cholesky", "eigen", "empty"])
def test_span_whitener_is_triangular_and_its_blocks_give_the_full_product(backend, route):
    """mixedsim's span whitener is upper triangular (Cholesky route) or lower trapezoidal
    (the eigendirections rotated by a QR factorisation) with the same ``W W'`` as the plain
    basis, and the blockwise product that skips its zero part equals the full one."""
    from analysis_lib.similarity import _backend
    from analysis_lib.similarity.core import LayerStats, span_sq_norms

    rng = np.random.default_rng(11)
    X = rng.standard_normal((400, 30))
    Y = X[:, :10] @ rng.standard_normal((10, 25)) + rng.standard_normal((400, 25)) * [
        10.0 ** k for k in np.linspace(-1, 1, 25)]
    if route == "eigen":
        Y[:, -5:] = Y[:, :5] @ rng.standard_normal((5, 5))  # rank 20 of 25
    if route == "empty":
        Y[:] = 3.0
    bk = _backend.get("cpu", backend)
    a, b = LayerStats(X, backend=bk), LayerStats(Y, backend=bk)
    assert (b.span_cholesky is not None) == (route == "cholesky")
    W = bk.host(b.span_whitener())
    unit = b.standardized()
    if route == "empty":
        assert W.shape == (25, 0)
    else:
        plain = bk.host(b.scales[:, None] * unit.whitener(unit.rank)) if route == "eigen" else W
        assert W.shape == plain.shape == (25, 25 if route == "cholesky" else 20)
        np.testing.assert_allclose(W @ W.T, plain @ plain.T, rtol=0,
                                   atol=1e-9 * np.abs(plain @ plain.T).max())
        zero = np.triu(W, 1) if route == "eigen" else np.tril(W, -1)
        assert not zero.any()
    C = a.Xc.T @ b.Xc
    full = ((bk.host(C) @ W) ** 2).sum(1)
    for width in (1, 4, 7, 192):  # one column per block, uneven blocks, one block
        blocks = b.span_blocks(width)
        assert sum(cols.stop - cols.start for _, cols in blocks) == W.shape[1]
        fast = bk.host(span_sq_norms(C, b, width))
        np.testing.assert_allclose(fast, full, rtol=1e-10, atol=1e-12 * full.max(initial=1))


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_cholesky_route_is_taken_only_when_no_direction_would_be_cut(backend):
    """The certificate (a Cholesky factor of ``G - t I``) accepts a matrix whose smallest
    eigenvalue is comfortably above ``rtol`` times the largest, and never one whose
    eigendecomposition route would cut a direction."""
    from analysis_lib.similarity import _backend
    from analysis_lib.similarity.core import _cholesky_whitener

    bk = _backend.get("cpu", backend)
    rng = np.random.default_rng(11)
    Q, _ = np.linalg.qr(rng.standard_normal((60, 60)))
    rtol = 1e-5
    for ratio, expected in [(1e-3, True), (3e-5, True), (0.99e-5, False), (1e-7, False),
                            (0.0, False)]:
        lam = np.geomspace(1.0, max(ratio, 1e-300), 60) if ratio else np.r_[np.ones(59), 0.0]
        G = (Q * lam) @ Q.T
        W = _cholesky_whitener(bk.asarray(G), rtol, bk)
        assert (W is not None) == expected, ratio
        if W is not None:  # a whitener: W' G W = I
            W = bk.host(W)
            np.testing.assert_allclose(W.T @ G @ W, np.eye(60), atol=1e-8)


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_span_factors_of_several_layers_equal_one_by_one(backend):
    """The suite certifies and factorises every layer's z-scored G side by side (LAPACK, one
    thread each); each result is the one ``_cholesky_whitener`` gives alone, a refusal
    included, and the device route (torch's factorisations) agrees with the host's."""
    from analysis_lib.similarity import _backend
    from analysis_lib.similarity.core import (
        RANK_RTOL,
        LayerStats,
        _cholesky_whitener,
        fill_span_choleskys,
    )

    bk = _backend.get("cpu", backend)
    rng = np.random.default_rng(13)
    X = rng.standard_normal((400, 12))
    raw = [X, rng.standard_normal((400, 20)) * np.geomspace(1e-2, 1e2, 20),
           np.hstack([X, X[:, :2]]), rng.standard_normal((400, 5))]
    together = [LayerStats(x, backend=bk) for x in raw]
    fill_span_choleskys(together)
    for x, s in zip(raw, together):
        alone = _cholesky_whitener(LayerStats(x, backend=bk).standardized().G,
                                   RANK_RTOL, bk)
        assert (s.span_cholesky is None) == (alone is None)
        if alone is not None:
            np.testing.assert_allclose(bk.host(s.span_cholesky), bk.host(alone), atol=1e-12)
    assert [s.span_cholesky is None for s in together] == [False, False, True, False]
    G = torch.from_numpy(np.asarray(LayerStats(raw[1]).standardized().G))
    host = _backend._host_inverse_cholesky((G.numpy(), 1e-3))
    device = _backend._device_inverse_cholesky(G, 1e-3)
    np.testing.assert_allclose(device.numpy(), host, rtol=1e-10, atol=1e-12)
    assert _backend._device_inverse_cholesky(G, 1e3) is None  # shift above every eigenvalue
    assert _backend._host_inverse_cholesky((G.numpy(), 1e3)) is None


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_grams_of_several_layers_equal_their_products(backend):
    """``Backend.grams`` (NumPy's one-triangle product on the CPU) gives ``X' X`` in float64
    for column blocks of a shared buffer, as the suite passes them."""
    from analysis_lib.similarity import _backend

    bk = _backend.get("cpu", backend)
    rng = np.random.default_rng(12)
    buffer = rng.standard_normal((200, 50)).astype(np.float32)
    blocks = [bk.asarray(buffer)[:, a:b] for a, b in ((0, 20), (20, 21), (21, 50))]
    for X, G in zip(blocks, bk.grams(blocks)):
        X = bk.host(X).astype(np.float64)
        G = bk.host(G)
        assert G.dtype == np.float64
        np.testing.assert_allclose(G, X.T @ X, rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(G, G.T)


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_canonical_correlations_of_several_pairs_equal_one_by_one(backend):
    """``canonical_svds`` (the suite's row of pairs, decompositions side by side) returns the
    correlations and PWCCA weights that ``canonical_svd`` gives one pair at a time."""
    from analysis_lib.similarity import _backend
    from analysis_lib.similarity import kernels as m
    from analysis_lib.similarity.core import LayerStats, cross

    bk = _backend.get("cpu", backend)
    layers = [LayerStats(x, backend=bk) for x in _layers()]
    items = [(layers[0], b, cross(layers[0], b)) for b in layers[1:]]
    for (a, b, C), many in zip(items, m.canonical_svds(items, 0.99, "reach")):
        one = m.canonical_svd(a, b, C, 0.99, "reach")
        assert many[3:] == one[3:]  # the same numbers of directions
        np.testing.assert_allclose(bk.host(many[1]), bk.host(one[1]), atol=1e-12)
        for side, (stats, k) in enumerate([(a, one[3]), (b, one[4])]):
            vecs = [r[0] if side == 0 else r[2].T for r in (many, one)]
            w = [bk.host(m.pw_weights(stats, k, v, r[1])) for v, r in zip(vecs, (many, one))]
            np.testing.assert_allclose(w[0], w[1], atol=1e-10)
    assert m.canonical_svds([], 0.99, "reach") == []


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_side_by_side_eigendecompositions_equal_one_by_one(backend):
    """The per-layer decompositions the suite runs side by side (one LAPACK thread each)
    are the ones ``LayerStats.eig`` computes alone: the same eigenvalues, the same
    eigenvectors up to sign, on the backend's own arrays; one already computed is kept."""
    from analysis_lib.similarity import _backend
    from analysis_lib.similarity.core import LayerStats, fill_eigs

    bk = _backend.get("cpu", backend)
    rng = np.random.default_rng(9)
    raw = [rng.standard_normal((300, d)) * np.linspace(0.1, 3.0, d) for d in (12, 30, 7, 30)]
    alone = [LayerStats(x, backend=bk).eig for x in raw]
    together = [LayerStats(x, backend=bk) for x in raw]
    kept = together[2].eig
    fill_eigs(together + [s.standardized() for s in together] + together[:1])
    assert together[2].eig is kept
    for s, (lam, V) in zip(together, alone):
        lam2, V2 = s.eig
        assert type(lam2) is type(lam) and type(V2) is type(V)
        lam, V, lam2, V2 = (bk.host(x) for x in (lam, V, lam2, V2))
        np.testing.assert_allclose(lam2, lam, rtol=1e-12, atol=1e-12 * lam[0])
        np.testing.assert_allclose(np.abs((V2 * V).sum(0)), 1.0, atol=1e-9)  # same axes
        assert np.all(lam2[:-1] >= lam2[1:])  # descending, as eig promises
    # a z-scored layer's decomposition is that of its own G
    unit = together[1].standardized()
    lam, V = (bk.host(x) for x in unit.eig)
    np.testing.assert_allclose((V * lam) @ V.T, bk.host(unit.G), atol=1e-10)


def test_no_foreign_function_calls_in_the_library():
    """The library calls compiled code only through the public APIs of NumPy, SciPy and
    torch: no ctypes, cffi or capsule pointers, whose wrong argument corrupts memory instead
    of raising."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1] / "analysis_lib"
    pattern = re.compile(r"^\s*(import|from)\s+(ctypes|cffi|_cffi_backend)\b|__pyx_capi__",
                         re.M)
    found = [str(p) for p in root.rglob("*.py") if pattern.search(p.read_text())]
    assert found == []


@pytest.mark.parametrize("d, keep", [(30, 7), (30, 30), (30, 0), (2, 1), (1, 1), (200, 60)])
def test_leading_eigenvectors_equal_those_of_the_whole_decomposition(d, keep):
    """``_host_eigh`` returns every eigenvalue and the leading eigenvectors of ``eigh``
    (up to sign), in its order, and asks its count function with the descending,
    non-negative eigenvalues."""
    from analysis_lib.similarity._backend import _host_eigh

    rng = np.random.default_rng(d)
    A = rng.standard_normal((d + 5, d)) * np.linspace(0.1, 2.0, d)
    G = A.T @ A
    seen = []

    def want(lam):
        seen.append(lam)
        return keep

    lam, V = _host_eigh((G, want))
    full_lam, full_V = np.linalg.eigh(G)
    np.testing.assert_allclose(lam, full_lam, rtol=1e-10, atol=1e-12 * full_lam[-1])
    assert V.shape == (d, keep) and V.flags.c_contiguous
    np.testing.assert_allclose(np.abs((V * full_V[:, d - keep:]).sum(0)), 1.0, atol=1e-8)
    assert np.all(np.diff(seen[0]) <= 0) and seen[0].min() >= 0


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_decompositions_that_keep_leading_vectors_serve_every_reader(backend):
    """A layer decomposed with only its leading eigenvectors has every eigenvalue, gives
    the same whiteners and loadings as the whole decomposition, and computes the whole
    one when more vectors are read; a count of None or a second reader asking for all
    gives the whole decomposition at once."""
    from analysis_lib.similarity import _backend
    from analysis_lib.similarity.core import LayerStats, fill_eigs

    bk = _backend.get("cpu", backend)
    rng = np.random.default_rng(2)
    raw = [rng.standard_normal((300, d)) * np.linspace(0.1, 3.0, d) for d in (20, 25, 30)]
    part = [LayerStats(x, backend=bk) for x in raw]
    whole = [LayerStats(x, backend=bk) for x in raw]
    fill_eigs(part + part[2:], [lambda lam: 5, lambda lam: 8, lambda lam: 4, None])
    assert [(s.has("top_eig"), s.has("eig")) for s in part] == [
        (True, False), (True, False), (False, True)]
    for s, w in zip(part, whole):
        np.testing.assert_allclose(s.lam_host, bk.host(w.eig[0]), rtol=1e-10)
        assert s.rank == w.rank and s.n_components(0.9) == w.n_components(0.9)
        for k in (1, 5):
            np.testing.assert_allclose(np.abs(bk.host(s.whitener(k))),
                                       np.abs(bk.host(w.whitener(k))), rtol=1e-8)
            np.testing.assert_allclose(np.abs(bk.host(s.loadings(k))),
                                       np.abs(bk.host(w.loadings(k))), rtol=1e-8, atol=1e-10)
    assert not part[0].has("eig")
    np.testing.assert_allclose(np.abs(bk.host(part[0].whitener(12))),
                               np.abs(bk.host(whole[0].whitener(12))), rtol=1e-8)
    assert part[0].has("eig")  # more vectors than were kept: the whole decomposition


def test_suite_values_do_not_depend_on_the_thread_count():
    """With as many matrices as threads, every decomposition runs on one thread whatever
    the machine has, so the suite's numbers are the same at 1 and 2 threads."""
    layers = _layers()
    names = ["mixedsim", "svcca", "pwcca"]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        two = sim.pairwise_suite(layers, measures=names, device="cpu")
        torch.set_num_threads(1)
        one = sim.pairwise_suite(layers, measures=names, device="cpu")
    finally:
        torch.set_num_threads(before)
    for name in names:
        np.testing.assert_array_equal(two[name], one[name])

def test_the_diagonal_is_one_by_definition_except_ridge_cca():
    layers = _layers()
    names = ["neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka", "procrustes", "cca"]
    out = sim.pairwise_suite(layers, measures=names)
    for name in names:
        assert np.array_equal(np.diag(out[name]), np.ones(len(layers))), name
        # the same layer passed as two collections is computed, and comes out 1 too
        other = sim.pairwise_suite(layers[:1], layers[:1], measures=[name])[name][0, 0]
        assert other == pytest.approx(1.0, abs=1e-6), name
    ridge = sim.pairwise(layers, measure="cca", reg=1.0)
    assert (np.diag(ridge) < 1).all()
    assert np.diag(ridge)[0] == pytest.approx(sim.cca(layers[0], layers[0], reg=1.0).mean)
    constant = [np.ones((50, 3)), np.random.default_rng(0).standard_normal((50, 3))]
    with pytest.raises(ValueError, match="constant|no variance"):
        sim.pairwise(constant, measure="linear_cka")


@pytest.mark.parametrize("measure, method, debiased", [("linear_cka", "exact", False),
                                                       ("linear_cka", "exact", True),
                                                       ("neuronsim", "exact", False),
                                                       ("linear_cka", "minibatch", False)])
def test_streaming_on_torch_equals_numpy(measure, method, debiased):
    layers = _layers(n=240, dtype=np.float32)

    def batches():
        for start in range(0, 240, 60):
            yield [x[start:start + 60] for x in layers]

    kw = dict(measure=measure, method=method, debiased=debiased)
    ref = sim.stream_pairwise(batches(), backend="numpy", **kw)
    got = sim.stream_pairwise(batches(), device="cpu", **kw)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)
    if method == "exact":  # and the streamed numbers are the whole-array ones
        whole = sim.pairwise(layers, measure=measure,
                             **({"debiased": True} if debiased else {}))
        np.testing.assert_allclose(got, whole, rtol=0, atol=1e-5)


def test_the_default_device_can_be_set_for_a_process(monkeypatch):
    monkeypatch.setenv(devices.ENV, "cpu")
    assert devices.resolve(None).type == "cpu"
    monkeypatch.setenv(devices.ENV, "tpu")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        devices.resolve(None)  # a bad environment value is named
    with devices.default("cpu"):
        assert devices.resolve(None).type == "cpu"  # the call wins over the variable
    monkeypatch.delenv(devices.ENV)
    with pytest.raises(ValueError, match="unknown device"):
        devices.set_default("gpu")
    assert devices.process_default is None


def test_read_only_arrays_are_read_without_warnings_or_copies_changed():
    """Memory-mapped files and cached extractions are read-only; the torch path shares them
    (it only reads its inputs) and says nothing."""
    import warnings

    X, Y = (x.astype(np.float32) for x in _layers()[:2])
    X.flags.writeable = False
    before = X.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = sim.pairwise_suite([X, Y], measures=SUITE[:5])
        sim.stream_pairwise([[X, Y]], "linear_cka")
    assert np.array_equal(X, before)
    ref = sim.pairwise_suite([X.copy(), Y], measures=SUITE[:5])
    for name in SUITE[:5]:
        assert np.array_equal(value[name], ref[name]), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32_pwcca_is_the_same_at_one_and_two_threads(dtype):
    """Random float32 layers sharing 10 signals gave PWCCA 0.385911 at one BLAS/torch thread
    and 0.386475 at two, because rounding split tied canonical correlations differently; the
    tie tolerance now sits far above float32 rounding, so every measure agrees to float32's
    precision at any thread count, as float64 does to its own."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(3)
    shared = rng.standard_normal((2000, 10))
    X = np.column_stack([shared, rng.standard_normal((2000, 40))]) @ rng.standard_normal(
        (50, 50))
    Y = np.column_stack([shared, rng.standard_normal((2000, 30))]) @ rng.standard_normal(
        (40, 40))
    layers = [X.astype(dtype), Y.astype(dtype)]
    names = ["neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka", "procrustes", "cca"]
    before = torch.get_num_threads()
    found = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            with threadpool_limits(threads):
                found.append(sim.pairwise_suite(layers, measures=names, device="cpu"))
    finally:
        torch.set_num_threads(before)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for name in names:
        np.testing.assert_allclose(found[0][name], found[1][name], atol=tol, err_msg=name)


@pytest.fixture
def fresh_choices(monkeypatch, tmp_path):
    """The backend's choices forgotten before and after a test, kept in a cache of its own."""
    from analysis_lib.similarity import _backend

    monkeypatch.setenv("ANALYSIS_LIB_CACHE", str(tmp_path))
    monkeypatch.delenv(_backend.ENV, raising=False)
    _backend._chosen.cache_clear()
    _backend._calibrations.clear()
    yield _backend
    _backend._chosen.cache_clear()
    _backend._calibrations.clear()


def _planted_timings(monkeypatch, backend_module, faster: str) -> list:
    """Replace the timing of the two paths by a planted result; return the list of shape
    classes it was asked to time."""
    asked: list = []

    def planted(work, engine):
        asked.append(work)
        slow, fast = 1.0, 0.5
        return {"choice": faster, "numpy_s": fast if faster == "numpy" else slow,
                "torch_s": fast if faster == "torch" else slow, "shape": [1, 1], "note": ""}

    monkeypatch.setattr(backend_module, "_time_paths", planted)
    return asked


@pytest.mark.parametrize("faster", ["numpy", "torch"])
def test_auto_takes_the_path_measured_faster_here(monkeypatch, fresh_choices, faster):
    """The ``"auto"`` rule on the CPU follows the calibration, whatever the CPU's vendor;
    a call whose shape is not known takes NumPy; explicit backends are never overridden."""
    _backend = fresh_choices
    asked = _planted_timings(monkeypatch, _backend, faster)
    work = _backend.Work.of(["linear_cka"], [np.zeros((300, 20), np.float32)])
    engine = timing_engine
    assert _backend.get("cpu", "auto", work, engine).name == faster
    assert _backend.get("cpu", "auto", None, engine).name == "numpy"
    assert _backend.get("cpu", "auto", work, None).name == "numpy"
    assert _backend.get("cpu", "numpy", work, engine).name == "numpy"
    assert _backend.get("cpu", "torch", work, engine).name == "torch"
    assert len(asked) == 1
    info = sim.backend_info("cpu")
    assert list(info["choice"]) == [faster] and list(info["rows"]) == [512]


def test_a_calibration_is_kept_on_disk_and_never_survives_a_change_of_machine(
        monkeypatch, fresh_choices, tmp_path):
    """A second process reads the kept choice; a different CPU name, thread count or library
    version is measured afresh; a damaged file is measured again."""
    from analysis_lib.runtime import machine

    _backend = fresh_choices
    asked = _planted_timings(monkeypatch, _backend, "torch")
    work = _backend.Work.of(["svcca"], [np.zeros((100, 8))])
    first = _backend.calibrate(work, timing_engine)
    assert first["source"] == "measured" and len(asked) == 1
    _backend._calibrations.clear()  # a new process: only the disk remembers
    again = _backend.calibrate(work, timing_engine)
    assert again["choice"] == "torch" and again["source"].endswith(".json") and len(asked) == 1
    files = list((tmp_path / "backend").glob("*.json"))
    assert len(files) == 1
    files[0].write_text("{ damaged")
    _backend._calibrations.clear()
    assert _backend.calibrate(work, timing_engine)["source"] == "measured"
    assert len(asked) == 2
    # another model name, the same model name with other vector units (a kind of CPU,
    # machine.cpu_kind), another version or thread count: measured again
    other = {"avx2"} if machine.cpu_kind().endswith("(AMX)") else {"amx_bf16"}
    for change in ("cpu", "vector", "version", "threads"):
        _backend._calibrations.clear()
        with monkeypatch.context() as m:
            if change == "cpu":
                m.setattr(machine, "cpu_name", lambda: "Another CPU 9000")
            elif change == "vector":
                m.setattr(machine, "cpu_flags", lambda: frozenset(other))
            elif change == "version":
                m.setattr(np, "__version__", "0.0.1")
            else:
                m.setattr(_backend.NumpyBackend, "threads", lambda self: 64)
            machine.cpu_kind.cache_clear()
            try:
                assert _backend.calibrate(work, timing_engine)["source"] == "measured", change
            finally:
                machine.cpu_kind.cache_clear()
    assert len(asked) == 6


def test_the_environment_fixes_what_auto_means(monkeypatch, fresh_choices):
    _backend = fresh_choices
    asked = _planted_timings(monkeypatch, _backend, "numpy")
    work = _backend.Work.of(["rsa"], [np.zeros((100, 8))])
    monkeypatch.setenv(_backend.ENV, "torch")
    assert _backend.get("cpu", "auto", work, timing_engine).name == "torch"
    assert list(sim.backend_info()["source"]) == [f"{_backend.ENV}=torch"]
    monkeypatch.setenv(_backend.ENV, "fastest")
    with pytest.raises(ValueError, match=_backend.ENV):
        _backend.get("cpu", "auto", work, timing_engine)
    assert not asked


def test_a_real_calibration_times_both_paths_and_their_numbers_agree(fresh_choices):
    """The calibration runs the engine on both paths (a choice, two positive times), and
    whichever it takes, the measures agree with the other path to float32 rounding."""
    _backend = fresh_choices
    layers = [x.astype(np.float32) for x in _layers()]
    work = _backend.Work.of(["linear_cka", "svcca", "rsa"], layers)
    found = _backend.calibrate(work, timing_engine)
    assert found["source"] == "measured"
    assert found["choice"] in ("numpy", "torch") and found["numpy_s"] > 0 and found["torch_s"] > 0
    assert found["cpu"] and found["rows"] == 512 and found["columns"] == 64
    auto = sim.pairwise_suite(layers, measures=["linear_cka", "svcca", "rsa"])
    for path in ("numpy", "torch"):
        other = sim.pairwise_suite(layers, measures=["linear_cka", "svcca", "rsa"],
                                   backend=path)
        for name in auto:
            np.testing.assert_allclose(auto[name], other[name], atol=2e-5, err_msg=name)


def test_shape_classes():
    from analysis_lib.similarity._backend import Work

    a = Work.of(["svcca", "linear_cka"], [np.zeros((3000, 700), np.float32),
                                          np.zeros((3000, 384), np.float32)])
    assert a == Work(("linear_cka", "svcca"), 4096, 1024, "float32")
    assert Work.of(["rsa"], [np.zeros((10, 3)), np.zeros((10, 3), np.float32)]).dtype == "float64"
    assert Work.of(["rsa"], [np.zeros((10, 3), np.float32)], dtype=np.float64).dtype == "float64"
    assert Work.of(["rsa"], [torch.zeros(1, 10, 3)]).rows == 16  # Hugging Face's (1, n, d)
    assert Work.of(["rsa"], [np.zeros(10)]) is None and Work.of(["rsa"], []) is None
