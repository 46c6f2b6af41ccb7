"""The structure of a layer x layer matrix, as the papers read it.

Phang et al. 2021 see clusters of similar layers: :func:`block_fit` finds the best
partition of the layers into contiguous blocks and how much of the matrix the blocks
explain, :func:`band_fit` the same for the alternative in which similarity depends only on
the distance between two layers, and :func:`block_gain` compares the two, each charged for
its parameters (:func:`adjusted_r2`). Ren et al. 2023 (Fig. 3) see distance grow away from
the diagonal: :func:`layer_gradient`. Wu et al. 2020 compare the cells across models with
those within one model: :func:`across_within`, :func:`rank_overlap`. Phang et al.'s four
views of a fine-tuned model against its base and its other seeds: :func:`phang_views`
(linear CKA, :func:`cka_matrix`), :func:`mean_views`, and their block and band fits,
:func:`structure_table`. Cells that are NaN (an undefined similarity, such as a constant
layer's) are left out of every fit.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .pairwise import pairwise


def _off_diagonal(M: np.ndarray) -> np.ndarray:
    mask = ~np.eye(len(M), dtype=bool) & np.isfinite(M)
    return mask


def _defined(M: np.ndarray) -> list[int]:
    return [i for i in range(len(M)) if np.isfinite(np.delete(M[i], i)).any()]


def n_defined(M: np.ndarray) -> int:
    """Layers of a square matrix with at least one defined off-diagonal cell."""
    return len(_defined(np.asarray(M, dtype=np.float64)))


def block_fit(M: np.ndarray, k: int) -> dict[str, Any]:
    """The best partition of the layers (over the defined ones) into ``k`` contiguous blocks.

    Each pair of blocks (a, b) gets the mean of its off-diagonal cells; the partition that
    leaves the smallest squared error is chosen (exhaustively). ``r2`` is the share of the
    off-diagonal cells' variance the block means explain (1: the matrix is exactly
    block-constant; 0: blocks explain nothing), ``starts`` the first layer of each block
    (matrix positions), ``within`` / ``between`` the mean similarity inside blocks and
    across them.
    """
    M = np.asarray(M, dtype=np.float64)
    defined = _defined(M)
    n = len(defined)
    if not 1 <= k <= n:
        raise ValueError(f"k={k} blocks need 1..{n} defined layers")
    S = M[np.ix_(defined, defined)]
    mask = _off_diagonal(S)
    values = S[mask]
    total = np.sum((values - values.mean()) ** 2)
    best: tuple[float, tuple[int, ...], np.ndarray, np.ndarray] | None = None
    for cuts in itertools.combinations(range(1, n), k - 1):
        label = np.searchsorted(np.array(cuts), np.arange(n), side="right")
        pair = label[:, None] * k + label[None, :]
        pred = np.zeros_like(S)
        for p in np.unique(pair[mask]):
            cells = mask & (pair == p)
            pred[cells] = S[cells].mean()
        sse = np.sum((S[mask] - pred[mask]) ** 2)
        if best is None or sse < best[0] - 1e-15:
            same = label[:, None] == label[None, :]
            best = (sse, cuts, S[mask & same], S[mask & ~same])
    if best is None:  # pragma: no cover - the loop runs at least once for 1 <= k <= n
        raise ValueError(f"no way to cut {n} layers into {k} blocks")
    sse, cuts, inside, across = best
    return {"k": k, "r2": float(1 - sse / total) if total > 0 else float("nan"),
            "starts": [defined[0]] + [defined[c] for c in cuts],
            "within": float(inside.mean()) if inside.size else float("nan"),
            "between": float(across.mean()) if across.size else float("nan")}


def band_fit(M: np.ndarray) -> float:
    """Share of the off-diagonal variance explained when similarity depends only on the
    distance between the two layers (a banded, Toeplitz model): the alternative to blocks."""
    M = np.asarray(M, dtype=np.float64)
    mask = _off_diagonal(M)
    i, j = np.nonzero(mask)
    gap = np.abs(i - j)
    values = M[mask]
    pred = np.zeros_like(values)
    for g in np.unique(gap):
        pred[gap == g] = values[gap == g].mean()
    total = np.sum((values - values.mean()) ** 2)
    return float(1 - np.sum((values - pred) ** 2) / total) if total > 0 else float("nan")


def adjusted_r2(r2: float, n: int, p: int) -> float:
    """R^2 charged for ``p`` fitted parameters (besides the mean) on ``n`` values:
    ``1 - (1 - R^2) (n - 1) / (n - p - 1)``; NaN when ``n <= p + 1``."""
    return float(1 - (1 - r2) * (n - 1) / (n - p - 1)) if n > p + 1 else float("nan")


def block_gain(M: np.ndarray) -> float:
    """Adjusted R^2 of the best 2-block partition minus that of the band model, on one
    symmetric layer x layer matrix. Each off-diagonal pair of layers counts once; the block
    model fits 3 means and chooses a cut (4 parameters counting the cut, i.e. 3 besides
    the mean), the band model one mean per distance (``L - 1`` distances: ``L - 2``)."""
    M = np.asarray(M, dtype=np.float64)
    n_layers = n_defined(M)
    if n_layers < 4:
        return float("nan")
    n = n_layers * (n_layers - 1) // 2
    block = adjusted_r2(block_fit(M, 2)["r2"], n, 3)
    band = adjusted_r2(band_fit(M), n, n_layers - 2)
    return block - band


def layer_gradient(within: np.ndarray, first_layer: int = 1) -> float:
    """Ren et al.'s Fig. 3 as one number: in a layer x layer distance matrix (such as
    ``alignment.pairs.layer_by_layer``'s), the mean distance between layers two or more
    apart minus the mean between adjacent layers (both
    directions of each pair; layers below ``first_layer`` left out: Ren et al. show the 12
    transformer layers, not the embeddings). Positive when distance grows away from the
    diagonal; NaN for fewer than three layers."""
    M = np.asarray(within, dtype=np.float64)[first_layer:, first_layer:]
    apart = np.abs(np.subtract.outer(np.arange(len(M)), np.arange(len(M))))
    if len(M) < 3:
        return float("nan")
    return float(M[apart >= 2].mean() - M[apart == 1].mean())


def rank_overlap(across: np.ndarray, within: np.ndarray) -> float:
    """The probability that a cell across two models is at least as similar as a cell
    within one model, ties counting half: the Mann-Whitney U of the two groups of cells over
    the product of their sizes (NaN cells left out; NaN when a group is empty).

    0.5: the cells across models are as similar as those within; 0: every one of them lies
    below every within-model cell. It depends on the order of the values only, so any
    increasing transformation of a measure (its scale, its offset, its chance level) leaves
    it unchanged: two measures are compared by it without their scales ever meeting."""
    from scipy.stats import mannwhitneyu

    across = np.asarray(across, dtype=np.float64).ravel()
    within = np.asarray(within, dtype=np.float64).ravel()
    across, within = across[~np.isnan(across)], within[~np.isnan(within)]
    if not across.size or not within.size:
        return float("nan")
    u = mannwhitneyu(across, within, alternative="greater").statistic
    return float(u / (across.size * within.size))


def across_within(M: np.ndarray, same_model: np.ndarray) -> dict[str, float]:
    """A layer x layer matrix's cells between layers of different models and between two
    different layers of one model (``same_model[i, j]``: layers i and j belong to one
    model): the mean of each group (NaN for an empty one) and ``overlap``, the
    :func:`rank_overlap` of the first group with the second."""
    M, same = np.asarray(M), np.asarray(same_model, dtype=bool)
    across, within = ~same, same & ~np.eye(len(same), dtype=bool)
    return {"across models": M[across].mean() if across.any() else np.nan,
            "within a model": M[within].mean() if within.any() else np.nan,
            "overlap": rank_overlap(M[across], M[within])}


#: Phang et al.'s four views of a fine-tuned model (:func:`phang_views`)
VIEWS = ("ORIG-ORIG", "FT-ORIG", "FT-FT", "FT[1]-FT[2]")


def cka_matrix(A: Sequence[np.ndarray], B: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Linear CKA of every layer of A against every layer of B (A itself when None), NaN in
    the rows and columns of constant layers, where it is undefined (the first token's
    vector at the embedding layer)."""
    return pairwise(A, B, measure="linear_cka", progress=False, undefined="nan")


