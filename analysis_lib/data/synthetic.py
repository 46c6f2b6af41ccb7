"""Synthetic representations with known structure, for learning what each measure sees.

A "representation" is an (n stimuli x d neurons) array. :func:`representation` draws one with
a decaying spectrum (a few strong directions, many weak ones, like a real layer); the
transforms below change it in one controlled way each; :func:`compare` and :func:`sweep` put
every measure side by side on the result.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..similarity import pairwise_suite


def _rng(seed: int, stream: int) -> np.random.Generator:
    """An independent generator per function, so that the same ``seed`` in two functions
    never yields the same numbers (noise drawn with the seed of the data would lie in the
    data's own span)."""
    return np.random.default_rng([seed, stream])


PRIMER_MEASURES = ("neuronsim", "mixedsim", "svcca", "pwcca", "linear_cka", "rsa",
                   "procrustes")


def representation(n: int, d: int, *, decay: float = 0.7, seed: int = 0) -> np.ndarray:
    """(n, d) float64 activations whose i-th principal direction has standard deviation
    ``(i + 1) ** -decay``, in a random basis (no neuron is special)."""
    rng = _rng(seed, 1)
    latent = rng.standard_normal((n, d)) * (np.arange(1, d + 1) ** -decay)
    basis = np.linalg.qr(rng.standard_normal((d, d)))[0]
    return latent @ basis.T


def rotate_pairs(X: np.ndarray, angle: float, *, seed: int = 0) -> np.ndarray:
    """Rotate random disjoint pairs of neurons by ``angle`` (radians): an orthogonal map that
    mixes each neuron with one partner; at pi/4 every neuron is an equal blend of two."""
    rng = _rng(seed, 2)
    d = X.shape[1]
    order = rng.permutation(d)
    Q = np.eye(d)
    c, s = np.cos(angle), np.sin(angle)
    for a, b in zip(order[0::2], order[1::2]):
        Q[a, a], Q[a, b], Q[b, a], Q[b, b] = c, -s, s, c
    return X @ Q


def random_rotation(X: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """Apply a uniformly random orthogonal map: every neuron becomes a blend of all."""
    d = X.shape[1]
    Q, R = np.linalg.qr(_rng(seed, 3).standard_normal((d, d)))
    return X @ (Q * np.sign(np.diag(R)))


def permute_neurons(X: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """Shuffle the neurons (columns)."""
    return X[:, _rng(seed, 4).permutation(X.shape[1])]


def scale_neurons(X: np.ndarray, *, spread: float = 10.0, seed: int = 0) -> np.ndarray:
    """Multiply each neuron by its own factor, log-uniform in [1/spread, spread]."""
    rng = _rng(seed, 5)
    return X * np.exp(rng.uniform(-np.log(spread), np.log(spread), X.shape[1]))


def invertible_map(X: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """Apply a random (well-conditioned) invertible linear map."""
    d = X.shape[1]
    A = _rng(seed, 6).standard_normal((d, d)) / np.sqrt(d) + np.eye(d)
    return X @ A


def warp(X: np.ndarray, *, strength: float = 2.0) -> np.ndarray:
    """A monotone nonlinear warp of every neuron: ``tanh(strength * z) / strength`` of the
    z-scored neuron."""
    Z = (X - X.mean(0)) / X.std(0)
    return np.tanh(strength * Z) / strength


def add_noise(X: np.ndarray, level: float, *, seed: int = 0) -> np.ndarray:
    """Add isotropic Gaussian noise whose total variance is ``level`` times X's."""
    rng = _rng(seed, 7)
    scale = np.sqrt(level * X.var(axis=0).sum() / X.shape[1])
    return X + scale * rng.standard_normal(X.shape)


def shared_subspace(n: int, d: int, k: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two (n, d) representations that share exactly k directions (unit variance each) and
    are otherwise independent (d - k private directions each), in different random bases."""
    if not 0 <= k <= d:
        raise ValueError(f"k must be between 0 and d={d}, got {k}")
    rng = _rng(seed, 8)
    shared = rng.standard_normal((n, k))
    X = np.hstack([shared, rng.standard_normal((n, d - k))])
    Y = np.hstack([shared, rng.standard_normal((n, d - k))])
    return random_rotation(X, seed=seed + 1), random_rotation(Y, seed=seed + 2)


def compare(X: np.ndarray, Y: np.ndarray, measures: Sequence[str] = PRIMER_MEASURES
            ) -> dict[str, float]:
    """Every measure of (X, Y) from one pass over their cross-products."""
    out = pairwise_suite([X], [Y], measures=list(measures), progress=False)
    return {name: float(M[0, 0]) for name, M in out.items()}


def transform_table(X: np.ndarray, measures: Sequence[str] = PRIMER_MEASURES, *, seed: int = 0
                    ) -> pd.DataFrame:
    """Each measure between X and each standard transform of X (rows: transforms)."""
    transforms = {
        "itself": X,
        "translated (+5)": X + 5.0,
        "isotropic scale (x3)": 3.0 * X,
        "neurons permuted": permute_neurons(X, seed=seed),
        "neurons scaled": scale_neurons(X, seed=seed),
        "pairs rotated 45 deg": rotate_pairs(X, np.pi / 4, seed=seed),
        "random rotation": random_rotation(X, seed=seed),
        "invertible linear map": invertible_map(X, seed=seed),
        "nonlinear warp (tanh)": warp(X),
        "noise (level 1)": add_noise(X, 1.0, seed=seed),
        "independent": representation(*X.shape, seed=seed + 99),
    }
    rows = {name: compare(X, Y, measures) for name, Y in transforms.items()}
    return pd.DataFrame(rows).T[list(measures)]


def sweep(X: np.ndarray, noise_levels: Sequence[float], angles: Sequence[float],
          measures: Sequence[str] = PRIMER_MEASURES, *, seed: int = 0) -> pd.DataFrame:
    """Long table of every measure between X and ``add_noise(rotate_pairs(X, angle), noise)``
    over the grid of noise levels and rotation angles (degrees)."""
    records = []
    for noise in noise_levels:
        for angle in angles:
            Y = add_noise(rotate_pairs(X, np.deg2rad(angle), seed=seed), noise, seed=seed + 1)
            for name, value in compare(X, Y, measures).items():
                records.append({"noise": float(noise), "angle": float(angle), "measure": name,
                                "value": value})
    return pd.DataFrame(records)


def subspace_sweep(n: int, d: int, ks: Sequence[int], measures: Sequence[str] = PRIMER_MEASURES,
                   *, seed: int = 0) -> pd.DataFrame:
    """Long table of every measure for two representations sharing k of d directions."""
    records = []
    for k in ks:
        X, Y = shared_subspace(n, d, int(k), seed=seed)
        for name, value in compare(X, Y, measures).items():
            records.append({"shared": int(k), "measure": name, "value": value})
    return pd.DataFrame(records)


#: the spectra :func:`chance_table` draws: a decaying one (as in real layers) and a flat one
SPECTRA = {"decaying (0.7)": 0.7, "flat": 0.0}


def chance_table(n: int, widths: Sequence[int], measures: Sequence[str] = PRIMER_MEASURES,
                 *, seed: int = 0) -> pd.DataFrame:
    """Every measure between two independent representations of ``n`` rows, for each width
    in ``widths`` and each spectrum of :data:`SPECTRA`: the chance level a measure reaches
    with nothing shared, at the sizes a study uses (rows: width and spectrum; columns:
    measures). Chance grows with the width and shrinks with the rows; a flat spectrum
    spreads the variance over every direction and raises the chance level of the measures
    that weigh directions by variance (CKA, Procrustes)."""
    rows = {}
    for d in widths:
        for label, decay in SPECTRA.items():
            X = representation(n, int(d), decay=decay, seed=seed)
            Y = representation(n, int(d), decay=decay, seed=seed + 1)
            rows[(int(d), label)] = compare(X, Y, measures)
    table = pd.DataFrame(rows).T[list(measures)]
    table.index.names = ["neurons", "spectrum"]
    return table


def unchanged(table: pd.DataFrame, transform: str, *, tol: float = 1e-6) -> list[str]:
    """The measures (columns of :func:`transform_table`) that read the same for ``transform``
    as for ``"itself"``, within ``tol``: the transform's invariances, as measured."""
    if transform not in table.index:
        raise KeyError(f"no transform {transform!r}; the table has {list(table.index)}")
    same = (table.loc[transform] - table.loc["itself"]).abs() <= tol
    return [m for m in table.columns if same[m]]


def falling(grid: pd.DataFrame, *, noise: float, tol: float = 1e-3) -> list[str]:
    """The measures of a :func:`sweep` grid that fall by more than ``tol`` from the smallest
    to the largest angle at the given noise level."""
    at = grid[np.isclose(grid["noise"], noise)]
    if at.empty:
        raise KeyError(f"no noise level {noise} in the grid: {sorted(set(grid['noise']))}")
    out = []
    for measure, g in at.groupby("measure", sort=False):
        g = g.sort_values("angle")
        if g["value"].iloc[0] - g["value"].iloc[-1] > tol:
            out.append(measure)
    return out


def proportionality(shared: pd.DataFrame) -> pd.Series:
    """For a :func:`subspace_sweep` table: each measure's largest distance from the line
    ``k / d`` (0 = exactly proportional to the share of shared directions), smallest first."""
    d = shared["shared"].max()
    gap = (shared["value"] - shared["shared"] / d).abs()
    return gap.groupby(shared["measure"]).max().sort_values()
