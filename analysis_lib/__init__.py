"""analysis_lib: the helper library of the book on comparing layers of transformer models.

Modules
-------
models      load a model by name (packaged MiniLM, hub id, local folder, random-init family)
corpora     named corpora (offline tweets and BBC news; hub corpora online; your own text)
extract     one forward pass -> per-layer word, sentence and attention arrays, cached on disk
similarity  the similarity measures of the four papers, all-pairs layer matrices, uncertainty
cache       the atomic on-disk array cache used by the modules above
"""

__version__ = "0.1.0"

from .errors import OfflineError  # noqa: E402

__all__ = ["OfflineError", "__version__"]
