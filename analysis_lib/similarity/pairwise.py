"""All-pairs layer x layer matrices for any measure, with per-layer work done once.

:func:`pairwise` takes lists of layers (each an (n, d) array over the same n stimuli, or for the
attention methods a list of per-sentence maps) and returns ``M[i, j] = measure(A[i], B[j])``.
:func:`pairwise_suite` returns one matrix per measure of a list from one pass: the centred
cross-product ``Xi.T @ Xj`` of each pair is computed once and neuronsim, mixedsim, SVCCA,
PWCCA, linear CKA, Procrustes and CCA are all derived from it and one eigendecomposition per
layer. The numbers equal those of the single-pair functions, which call the same kernels.
Which measure builds from what, and which options it takes, is the table in
:mod:`.registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..errors import UndefinedMeasure
from ..runtime.device import DeviceLike
from ..runtime.profile import profiled
from . import _backend
from . import measures as m
from ._core import (
    RANK_RTOL,
    LayerStats,
    as_matrix,
    components_of,
    cross,
    fill_eigs,
    fill_span_choleskys,
    standardize_pair,
    work_dtype,
)
from .attention import AttentionLayer, check_maps, head_similarity
from .kernels import KERNELS, canonical_svds, check_variance
from .registry import CROSS_PRODUCT_MEASURES, MEASURES, REGISTRY, canonical, check_options
from .rsa import Stimuli, normalized_rows, pearson_of_upper, pearson_vectors, shifted_triangle

__all__ = ["CROSS_PRODUCT_MEASURES", "MEASURES", "canonical", "pairwise", "pairwise_suite"]


@profiled("measure", lambda *a, **k: str(k.get("measure", a[2] if len(a) > 2 else "linear_cka")))
def pairwise(layers_a: Sequence, layers_b: Sequence | None = None,
             measure: str = "linear_cka", *, progress: bool | None = None,
             device: DeviceLike = None,
             backend: str = "auto", **options: Any) -> np.ndarray:
    """Layer x layer similarity matrix of one measure.

    Parameters
    ----------
    layers_a : list of arrays (n, d_i), or of per-sentence attention maps
    layers_b : list, optional
        Second collection; None compares ``layers_a`` with itself and uses symmetry (each
        unordered pair is computed once; asymmetric measures take both directions from it).
    measure : str
        Any of :data:`MEASURES` (or an alias). For several measures at once use
        :func:`pairwise_suite`.
    progress : bool, optional
        Show a progress bar (default: when there are more than 20 pairs).
    device : str or torch.device, optional
        Where the cross-product measures compute (default: CUDA when available, else the
        CPU); see :mod:`analysis_lib.runtime.device`. RSA, RBF CKA and the attention
        methods run on the CPU.
    backend : {'auto', 'torch', 'numpy'}
        ``'torch'`` runs the cross-product measures on torch tensors on ``device``;
        ``'numpy'`` runs the same kernels on NumPy arrays (CPU), the reference path;
        ``'auto'`` (default) is ``'torch'`` when PyTorch is installed, else ``'numpy'``.
    **options
        The measure's options (see :mod:`.registry`): ``variance``, ``standardize``, ``cut``
        (SVCCA/PWCCA), ``debiased`` (CKA), ``top_k`` (neuronsim/mixedsim/SVCCA), ``kernel``,
        ``compare`` (RSA), ``threshold`` (RBF CKA), ``base`` (attention JS), ``reg`` (CCA),
        ``dtype`` (work dtype of the products). An option the measure does not take is an
        error.

    Returns
    -------
    numpy.ndarray (len(layers_a), len(layers_b))
        ``M[i, j] = measure(layers_a[i], layers_b[j])``; asymmetric measures average over the
        neurons (heads) of ``layers_a[i]``.
    """
    if not isinstance(measure, str):
        raise TypeError("pairwise computes one measure (a string); for a list of measures use "
                        "pairwise_suite(layers, measures=[...]), which returns {name: matrix}")
    return pairwise_suite(layers_a, layers_b, [measure], progress=progress, device=device,
                          backend=backend, **options)[canonical(measure)]


@profiled("measure suite", lambda *a, **k: ", ".join(k.get("measures") or ["default"]))
def pairwise_suite(layers_a: Sequence, layers_b: Sequence | None = None,
                   measures: Sequence[str] = ("linear_cka",), *, progress: bool | None = None,
                   device: DeviceLike = None, backend: str = "auto", **options: Any) -> dict[str,
                   np.ndarray]:
    """The matrices of several measures from one pass: ``{canonical name: matrix}``.

    Arguments as :func:`pairwise`; each option must be taken by at least one of the measures
    and goes to those that take it.
    """
    if isinstance(measures, str):
        measures = [measures]
    names = list(dict.fromkeys(canonical(x) for x in measures))
    if not names:
        raise ValueError("measure list is empty")
    check_options(names, options)
    A = _layer_list(layers_a, "layers_a")
    same = layers_b is None
    B = A if same else _layer_list(layers_b, "layers_b")
    # rows from the last: with symmetry, row i then finds every later layer's G computed
    pairs = [(i, j) for i in reversed(range(len(A))) for j in range(i if same else 0, len(B))]
    show = len(pairs) > 20 if progress is None else progress
    out = {x: np.full((len(A), len(B)), np.nan) for x in names}

    groups = [x for x in names if x in CROSS_PRODUCT_MEASURES]
    if groups:
        _cross_product_suite(A, B, same, pairs, groups, out, options, show,
                             _backend.get(device, backend))
    for x in names:
        family = REGISTRY[x].family
        if family == "rsa":
            _rsa_matrix(A, B, same, pairs, out[x], options, show)
        elif family == "gram":
            _gram_matrix(A, B, same, pairs, out[x], options, show)
        elif family == "attention":
            _attention_matrix(A, B, same, pairs, out[x], x.split("_", 1)[1], options, show)
    return out


def _bar(pairs, show, desc):
    return tqdm(pairs, desc=desc, unit="pair", disable=not show, leave=False)


def _layer_list(layers, name: str) -> list:
    """``layers`` as a list of layers, with an error that names the confusion when it is one
    layer's rows (a 2-D array, or a list of 1-D rows of numbers) instead."""
    if isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__"):
        raise TypeError(f"{name} must be a list of layers (arrays of stimuli x neurons), got "
                        f"{type(layers).__name__}")
    found = list(layers)
    if not found:
        raise ValueError(f"{name} must hold at least one layer")
    if len(found) > 1 and all(_is_row(x) for x in found):
        raise ValueError(
            f"{name} looks like the rows of one layer ({len(found)} rows of numbers), not a "
            f"list of layers; pass [X] for one layer, or a list of 2-D arrays (stimuli x "
            f"neurons), one per layer")
    return found


