"""Run a sweep's units in this process or on a Dask cluster, and gather one tidy table.

Every unit is one of the library's cached steps (fine-tuning, extraction, a measure's layer x
layer matrix), so a unit whose result is in the cache is not recomputed, and rerunning a
half-finished sweep does only what is missing. Units pass each other cache keys and small
results, never arrays: the arrays travel through the cache folder, which every worker must
see (a shared filesystem on a cluster). A unit that fails is retried ``spec.retries`` times
(errors that name bad input, ``ValueError``/``TypeError``/``LookupError``, fail the same way
every time and are not retried), then reported; the units that need it are skipped and the
rest of the grid finishes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import time
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import __version__
from ..runtime.cache import (
    ArrayCache,
    atomic_write,
    check_writable,
    code_digest,
    default_root,
    make_key,
    pin_root,
)
from ..runtime.machine import cores
from .spec import SweepSpec, Unit, load_spec, plan

#: Errors that describe bad input: retrying cannot help.
NOT_RETRIED = (ValueError, TypeError, LookupError)
#: a local cluster runs at most this many worker processes per core of the machine
MAX_WORKERS_PER_CORE = 4


@dataclass
class SweepResult:
    """What a sweep produced.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (pair of variants, measure, layer pair): ``model_a, seed_a, task_a,
        model_b, seed_b, task_b, measure, layer_a, layer_b, value``, then the settings and
        versions that produced it.
    units : pandas.DataFrame
        One row per unit: key, stage, ok, computed (False: read from the cache), attempts,
        seconds, error, where it ran.
    failures : pandas.DataFrame
        The rows of ``units`` that failed or were skipped because a unit they need failed.
    """

    table: pd.DataFrame
    units: pd.DataFrame
    seconds: float

    @property
    def failures(self) -> pd.DataFrame:
        return self.units[~self.units["ok"]].reset_index(drop=True)

    @property
    def n_computed(self) -> int:
        return int(self.units["computed"].sum())

    def write(self, folder: str | Path) -> dict[str, Path]:
        """Write ``results.parquet``, ``results.csv``, ``units.csv`` and ``failures.csv``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = {"parquet": folder / "results.parquet", "csv": folder / "results.csv",
                 "units": folder / "units.csv", "failures": folder / "failures.csv"}
        for name, path in paths.items():
            frame = {"parquet": self.table, "csv": self.table, "units": self.units,
                     "failures": self.failures}[name]
            atomic_write(path, functools.partial(_write_table, frame, name == "parquet"))
        return paths


