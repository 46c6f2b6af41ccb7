"""analysis_lib: the helper library of the book on comparing layers of transformer models.

The folders follow the data flow, one home per step::

    data/        corpora, tasks with fixed splits, synthetic representations
    models/      load any model by name; random families and their tokenizers
    extract.py   one forward pass -> per-layer arrays (cached)
    layers.py    the layer-index convention and the per-layer table (layer identity as data)
    similarity/  the measures, all-pairs matrices, intervals and tests
    alignment/   maps fitted between two representations (Ren et al.)
    training/    the one training loop, model surgery, fine-tuning, probes
    studies/     one module per study notebook (its bookkeeping and tables)
    book/        the build, parameters, charts, offline renderer, widgets
    runtime/     the atomic on-disk cache

Each module is imported by its full path (``from analysis_lib.data import corpora``,
``from analysis_lib.studies import representation``), or reached as an attribute of the
package (``analysis_lib.similarity.linear_cka``), imported on first use.
"""

from __future__ import annotations

__version__ = "0.2.0"

from .errors import OfflineError  # noqa: E402

#: the library's modules and packages, reachable as attributes of the package
#: (``import analysis_lib; analysis_lib.similarity``) and imported on first use, so that
#: ``import analysis_lib`` stays light and needs no PyTorch
SUBMODULES = ("alignment", "book", "data", "errors", "extract", "layers", "models", "runtime",
              "similarity", "studies", "sweep", "training")

__all__ = ["OfflineError", "SUBMODULES", "__version__"]


def __getattr__(name: str):
    if name in SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'analysis_lib' has no attribute {name!r}; its modules: "
                         f"{', '.join(SUBMODULES)}")


def __dir__() -> list[str]:
    return sorted([*globals(), *SUBMODULES])