def _is_row(x) -> bool:
    """Whether ``x`` is a 1-D run of numbers (an array, list or tuple of them)."""
    if hasattr(x, "ndim"):
        return x.ndim == 1
    return isinstance(x, (list, tuple)) and bool(x) and all(
        isinstance(v, (int, float, np.number)) for v in x)


def _cross_product_suite(A, B, same, pairs, names, out, options, show, bk):
    dt = work_dtype(*[np.asarray(x) for x in A + ([] if same else B)],
                    dtype=options.get("dtype"))
    stack_b = _stack_buffer(B, dt, bk)
    SB = [LayerStats(x, dtype=dt, name=f"layers_{'a' if same else 'b'}[{j}]",
                     out=None if stack_b is None else stack_b[1][j], backend=bk)
          for j, x in enumerate(B)]
    SA = SB if same else [LayerStats(x, dtype=dt, name=f"layers_a[{i}]", backend=bk)
                          for i, x in enumerate(A)]
    n_rows = {s.n for s in SA + SB}
    if len(n_rows) != 1:
        raise ValueError(f"every layer must have the same rows (stimuli); got row counts "
                         f"{sorted(n_rows)}")
    for s in SA + SB:
        if s.total_var == 0:
            raise UndefinedMeasure(f"{s.name} has no variance (every neuron constant, or every "
                                   f"row the same), so no measure is defined for it; leave that "
                                   f"layer out or check how it was made")
    check_variance(options.get("variance", 0.99))
    # PWCCA's kernel fills the shared decomposition first, so SVCCA reads the same correlations
    order = sorted(names, key=lambda x: x != "pwcca")
    products = _BlockCross(SA, SB, same, None if stack_b is None else stack_b[0])
    if set(names) - {"neuronsim", "procrustes"}:  # the others read G
        products.grams()
        _decompose(SA, SB, same, names, options)
    memos: dict = {}
    for i, j in _bar(pairs, show, "cross-products"):
        C = products.get(i, j)
        rev = same and i != j  # the (j, i) entry comes from the same cross-product
        if (i, j) not in memos:  # a new row: the work its pairs can share, all at once
            memos = _row_memos(i, [jj for ii, jj in pairs if ii == i], SA, SB, same, products,
                               names, options)
        memo = memos.pop((i, j))
        for name in order:
            if same and i == j and _is_one_with_itself(name, SA[i], options):
                out[name][i, i] = 1.0
                continue
            value_ij, value_ji = KERNELS[name](SA[i], SB[j], C, rev, options, memo)
            out[name][i, j] = value_ij
            if rev:
                out[name][j, i] = value_ij if value_ji is None else value_ji


