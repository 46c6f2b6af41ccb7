"""Localization score (Wu et al. 2020 §5.1, Fig. 3)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import rankdata


def localization(neuron_matrix: ArrayLike, svcca_matrix: ArrayLike, *,
                 standardize: bool = False) -> np.ndarray:
    """Per-layer localization: mean neuronsim minus mean svsim to the other layers.

    For every layer j (a column of the square matrices, ``M[i, j] = measure(layer_i,
    layer_j)``), take the mean of column j over the other layers (i != j) in the neuronsim
    matrix and in the SVCCA matrix, and subtract the second from the first. High values: pairs
    of individual neurons match better than whole representations, i.e. information is more
    localized.

    Parameters
    ----------
    neuron_matrix, svcca_matrix : arrays (L, L)
        The two heatmaps over the same layers (of one model or a collection).
    standardize : bool
        z-score both series of column means before subtracting, as Wu et al.'s released code
        does; the paper's text describes the plain difference (default).

    Returns
    -------
    numpy.ndarray (L,)
    """
    n_mean, s_mean = _column_means(neuron_matrix, svcca_matrix)
    if standardize:
        n_mean, s_mean = _z(n_mean), _z(s_mean)
    return n_mean - s_mean


def _column_means(neuron_matrix: ArrayLike, svcca_matrix: ArrayLike
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Each layer's mean over the other layers, in each of the two checked matrices."""
    N = np.asarray(neuron_matrix, dtype=np.float64)
    S = np.asarray(svcca_matrix, dtype=np.float64)
    if N.ndim != 2 or N.shape[0] != N.shape[1] or N.shape != S.shape:
        raise ValueError(f"both matrices must be square and of one shape, got {N.shape} and "
                         f"{S.shape}")
    if N.shape[0] < 2:
        raise ValueError("localization needs at least two layers")
    if not (np.isfinite(N).all() and np.isfinite(S).all()):
        raise ValueError("the matrices contain NaN or infinite values")
    off = ~np.eye(N.shape[0], dtype=bool)
    return (np.where(off, N, 0).sum(axis=0) / off.sum(axis=0),
            np.where(off, S, 0).sum(axis=0) / off.sum(axis=0))


def ranked_localization(neuron_matrix: ArrayLike, svcca_matrix: ArrayLike) -> np.ndarray:
    """Per-layer localization read on ranks: for every layer, the rank of its mean neuronsim
    to the other layers among all the layers' means minus the rank of its mean SVCCA, each
    rank scaled to [0, 1] (ties share their mean rank).

    The plain score subtracts two measures on different scales, so a layer that becomes unlike
    every other one under both measures gains or loses "localization" by how far each
    measure falls, not by what it finds. Ranks take the scales away: a layer whose neurons
    match the other layers' as well, relative to the rest, as its whole representation does
    scores 0, and the score is positive where its neurons match the other layers relatively
    better than its subspaces do. Ranks among the layers given: pass the pretrained layers'
    matrices for a reference set of trained layers."""
    n_mean, s_mean = _column_means(neuron_matrix, svcca_matrix)
    return _scaled_ranks(n_mean) - _scaled_ranks(s_mean)


def _scaled_ranks(x: np.ndarray) -> np.ndarray:
    return (rankdata(x) - 1) / (len(x) - 1)


def _z(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    if sd == 0:
        raise ValueError("a series of layer means is constant; it cannot be standardized")
    return (x - x.mean()) / sd
