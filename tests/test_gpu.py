"""The GPU paths: every step that takes ``device`` gives on a CUDA GPU what it gives on the
CPU (to rounding, or to the precision it was asked for) and keeps its results apart from the
CPU's. Skipped where torch sees no GPU, as on CI; the running page ("On a GPU") names the
machine they last ran on."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from analysis_lib import alignment, extract
from analysis_lib import similarity as sim
from analysis_lib.training import finetune, loop
from analysis_lib.training import pretrain as pt

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")

#: the measures computed on the GPU (RSA, RBF CKA and the attention measures run on the CPU)
ON_GPU = ["neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka", "procrustes", "cca"]


def _layers(n=300, d=24, offset=0.0, dtype=np.float64, seed=0):
    """Four layers that share a latent signal: a chain of noisy linear maps."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    out = []
    for _ in range(4):
        out.append((X + offset).astype(dtype))
        X = np.tanh(X @ rng.standard_normal((d, d)) / d ** 0.5) + 0.3 * rng.standard_normal((n, d))
    return out


@pytest.mark.parametrize("case", ["plain", "large offset", "float32"])
def test_every_gpu_measure_agrees_with_the_numpy_path(case):
    """All pairs of four layers on the GPU against the NumPy path: float64 to 1e-6; a large
    common offset (1e4, which centring must remove) and float32 layers to float32 rounding."""
    layers = _layers(offset=1e4 if case == "large offset" else 0.0,
                     dtype=np.float32 if case == "float32" else np.float64)
    cpu = sim.pairwise_suite(layers, measures=ON_GPU, backend="numpy", progress=False)
    gpu = sim.pairwise_suite(layers, measures=ON_GPU, device="cuda", progress=False)
    tolerance = 1e-6 if case == "plain" else 1e-4
    for measure in ON_GPU:
        np.testing.assert_allclose(gpu[measure], cpu[measure], atol=tolerance, err_msg=measure)


def test_a_rank_deficient_layer_gives_the_cpu_value_on_the_gpu():
    """A layer of 24 neurons spanning 5 directions: the variance cuts and the rank-aware
    steps must find the same subspace on both devices."""
    rng = np.random.default_rng(1)
    low = rng.standard_normal((300, 5)) @ rng.standard_normal((5, 24))
    other = low @ rng.standard_normal((24, 24)) + 0.1 * rng.standard_normal((300, 24))
    for measure in ["svcca", "pwcca", "linear_cka", "mixedsim"]:
        cpu = sim.pairwise([low], [other], measure=measure, backend="numpy", progress=False)
        gpu = sim.pairwise([low], [other], measure=measure, device="cuda", progress=False)
        np.testing.assert_allclose(gpu, cpu, atol=1e-6, err_msg=measure)


def test_extraction_on_the_gpu_matches_the_cpu_and_is_cached_apart(tiny_models, tricky_corpus,
                                                                     tmp_path):
    loaded = tiny_models["bert"]
    kw = dict(cache_dir=tmp_path, progress=False, attention=True)
    cpu = extract.extract(loaded, tricky_corpus, device="cpu", **kw)
    gpu = extract.extract(loaded, tricky_corpus, device="cuda", **kw)
    assert gpu.cache_key != cpu.cache_key and not gpu.from_cache
    for a, b in zip(cpu.words, gpu.words):
        np.testing.assert_allclose(b, a, atol=1e-4, rtol=1e-4)
    for a, b in zip(cpu.attention, gpu.attention):
        np.testing.assert_allclose(b, a, atol=1e-5)
    again = extract.extract(loaded, tricky_corpus, device="cuda", **kw)
    assert again.from_cache and again.cache_key == gpu.cache_key
    # bfloat16 autocast is keyed apart and keeps each layer's geometry
    low = extract.extract(loaded, tricky_corpus, device="cuda", precision="bfloat16", **kw)
    assert low.cache_key not in (cpu.cache_key, gpu.cache_key)
    for a, b in zip(cpu.words, low.words):
        assert sim.linear_cka(a, b, backend="numpy") > 0.99


def test_fine_tuning_on_the_gpu_learns_in_both_precisions_and_is_cached_apart(tmp_path):
    from tests.test_finetune import FAST, TINY, keyword_task

    task = keyword_task()
    kw = dict(progress=False, cache_dir=tmp_path, **TINY)
    auto = replace(FAST, precision="auto")
    runs = {precision: finetune.finetune("random:bert", task, replace(FAST, precision=precision),
                                         device="cuda", **kw)
            for precision in ("auto", "bfloat16")}
    # "auto" trains in float32 on a GPU (measured faster there for the library's loops)
    assert runs["auto"].record["config"]["precision"] == "float32"
    assert runs["bfloat16"].record["config"]["precision"] == "bfloat16"
    for run in runs.values():
        assert run.record["device"] == "cuda"
        test = run.metrics["test"]
        assert test["accuracy"] > test["majority_baseline"] + 0.2, test
    cpu = finetune.finetune("random:bert", task, replace(FAST, precision="float32"),
                            device="cpu", **kw)
    assert len({cpu.path, runs["auto"].path, runs["bfloat16"].path}) == 3
    calls = []
    real = loop.run

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    loop.run = counted
    try:
        again = finetune.finetune("random:bert", task, auto, device="cuda", **kw)
        looked_up = finetune.lookup("random:bert", task, auto, device="cuda",
                                    cache_dir=tmp_path, **TINY)
    finally:
        loop.run = real
    assert not calls and again.path == looked_up.path == runs["auto"].path  # read back
    # a run read back is on the device it was asked for, as a run just trained is
    for run in (again, looked_up, runs["auto"]):
        assert {p.device.type for p in run.model.parameters()} == {"cuda"}
    assert {p.device.type for p in cpu.model.parameters()} == {"cpu"}


def test_pretraining_on_the_gpu_is_recorded_and_cached_apart(tmp_path):
    from tests.test_zoo import TINY

    gpu = pt.pretrain(TINY, cache_dir=tmp_path, progress=False, device="cuda")
    assert gpu.record["device"].startswith("cuda")
    assert pt.key_of(TINY, "cuda") != pt.key_of(TINY, "cpu")
    assert pt.cached(TINY, tmp_path, device="cuda") is not None
    assert pt.cached(TINY, tmp_path, device="cpu") is None


def test_alignments_on_the_gpu_agree_with_the_cpu_where_they_are_closed_form():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 16))
    Y = np.tanh(X @ rng.standard_normal((16, 16)) / 4) + 0.05 * rng.standard_normal((400, 16))
    for method in ["linreg", "cca", "svcca"]:
        cpu = alignment.fit(X, Y, method, device="cpu").distance(X, Y)
        gpu = alignment.fit(X, Y, method, device="cuda").distance(X, Y)
        assert gpu == pytest.approx(cpu, abs=1e-6), method
    # the networks train on the GPU (their random draws differ from the CPU's) and align
    identity = alignment.fit(X, Y, "identity").distance(X, Y)
    for method in ["inn", "mlp"]:
        fitted = alignment.fit(X, Y, method, device="cuda", seed=0, epochs=40)
        assert np.isfinite(fitted.distance(X, Y)), method
        assert fitted.distance(X, Y) < identity, method
