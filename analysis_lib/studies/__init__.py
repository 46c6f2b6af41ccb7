"""One module per study notebook: its bookkeeping, so notebooks never re-derive it.

``representation``  Wu et al. 2020 §3-5: a collection of models on the same words
``attention``       Wu et al. 2020 §3.4-3.5: attention heads of a collection
``finetuning``      Phang et al. 2021, Wu et al. §6, Merchant et al. §5: what fine-tuning changes
``truncation``      Phang et al. 2021 §4, Merchant et al. §5.2: how many layers a task needs
``domains``         Merchant et al. 2020 §6: in-domain against out-of-domain inputs
``seeds``           Ren et al. 2023: models that differ only by seed, aligned

Every study names layers through :class:`analysis_lib.layers.LayerTable`.

The package imports nothing heavy itself: the claims and the verdict rule
(:mod:`.claims`, :mod:`.verdicts`) import with the library's core alone (no PyTorch), and a
chapter module brings in extraction and training where it needs them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..data.corpora import Corpus
    from ..extract import Extraction
    from ..models import LoadedModel


def extract_each(models: Sequence[str], corpus: Corpus, *,
                 model_options: Mapping[str, Any] | None = None, progress: bool = True,
                 **extract_options: Any) -> Iterator[tuple[str, LoadedModel, Extraction]]:
    """Load and extract every model on ``corpus`` in turn (``model_options`` apply to
    ``random:`` models only): ``(name, loaded, extraction)``."""
    from ..extract import extract
    from .shared import load_model

    if not models:
        raise ValueError("the collection needs at least one model")
    for name in models:
        loaded = load_model(name, model_options)
        yield name, loaded, extract(loaded, corpus, progress=progress, **extract_options)
