"""analysis_lib: the helper library of the book on comparing layers of transformer models.

The folders follow the data flow, one home per step::

    data/          corpora, tasks with fixed splits, stimuli, synthetic representations
    models/        load any model by name; random families and their tokenizers
    layers.py      the layer-index convention and the per-layer table (layer identity as data)
    collection.py  several models' layers on the same words, and what is read from them
    extract.py     one forward pass -> per-layer arrays (cached)
    similarity/    the measures, all-pairs matrices, curves over layers, intervals and tests
    alignment/     maps fitted between two representations (Ren et al.)
    training/      the one training loop, model surgery, fine-tuning, freezing, probes
    collect.py     several models loaded and extracted on one corpus
    readout.py     a fine-tuned model's task read from its lower layers (Phang et al.)
    claims/        the papers' claims, the one verdict rule, findings tables
    book/          the build, parameters, charts, offline renderer, widgets
    runtime/       the atomic on-disk cache, devices, threads, worker processes

Each module is imported by its full path (``from analysis_lib.data import corpora``,
``from analysis_lib import collection``), or reached as an attribute of the package
(``analysis_lib.similarity.linear_cka``), imported on first use.
"""

from __future__ import annotations

__version__ = "0.2.0"

from .errors import OfflineError  # noqa: E402

#: the library's modules and packages, reachable as attributes of the package
#: (``import analysis_lib; analysis_lib.similarity``) and imported on first use, so that
#: ``import analysis_lib`` stays light and needs no PyTorch
SUBMODULES = ("alignment", "book", "claims", "collect", "collection", "data", "errors",
              "extract", "layers", "models", "readout", "rules", "runtime", "similarity",
              "sweep", "training")

__all__ = ["OfflineError", "SUBMODULES", "__version__"]


def __getattr__(name: str):
    if name in SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'analysis_lib' has no attribute {name!r}; its modules: "
                         f"{', '.join(SUBMODULES)}")


def __dir__() -> list[str]:
    return sorted([*globals(), *SUBMODULES])