def _write_table(frame: pd.DataFrame, parquet: bool, path: Path) -> None:
    if parquet:
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    """Run torch and the BLAS libraries on ``n`` threads inside the block: the same count
    wherever a unit runs gives the same floating-point sums, so the same numbers."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(before)


def _finetune(params: dict[str, Any], deps: list[dict], cache_dir: str) -> tuple[Any, bool]:
    from ..training import zoo
    from ..training.grid import FinetuneGrid

    zoo.ensure([params["model"]], cache_dir=cache_dir)  # loading never trains
    result = FinetuneGrid.of(params["finetune"]).train(
        params["model"], params["task"], params["seed"], progress=False, cache_dir=cache_dir,
        load_options=params["load_options"])
    return {"path": str(result.path), "metrics": result.metrics}, not result.from_cache


def _extract(params: dict[str, Any], deps: list[dict], cache_dir: str) -> tuple[Any, bool]:
    from ..data.corpora import load_corpus
    from ..extract import extract
    from ..training import zoo

    corpus_spec = params["corpus"]
    corpus = load_corpus(corpus_spec["name"], n=corpus_spec["n"], seed=corpus_spec["seed"])
    model = deps[0]["value"]["path"] if deps else params["model"]
    zoo.ensure([model], cache_dir=cache_dir)  # loading never trains
    result = extract(model, corpus, cache_dir=cache_dir, progress=False,
                     **params["extract_options"], **params["load_options"])
    return {"key": result.cache_key, "n_layers": result.n_layers,
            "family": result.info.family, "pretrained": bool(result.info.pretrained),
            "fingerprint": result.info.fingerprint}, not result.from_cache


def _rows(n: int, keep: int | None, seed: int) -> np.ndarray:
    if keep is None or keep >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=keep, replace=False))


def _measure(params: dict[str, Any], deps: list[dict], cache_dir: str) -> tuple[Any, bool]:
    from ..layers import check_layer
    from ..similarity.pairwise import pairwise
    from ..similarity.registry import SYMMETRIC

    a, b = (d["value"] for d in deps)
    key = make_key(kind="sweep-measure", a=a["key"], b=b["key"], measure=params["measure"],
                   code=code_digest("analysis_lib.similarity.pairwise", "analysis_lib.layers",
                                    __name__),
                   options=params["options"], kind_=params["kind"],
                   max_words=params["max_words"], layers=params["layers"],
                   row_seed=params["row_seed"])
    computed = []

    def compute():
        computed.append(True)
        store = ArrayCache("extract", cache_dir)
        loaded = []
        for side in (a, b):
            hit = store.load(side["key"])
            if hit is None:
                raise RuntimeError(f"the extraction {side['key']} is not in the cache at "
                                   f"{store.folder}; every worker must see the same cache "
                                   "folder (a shared filesystem on a cluster)")
            loaded.append(hit[0])
        source = {"words": "words", "first": "sentence_first", "last": "sentence_last",
                  "mean": "sentence_mean"}
        name = source[params["kind"]]
        if params["kind"] == "words" and not (
                np.array_equal(loaded[0]["word_sentence"], loaded[1]["word_sentence"])
                and np.array_equal(loaded[0]["word_position"], loaded[1]["word_position"])):
            raise ValueError("the two extractions hold different words (a model cut long "
                             "sentences at its maximum length); set extract_options: "
                             "{max_length: N} to the smaller model's limit")
        arrays = [x[name] for x in loaded]
        rows = _rows(arrays[0].shape[1], params["max_words"], params["row_seed"])
        picks = []
        for x in arrays:
            n = x.shape[0] - 1
            layers = (list(range(n + 1)) if params["layers"] == "all"
                      else [check_layer(v, n, "layers") for v in params["layers"]])
            picks.append(layers)
        side_a = [arrays[0][i][rows] for i in picks[0]]
        side_b = [arrays[1][j][rows] for j in picks[1]]
        out = {"matrix": pairwise(side_a, side_b, measure=params["measure"], progress=False,
                                  **params["options"]),
               "layers_a": np.array(picks[0]), "layers_b": np.array(picks[1])}
        if both:  # an asymmetric measure between two variants: the other direction too
            out["matrix_ba"] = pairwise(side_b, side_a, measure=params["measure"],
                                        progress=False, **params["options"])
        return out, {"n_rows": int(len(rows))}

    both = a["key"] != b["key"] and params["measure"] not in SYMMETRIC
    needed = ("matrix", "layers_a", "layers_b") + (("matrix_ba",) if both else ())
    arrays, meta = ArrayCache("sweep", cache_dir).get_or_compute(
        key, compute, required_arrays=needed, required_meta=("n_rows",))
    value = {"matrix": arrays["matrix"].tolist(), "layers_a": arrays["layers_a"].tolist(),
             "layers_b": arrays["layers_b"].tolist(), "n_rows": meta["n_rows"],
             "family_a": a["family"], "family_b": b["family"],
             "pretrained_a": a["pretrained"], "pretrained_b": b["pretrained"],
             "n_layers_a": a["n_layers"] - 1, "n_layers_b": b["n_layers"] - 1}
    if both:
        value["matrix_ba"] = arrays["matrix_ba"].tolist()
    return value, bool(computed)


STAGES = {"finetune": _finetune, "extract": _extract, "measure": _measure}


def run_unit(unit: Unit, cache_dir: str, *deps: dict[str, Any]) -> dict[str, Any]:
    """Run one unit (after the units it needs, whose outcomes are ``deps``) and return its
    outcome: ``{key, stage, ok, computed, value, error, attempts, seconds, host}``. Never
    raises: a failure is an outcome with ``ok=False`` and the error's last lines."""
    outcome: dict[str, Any] = {"key": unit.key, "stage": unit.stage, "ok": False, "computed": False,
               "value": None, "error": "", "attempts": 0, "seconds": 0.0,
               "host": f"{platform.node()}:{os.getpid()}"}
    failed = [d["key"] for d in deps if not d["ok"]]
    if failed:
        outcome["error"] = f"skipped: it needs {', '.join(failed)}, which failed"
        return outcome
    start = time.perf_counter()
    retries = int(unit.params.get("retries", 0))
    while True:
        outcome["attempts"] += 1
        try:
            with _threads(unit.params["threads"]):
                value, computed = STAGES[unit.stage](unit.params, list(deps), cache_dir)
            outcome.update(ok=True, value=value, computed=computed, error="")
            break
        except Exception as error:  # noqa: BLE001 - a unit reports its failure, never raises
            lines = traceback.format_exception_only(type(error), error)
            outcome["error"] = "".join(lines).strip()
            if isinstance(error, NOT_RETRIED) or outcome["attempts"] > retries:
                break
    outcome["seconds"] = time.perf_counter() - start
    return outcome


