"""What a measure gives two representations that share nothing but the repetition of their
inputs: its floor on these rows.

A word-level comparison reads one row per word token. When the same word form recurs, two
unrelated models that only encode *which word it is* give identical rows for its tokens on
both sides, and every measure counts that shared repetition as similarity. The floor is that
level: read a similarity against it, not against zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .pairwise import pairwise


def word_identity_floor(words: Sequence[str], measure: str = "linear_cka", *, d: int = 64,
                        seed: int = 0) -> float:
    """The similarity that word identity alone gives: every word form gets an independent
    random code of width ``d`` in each of two unrelated "models", and ``measure`` compares
    the two on these rows (``words``: the word of each row, in row order). Rows of one
    repeated word are identical on both sides, so the more a sample repeats its words, the
    higher this floor: the chance level of a word-level comparison on *these* rows (about
    ``d / (n + d)`` only when every word is distinct)."""
    forms, index = np.unique(np.asarray(words, dtype=object).astype(str), return_inverse=True)
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((len(forms), d))[index]
    B = rng.standard_normal((len(forms), d))[index]
    return float(pairwise([A], [B], measure=measure, progress=False)[0, 0])
