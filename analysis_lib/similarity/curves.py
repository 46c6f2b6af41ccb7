"""Curves over layers between two models on the same stimuli: RSA per layer with intervals
from resampling sentences and seeds, a permutation test between two sets of stimuli, RSA
on mixtures of two sets, and linear CKA per layer between models paired by seed.

Merchant et al. 2020 (§6, Fig. 5) compare a pretrained model with its fine-tuned version,
layer by layer, by RSA (cosine kernel, Pearson over the upper triangles) on word tokens from
the fine-tuning task's own domain and from another:

* :func:`rsa_by_layer`, :func:`bootstrap_rsa`: the curves, and intervals from a bootstrap
  that resamples sentences (not tokens) and fine-tuning seeds together, with the pairs of two
  copies of one token left out (:class:`~analysis_lib.similarity.rsa.WeightedRSA`);
* :func:`permutation_difference`: a permutation test of out-of-domain minus in-domain RSA at
  chosen layers, shuffling whole sentences between the domains;
* :func:`mixture_curve`: RSA at one layer on stimuli mixing the two domains in proportions;
* :func:`cka_by_layer`: two models' layers compared seed by seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..runtime import checks
from ..runtime.profile import profiled
from . import stats
from .measures import linear_cka, rsa
from .rsa import ConstantSimilarity, WeightedRSA, WeightedSide

#: the two sets of stimuli :func:`permutation_difference` and :func:`mixture_curve` compare:
#: inputs from a fine-tuning task's own domain and from another
DOMAINS = ("in-domain", "out-of-domain")


def rsa_by_layer(base: Sequence[np.ndarray], tuned: Sequence[np.ndarray],
                 weights: np.ndarray | None = None) -> np.ndarray:
    """RSA (cosine, Pearson) of every layer, base against fine-tuned, on the same rows. With
    ``weights`` (a resample), NaN where the resample's similarity matrix is constant
    (:class:`~analysis_lib.similarity.rsa.ConstantSimilarity`, RSA undefined); every other
    error is raised."""
    if weights is None:
        return np.array([rsa(X, Y, "cosine", "pearson") for X, Y in zip(base, tuned)])
    return resampled_rsa(resamplers(base, tuned), weights)


def resamplers(base: Sequence[np.ndarray | WeightedSide], tuned: Sequence[np.ndarray]
               ) -> list[WeightedRSA]:
    """Every layer's pair, base against fine-tuned, prepared once for many resamples
    (``base`` may hold sides already prepared, :class:`~.rsa.WeightedSide`)."""
    return [WeightedRSA(X, Y) for X, Y in zip(base, tuned)]


def resampled_rsa(layers: Sequence[WeightedRSA], weights: np.ndarray) -> np.ndarray:
    """:func:`rsa_by_layer` of one resample (``weights``) on pairs from :func:`resamplers`."""
    out = np.full(len(layers), np.nan)
    for layer, pair in enumerate(layers):
        try:
            out[layer] = pair(weights)
        except ConstantSimilarity:
            pass
    return out


@profiled("resampling", lambda *a, **k: "bootstrap rsa")
def bootstrap_rsa(base: Sequence[np.ndarray], tuned: Mapping[int, Sequence[np.ndarray]],
                  sentence: np.ndarray, *, n_boot: int = 200, level: float = 0.95,
                  seed: int = 0) -> pd.DataFrame:
    """Per layer: the RSA averaged over fine-tuning seeds, and a percentile interval from a
    bootstrap that draws a fine-tuning seed and a resample of sentences each time.

    A token of a resampled sentence appears as many times as its sentence; pairs of two
    copies of one token are left out of the RSA (they are identical on both sides). The
    column ``dropped`` counts, per layer, the resamples whose RSA was undefined (a constant
    similarity matrix) and are left out of the interval.
    """
    checks.integer(n_boot, "n_boot", low=2)
    checks.integer(seed, "seed", low=0)
    seeds = sorted(tuned)
    if len(np.unique(sentence)) < 2:
        raise ValueError("the stimuli come from a single sentence; a bootstrap over sentences "
                         "needs at least two (use more sentences)")
    sides = [WeightedSide(X) for X in base]  # the base model's layers, prepared once
    prepared = {s: resamplers(sides, tuned[s]) for s in seeds}
    estimate = np.mean([[pair() for pair in prepared[s]] for s in seeds], axis=0)

    def resampled(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # a resample of sentences, then a fine-tuning seed: a two-level bootstrap
        return resampled_rsa(prepared[seeds[rng.integers(len(seeds))]], weights)

    samples = stats.group_bootstrap(resampled, sentence, n_boot=n_boot, seed=seed)
    alpha = (1 - level) / 2
    dropped = np.isnan(samples).sum(axis=0)
    if (dropped == n_boot).any():
        raise ValueError(f"every resample of layer {int(np.argmax(dropped == n_boot))} has a "
                         "constant similarity matrix; RSA is undefined there")
    low, high = np.nanquantile(samples, [alpha, 1 - alpha], axis=0)
    se = np.nanstd(samples, axis=0, ddof=1)
    return pd.DataFrame({"layer": np.arange(len(base)), "rsa": estimate, "low": low,
                         "high": high, "se": se, "dropped": dropped})


@profiled("resampling", lambda *a, **k: "permutations rsa")
def permutation_difference(base: Mapping[str, Sequence[np.ndarray]],
                           tuned: Mapping[str, Sequence[np.ndarray]],
                           sentence: Mapping[str, np.ndarray], *, n_perm: int = 100,
                           seed: int = 0, layers: Sequence[int] | None = None
                           ) -> pd.DataFrame:
    """Per layer: out-of-domain minus in-domain RSA, and its permutation p-value.

    The null hypothesis is that the domain label does not matter: whole sentences are
    shuffled between the two domains (each keeps its number of sentences) and both RSAs are
    recomputed. One-sided: ``p = (1 + #{null >= observed}) / (1 + n_perm)``, small when
    fine-tuning changed the in-domain tokens more. ``layers``: the layers tested (default:
    all; each permutation recomputes the RSA of every tested layer); ``p_holm`` adjusts
    over them (Holm's adjustment, ``similarity.stats.holm``).
    """
    checks.integer(n_perm, "n_perm", low=1)
    checks.integer(seed, "seed", low=0)
    n_layers = len(base["in-domain"])
    tested = list(range(n_layers)) if layers is None else \
        [checks.integer(k, "layers item", low=0, high=n_layers - 1) for k in layers]
    if not tested:
        raise ValueError("layers must name at least one layer (or be None for all)")
    pooled_b = [np.vstack([base["in-domain"][k], base["out-of-domain"][k]]) for k in tested]
    pooled_t = [np.vstack([tuned["in-domain"][k], tuned["out-of-domain"][k]])
                for k in tested]
    # sentence ids made unique across the domains
    offset = int(sentence["in-domain"].max()) + 1
    groups = np.concatenate([sentence["in-domain"], sentence["out-of-domain"] + offset])
    is_in = np.r_[np.ones(len(sentence["in-domain"]), bool),
                  np.zeros(len(sentence["out-of-domain"]), bool)]

    pooled = resamplers(pooled_b, pooled_t)

    def difference(mask: np.ndarray) -> np.ndarray:
        inside = resampled_rsa(pooled, mask.astype(np.int64))
        outside = resampled_rsa(pooled, (~mask).astype(np.int64))
        return outside - inside

    test = stats.two_sample_permutation(difference, groups, is_in, n_perm=n_perm, seed=seed)
    return pd.DataFrame({"layer": tested, "out_minus_in": test.statistic,
                         "p_value": test.p_value, "p_holm": stats.holm(test.p_value)})


def mixture_curve(base: Mapping[str, Sequence[np.ndarray]],
                  tuned: Mapping[str, Sequence[np.ndarray]], layer: int,
                  proportions: Sequence[float], *, n: int, seed: int = 0) -> pd.DataFrame:
    """RSA at ``layer`` on ``n`` tokens of which a share ``p`` is in-domain (the rest
    out-of-domain), for each ``p`` in ``proportions``. ``base`` and ``tuned`` hold every
    layer's rows of each of :data:`DOMAINS`."""
    rng = np.random.default_rng(seed)
    sizes = {d: len(base[d][layer]) for d in DOMAINS}
    rows = []
    for p in proportions:
        if not 0 <= p <= 1:
            raise ValueError(f"proportions must lie in [0, 1], got {p}")
        k_in = int(round(p * n))
        if k_in > sizes["in-domain"] or n - k_in > sizes["out-of-domain"]:
            raise ValueError(f"n={n} tokens at proportion {p} need {k_in} in-domain and "
                             f"{n - k_in} out-of-domain tokens; there are {sizes}")
        take = {"in-domain": rng.choice(sizes["in-domain"], k_in, replace=False),
                "out-of-domain": rng.choice(sizes["out-of-domain"], n - k_in, replace=False)}
        X = np.vstack([base[d][layer][take[d]] for d in DOMAINS])
        Y = np.vstack([tuned[d][layer][take[d]] for d in DOMAINS])
        rows.append({"in_domain_share": float(p), "rsa": rsa(X, Y)})
    return pd.DataFrame(rows)


def cka_by_layer(own: Mapping[int, Sequence[np.ndarray]],
                 other: Mapping[int, Sequence[np.ndarray]]) -> pd.DataFrame:
    """Two sets of models on the same rows, paired by seed (``own`` and ``other``: seed ->
    every layer's rows; two tasks' fine-tuned models from one base, or two seeds of one
    task): linear CKA between them at every layer, one row per (seed, layer), for the seeds
    both hold."""
    rows = []
    for seed in sorted(set(own) & set(other)):
        for layer, (X, Y) in enumerate(zip(own[seed], other[seed])):
            rows.append({"seed": seed, "layer": layer, "linear_cka": linear_cka(X, Y)})
    return pd.DataFrame(rows)
