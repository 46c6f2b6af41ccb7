"""Benchmark: how close each training loop of the book runs to this machine's matmul rate.

In one run: the dense matrix-product rate of this CPU (float32 at one thread and at the
fine-tuning threads; bfloat16 too where the CPU computes it natively, with AMX or
AVX512-BF16), then each training loop the book runs, called through the library's own
function on a short, book-shaped workload in a temporary cache:

* MiniLM fine-tuning (``training.finetune``, the ``cpu`` preset, tweets), at the fine-tuning
  threads, in float32 and, where the CPU computes bfloat16 natively, in bfloat16 autocast
  (``precision="bfloat16"``, what the book's ``auto`` precision trains in there);
* two runs of the book's fine-tuning grid (``training.grid.run_grid``, three epochs, the
  precision it trains in here), one after the other and side by side in two worker
  processes, each timed whole (scoring each epoch too; CPU only);
* the model zoo's pretraining (``training.pretrain``: the causal and the masked base models,
  fewer steps), one thread each as the zoo trains them, in float32 (the zoo's precision)
  and, for comparison, under bfloat16 autocast;
* the truncation chapter's heads (``training.heads.fit_heads``: MiniLM's own head on
  first-token vectors, one per layer), at the heads' threads;
* the seeds chapter's invertible flow (``alignment.fit(..., "inn")``), one thread.

Each loop runs three times on identical work: once timed, once under torch's
``FlopCounterMode``, which counts the floating-point operations of its forward and backward
passes (the useful work; the optimizer's updates are not counted), and once under torch's
profiler. Printed per loop: seconds, GFLOP, the achieved GFLOP/s, its share of the matmul
rate of its own precision at the loop's thread count (the roofline it can reach), and tokens
(or rows) per second. A second table says where each loop's time goes, from the profiled
run: the share of its wall time in the matrix products, in random draws (dropout's masks,
the masked-LM's masking), in copies and type casts (autocast's among them), in the
optimizer, in every other operation, and outside any operation (Python, the framework); and
the rate of its products alone (its counted FLOPs over the time in its products), against
the matmul rate: how much the small products of the book's shapes lose by themselves, and
how much the time between them adds. The profiler adds a little time to each operation, so
the shares are of the profiled run. Last, how busy the machine's cores were while the
benchmark ran and the share of their time its host took for other machines (stolen
time, :func:`analysis_lib.book.times.core_time`), which lowers every rate: a run whose
host took 5% or more says so.

With ``--device cuda`` the same loops run on a GPU (the heads, which the library fits on the
CPU, are left out) against the GPU's own product rate (8192 x 8192 products, float32 and
bfloat16), timed with the GPU synchronised; torch's profiler reads CPU time only, so the
second table is left out there. ``--model random-minilm`` fine-tunes a randomly initialised
BERT of MiniLM's shape (6 x 384, 12 heads, MiniLM's vocabulary size) instead of MiniLM: the
same operations at the same rate, for a machine that does not have MiniLM's weights;
``--model random-bert-base`` one of BERT-base's shape (12 x 768), the papers' size.

    python benchmarks/bench_train.py [--n-train 512] [--zoo-steps 150] [--skip-bf16]
                                     [--device cuda] [--model random-minilm]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from analysis_lib.book.times import STOLEN_NOTED, CoreTime, core_time
from analysis_lib.runtime.device import NATIVE_BF16_FLAGS
from analysis_lib.runtime.machine import cores, cpu_flags, cpu_kind
from analysis_lib.runtime.threads import torch_threads
from analysis_lib.training import finetune, loop


def native_bf16_flag() -> str:
    """The flag of the CPU's native bfloat16 arithmetic (one of the library's
    :data:`~analysis_lib.runtime.device.NATIVE_BF16_FLAGS`), or ''."""
    return next((flag for flag in NATIVE_BF16_FLAGS if flag in cpu_flags()), "")


#: where the loops run: "cpu" or a CUDA device (``--device``)
DEVICE = torch.device("cpu")
#: the model fine-tuned and whose head the heads copy: its label, name and load options
MODELS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "minilm": ("MiniLM", "minilm", {}),
    "random-minilm": ("MiniLM-shaped", "random:bert",
                      dict(layers=6, hidden=384, heads=12, vocab_size=30522)),
    "random-bert-base": ("BERT-base-shaped", "random:bert",
                         dict(layers=12, hidden=768, heads=12, vocab_size=30522)),
}
MODEL = MODELS["minilm"]


def on_gpu() -> bool:
    return DEVICE.type == "cuda"


def matmul_rate(threads: int, dtype: torch.dtype, n: int = 2048, repeats: int = 5) -> float:
    """Best FLOP/s of an n x n by n x n product at ``threads`` torch threads (on a GPU,
    :data:`DEVICE`, where ``threads`` is 0 and n is 8192, large enough to fill it)."""
    generator = torch.Generator().manual_seed(0)
    n = 8192 if on_gpu() else n
    A = torch.randn(n, n, generator=generator).to(DEVICE, dtype)
    B = torch.randn(n, n, generator=generator).to(DEVICE, dtype)
    with torch_threads(threads) if threads else contextlib.nullcontext():
        A @ B  # warm the kernels and the allocator
        best = min(_seconds(lambda: A @ B) for _ in range(repeats))
    return 2 * n ** 3 / best


def _synchronised() -> None:
    if on_gpu():
        torch.cuda.synchronize(DEVICE)


def _seconds(f: Callable[[], object]) -> float:
    _synchronised()
    start = time.perf_counter()
    f()
    _synchronised()
    return time.perf_counter() - start


@dataclass
class Measured:
    """One loop's timed run and its counted twin."""

    name: str
    threads: int
    dtype: torch.dtype = torch.float32
    seconds: float = 0.0
    flops: float = 0.0
    tokens: float = 0.0
    unit: str = "tokens"
    #: the profiled run's wall time, and its operations' own time by :data:`KINDS`
    profiled_seconds: float = 0.0
    kinds: dict[str, float] = field(default_factory=dict)


