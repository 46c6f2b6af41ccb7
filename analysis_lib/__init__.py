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
``from analysis_lib.studies import representation``); this package holds nothing else.
"""

from __future__ import annotations

__version__ = "0.2.0"

from .errors import OfflineError  # noqa: E402

__all__ = ["OfflineError", "__version__"]
