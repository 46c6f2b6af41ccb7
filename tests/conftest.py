"""Shared fixtures: a private cache folder, tiny random models of every family and the smoke
build of the book (in a copy of its sources)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from analysis_lib import book, models
from analysis_lib.data import corpora

ROOT = Path(__file__).resolve().parent.parent

TINY = dict(layers=2, hidden=32, heads=2, vocab_size=2000)

TRICKY = [
    "Hello, world! It's 3.14 o'clock.",
    "Unbelievably, tokenisation of naïve café-goers (ca. 1,234,567) works 🙂",
    "A",
    "Ünïcödé — “quotes”, ellipses… and 42nd/43rd numbers: 10%!",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
]


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("analysis_lib_cache")
    old = os.environ.get("ANALYSIS_LIB_CACHE")
    os.environ["ANALYSIS_LIB_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("ANALYSIS_LIB_CACHE", None)
    else:
        os.environ["ANALYSIS_LIB_CACHE"] = old


@pytest.fixture(scope="session")
def tiny_models():
    """One tiny randomly initialised model per family, loaded once."""
    return {f: models.load(f"random:{f}", **TINY) for f in models.FAMILIES}


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
