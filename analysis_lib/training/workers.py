"""Training runs side by side, each in a worker process of its own on one thread.

On a CPU, two runs on one thread each train more examples per second than one run on two
threads (1.35 times as many for MiniLM's fine-tuning on a 2-core machine): a thread's
products need no splitting, and nothing waits at a barrier. The zoo's pretraining
(:func:`~analysis_lib.training.pretrain.pretrain_many`) and the fine-tuning grid
(:func:`~analysis_lib.training.grid.run_grid`) start one worker per core with
:func:`run_workers`; each worker is a fresh interpreter that imports only the library (never
the caller's script or notebook), trains one model into the cache and ends; the caller
then reads every model from the cache. A worker's settings are JSON (data, never code).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tqdm.auto import tqdm

#: the environment variable that tells a worker its parent's process id, so that it ends
#: with its parent even if the parent is gone before the worker starts
WORKER_PARENT_ENV = "ANALYSIS_LIB_WORKER_PARENT"
#: the environment variable that sets how many runs train side by side (default: one per
#: core); 1 trains them one after the other in the calling process. The weights are the
#: same either way.
WORKERS_ENV = "ANALYSIS_LIB_WORKERS"


def default_workers() -> int:
    """How many runs train side by side: ``$ANALYSIS_LIB_WORKERS`` when set, else one per
    core this process may use."""
    from ..runtime.threads import usable_cores

    value = os.environ.get(WORKERS_ENV, "").strip()
    if not value:
        return usable_cores()
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{WORKERS_ENV}={value!r} must be a whole number of at least 1 (the "
                         "runs that train side by side); unset it for one per core")
    return int(value)


def run_workers(commands: dict[str, list[str]], workers: int, *, progress: bool = True,
                what: str = "train") -> None:
    """Run each named worker command, ``workers`` at a time; the first failure is an error
    (naming ``what`` failed, and the worker's last words) that stops the others, and so is
    an interrupt. Each worker knows this process's id, so it ends when this process does
    (even killed)."""
    started: list[subprocess.Popen] = []
    stopping = threading.Event()

    def run(command: list[str]) -> tuple[int, str]:
        if stopping.is_set():
            return 1, "stopped"
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, WORKER_PARENT_ENV: str(os.getpid())})
        started.append(process)
        if stopping.is_set():
            process.terminate()
        errors = process.communicate()[1]
        return process.returncode, errors

    with ThreadPoolExecutor(workers) as pool:
        runs = {n: pool.submit(run, cmd) for n, cmd in commands.items()}
        try:
            for n, future in tqdm(runs.items(), desc=what, unit="run", disable=not progress):
                code, errors = future.result()
                if code:
                    raise RuntimeError(f"{what} {n!r} failed in its worker process "
                                       f"(exit {code}):\n{errors[-3000:]}")
        finally:  # an error or an interrupt here stops the other workers too
            stopping.set()
            for future in runs.values():
                future.cancel()
            for process in started:
                if process.poll() is None:
                    process.terminate()


def end_with_parent(every: float = 0.5) -> None:
    """In a worker: end this process when its parent is gone (killed, or ended by a signal
    that gave it no time to stop its workers); the parent of an orphan becomes another
    process. What the worker was training is left unpublished (the cache writes are
    atomic)."""
    parent = int(os.environ.get(WORKER_PARENT_ENV) or os.getppid())

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="end-with-parent").start()
