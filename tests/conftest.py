"""Shared fixtures: a private cache folder and tiny random models of every family."""

from __future__ import annotations

import os

import pytest

from analysis_lib import models
from analysis_lib.data import corpora

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
