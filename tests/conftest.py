"""Shared fixtures: a private cache folder, tiny random models of every family and the smoke
build of the book (in a copy of its sources).

``make test`` runs the tests side by side in one worker process per core (pytest-xdist's
``-n auto --dist loadfile``): each test file runs whole in one worker, so its module fixtures
are built once, and every test that reads the smoke build (``built_book``) is in
``test_book.py``, so the book is built once. Workers share the cores: each runs torch and the
processes it starts on its share of them (training runs at its own fixed thread count, so no
number depends on the share), and an OpenMP thread waiting for work sleeps instead of
spinning (``OMP_WAIT_POLICY=PASSIVE``): two processes training on two threads each, side by
side on two cores, ran three times slower with their waiting threads spinning than
sleeping. Both are set before torch is first imported, which is when OpenMP reads them.
The same share bounds the pools of worker processes the library starts for independent
jobs (``ANALYSIS_LIB_WORKERS``, :mod:`analysis_lib.runtime.workers`): with every core
already busy with a test, a pool only adds processes that each import torch anew (about
5 s of CPU each on a slow CPU; the seeds chapter's smoke run used 17 s more CPU with its
pool than without); a session of one process sets it to one, so that every job runs in
the test's own process, where its monkeypatches apply. The jobs compute the same numbers in
or out of a pool (``tests/test_workers.py`` and the fine-tuning grid's test of runs
trained side by side, which name their pools' sizes, check it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from analysis_lib.runtime.machine import cores  # (imports no torch)

if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # one of several workers side by side
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    share = max(1, cores() // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(share))
    os.environ.setdefault("ANALYSIS_LIB_WORKERS", str(share))
os.environ.setdefault("ANALYSIS_LIB_WORKERS", "1")

import labtools  # noqa: E402
import numpy as np  # noqa: E402 (after the OpenMP settings, which torch reads once)
import pytest  # noqa: E402

from analysis_lib import book, models  # noqa: E402
from analysis_lib.data import corpora  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

TINY = dict(layers=2, hidden=32, heads=2, vocab_size=2000)

TRICKY = [
    "Hello, world! It's 3.14 o'clock.",
    "Unbelievably, tokenisation of naïve café-goers (ca. 1,234,567) works 🙂",
    "A",
    "Ünïcödé — “quotes”, ellipses… and 42nd/43rd numbers: 10%!",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
]

#: the test files that take longest, longest first: ``make test`` hands its workers whole
#: files in collection order (``--dist loadfile --no-loadscope-reorder``), so these start
#: first and the many short files fill in at the end, where one long file started last would
#: leave the other worker idle (the order of the file durations of a 2-core run)
LONGEST_FIRST = ("test_book.py", "test_packaged.py", "test_zoo.py", "test_finetune.py",
                 "test_chapter_runs.py", "test_sweep.py", "test_models.py", "test_devices.py",
                 "test_jupyterlab.py", "test_extract.py")


def pytest_collection_modifyitems(items):
    """The files of :data:`LONGEST_FIRST` first, in its order; every file's tests together,
    in their own order."""
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """A cache folder of the session's own. Side by side, the workers share one folder of
    random models' tokenizers and one of parsed packaged corpora (the same files in every
    process: made once, written atomically), so each is made once per session, not once per
    worker."""
    folder = tmp_path_factory.mktemp("analysis_lib_cache")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for name in ("tokenizers", "corpora"):
            shared = tmp_path_factory.getbasetemp().parent / name
            shared.mkdir(exist_ok=True)
            (folder / name).symlink_to(shared, target_is_directory=True)
    old = os.environ.get("ANALYSIS_LIB_CACHE")
    os.environ["ANALYSIS_LIB_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("ANALYSIS_LIB_CACHE", None)
    else:
        os.environ["ANALYSIS_LIB_CACHE"] = old


def session_inputs(folder: Path) -> Path:
    """``folder`` made a cache that holds no model, but reads the session's tokenizers and
    parsed corpora (a fresh process given it skips training the tokenizers, 7 s a process
    on a slow CPU; that a fresh process with an empty cache trains the same tokenizers is
    ``tests/test_models.py``'s check)."""
    session = Path(os.environ["ANALYSIS_LIB_CACHE"])
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizers", "corpora"):
        (session / name).mkdir(exist_ok=True)
        (folder / name).symlink_to(session / name, target_is_directory=True)
    return folder


@pytest.fixture(scope="session")
def tiny_models():
    """One tiny randomly initialised model per family, loaded once."""
    return {f: models.load(f"random:{f}", **TINY) for f in models.FAMILIES}


@pytest.fixture
def linear_heads(monkeypatch):
    """Task heads that are fixed linear classifiers on the vectors: ``make(width, seed)``
    gives one, and ``training.heads.head_logits`` applies it (no torch module to train)."""
    from analysis_lib.training import heads

    class Head:
        def __init__(self, width, seed):
            self.W = np.random.default_rng(seed).standard_normal((width, 2)).astype(np.float32)

    monkeypatch.setattr(heads, "head_logits", lambda head, X: np.asarray(X) @ head.W)
    return Head


@pytest.fixture(scope="session")
def tricky_corpus():
    return corpora.from_sentences(TRICKY, name="tricky")


@pytest.fixture(scope="session")
def book_root(tmp_path_factory):
    """A copy of the book's sources in a temporary folder: the test build never writes into
    the checkout."""
    root = tmp_path_factory.mktemp("book")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(ROOT / name, root / name)
    for folder in ("book", "notebooks", "profiles"):
        shutil.copytree(ROOT / folder, root / folder)
    return root


@pytest.fixture(scope="session")
def built_book(book_root):
    index = book.build("smoke", root=book_root, echo=lambda m: None, cell_timeout=300)
    assert index.is_file()
    second: list[str] = []
    again = book.build("smoke", root=book_root, echo=second.append, cell_timeout=300)
    assert again == index
    return index, second, book_root


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a folder of its own, and a headless Chromium with the internet
    cut off (:func:`labtools.serve`); skipped where Debian's chromium is missing."""
    yield from labtools.serve(tmp_path_factory)