#: the kinds of operation the time is split into, by the profiler's names of the operations
#: (their own time, without the operations they call): the first kind that matches names it
KINDS = {
    "products": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm",
                 "aten::_scaled_dot_product"),
    "random draws": ("aten::bernoulli", "aten::uniform_", "aten::normal_", "aten::random_",
                     "aten::rand", "aten::native_dropout"),
    "copies and casts": ("aten::copy_", "aten::_to_copy", "aten::to", "aten::clone",
                         "aten::contiguous"),
    "optimizer": ("aten::_fused_adam", "aten::_foreach_", "Optimizer."),
}


#: the second table's column headers
SHORT = {"products": "products", "random draws": "random", "copies and casts": "copies",
         "optimizer": "optimizer", "other operations": "other ops"}


def kind_of(name: str) -> str:
    """The kind (:data:`KINDS`) of a profiled operation, or ``"other operations"``."""
    return next((kind for kind, prefixes in KINDS.items() if name.startswith(prefixes)),
                "other operations")


@contextlib.contextmanager
def profiled(found: Measured) -> Iterator[None]:
    """Inside the block, the operations' own CPU time is summed by kind into ``found.kinds``
    and the block's wall time into ``found.profiled_seconds``."""
    from torch.profiler import ProfilerActivity, profile

    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        yield
    found.profiled_seconds += time.perf_counter() - start
    for event in prof.key_averages():
        kind = kind_of(event.key)
        found.kinds[kind] = found.kinds.get(kind, 0.0) + event.self_cpu_time_total / 1e6


#: the three runs of each loop on identical work
MODES = ("timed", "counted", "profiled")


def modes() -> tuple[str, ...]:
    """The runs of each loop here: no profiled run on a GPU (the profiler reads CPU time)."""
    return MODES[:2] if on_gpu() else MODES


