"""Independent jobs spread over the machine's cores, each in a worker process.

Some of the book's work is many small, independent fits that each run on one thread:
the alignment networks of the seeds chapter (:mod:`analysis_lib.alignment`) train on one
torch thread because their products are too small for a second one to pay. On a 2-core
machine, one such fit at a time leaves a core idle. :func:`map_jobs` runs the jobs in a
pool of worker processes instead, one job per worker at a time, and returns their results
in the jobs' order.

The numbers do not change. A job is a plain function of its arguments (seeded, on the
thread count it sets itself), so a worker computes exactly what the calling process would:
``tests/test_workers.py`` checks that the results are identical, bit for bit, with and
without workers. Only what such a function computes is sent back (pickled between this
process and its own workers, never read from a file).

A job may run torch on more than one thread (a fine-tuning run on its two,
:func:`analysis_lib.training.grid.train_side_by_side`): two such workers on a 2-core machine
ask for more threads than there are cores. Their threads then wait for each other passively
(the workers start with ``OMP_WAIT_POLICY=PASSIVE``, whatever this process sets): a thread
that spins while it waits holds the core that the thread it waits for needs, and two MiniLM
runs side by side took 768 s that way where they take 47 s passively (one after the other:
63 s).

The pool starts with the first call (a second or two: each worker imports the library),
stays for the calls after it and ends with the process. ``workers`` (or the environment
variable :data:`ENV`) sets its size; 1 computes every job in the calling process, as
before.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from .machine import cores

#: environment variable: how many worker processes :func:`map_jobs` uses (1: none)
ENV = "ANALYSIS_LIB_WORKERS"
#: what the workers' environment sets over this process's
WORKER_ENVIRONMENT = {"OMP_WAIT_POLICY": "PASSIVE"}

_pools: dict[int, ProcessPoolExecutor] = {}
_cpu_seconds = [0.0]  # CPU time the workers spent on this process's jobs


def default_workers() -> int:
    """The pool size when a call names none: :data:`ENV` when it is set, else the cores
    this process may run on."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return cores()
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"{ENV}={value!r} is not a number of worker processes: set it to a "
                         "whole number of at least 1 (1 computes in this process), or unset it "
                         "to use every core")
    return count


def map_jobs(function: Callable[..., Any], jobs: Iterable[Sequence[Any]], *,
             workers: int | None = None) -> list[Any]:
    """``[function(*job) for job in jobs]``, the jobs spread over ``workers`` worker
    processes (default :func:`default_workers`), one job per worker at a time.

    ``function`` must be importable by its module's name (a function of a module, not of
    the script that runs, or a ``functools.partial`` of one; the workers do not run the
    script) and give the same result wherever it runs: seeded, on a thread count it sets
    itself. An error raised by a job is raised here, as it was raised there. With one
    worker, or one job, everything runs in this process.
    """
    jobs = [tuple(job) for job in jobs]
    count = default_workers() if workers is None else int(workers)
    if count < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if count == 1 or len(jobs) <= 1:
        return [function(*job) for job in jobs]
    pool = _pool(count)
    futures: list[Future] = []
    try:
        with _main_left_out(), _worker_environment():  # the workers start on these
            futures += [pool.submit(_timed, function, *job) for job in jobs]
        results = []
        for future in futures:
            result, seconds = future.result()
            _cpu_seconds[0] += seconds
            results.append(result)
        return results
    except BaseException as error:  # a job's error, or the notebook interrupted
        for future in futures:
            future.cancel()  # the jobs not started yet are dropped
        if not isinstance(error, BrokenProcessPool):
            raise
        _pools.pop(count, None)
        pool.shutdown(wait=False, cancel_futures=True)
        raise RuntimeError(
            f"a worker process of analysis_lib ended before its job did (out of memory, or "
            f"killed): {error}. Set {ENV}=1 to compute every job in this process") from error


_blas: list[Any] = [None, -1]  # the controller, and how many modules were loaded then


def blas() -> Any:
    """The threadpoolctl controller of the BLAS libraries loaded in this process, made again
    after any import: a module can load a BLAS library of its own (SciPy's optimizers bring
    their OpenBLAS beside NumPy's), and a controller made before it would leave that
    library's threads out of every limit."""
    from threadpoolctl import ThreadpoolController

    if _blas[1] != len(sys.modules):
        _blas[:] = [ThreadpoolController(), len(sys.modules)]
    return _blas[0]