def _row_memos(i, row, SA, SB, same, products, names, opts) -> dict:
    """The per-pair memos of one row of pairs ``(i, j)``: with PWCCA, the canonical
    correlations and vectors of every off-diagonal pair, computed together
    (:func:`~.kernels.canonical_svds` runs their decompositions side by side)."""
    memos: dict = {(i, j): {} for j in row}
    if "pwcca" not in names:
        return memos
    todo = [j for j in row if not (same and i == j)]
    std = opts.get("standardize")
    sides = {j: (SA[i].standardized(), SB[j].standardized()) if std else (SA[i], SB[j])
             for j in todo}
    # a generator: each pair's z-scored cross-product is dropped once its T is formed
    items = ((*sides[j], standardize_pair(SA[i], SB[j], products.get(i, j))[2] if std else
              products.get(i, j)) for j in todo)
    found = canonical_svds(items, opts.get("variance", 0.99), opts.get("cut", "reach"))
    for j, result in zip(todo, found):
        memos[(i, j)]["svd"] = (*sides[j], result)
    return memos


def _decompose(SA, SB, same, names, opts) -> None:
    """Every eigendecomposition of a layer that the measures will read, all at once (side by
    side on the CPU; see :func:`~._core.fill_eigs`) rather than one by one as the pairs
    first need them: SVCCA/PWCCA's of ``G`` (or of the z-scored ``G`` with
    ``standardize=True``), CCA's of ``G``, and mixedsim's of the z-scored ``G`` of every
    layer whose span the Cholesky route cannot take. SVCCA/PWCCA read only the leading
    eigenvectors that their variance threshold keeps, so only those are formed."""
    layers = list(dict.fromkeys(SA + SB))
    wanted: list[LayerStats] = []
    vectors: list[Callable[[np.ndarray], int] | None] = []
    if {"svcca", "pwcca"} & set(names):
        variance, cut = opts.get("variance", 0.99), opts.get("cut", "reach")
        for s in ([s.standardized() for s in layers] if opts.get("standardize") else layers):
            wanted.append(s)
            vectors.append(_principal_count(RANK_RTOL[s.dtype], variance, cut))
    if "cca" in names:
        wanted += layers
        vectors += [None] * len(layers)
    if "mixedsim" in names:
        spans = layers if same else SB
        fill_span_choleskys(spans)
        todo = [s.standardized() for s in spans if s.span_cholesky is None]
        wanted += todo
        vectors += [None] * len(todo)
    fill_eigs(wanted, vectors)


def _is_one_with_itself(name: str, a: LayerStats, opts) -> bool:
    """Whether the measure of a layer with itself is 1 by definition, so that the diagonal of
    a symmetric matrix needs no work: every cross-product measure is 1 there (each neuron
    correlates perfectly with itself and lies in its own span; the canonical correlations of
    a subspace with itself are all 1; CKA and Procrustes of equal inputs are 1), except
    ridge-regularised CCA, which shrinks the correlations. (A layer with no variance was
    refused before.)"""
    return not (name == "cca" and opts.get("reg", 0.0))


def _stack_buffer(layers, dtype, bk, max_bytes: int = 2 << 30):
    """One (n, sum of widths) buffer on the backend's device and a view of it per layer, or
    None when the layers are ragged or too large to stack (over ``max_bytes``)."""
    shapes = [np.shape(x) for x in layers]
    if any(len(s) != 2 for s in shapes) or len({s[0] for s in shapes}) != 1:
        return None
    widths = np.cumsum([0] + [s[1] for s in shapes])
    if shapes[0][0] * widths[-1] * np.dtype(dtype).itemsize > max_bytes:
        return None
    buffer = bk.empty((shapes[0][0], int(widths[-1])), dtype)
    return buffer, [buffer[:, int(widths[k]):int(widths[k + 1])] for k in range(len(layers))]


class _BlockCross:
    """Centred cross-products of every pair, one row block at a time.

    The second collection's centred layers lie side by side in one buffer, so that row i is a
    single large product ``Xi.T @ [Y_0 | Y_1 | ...]`` (larger products run closer to the
    machine's peak than many small ones). With symmetry only ``j > i`` is computed: every
    layer's ``G`` comes first (:meth:`grams`, so that the per-layer decompositions can all
    run before the pairs) and is the diagonal block. Without a buffer (collections too large
    to stack) every pair is one product.
    """

    def __init__(self, SA, SB, same, stacked=None):
        self.SA, self.SB, self.same, self.stacked = SA, SB, same, stacked
        self.offsets = np.concatenate([[0], np.cumsum([s.d for s in SB])])
        self.row, self.block, self.start = None, None, 0

    def grams(self) -> None:
        """Every layer's self cross-product ``G``, one after another
        (:meth:`~._backend.Backend.grams`)."""
        todo = [s for s in dict.fromkeys(self.SA + self.SB) if not s.has("G")]
        if todo:
            for s, G in zip(todo, todo[0].bk.grams([s.Xc for s in todo])):
                s.provide("G", G)  # computed once and kept (LayerStats.G)

    def get(self, i: int, j: int) -> np.ndarray:
        a, b = self.SA[i], self.SB[j]
        if self.same and i == j:
            return a.xp.astype(a.G, a.Xc.dtype)  # exact: G is the work-dtype product, widened
        if self.stacked is None:
            return cross(a, b)
        if self.row != i:
            self.start = int(self.offsets[i + 1]) if self.same else 0
            self.block = a.Xc.T @ self.stacked[:, self.start:]
            self.row = i
        lo, hi = int(self.offsets[j] - self.start), int(self.offsets[j + 1] - self.start)
        return self.block[:, lo:hi]


