"""The machine a number was measured on: its CPU's model name and flags, its memory and the
cores this process uses.

Timings and speed choices are only comparable within one kind of CPU, so everything that
records a time or keeps a choice made by timing (the book's run times, the measures'
backend calibration) names the CPU with :func:`cpu_kind`: its model name and the widest
vector arithmetic it has. The model name alone does not tell two kinds apart: a virtual
machine's CPU is often named by its family only ("AMD EPYC"), for cores with AVX2 only and
for cores with AVX-512 and native bfloat16, which train the book's models in different
precisions and at different speeds.
"""

from __future__ import annotations

import os
import platform
from functools import lru_cache


@lru_cache(maxsize=1)
def cpu_name() -> str:
    """This machine's CPU model name as ``lscpu`` prints it (read from ``/proc/cpuinfo``;
    else the platform's processor string), or ``"unknown CPU"``."""
    name = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.lower().startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    name = " ".join((name or platform.processor() or platform.machine() or "").split())
    return name or "unknown CPU"


#: the CPU flags that set a CPU's kind beyond its model name, strongest first, each with the
#: words :func:`cpu_kind` names it by: whether bfloat16 products run natively (what the
#: book's ``auto`` precision trains in, :mod:`analysis_lib.runtime.device`) and how wide
#: the float32 vector units are (how fast everything else runs)
VECTOR_KINDS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"), ("avx512f", "AVX-512"),
                ("avx2", "AVX2"))


@lru_cache(maxsize=1)
def cpu_kind() -> str:
    """This CPU as the book's timings tell CPUs apart: :func:`cpu_name` and, in brackets,
    the first of :data:`VECTOR_KINDS` its flags hold, e.g. ``"AMD EPYC (AVX2)"`` or
    ``"AMD EPYC (AVX512-BF16)"``; the model name alone where none is found (flags that
    cannot be read, another architecture)."""
    flags = cpu_flags()
    vector = next((words for flag, words in VECTOR_KINDS if flag in flags), None)
    return f"{cpu_name()} ({vector})" if vector else cpu_name()


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``avx512f``, ``amx_bf16``, ...) from ``/proc/cpuinfo``; empty
    where that cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            line = next((line for line in info if line.startswith("flags")), "")
    except OSError:
        return frozenset()
    return frozenset(line.partition(":")[2].split())


def memory_bytes() -> int:
    """This machine's physical memory in bytes (a very large number where it cannot be
    read, so that nothing is refused for lack of a reading)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 1 << 50


def cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the system has one,
    else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


#: the speed probe's matrix side: a float32 product of this size is dense arithmetic like
#: the book's training and extraction, and takes a few milliseconds
PROBE_SIDE = 1024
#: the speed probe's time: products are timed until this many seconds have passed
PROBE_SECONDS = 0.3


@lru_cache(maxsize=1)
def speed() -> float:
    """This machine's speed as the book's run times compare it: the float32 matrix product
    rate, in GFLOP/s, NumPy reaches on this process's threads (the best of the products of
    two 1024 x 1024 matrices timed for 0.3 s, at least five, after two untimed ones). Two
    machines' ratio of speeds is the guide to their ratio of run times for pages that train
    and extract (dense arithmetic); pages dominated by Python code differ less."""
    import time

    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((PROBE_SIDE, PROBE_SIDE), dtype=np.float32)
    b = rng.standard_normal((PROBE_SIDE, PROBE_SIDE), dtype=np.float32)
    a @ b
    a @ b
    best, timed, start = float("inf"), 0, time.perf_counter()
    while timed < 5 or time.perf_counter() - start < PROBE_SECONDS:
        tick = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - tick)
        timed += 1
    return 2 * PROBE_SIDE ** 3 / max(best, 1e-9) / 1e9
