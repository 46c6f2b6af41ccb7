"""Jobs in worker processes (:mod:`analysis_lib.runtime.workers`): the same results, bit for
bit, as in the calling process, in the jobs' order; a job's error and a lost worker reported
with what to do."""

import math
import operator
import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from analysis_lib import alignment
from analysis_lib.alignment import pairs
from analysis_lib.runtime import workers
from analysis_lib.training import heads


def test_results_come_back_in_the_jobs_order_from_other_processes():
    jobs = [(k, k + 1) for k in range(7)]
    assert workers.map_jobs(operator.mul, jobs, workers=2) == [k * (k + 1) for k in range(7)]
    here = os.getpid()
    assert workers.map_jobs(os.getpid, [()], workers=2) == [here]  # one job: no pool
    assert workers.map_jobs(os.getpid, [(), ()], workers=1) == [here, here]
    away = workers.map_jobs(os.getpid, [()] * 4, workers=2)
    assert here not in away and 1 <= len(set(away)) <= 2


def test_side_by_side_threads_give_the_bits_of_one_thread_and_set_blas_back():
    """Fits of many BLAS calls (the structural probe's L-BFGS-B, an eigendecomposition) in
    a pool of threads, each on one BLAS thread: the same bits as one after another, in the
    items' order, and the BLAS libraries back on their own thread counts afterwards."""
    from analysis_lib.training import probes

    rng = np.random.default_rng(0)
    rows = [rng.standard_normal((300, 24)) * rng.uniform(0.5, 3.0, 24) for _ in range(4)]
    depth = rng.integers(0, 6, 300).astype(float)

    def fit(X):
        B, scale = probes.depth_probe_fit(X, depth, rank=4, max_iter=30)
        return B, scale, np.linalg.eigh(X.T @ X)[0]

    before = [lib["num_threads"] for lib in workers.blas().info()]
    alone = workers.side_by_side(fit, rows, threads=1)
    together = workers.side_by_side(fit, rows, threads=3)
    assert [lib["num_threads"] for lib in workers.blas().info()] == before
    assert len(together) == 4
    for one, other in zip(alone, together):
        assert all(np.array_equal(a, b) for a, b in zip(one, other))
    assert not np.array_equal(alone[0][0], alone[1][0])  # each item its own fit, in order
    assert workers.side_by_side(fit, [], threads=2) == []
    with pytest.raises(ValueError, match="math domain error"):
        workers.side_by_side(math.sqrt, [4.0, -1.0], threads=2)


