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

The short names the notebooks and the README use (``corpora``, ``finetune``, ``collection``,
``heads``, ``plots``, ...) are attributes of this package.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

from .errors import OfflineError  # noqa: E402

#: short name -> module, loaded on first use
_SHORT = {
    "corpora": "data.corpora", "tasks": "data.tasks", "synthetic": "data.synthetic",
    "models": "models", "extract": "extract", "layers": "layers", "similarity": "similarity",
    "finetune": "training.finetune", "surgery": "training.surgery", "probes": "training.probes",
    "collection": "studies.representation", "heads": "studies.attention",
    "representation": "studies.representation", "attention": "studies.attention",
    "finetuning": "studies.finetuning", "truncation": "studies.truncation",
    "domains": "studies.domains", "seeds": "studies.seeds", "alignment": "alignment",
    "book": "book", "params": "book.params", "plots": "book.plots", "render": "book.render",
    "widgets": "book.widgets", "cache": "runtime.cache",
}


def __getattr__(name: str):
    if name in _SHORT:
        module = importlib.import_module(f".{_SHORT[name]}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'analysis_lib' has no attribute {name!r}")


__all__ = ["OfflineError", "__version__", *_SHORT]
