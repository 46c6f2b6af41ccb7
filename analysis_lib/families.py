"""What the library knows about a model family without loading a model: whether its models
read left to right.

A family is a transformers configuration's ``model_type`` (``"bert"``, ``"gpt2"``,
``"llama"``), as the ``family`` column of a :class:`~analysis_lib.layers.LayerTable` holds
it. The statistics of a collection matrix read it on arrays alone (across an encoder and a
decoder, across two encoders: :func:`analysis_lib.collection.summary`), so it needs neither
PyTorch nor a model; only a family the sets below do not name is looked up in transformers'
tables.
"""

from __future__ import annotations

#: Families whose models read left to right (causal attention). Beyond these,
#: :func:`causal_family` counts every family transformers builds as a causal language model
#: and not as a masked one (qwen3, gemma3, phi3, ... as they come).
CAUSAL_FAMILIES = {"gpt2", "openai-gpt", "gpt_neo", "gpt_neox", "gptj", "llama", "mistral",
                   "opt", "bloom", "qwen2", "gemma", "phi", "ctrl", "transfo-xl"}
#: Families of encoders, which read both directions (transformers builds each as a masked
#: language model)
ENCODER_FAMILIES = {"bert", "roberta", "xlm-roberta", "camembert", "mpnet", "electra",
                    "albert", "distilbert", "deberta", "deberta-v2", "modernbert"}
#: families with a causal-LM head whose representations read both directions: XLNet's
#: permutation objective sees the whole sentence
BIDIRECTIONAL_FAMILIES = {"xlnet"}


def causal_family(family: str) -> bool:
    """Whether models of ``family`` (``config.model_type``) read left to right: a known
    causal family (:data:`CAUSAL_FAMILIES`; not one of :data:`ENCODER_FAMILIES` or
    :data:`BIDIRECTIONAL_FAMILIES`), or one transformers builds as a causal language model
    and not as a masked one (a decoder-only family, new ones included). Without
    transformers installed, a family none of the three sets names raises an ``ImportError``
    that says so, rather than a guess."""
    if family in CAUSAL_FAMILIES:
        return True
    if family in ENCODER_FAMILIES or family in BIDIRECTIONAL_FAMILIES:
        return False
    try:
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
            MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        )
    except ImportError as error:
        raise ImportError(
            f"whether models of the family {family!r} read left to right is looked up in "
            "transformers' tables, and transformers is not installed: install the models "
            'extra (pip install "analysis_lib[models]"), or name a family of '
            "families.CAUSAL_FAMILIES, ENCODER_FAMILIES or BIDIRECTIONAL_FAMILIES") from error
    return (family in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
            and family not in MODEL_FOR_MASKED_LM_MAPPING_NAMES)