@contextlib.contextmanager
def watched_loop(found: Measured, mode: str, autocast: bool = False) -> Iterator[None]:
    """Inside the block, every call of the one training loop (``training.loop.run``) is
    timed and the tokens of its batches summed (the attention mask's ones: real tokens, not
    padding), or (``mode``) its floating-point operations counted, or it is profiled
    (:func:`profiled`)."""
    real = loop.run

    def watched(model, epoch_batches, **kwargs):
        def batches():
            for batch in epoch_batches():
                if mode == "timed":
                    mask = batch.get("attention_mask")
                    found.tokens += float(mask.sum() if mask is not None
                                          else batch["input_ids"].numel())
                yield batch

        counter: Any = contextlib.nullcontext()
        if mode == "counted":
            counter = FlopCounterMode(display=False)
        elif mode == "profiled":
            counter = profiled(found)
        precision = (torch.autocast(DEVICE.type, dtype=torch.bfloat16) if autocast
                     else contextlib.nullcontext())
        _synchronised()
        start = time.perf_counter()
        with counter, precision:
            out = real(model, batches, **kwargs)
        _synchronised()
        if mode == "counted":
            found.flops += counter.get_total_flops()
        elif mode == "timed":
            found.seconds += time.perf_counter() - start
        return out

    loop.run = watched
    try:
        yield
    finally:
        loop.run = real


def finetuning(n_train: int, precision: str) -> Measured:
    from analysis_lib.data import tasks

    task = tasks.load_task("tweets-sentiment", n_train=n_train, n_val=100, n_test=100, seed=0)
    config = replace(finetune.PRESETS["cpu"], epochs=1.0, precision=precision)
    label, name, options = MODEL
    found = Measured(f"{label} fine-tuning, {precision}", threads(finetune.CPU_THREADS),
                     getattr(torch, precision))
    for mode in modes():
        with tempfile.TemporaryDirectory() as tmp, watched_loop(found, mode):
            finetune.finetune(name, task, config, cache_dir=tmp, progress=False,
                              device=DEVICE, **options)
    return found


def grid_runs(n_train: int, precision: str, epochs: float = 3.0) -> list[Measured]:
    """Two runs of the fine-tuning grid (seeds 0 and 1), as ``run_grid`` trains them:
    one after the other in this process, then side by side in two worker processes
    (``training.grid.train_side_by_side``), each timed whole (training and scoring each
    epoch; neither trained again for longer, so that both train as long), each from an
    empty cache, once the workers have trained a first pair (their start: importing the
    library, loading the model, which a notebook's worker pays once). The two ways train
    the same runs bit for bit, so the operations and tokens counted in the first stand
    for the second."""
    from analysis_lib.training.grid import FinetuneGrid, run_grid

    label, name, options = MODEL
    grid = FinetuneGrid.of({"models": [name], "tasks": ["tweets-sentiment"], "seeds": [0, 1],
                            "n_train": n_train, "n_heldout": 100, "epochs": epochs,
                            "preset": "cpu", "precision": precision,
                            "longer_if_rising": 1.0}, options or None)  # both as long
    dtype = getattr(torch, precision)
    found = [Measured(f"{label} fine-tuning, {precision}, 2 {how}",
                      finetune.CPU_THREADS, dtype) for how in ("in turn", "side by side")]
    with tempfile.TemporaryDirectory() as tmp, cache_in(tmp):  # the workers started
        run_grid(grid.only(seeds=(2, 3)), progress=False, workers=2)
    for mode, workers in (("counted", 1), ("timed", 1), ("timed", 2)):
        run = found[workers - 1]
        with tempfile.TemporaryDirectory() as tmp, cache_in(tmp), watched_loop(run, mode):
            start = time.perf_counter()
            run_grid(grid, progress=False, workers=workers)
            run.seconds = time.perf_counter() - start
    found[1].flops, found[1].tokens = found[0].flops, found[0].tokens
    return found


def cache_in(folder: str) -> contextlib.AbstractContextManager[None]:
    """The library's cache in ``folder`` inside the block (its worker processes are told
    the folder with each job)."""
    from analysis_lib.runtime.workers import environment

    return environment({"ANALYSIS_LIB_CACHE": folder})


def threads(on_cpu: int) -> int:
    """A loop's thread count on the CPU; 0 on a GPU."""
    return 0 if on_gpu() else on_cpu


