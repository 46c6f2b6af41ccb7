"""The similarity measures of the four papers, all-pairs matrices and their uncertainty.

Representation measures take ``X`` (n, d1) and ``Y`` (n, d2) over the same n stimuli and return
a similarity (higher = more similar): :func:`neuronsim`, :func:`mixedsim`, :func:`svcca`,
:func:`pwcca`, :func:`cca`, :func:`linear_cka`, :func:`rbf_cka`, :func:`rsa`,
:func:`procrustes`. Attention: :func:`attention_similarity`, :func:`attention_representation`.
Layers: :func:`pairwise` (any measure, or several at once from shared cross-products),
:func:`localization`. Uncertainty: :func:`bootstrap`, :func:`permutation_test`.
"""

from .attention import AttentionLayer, attention_representation, attention_similarity
from .localization import localization
from .measures import (
                       CCAResult,
                       cca,
                       linear_cka,
                       mixedsim,
                       neuronsim,
                       procrustes,
                       pwcca,
                       rbf_cka,
                       rbf_gram,
                       svcca,
)
from .pairwise import MEASURES, canonical, pairwise
from .rsa import rsa, upper_triangle
from .stats import BootstrapResult, PermutationResult, bootstrap, permutation_test

# the names Wu et al. use
ckasim = linear_cka
svsim = svcca
pwsim = pwcca

__all__ = [
    "AttentionLayer", "BootstrapResult", "CCAResult", "MEASURES", "PermutationResult",
    "attention_representation", "attention_similarity", "bootstrap", "canonical", "cca",
    "ckasim", "linear_cka", "localization", "mixedsim", "neuronsim", "pairwise",
    "permutation_test", "procrustes", "pwcca", "pwsim", "rbf_cka", "rbf_gram", "rsa", "svcca",
    "svsim", "upper_triangle",
]