def _with_retries(units: list[Unit], retries: int) -> list[Unit]:
    return [Unit(u.key, u.stage, {**u.params, "retries": retries}, u.deps, u.axes)
            for u in units]


def run_sweep(spec: SweepSpec | str | Path | dict, *, workers: int | str | None = None,
              scheduler: str | None = None, client: Any = None,
              cache_dir: str | os.PathLike | None = None, out: str | Path | None = None,
              progress: bool = True) -> SweepResult:
    """Run every unit of ``spec`` and return the tidy table.

    Parameters
    ----------
    spec : SweepSpec, path of a YAML spec, or a mapping
    workers : int or "auto", optional
        Run on a Dask ``LocalCluster`` of this many worker processes (``"auto"``: the
        machine's cores divided by ``spec.threads_per_unit``). ``None`` with no scheduler or
        client: run in this process, one unit after another.
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:8786``).
    client : distributed.Client, optional
        A client of any Dask cluster (a ``dask_jobqueue.SLURMCluster``, say).
    cache_dir : path, optional
        The cache every unit reads and writes (default:
        :func:`~analysis_lib.runtime.cache.default_root`); on a cluster, a folder every
        worker sees.
    out : path, optional
        Also write the tables there (see :meth:`SweepResult.write`).
    """
    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec)
    if workers is not None and workers != "auto" and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a positive integer or 'auto', got {workers!r}")
    most = MAX_WORKERS_PER_CORE * cores()
    if isinstance(workers, int) and workers > most:
        raise ValueError(f"workers={workers} is more than this machine can run: a local "
                         f"cluster's workers share its {cores()} cores, so at most {most} "
                         f"({MAX_WORKERS_PER_CORE} per core); use workers='auto', or a "
                         "scheduler on a cluster (scheduler=..., or client=...) for more")
    if sum(x is not None for x in (workers, scheduler, client)) > 1:
        raise ValueError("give at most one of workers, scheduler and client")
    pin_root()
    cache = str(default_root(cache_dir).resolve())
    check_writable(Path(cache))
    units = _with_retries(plan(spec), spec.retries)
    if len(units) > spec.max_units:
        raise ValueError(
            f"the grid of {spec.name!r} has {len(units):,} units (extractions, fine-tunings "
            f"and measures), more than max_units = {spec.max_units:,}; nothing has run. "
            "Shrink the grid (fewer models, seeds, layers or measures, or pairs: within) or, "
            "if you mean it, raise max_units in the spec")
    start = time.perf_counter()
    if workers is None and scheduler is None and client is None:
        outcomes = _run_here(units, cache, progress)
    else:
        outcomes = _run_dask(units, cache, spec, workers, scheduler, client, progress)
    result = _gather(spec, units, outcomes, time.perf_counter() - start)
    if out is not None:
        result.write(out)
    return result


def _bar(total: int, show: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not show, desc=desc, unit="unit")


def _run_here(units: list[Unit], cache: str, progress: bool) -> dict[str, dict]:
    outcomes: dict[str, dict] = {}
    with _bar(len(units), progress, "sweep") as bar:
        for unit in units:
            outcomes[unit.key] = run_unit(unit, cache, *(outcomes[d] for d in unit.deps))
            bar.update(1)
    return outcomes