def zoo_pretraining(steps: int, objective: str, autocast: bool = False) -> Measured:
    from analysis_lib.models import zoo
    from analysis_lib.models.zoo_store import CPU_THREADS
    from analysis_lib.training import pretrain

    config = replace(zoo.BASE if objective == "clm" else zoo.MLM, steps=steps,
                     checkpoints=())
    found = Measured(f"zoo pretraining ({objective}, {config.layers} x {config.hidden})"
                     + (", bfloat16" if autocast else ""), threads(CPU_THREADS),
                     torch.bfloat16 if autocast else torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        pretrain.tokenizer(config.vocab_size, tmp)  # made once, outside the timed loop
        for mode in modes():
            with watched_loop(found, mode, autocast):
                pretrain.pretrain(config, cache_dir=tmp, progress=False, device=DEVICE)
            for run in (Path(tmp) / "pretrain").iterdir():
                shutil.rmtree(run)  # the next run trains again
    return found


def _counted(name: str, threads: int, unit: str, rows: int,
             run: Callable[[], object]) -> Measured:
    """A call timed, then counted and profiled on identical work (``run`` is
    deterministic)."""
    found = Measured(name, threads, unit=unit)
    found.seconds = _seconds(run)
    counter = FlopCounterMode(display=False)
    with counter:
        run()
    found.flops = counter.get_total_flops()
    found.tokens = rows
    if "profiled" in modes():
        with profiled(found):
            run()
    return found


def heads(n: int, layers: int, epochs: int) -> Measured:
    from analysis_lib import models
    from analysis_lib.training.heads import HEADS_THREADS, FirstTokenHead, fit_heads

    _, name, options = MODEL
    base = models.load(name, **options)
    task_model = finetune.task_model(base, 3, False, 0)
    rng = np.random.default_rng(0)
    width = base.info.hidden_size
    train = [rng.standard_normal((n, width)).astype(np.float32) for _ in range(layers)]
    val = [rng.standard_normal((n // 4, width)).astype(np.float32) for _ in range(layers)]
    labels, val_labels = rng.integers(0, 3, n), rng.integers(0, 3, n // 4)

    def run():
        fitted = [FirstTokenHead(task_model) for _ in range(layers)]
        fit_heads(fitted, train, labels, val, val_labels, epochs=epochs)

    return _counted(f"heads ({layers} x MiniLM's head, {epochs} epochs)", HEADS_THREADS,
                    "rows", n * layers * epochs, run)


def flow(n: int, width: int, epochs: int) -> Measured:
    from analysis_lib import alignment

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, width))
    Y = np.tanh(X @ rng.standard_normal((width, width)) / width ** 0.5)

    def run():
        alignment.fit(X, Y, "inn", seed=0, epochs=epochs, patience=epochs, device=DEVICE)

    return _counted(f"invertible flow ({width} wide, {epochs} epochs)", threads(1), "rows",
                    int(0.9 * n) * epochs, run)


def main() -> None:
    global DEVICE, MODEL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=512,
                        help="tweets in the fine-tuning run (one epoch)")
    parser.add_argument("--zoo-steps", type=int, default=150)
    parser.add_argument("--skip-bf16", action="store_true",
                        help="leave out the bfloat16 autocast runs")
    parser.add_argument("--device", default="cpu", help="cpu (default) or a CUDA device")
    parser.add_argument("--model", choices=sorted(MODELS), default="minilm",
                        help="MiniLM, or a randomly initialised BERT of its shape")
    args = parser.parse_args()
    from transformers.utils import logging as hf_logging

    from analysis_lib.runtime.device import native_bf16, resolve

    hf_logging.disable_progress_bar()  # the models' saving bars, not the benchmark's output
    cores_before = core_time()
    DEVICE, MODEL = resolve(args.device), MODELS[args.model]
    if on_gpu():
        bf16 = "bfloat16" if native_bf16(DEVICE) else ""
        print(f"{torch.cuda.get_device_name(DEVICE)} beside {cpu_kind()}, torch "
              f"{torch.__version__}; native bfloat16: {bf16 or 'none'}")
        thread_counts = [0]
    else:
        bf16 = native_bf16_flag()
        print(f"{cpu_kind()}, {cores()} cores, torch {torch.__version__}; native bfloat16: "
              f"{bf16 or 'none'}")
        thread_counts = sorted({1, finetune.CPU_THREADS})
    dtypes = [torch.float32] + ([torch.bfloat16] if bf16 else [])
    rate = {(t, d): matmul_rate(t, d) for t in thread_counts for d in dtypes}
    n = 8192 if on_gpu() else 2048
    print(f"\ndense matmul ({n} x {n} by {n} x {n}), best of 5:")
    for t in thread_counts:
        print(f"  {where(t)}: " + ", ".join(
            f"{str(d).removeprefix('torch.')} {rate[t, d] / 1e9:7.1f} GFLOP/s" for d in dtypes))
    low = bool(bf16) and not args.skip_bf16
    runs = [finetuning(args.n_train, "float32")]
    if low:
        runs.append(finetuning(args.n_train, "bfloat16"))
    if not on_gpu():  # the precision the book's grid trains in here
        runs += grid_runs(args.n_train, "bfloat16" if bf16 else "float32")
    for objective in ("clm", "mlm"):
        runs.append(zoo_pretraining(args.zoo_steps, objective))
        if low:
            runs.append(zoo_pretraining(args.zoo_steps, objective, autocast=True))
    if not on_gpu():  # the library fits the heads on the CPU
        runs.append(heads(2000, 6, 5))
    runs.append(flow(2000, 64, 30))
    print(f"\n{'training loop':<44}{'threads':>8}{'s':>8}{'GFLOP':>9}{'GFLOP/s':>9}"
          f"{'of matmul':>11}{'per s':>12}")
    for m in runs:
        achieved = m.flops / m.seconds
        print(f"{m.name:<44}{m.threads or 'GPU':>8}{m.seconds:>8.1f}{m.flops / 1e9:>9.1f}"
              f"{achieved / 1e9:>9.1f}{achieved / rate[m.threads, m.dtype]:>10.0%} "
              f"{m.tokens / m.seconds:>8.0f} {m.unit}")
    print("\n'of matmul': the loop's useful FLOP/s (forward and backward passes, counted by "
          "torch's FlopCounterMode) as a share of the matmul rate of its precision at its "
          "threads.")
    if not on_gpu():
        where_the_time_goes(runs, rate)
    host_line(cores_before)


def host_line(before: CoreTime | None) -> None:
    """Print how busy the machine's cores were since ``before`` and what its host took: time
    stolen by the host slows every loop, and the matmul rates with them."""
    now = core_time()
    if now is None or before is None:
        return
    busy, stolen = now.shares_since(before)
    noted = (": the host ran other work on these cores, so every rate above is lower than "
             "this CPU computes") if stolen >= STOLEN_NOTED else ""
    print(f"\nthe machine's cores during the benchmark: busy {busy:.0%}, stolen by the host "
          f"{stolen:.1%}{noted}")


def where(threads: int) -> str:
    return "GPU" if not threads else f"{threads} thread{'s' * (threads > 1)}"


def where_the_time_goes(runs: list[Measured], rate: dict) -> None:
    """The second table: each loop's profiled time by kind of operation."""
    kinds = [*KINDS, "other operations"]
    print(f"\nwhere the time goes{'':>25}" + "".join(f"{SHORT[k]:>10}" for k in kinds)
          + f"{'outside':>10}{'products alone':>22}")
    for m in (m for m in runs if m.profiled_seconds):  # the grid's runs are not profiled
        inside = sum(m.kinds.values())
        shares = [m.kinds.get(k, 0.0) / m.profiled_seconds for k in kinds]
        outside = max(0.0, 1.0 - inside / m.profiled_seconds)
        alone = m.flops / m.kinds["products"] if m.kinds.get("products") else float("nan")
        print(f"{m.name:<44}" + "".join(f"{x:>10.0%}" for x in [*shares, outside])
              + f"{alone / 1e9:>9.1f} GFLOP/s{alone / rate[m.threads, m.dtype]:>6.0%}")
    print("\nwhere the time goes: each kind's share of the profiled run's wall time (products:"
          " matrix products and attention; random: random draws, dropout's masks among them;"
          " copies: copies and type casts; outside: time in no operation, Python and the "
          "framework). 'products alone': the counted FLOPs over the time in products, and "
          "that rate's share of the matmul rate, which is what the book's small products "
          "reach by themselves.")


if __name__ == "__main__":
    main()
