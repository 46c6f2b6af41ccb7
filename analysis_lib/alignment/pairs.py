"""Distances between models after alignment, as Ren et al. 2023 read them: every pair of
models (seeds) layer by layer, every pair of layers of one model, every method on the same
pairs, and the known-answer check of the methods on synthetic pairs.

:func:`pair_distances` aligns each layer of every unordered pair of models and keeps the
held-out and train distance (each pair once, never a model with itself, both directions
averaged and Procrustes scaled: :func:`figure_options`); :func:`layer_by_layer` does the
same for every pair of layers of one model (Ren et al. Fig. 3); :func:`method_distances`
fits every method as Ren et al.'s Table 4 does (one way, unscaled; or both ways, as the
book's claims read it); :func:`synthetic_table` (:func:`synthetic_tables` for several sizes
and seeds) is their Table 3 with known answers (Y = g(X) for a linear and for an invertible
nonlinear g). A method that cannot be fitted on the rows given is reported with the reason
(:func:`unfit`), not stopped on.

The network maps (``inn``, ``mlp``) train on one thread each, so every function here
fits them side by side in worker processes, one per core
(:func:`analysis_lib.runtime.workers.map_jobs`: the same numbers, in 0.5 to 0.6 of the
time on two cores); the closed-form maps are solved in the calling process.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..runtime import device as devices
from ..runtime.profile import profiled
from ..runtime.workers import map_jobs
from .core import NETWORKS, fit_rows, held_out, rows_needed


def synthetic_table(methods: Sequence[str], *, n: int = 3000, d: int = 8, seed: int = 0
                    ) -> pd.DataFrame:
    """Table 3 with known answers: held-out (and train) distance of every method for a
    linear and for an invertible nonlinear g."""
    return synthetic_tables([(methods, n, seed)], d=d).drop(columns="rows")


@profiled("alignment", lambda runs, **k: f"synthetic, {len(runs)} runs")
def synthetic_tables(runs: Sequence[tuple[Sequence[str], int, int]], *, d: int = 8
                     ) -> pd.DataFrame:
    """:func:`synthetic_table` for each ``(methods, n, seed)`` of ``runs``, one table with
    ``n`` in the column ``rows``. The network maps of every run are fitted side by side
    at once, so that a run's longest fit does not keep the other cores waiting."""
    jobs = [(kind, method, n, seed) for methods, n, seed in runs
            for kind in ("linear", "flow") for method in methods]
    found = fit_each(functools.partial(_synthetic_row, d=d), jobs, [job[1] for job in jobs])
    return pd.DataFrame([{"g": kind, "method": method, "seed": seed, **result, "rows": n}
                         for (kind, method, n, seed), result in zip(jobs, found)])


def _synthetic_row(kind: str, method: str, n: int, seed: int, *, d: int) -> dict[str, float]:
    """One row of :func:`synthetic_tables`: ``method``'s distances on the known pair."""
    from .flows import synthetic_pair  # PyTorch: the flow pair only

    X, Y = synthetic_pair(n, d, kind, seed=seed)
    return held_out(X, Y, method, seed=seed)


def fit_each(function: Callable[..., Any], jobs: Sequence[Sequence[Any]],
             methods: Sequence[str], device: Any = None) -> list[Any]:
    """``function(*job)`` for every job, in order: the jobs whose method (``methods``, one
    per job) trains a network side by side in worker processes when the networks train on
    the CPU (``device``, resolved as :func:`~analysis_lib.alignment.fit` resolves it), the
    others here. On a GPU every job runs here, one after another: each worker would
    start a GPU context of its own for a network that keeps the GPU busy for milliseconds."""
    networks = [k for k, method in enumerate(methods) if method in NETWORKS]
    if networks and not devices.is_cpu(devices.resolve(device)):
        networks = []
    found = dict(zip(networks, map_jobs(function, [jobs[k] for k in networks])))
    return [found[k] if k in found else function(*job) for k, job in enumerate(jobs)]


def figure_options(method: str) -> dict[str, bool]:
    """The options of the distances Ren et al.'s figures are read on: each pair aligned
    both ways and the two distances averaged (``both_ways``: no seed is the privileged
    target), and for ``procrustes`` the best scale after the rotation (``scaled``: the
    distance ignores either seed's overall size and stays at most 1 on the fitted rows,
    1 being no better than predicting the target's mean). The plain one-way map of
    Ren et al.'s L2 distance moves with the layers' scale: a seed with larger activations
    lands further away, beyond what two unrelated spaces give."""
    return {"both_ways": True, **({"scaled": True} if method == "procrustes" else {})}