class _RSAPrep:
    """Per-layer RSA work, done once: row-normalised stimuli and the upper triangle's moments
    (fast path, cosine/correlation kernel with Pearson), or the upper triangle itself."""

    def __init__(self, kernel: str, compare: str):
        if kernel not in ("cosine", "correlation", "euclidean") or compare not in (
                "pearson", "spearman"):
            raise ValueError(f"invalid RSA kernel/compare: {kernel!r}/{compare!r}; kernel is "
                             "cosine, correlation or euclidean, compare pearson or spearman")
        self.kernel, self.compare = kernel, compare
        self.fast = kernel != "euclidean" and compare == "pearson"
        self.done: dict = {}

    def __call__(self, side: str, k: int, x):
        key = (side, k)
        if key not in self.done:
            X = as_matrix(x, f"layers_{side}[{k}]", min_rows=3)
            if self.fast:
                self.done[key] = Stimuli(normalized_rows(X, self.kernel, f"layer {k}"))
            else:
                tri = shifted_triangle(X, self.kernel)
                if self.compare == "spearman":
                    from scipy.stats import rankdata

                    tri = rankdata(tri)
                self.done[key] = tri
        return self.done[key]

    def value(self, a, b) -> float:
        if not self.fast:
            if a.shape != b.shape:
                raise ValueError("every layer must have the same rows (stimuli)")
            return pearson_vectors(a, b)
        if a.n != b.n:
            raise ValueError("every layer must have the same rows (stimuli)")
        return pearson_of_upper(a, b)


def _rsa_matrix(A, B, same, pairs, M, options, show):
    prep = _RSAPrep(options.get("kernel", "cosine"), options.get("compare", "pearson"))
    for i, j in _bar(pairs, show, "rsa"):
        value = prep.value(prep("a", i, A[i]), prep("a" if same else "b", j, B[j]))
        M[i, j] = value
        if same:
            M[j, i] = value


def _gram_matrix(A, B, same, pairs, M, options, show):
    threshold = options.get("threshold", 1.0)
    debiased = options.get("debiased", False)
    grams = {}

    def get(side, k, x):
        if (side, k) not in grams:
            try:
                K = m.rbf_gram(x, threshold)
            except ValueError as error:  # name the layer: the message says what is wrong
                raise ValueError(f"layers_{side}[{k}]: {error}") from error
            grams[(side, k)] = K if debiased else m.center_gram(K)
        return grams[(side, k)]

    for i, j in _bar(pairs, show, "rbf_cka"):
        K, L = get("a", i, A[i]), get("a" if same else "b", j, B[j])
        if K.shape != L.shape:
            raise ValueError("every layer must have the same rows (stimuli)")
        value = m.cka_from_grams(K, L, debiased, centred=True)
        M[i, j] = value
        if same:
            M[j, i] = value


def _attention_matrix(A, B, same, pairs, M, method, options, show):
    base = options.get("base", 2.0)
    LA = [a if isinstance(a, AttentionLayer) else AttentionLayer(check_maps(a, f"layer {i}"))
          for i, a in enumerate(A)]
    LB = LA if same else [b if isinstance(b, AttentionLayer) else
                          AttentionLayer(check_maps(b, f"layer {j}")) for j, b in enumerate(B)]
    for i, j in _bar(pairs, show, f"attention {method}"):
        S = head_similarity(LA[i], LB[j], method, base)
        M[i, j] = S.max(axis=1).mean()
        if same:
            M[j, i] = S.max(axis=0).mean()


def _principal_count(rtol: float, variance: float | None, cut: str
                     ) -> Callable[[np.ndarray], int]:
    """How many principal directions SVCCA and PWCCA keep of a layer, as a function of its
    descending eigenvalues (what :meth:`~._backend_base.Backend.eighs` asks)."""
    return lambda lam: components_of(lam, rtol, variance, cut)