class SeedViews(dict):
    """Phang et al.'s views (:func:`phang_views`: view -> list of matrices), and ``seeds``,
    the fine-tuning seeds that the per-seed lists follow, in their order (the per-pair list
    follows their pairs in ``itertools.combinations`` order)."""

    def __init__(self, views: Mapping[str, list[np.ndarray]], seeds: Sequence[int]):
        super().__init__(views)
        self.seeds = tuple(seeds)


def phang_views(base: Sequence[np.ndarray], tuned: Mapping[int, Sequence[np.ndarray]]
                ) -> SeedViews:
    """Phang et al.'s four views, each a list of layer x layer CKA matrices (one per seed, or
    per pair of seeds): ``ORIG-ORIG`` (the base model with itself), ``FT-ORIG`` (rows: the
    fine-tuned model's layers, columns: the base model's), ``FT-FT`` and ``FT[1]-FT[2]``
    (two fine-tuning seeds; rows the first). The seeds in sorted order, as ``seeds``."""
    seeds = sorted(tuned)
    return SeedViews({
        "ORIG-ORIG": [cka_matrix(base)],
        "FT-ORIG": [cka_matrix(tuned[s], base) for s in seeds],
        "FT-FT": [cka_matrix(tuned[s]) for s in seeds],
        "FT[1]-FT[2]": [cka_matrix(tuned[a], tuned[b])
                        for a, b in itertools.combinations(seeds, 2)],
    }, seeds)


def mean_views(views: Mapping[str, Sequence[np.ndarray]]) -> dict[str, np.ndarray]:
    """Each view's matrices averaged (over seeds or seed pairs); undefined cells stay NaN."""
    return {name: np.mean(np.stack(mats), axis=0) for name, mats in views.items()}


def structure_table(views: Mapping[str, Sequence[np.ndarray]], ks: Sequence[int] = (2, 3)
                    ) -> pd.DataFrame:
    """For every matrix of every view: block R^2 for each k, the banded R^2, and the block
    boundaries (one row per matrix). A k-block fit needs at least 2k defined layers (fewer
    would fit every cell by its own block); below that it is NaN."""
    rows = []
    for view, mats in views.items():
        for index, M in enumerate(mats):
            M = np.asarray(M, dtype=np.float64)
            row: dict[str, Any] = {"view": view, "matrix": index, "band_r2": band_fit(M)}
            for k in ks:
                fit = block_fit(M, k) if 2 * k <= n_defined(M) else {
                    "r2": float("nan"), "starts": [], "within": float("nan"),
                    "between": float("nan")}
                row[f"block{k}_r2"] = fit["r2"]
                row[f"block{k}_starts"] = fit["starts"]
                if k == 2:
                    row["within"], row["between"] = fit["within"], fit["between"]
            rows.append(row)
    return pd.DataFrame(rows)