@profiled("alignment", lambda layers, method, **k: f"seed pairs, {method}")
def pair_distances(layers: Mapping[str, Sequence[np.ndarray]], method: str, *,
                   seed: int = 0, first_layer: int = 0, **options: Any) -> pd.DataFrame:
    """For every layer and every unordered pair of models: the held-out and train distance
    after aligning the two models' layers (:func:`figure_options`, which ``options``
    override: ``both_ways=False`` aligns the first model's layer to the second's only).
    ``first_layer`` is the index of the first entry (0 for hidden states, 1 for
    attention)."""
    options = {**figure_options(method), **options}
    names = list(layers)
    if len(names) < 2:
        raise ValueError("pair distances need at least two models (seeds)")
    n_layers = {len(v) for v in layers.values()}
    if len(n_layers) != 1:
        raise ValueError(f"the models have different numbers of layers: {sorted(n_layers)}")
    first = layers[names[0]][0]
    why = unfit(method, fit_rows(len(first)), first.shape[1], first.shape[1],
                options.get("ridge", 0.0))
    keys = [(a, b, k) for a, b in itertools.combinations(names, 2)
            for k in range(len(layers[a]))]
    rows = [{"layer": k + first_layer, "pair": f"{a} / {b}", "method": method}
            for a, b, k in keys]
    if why:
        return pd.DataFrame([{**row, "train": np.nan, "test": np.nan, "note": why}
                             for row in rows])
    fitted = fit_each(functools.partial(held_out, method=method, seed=seed, **options),
                      [(layers[a][k], layers[b][k]) for a, b, k in keys], [method] * len(keys),
                      options.get("device"))
    return pd.DataFrame([{**row, **result, "note": ""} for row, result in zip(rows, fitted)])


def unfit(method: str, rows: int, x_columns: int, y_columns: int, ridge: float = 0.0) -> str:
    """Why ``method`` cannot be fitted on ``rows`` rows at these widths ("" when it can):
    a table reports such a method as not fitted instead of stopping the page."""
    needed = rows_needed(method, x_columns, y_columns, ridge)
    if rows >= needed:
        return ""
    return (f"not fitted: {method} at {max(x_columns, y_columns)} columns needs {needed} rows "
            f"to fit, this split has {rows}; use more sentences or a ridge")


@profiled("alignment", lambda layers, method="linreg", **k: f"layer by layer, {method}")
def layer_by_layer(layers: Sequence[np.ndarray], method: str = "linreg", *, seed: int = 0,
                   **options: Any) -> np.ndarray:
    """Fig. 3: held-out distance after aligning layer i to layer j of one model, for all
    i, j (0 on the diagonal), with :func:`figure_options` unless ``options`` override
    them (both ways, the matrix is symmetric)."""
    options = {**figure_options(method), **options}
    n = len(layers)
    cells = [(i, j) for i, j in itertools.product(range(n), range(n))
             if i < j or (i > j and not options["both_ways"])]
    fitted = fit_each(functools.partial(held_out, method=method, seed=seed, **options),
                      [(layers[i], layers[j]) for i, j in cells], [method] * len(cells),
                      options.get("device"))
    M = np.zeros((n, n))
    for (i, j), result in zip(cells, fitted):
        M[i, j] = result["test"]
        if options["both_ways"]:
            M[j, i] = M[i, j]
    return M


def method_distances(layers: Mapping[str, Sequence[np.ndarray]], methods: Sequence[str], *,
                     seed: int = 0, both_ways: bool = False) -> pd.DataFrame:
    """Every method on every seed pair and layer (:func:`pair_distances`), one long table:
    each method as Ren et al.'s Table 4 fits it, one way (the pair's first model mapped to
    its second) and unscaled. ``both_ways``: each pair also mapped the other way on the same
    split and the two distances averaged, so that no seed is the privileged target (a seed
    whose layer is harder to predict would otherwise make every map look worse)."""
    return pd.concat([pair_distances(layers, m, seed=seed,
                                     **{**dict.fromkeys(figure_options(m), False),
                                        "both_ways": both_ways})
                      for m in methods],
                     ignore_index=True)