def _run_dask(units: list[Unit], cache: str, spec: SweepSpec, workers: int | str | None,
              scheduler: str | None, client: Any, progress: bool) -> dict[str, dict]:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as error:
        raise ModuleNotFoundError("running on Dask needs dask[distributed], which the sweep "
                                  'extra installs: pip install "analysis_lib[sweep]"',
                                  name="distributed") from error
    with contextlib.ExitStack() as stack:
        if client is None:
            if scheduler is not None:
                client = stack.enter_context(Client(scheduler))
            else:
                n = workers if isinstance(workers, int) else max(
                    1, (os.cpu_count() or 1) // spec.threads_per_unit)
                cluster = stack.enter_context(LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True,
                    dashboard_address=":0"))
                client = stack.enter_context(Client(cluster))
        if progress:
            link = getattr(client, "dashboard_link", None)
            print(f"Dask: {len(client.scheduler_info().get('workers', {}))} workers; "
                  f"dashboard {link or 'not available (install bokeh)'}")
        futures: dict[str, Any] = {}
        run = uuid.uuid4().hex[:8]
        for unit in units:
            # one Dask task per unit; a unit's futures resolve to its dependencies' outcomes
            futures[unit.key] = client.submit(
                run_unit, unit, cache, *(futures[d] for d in unit.deps), key=f"{unit.key}-{run}",
                pure=False)
        outcomes = {}
        with _bar(len(units), progress, "sweep") as bar:
            for future in as_completed(list(futures.values())):
                outcome = future.result()
                outcomes[outcome["key"]] = outcome
                bar.update(1)
    return outcomes


def _versions() -> dict[str, str]:
    import torch
    import transformers

    return {"library_version": __version__, "torch_version": torch.__version__,
            "transformers_version": transformers.__version__,
            "numpy_version": np.__version__}


UNIT_COLUMNS = ["key", "stage", "ok", "computed", "attempts", "seconds", "error", "host"]
MODEL_COLUMNS = ["family_a", "family_b", "pretrained_a", "pretrained_b", "n_layers_a",
                 "n_layers_b"]
TABLE_AXES = ["model_a", "seed_a", "task_a", "model_b", "seed_b", "task_b", "measure",
              "layer_a", "layer_b", "value"]


def _matrix_rows(axes: dict[str, Any], value: dict[str, Any], matrix: list[list[float]],
                 layers_a: list[int], layers_b: list[int]) -> list[dict[str, Any]]:
    return [{**axes, "layer_a": la, "layer_b": lb, "value": float(matrix[i][j]),
             **{k: value[k] for k in MODEL_COLUMNS}, "n_rows": value["n_rows"]}
            for i, la in enumerate(layers_a) for j, lb in enumerate(layers_b)]


def _gather(spec: SweepSpec, units: list[Unit], outcomes: dict[str, dict],
            seconds: float) -> SweepResult:
    unit_rows = []
    rows = []
    for unit in units:
        o = outcomes[unit.key]
        unit_rows.append({**{c: o[c] for c in UNIT_COLUMNS}, **unit.axes})
        if unit.stage != "measure" or not o["ok"]:
            continue
        v = o["value"]
        rows += _matrix_rows(unit.axes, v, v["matrix"], v["layers_a"], v["layers_b"])
        if "matrix_ba" in v:  # the other direction of an asymmetric measure: sides swapped
            swap = {k[:-1] + ("b" if k.endswith("a") else "a"): x for k, x in unit.axes.items()
                    if k.endswith(("_a", "_b"))}
            flipped = {k[:-1] + ("b" if k.endswith("a") else "a"): v[k] for k in MODEL_COLUMNS}
            rows += _matrix_rows({**unit.axes, **swap}, {**v, **flipped}, v["matrix_ba"],
                                 v["layers_b"], v["layers_a"])
    table = pd.DataFrame(rows, columns=TABLE_AXES + MODEL_COLUMNS + ["n_rows"])
    for col in ("seed_a", "seed_b", "layer_a", "layer_b", "n_layers_a", "n_layers_b"):
        table[col] = table[col].astype("Int64")
    settings = {"sweep": spec.name, "spec_digest": spec.digest(), "corpus": spec.corpus,
                "n_sentences": spec.n_sentences, "kind": spec.kind,
                "threads_per_unit": spec.threads_per_unit, **_versions()}
    for name, value in settings.items():
        table[name] = value
    units_frame = pd.DataFrame(unit_rows)
    return SweepResult(table.reset_index(drop=True), units_frame, seconds)


def read_table(path: str | Path) -> pd.DataFrame:
    """A finished sweep's table (``results.parquet`` or ``results.csv``, or the folder that
    holds them), checked for the columns the study pages read."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.parquet" if (path / "results.parquet").is_file() \
            else path / "results.csv"
    if not path.is_file():
        raise FileNotFoundError(f"no sweep table at {path}; run `python -m analysis_lib sweep "
                                "SPEC.yml --out FOLDER` first")
    table = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    missing = [c for c in TABLE_AXES if c not in table.columns]
    if missing:
        raise ValueError(f"{path} is not a sweep table: it lacks the columns {missing}")
    return table
