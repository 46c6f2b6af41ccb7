"""Localization score (Wu et al. 2020 §5.1, Fig. 3)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


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
    n_mean = np.where(off, N, 0).sum(axis=0) / off.sum(axis=0)
    s_mean = np.where(off, S, 0).sum(axis=0) / off.sum(axis=0)
    if standardize:
        n_mean, s_mean = _z(n_mean), _z(s_mean)
    return n_mean - s_mean


def _z(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    if sd == 0:
        raise ValueError("a series of layer means is constant; it cannot be standardized")
    return (x - x.mean()) / sd