def side_by_side(function: Callable[[Any], Any], items: Sequence[Any], *,
                 threads: int | None = None) -> list[Any]:
    """``[function(x) for x in items]`` on a pool of ``threads`` threads (default: one per
    core; at most one per item), with every BLAS library on one thread meanwhile. For work
    that spends its time in NumPy's and SciPy's BLAS and LAPACK calls, which release the
    interpreter lock, so the threads compute at once: a factorisation, or a small fit of
    many products. Each item then computes on one BLAS thread however many run beside it,
    so its numbers do not depend on the pool's size (``tests/test_workers.py`` compares
    them bit for bit with one thread). The similarity backend's factorisations run side by
    side the same way, in the backend's own method, so that a measure's number is reached
    through the similarity package alone."""
    count = max(1, min(len(items), cores() if threads is None else int(threads)))
    with blas().limit(limits=1, user_api="blas"):
        if count == 1:
            return [function(x) for x in items]
        with ThreadPoolExecutor(count) as pool:
            return list(pool.map(function, items))


def cpu_seconds() -> float:
    """The CPU time worker processes have spent on this process's jobs so far. The build's
    profile (:mod:`analysis_lib.runtime.profile`) counts the CPU time of the calling process
    and of the child processes it has waited for, which the pool's workers, kept for the
    next call, are not: a step that sends its work to them shows less CPU than it used."""
    return _cpu_seconds[0]


def _timed(function: Callable[..., Any], *job: Any) -> tuple[Any, float]:
    """A job run in a worker, with the CPU time it took there."""
    start = time.process_time()
    result = function(*job)
    return result, time.process_time() - start


def _pool(count: int) -> ProcessPoolExecutor:
    """The process's pool of ``count`` workers, started on first use. Workers are started
    fresh (``spawn``), not copied from this process: a copy of a process whose threads are
    running (torch's, a notebook kernel's) can hang."""
    import multiprocessing

    if count not in _pools:
        _pools[count] = ProcessPoolExecutor(count, initializer=_ignore_interrupts,
                                            mp_context=multiprocessing.get_context("spawn"))
    return _pools[count]


@contextlib.contextmanager
def _main_left_out() -> Iterator[None]:
    """Start workers without the caller's main module. A worker started fresh first runs
    the script that started its parent (as ``__mp_main__``), so that functions defined there
    can be sent to it; a script without an ``if __name__ == "__main__":`` guard would run
    whole in every worker and fail there. The jobs here are the library's functions, found
    by their module's name, so the workers need no main module: while they start, the
    main module names no file or module to run."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {name: vars(main)[name] for name in ("__spec__", "__file__") if name in vars(main)}
    try:
        main.__spec__ = None
        vars(main).pop("__file__", None)
        yield
    finally:
        for name in ("__spec__", "__file__"):
            if name in saved:
                setattr(main, name, saved[name])
            else:
                vars(main).pop(name, None)


@contextlib.contextmanager
def _worker_environment() -> Iterator[None]:
    """Start workers with :data:`WORKER_ENVIRONMENT` (a worker reads its environment as it
    starts: OpenMP its wait policy when torch loads) and the cache folder as an absolute
    path, and leave this process's environment as it was."""
    from .cache import pin_root

    pin_root()
    with environment(WORKER_ENVIRONMENT):
        yield


@contextlib.contextmanager
def environment(settings: dict[str, str]) -> Iterator[None]:
    """This process's environment with ``settings`` inside the block (what the processes
    started there inherit: workers, notebook kernels), as it was after it."""
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _ignore_interrupts() -> None:
    """A worker leaves interrupts to the process that sent it jobs: an interrupt of a
    notebook (or of its kernel's shutdown) reaches every process of its group, and the
    caller cancels the jobs not started (:func:`map_jobs`) and ends the workers when it
    ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@atexit.register
def shutdown() -> None:
    """End every worker process (at the latest when this process ends)."""
    while _pools:
        _, pool = _pools.popitem()
        pool.shutdown(wait=True, cancel_futures=True)
