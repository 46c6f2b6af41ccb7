"""The similarity measures of the four papers, all-pairs matrices and their uncertainty.

Representation measures take ``X`` (n, d1) and ``Y`` (n, d2) over the same n stimuli and return
a similarity (higher = more similar): :func:`neuronsim`, :func:`mixedsim`, :func:`svcca`,
:func:`pwcca`, :func:`cca`, :func:`linear_cka`, :func:`rbf_cka`, :func:`rsa`,
:func:`procrustes`. Attention: :func:`attention_similarity`, :func:`attention_representation`.
Per-neuron and per-direction values: :func:`neuron_correlations`, :func:`mixed_correlations`,
:func:`canonical_correlations`. Layers: :func:`pairwise` (one measure),
:func:`pairwise_suite` (several at once from shared cross-products), :func:`localization`.
Uncertainty: :func:`bootstrap`, :func:`permutation_test`, :func:`leave_out_matrices` (a
grouped jackknife's matrices; :func:`leave_out_suite` for several measures at once).
Every measure is one record of :data:`REGISTRY` (``similarity/registry.py``), and is defined
once more, plainly, in :mod:`.reference`: one short float64 function per measure in its
paper's notation, which the fast paths here are tested against. Where they compute (NumPy or
torch, chosen by timing on this machine unless ``backend=`` says): :func:`backend_info`.
"""

from . import reference
from ._backend import backend_info
from .attention import AttentionLayer, attention_representation, head_matches
from .leave_out import leave_out_matrices, leave_out_suite
from .localization import localization, ranked_localization
from .measures import (
    CCAResult,
    attention_similarity,
    canonical_correlations,
    cca,
    linear_cka,
    mixed_correlations,
    mixedsim,
    neuron_correlations,
    neuronsim,
    procrustes,
    pwcca,
    rbf_cka,
    rbf_gram,
    rsa,
    svcca,
)
from .pairwise import pairwise, pairwise_suite
from .registry import INVARIANCES, MEASURES, REGISTRY, SYMMETRIC, Measure, canonical, invariant_to
from .rsa import WeightedRSA, WeightedSide, upper_triangle
from .stats import BootstrapResult, PermutationResult, bootstrap, permutation_test
from .streaming import stream_pairwise

# the names Wu et al. use
ckasim = linear_cka
svsim = svcca
pwsim = pwcca

__all__ = [
    "AttentionLayer", "BootstrapResult", "CCAResult", "INVARIANCES", "MEASURES", "Measure",
    "PermutationResult", "WeightedRSA", "WeightedSide",
    "REGISTRY", "SYMMETRIC", "attention_representation", "attention_similarity",
    "backend_info", "bootstrap",
    "reference",
    "canonical",
    "canonical_correlations", "cca", "ckasim", "head_matches", "invariant_to",
    "leave_out_matrices", "leave_out_suite",
    "linear_cka", "localization", "ranked_localization",
    "mixed_correlations", "mixedsim", "neuron_correlations", "neuronsim", "pairwise",
    "pairwise_suite", "permutation_test", "procrustes", "pwcca", "pwsim", "rbf_cka", "rbf_gram",
    "rsa", "stream_pairwise", "svcca", "svsim", "upper_triangle",
]
