"""Training the model zoo (:mod:`analysis_lib.models.zoo`): the models of a set trained side
by side into the cache, where ``models.load("zoo:<name>")`` reads them.

This module is kept apart from :mod:`.pretrain` so that the zoo's catalog is not part of the
code digest in each zoo model's cache key: adding a model to the catalog retrains none.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..models import LoadedModel, load, random_options, zoo
from ..models.zoo_store import Pretrained
from .pretrain import pretrain_many


def train(names: Sequence[str] | None = None, *, cache_dir: str | os.PathLike | None = None,
          progress: bool = True
          ) -> dict[str, Pretrained]:
    """Train the zoo models ``names`` (``"base"`` or ``"zoo:base"``; default: the whole zoo) that
    the cache does not hold yet, side by side on the CPU's cores
    (:func:`~analysis_lib.training.pretrain.pretrain_many`), and return all of them by name.
    A checkpoint name (``"base@100"``) trains its model."""
    chosen = list(dict.fromkeys(zoo.parse(name.removeprefix("zoo:"))[0]
                              for name in (names or zoo.ZOO)))
    return pretrain_many({n: zoo.ZOO[n] for n in chosen}, cache_dir=cache_dir,
                         progress=progress)


def ensure(models: Sequence[str], *, cache_dir: str | os.PathLike | None = None) -> None:
    """Train the ``zoo:`` models among ``models`` (any model names, or loaded models) that the
    cache does not hold yet; every other model is left alone. Loading a ``zoo:`` name reads
    the cache and never trains, so a step that loads models by name calls this first."""
    names = [m for m in models if isinstance(m, str) and m.startswith("zoo:")]
    if names:
        train(names, cache_dir=cache_dir, progress=False)


def load_model(name: str, model_options: Mapping[str, Any] | None = None) -> LoadedModel:
    """The model ``name``, with ``model_options`` applied when it is a ``random:`` model
    (:func:`~analysis_lib.models.random_options`), a zoo model trained first if needed
    (:func:`ensure`)."""
    ensure([name])
    return load(name, **random_options(name, model_options))