def test_the_blas_controller_takes_in_libraries_loaded_after_it_was_made():
    """A limit set through a controller made before SciPy's optimizers were imported left
    their OpenBLAS out: the structural probe's fits then ran on two pools again, ten times
    slower. The controller is made again after an import."""
    script = (
        "from threadpoolctl import ThreadpoolController\n"
        "from analysis_lib.runtime import workers\n"
        "first = {lib['filepath'] for lib in workers.blas().info()}\n"
        "import scipy.optimize, numpy\n"
        "later = {lib['filepath'] for lib in workers.blas().info()}\n"
        "fresh = {lib['filepath'] for lib in ThreadpoolController().info()}\n"
        "assert later == fresh and later - first, (first, later, fresh)\n"
        "with workers.blas().limit(limits=1, user_api='blas'):\n"
        "    inside = [lib['num_threads'] for lib in ThreadpoolController().info()\n"
        "              if lib['user_api'] == 'blas']\n"
        "assert inside and set(inside) == {1}, inside\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_jobs_error_is_raised_as_it_was_raised():
    with pytest.raises(ValueError, match="math domain error"):
        workers.map_jobs(math.sqrt, [(4.0,), (-1.0,)], workers=2)
    assert workers.map_jobs(math.sqrt, [(4.0,), (9.0,)], workers=2) == [2.0, 3.0]


def test_a_lost_worker_names_the_way_out_and_the_next_call_starts_afresh():
    with pytest.raises(RuntimeError, match="ANALYSIS_LIB_WORKERS=1"):
        workers.map_jobs(os._exit, [(3,), (3,)], workers=2)
    assert workers.map_jobs(operator.add, [(1, 2), (3, 4)], workers=2) == [3, 7]


def test_workers_wait_for_their_threads_passively_and_leave_this_environment_alone(
        monkeypatch):
    """A worker may train on two threads beside another (a fine-tuning run): it starts with
    OpenMP's passive wait policy, whatever this process names, and this process's own
    environment is left as it was."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    workers.shutdown()  # pools started before: their workers read another environment
    assert workers.map_jobs(os.getenv, [("OMP_WAIT_POLICY",)] * 2, workers=2) == \
        ["PASSIVE"] * 2
    assert "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    workers.shutdown()
    assert workers.map_jobs(os.getenv, [("OMP_WAIT_POLICY",)] * 2, workers=2) == \
        ["PASSIVE"] * 2
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    workers.shutdown()


def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(tmp_path):
    """Workers started fresh run the parent's script first, unless it is left out: an
    unguarded script would run whole in each worker and stop there."""
    script = tmp_path / "unguarded.py"
    script.write_text("import operator\n"
                      "from analysis_lib.runtime import workers\n"
                      "print('script ran')\n"
                      "print(workers.map_jobs(operator.mul, [(2, 3), (4, 5)], workers=2))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["script ran", "[6, 20]"]


def test_workers_leave_an_interrupt_to_the_notebook_that_sent_the_jobs():
    """Interrupting a notebook (or shutting its kernel down) signals every process of its
    group: the workers ignore it and the caller decides."""
    assert workers.map_jobs(signal.raise_signal, [(signal.SIGINT,)] * 2, workers=2) == \
        [None, None]
    assert workers.map_jobs(operator.add, [(1, 1), (2, 2)], workers=2) == [2, 4]


def test_the_cpu_time_of_the_workers_is_counted():
    before = workers.cpu_seconds()
    assert workers.map_jobs(sum, [(range(4_000_000),)] * 2, workers=2) == \
        [sum(range(4_000_000))] * 2
    assert workers.cpu_seconds() - before > 0.05  # two sums of four million numbers there
    here = workers.cpu_seconds()
    workers.map_jobs(sum, [(range(4_000_000),)] * 2, workers=1)
    assert workers.cpu_seconds() == here  # in this process: its own CPU time, not counted


def test_the_pool_size_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv(workers.ENV, "1")
    assert workers.default_workers() == 1
    assert workers.map_jobs(os.getpid, [(), ()]) == [os.getpid()] * 2
    for bad in ("0", "two", "-3"):
        monkeypatch.setenv(workers.ENV, bad)
        with pytest.raises(ValueError, match="ANALYSIS_LIB_WORKERS=.*whole number of at least 1"):
            workers.default_workers()
    monkeypatch.delenv(workers.ENV)
    assert workers.default_workers() >= 1
    with pytest.raises(ValueError, match="workers must be at least 1"):
        workers.map_jobs(os.getpid, [()], workers=0)


def _seeds(n_seeds=3, n_layers=2, rows=60, width=4):
    rng = np.random.default_rng(0)
    base = [rng.standard_normal((rows, width)) for _ in range(n_layers)]
    return {f"s{k}": [x + 0.3 * rng.standard_normal(x.shape) for x in base]
            for k in range(n_seeds)}


@pytest.mark.parametrize("method", ["inn", "mlp"])
def test_network_maps_fitted_in_workers_equal_those_fitted_here(monkeypatch, method):
    """The alignment tables fit their network maps in workers: every number is the one the
    calling process computes alone, to the last bit."""
    layers = _seeds()
    options = {"epochs": 15, "hidden": 16}

    def tables():
        return (pairs.pair_distances(layers, method, seed=2, **options),
                pairs.layer_by_layer(layers["s0"] + layers["s1"], method, seed=2, **options))

    monkeypatch.setenv(workers.ENV, "1")
    alone, alone_matrix = tables()
    monkeypatch.setenv(workers.ENV, "2")
    spread, spread_matrix = tables()
    pd.testing.assert_frame_equal(alone, spread, check_exact=True)
    np.testing.assert_array_equal(alone_matrix, spread_matrix)
    assert len(alone) == 3 * 2 and alone.test.notna().all()
    assert alone.pair.tolist() == ["s0 / s1"] * 2 + ["s0 / s2"] * 2 + ["s1 / s2"] * 2


def test_on_a_gpu_the_network_maps_are_fitted_here_one_after_another(monkeypatch):
    """Workers are for maps trained on the CPU; a GPU would get one context per worker."""
    import torch

    from analysis_lib.runtime import device as devices

    monkeypatch.setenv(workers.ENV, "2")
    jobs = [(), ()]
    assert os.getpid() not in pairs.fit_each(os.getpid, jobs, ["inn", "mlp"], "cpu")
    monkeypatch.setattr(devices, "resolve", lambda device=None: torch.device("cuda"))
    assert pairs.fit_each(os.getpid, jobs, ["inn", "mlp"]) == [os.getpid()] * 2
    # the closed-form maps are always fitted here
    assert pairs.fit_each(os.getpid, jobs, ["linreg", "cca"], "cpu") == [os.getpid()] * 2


def test_the_synthetic_table_and_the_injection_are_the_same_with_workers(monkeypatch,
                                                                         linear_heads):
    rng = np.random.default_rng(1)
    features = {name: {"train": rng.standard_normal((40, 6)).astype(np.float32),
                       "test": rng.standard_normal((12, 6)).astype(np.float32)}
                for name in ("a", "b")}
    labels = {"test": rng.integers(0, 2, 12)}

    def tables():
        return (pairs.synthetic_table(["linreg", "mlp"], n=200, d=3, seed=1),
                heads.injection(features, {"a": linear_heads(6, 0), "b": linear_heads(6, 1)},
                                labels, ["procrustes", "inn", "mlp"], seed=3))

    monkeypatch.setenv(workers.ENV, "1")
    alone = tables()
    monkeypatch.setenv(workers.ENV, "2")
    spread = tables()
    for one, other in zip(alone, spread):
        pd.testing.assert_frame_equal(one, other, check_exact=True)
    assert alone[0].method.tolist() == ["linreg", "mlp"] * 2
    injected = alone[1].set_index(["from", "to", "method"]).accuracy
    assert injected.notna().all() and len(injected) == 2 * 6
    # the map a worker sends back is the fitted map applied here
    a, b = features["a"], features["b"]
    np.testing.assert_array_equal(
        alignment.fit_transform(a["train"], b["train"], a["test"], "inn", seed=3),
        alignment.fit(a["train"], b["train"], "inn", seed=3).transform(a["test"]))
