"""All-pairs layer x layer matrices for any registered measure, with per-layer work done once.

:func:`pairwise` takes lists of layers (each an (n, d) array over the same n stimuli, or for the
attention methods a list of per-sentence maps) and returns ``M[i, j] = measure(A[i], B[j])``.
:func:`pairwise_suite` returns one matrix per measure of a list from one pass. The engine
plans from the measures' records (:mod:`.registry`) and never names a measure:

1. every layer is prepared once as its measures' :attr:`~.registry.Measure.layer` kind asks
   (:data:`LAYER_KINDS`), and the per-layer quantities they declare (Gram matrices,
   eigendecompositions, spans) are computed for all layers at once
   (:data:`LAYER_QUANTITIES`);
2. row by row, every pair gets a :class:`Pair`: the two layers in a fixed order (decided by
   their contents, not by which was asked first), its cross-products, and the pair
   quantities its measures declare (:data:`PAIR_QUANTITIES`), computed for the row at once
   and shared by every measure that names them;
3. each measure's kernel reads the pair and gives one value or, for an asymmetric measure,
   both directions.

The single-pair functions (:mod:`.measures`) prepare their two layers as step 1 does and
call the same kernels, so that a matrix's entry and the single-pair value of the same layers
are the same number to the last bit, and a measure's value does not depend on which other
measures a suite computes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..runtime.device import DeviceLike
from ..runtime.machine import memory_bytes as _memory_bytes
from ..runtime.profile import profiled
from . import _backend
from .attention import AttentionLayer, check_maps
from .core import (
    LayerStats,
    Pair,
    constant_layer,
    digest,
    eigs,
    grams,
    is_wide,
    prepare_given,
    principal,
    real_array,
    reduced,
    same_rows,
    spans,
)
from .kernels import canonical_of_pairs, center_gram, rbf_gram
from .registry import DEFAULT, MEASURES, REGISTRY, canonical, check_options, options_of
from .rsa import prepare_stimuli

__all__ = ["MEASURES", "Pair", "canonical", "pairwise", "pairwise_suite"]


@profiled("measure", lambda *a, **k: str(k.get("measure", a[2] if len(a) > 2 else DEFAULT)))
def pairwise(layers_a: Sequence | Mapping, layers_b: Sequence | Mapping | None = None,
             measure: str = DEFAULT, *, progress: bool | None = None,
             device: DeviceLike = None, backend: str = "auto", as_frame: bool = False,
             undefined: str = "raise", **options: Any) -> Any:
    """Layer x layer similarity matrix of one measure.

    Parameters
    ----------
    layers_a : list of arrays (n, d_i), or of per-sentence attention maps
        Also a dict of layers (its keys name them, e.g. ``(model, layer)``), Hugging Face's
        ``hidden_states`` (a tuple of (1, n, d) tensors, or the model output that holds
        it), or a 3-D array of stacked layers. Tensors may be on any device, in bfloat16 or
        require grad: they are detached and read as float32.
    layers_b : list or dict, optional
        Second collection; None compares ``layers_a`` with itself and uses symmetry (each
        unordered pair is computed once; asymmetric measures take both directions from it).
    measure : str
        Any of :data:`MEASURES` (or an alias), in any case (``"CKA"``). For several measures
        at once use :func:`pairwise_suite`.
    progress : bool, optional
        Show a progress bar (default: when there are more than 20 pairs).
    device : str or torch.device, optional
        Where the measures on activations compute (default: CUDA when available, else the
        CPU); see :mod:`analysis_lib.runtime.device`. RSA, RBF CKA and the attention
        methods run on the CPU.
    backend : {'auto', 'torch', 'numpy'}
        ``'torch'`` runs the measures on activations on torch tensors on ``device``;
        ``'numpy'`` runs the same kernels on NumPy arrays (CPU), the reference path;
        ``'auto'`` (default) is the faster of the two where the call computes: torch on a
        GPU; on the CPU torch on an Intel processor (with a torch build on Intel's MKL),
        else NumPy.
    **options
        The measure's options (its record in :mod:`.registry` lists them with their
        defaults): ``variance``, ``standardize``, ``cut`` (SVCCA/PWCCA), ``debiased``,
        ``form`` (CKA), ``top_k`` (neuronsim/mixedsim/SVCCA), ``kernel``, ``compare`` (RSA),
        ``threshold`` (RBF CKA), ``base`` (attention JS), ``reg`` (CCA), ``dtype`` (work
        dtype of the products). An option the measure does not take is an error.
    as_frame : bool
        Return a labelled ``pandas.DataFrame``: rows and columns named by the layers' keys
        (a dict's keys, tuples as MultiIndex levels; else positions).
    undefined : {'raise', 'nan'}
        What a layer without variance (every neuron constant, e.g. the first token's vector
        at the embedding layer) gives: an error naming it (default), or NaN in its row or
        column, the measure being undefined there.

    Returns
    -------
    numpy.ndarray (len(layers_a), len(layers_b)), or a DataFrame with ``as_frame``
        ``M[i, j] = measure(layers_a[i], layers_b[j])``; asymmetric measures average over the
        neurons (heads) of ``layers_a[i]``.
    """
    if not isinstance(measure, str):
        raise TypeError("pairwise computes one measure (a string); for a list of measures use "
                        "pairwise_suite(layers, measures=[...]), which returns {name: matrix}")
    return pairwise_suite(layers_a, layers_b, [measure], progress=progress, device=device,
                          backend=backend, as_frame=as_frame, undefined=undefined,
                          **options)[canonical(measure)]


@profiled("measure suite", lambda *a, **k: ", ".join(k.get("measures") or ["default"]))
def pairwise_suite(layers_a: Sequence | Mapping, layers_b: Sequence | Mapping | None = None,
                   measures: Sequence[str] = (DEFAULT,), *, progress: bool | None = None,
                   device: DeviceLike = None, backend: str = "auto", as_frame: bool = False,
                   undefined: str = "raise", **options: Any) -> dict[str, Any]:
    """The matrices of several measures from one pass: ``{canonical name: matrix}``.

    Arguments as :func:`pairwise` (``as_frame``: each matrix a labelled data frame;
    ``undefined``: an error or NaN for a layer without variance); each option must be taken
    by at least one of the measures and goes to those that take it.
    """
    if undefined not in ("raise", "nan"):
        raise ValueError(f"undefined must be 'raise' or 'nan', got {undefined!r}")
    if isinstance(measures, str):
        measures = [measures]
    names = list(dict.fromkeys(canonical(x) for x in measures))
    if not names:
        raise ValueError("measure list is empty")
    check_options(names, options, ENGINE_ARGUMENTS)
    A, keys_a = _layer_list(layers_a, "layers_a")
    B, keys_b = (None, keys_a) if layers_b is None else _layer_list(layers_b, "layers_b")
    label_b = "layers_a" if B is None else "layers_b"
    labels = ([f"layers_a[{k!r}]" for k in keys_a], [f"{label_b}[{k!r}]" for k in keys_b])
    bk = _backend.get(device, backend, _backend.Work.of(names, A + (B or []),
                                                        options.get("dtype")), timing_engine)
    if undefined == "nan":
        found = _defined_only(A, B, names, options, progress, bk, labels)
    else:
        found = matrices(A, B, names, options, progress, bk, labels)
    if as_frame:
        return {name: _labelled(M, keys_a, keys_b) for name, M in found.items()}
    return found


def _has_variance(X: Any, label: str) -> bool:
    """Whether a layer has variance; attention maps, and layers that are not one 2-D array,
    are left to the measures' own checks."""
    if isinstance(X, AttentionLayer):
        return True
    array = real_array(X, label)
    return array.ndim != 2 or not constant_layer(array)


def _defined_only(A: list, B: list | None, names: list[str], options: dict,
                  progress: bool | None, bk, labels: tuple[list[str], list[str]]
                  ) -> dict[str, np.ndarray]:
    """:func:`matrices` over the layers with variance (:func:`~.core.constant_layer`), NaN in
    the rows and columns of the others."""
    def keep(layers: list, label: list[str]) -> list[int]:
        return [k for k, X in enumerate(layers) if _has_variance(X, label[k])]

    keep_a = keep(A, labels[0])
    keep_b = keep_a if B is None else keep(B, labels[1])
    n_b = len(A) if B is None else len(B)
    out = {name: np.full((len(A), n_b), np.nan) for name in names}
    if keep_a and keep_b:
        sub = matrices([A[i] for i in keep_a], None if B is None else [B[j] for j in keep_b],
                       names, options, progress, bk,
                       ([labels[0][i] for i in keep_a], [labels[1][j] for j in keep_b]))
        for name in names:
            out[name][np.ix_(keep_a, keep_b)] = sub[name]
    return out


def one_pair(name: str, X, Y, options: dict, device: DeviceLike = None,
             backend: str = "auto", names: tuple[str, str] = ("X", "Y")) -> float:
    """The measure ``name`` of one pair of layers, through the same engine as the matrices
    (errors name the layers as ``names`` says)."""
    check_options([name], options)
    bk = _backend.get(device, backend, _backend.Work.of([name], [X, Y], options.get("dtype")),
                      timing_engine)
    return float(matrices([X], [Y], [name], options, False, bk,
                          ([names[0]], [names[1]]))[name][0, 0])


def timing_engine(layers: list, names: list[str], bk) -> None:
    """The engine as the backend's ``"auto"`` rule times it (:func:`._backend.calibrate`):
    every measure of ``names`` over ``layers`` with their default options."""
    matrices(layers, None, names, {}, False, bk,
             ([f"calibration[{k}]" for k in range(len(layers))],) * 2)


def matrices(A: list, B: list | None, names: list[str], options: dict, progress: bool | None,
             bk, labels: tuple[list[str], list[str]]) -> dict[str, np.ndarray]:
    """The engine: ``{name: matrix}`` of checked measure names over the layer lists ``A``
    and ``B`` (None: ``A`` with itself, using symmetry); ``labels`` name the layers in
    errors."""
    same = B is None
    B_: list = A if B is None else B
    # rows from the last: with symmetry, row i then finds every later layer ready
    pairs = [(i, j) for i in reversed(range(len(A))) for j in range(i if same else 0, len(B_))]
    show = len(pairs) > 20 if progress is None else progress
    out = {x: np.full((len(A), len(B_)), np.nan) for x in names}
    records = [REGISTRY[x] for x in names]
    for kind in dict.fromkeys(r.layer for r in records):
        group = [r for r in records if r.layer == kind]
        for part, A_, B_plan, switched in _plans(group, A, B, labels, options):
            taken = {r.name: {**options_of(r.name, options), **switched} for r in part}
            _run_group(part, A_, B_plan, taken, pairs, out, show, bk, labels)
    return out


def _plans(group: list, A: list, B: list | None, labels, options: dict) -> list[tuple]:
    """How one kind's measures run: ``(measures, A, B, options they see instead)``. A
    wide layer (more neurons than rows) is given to the measures that declare
    :attr:`~.registry.Measure.row_space` as its rotation into its row space
    (:func:`~.core.row_space`; every layer z-scored first when they ask for
    ``standardize``, which they then need not do), so that their memory grows with the
    rows; the other measures, and every measure when no layer is wide, see the layers as
    given."""
    layers = A + (B or [])
    wide = [is_wide(x) for x in layers]
    reduce = [r for r in group if r.row_space] if any(wide) else []
    rest = [r for r in group if r not in reduce]
    if any(wide) and rest and rest[0].layer == "activations":
        _check_neuron_memory(rest, A, B, labels[0] + labels[1], options)
    plans: list[tuple] = [(rest, A, B, {})] if rest else []
    if reduce:
        standardize = any(options_of(r.name, options).get("standardize") for r in reduce)
        given = [reduced(x, name, standardize, w)
                 for x, name, w in zip(layers, labels[0] + labels[1], wide)]
        plans.append((reduce, given[:len(A)], None if B is None else given[len(A):],
                      {"standardize": False} if standardize else {}))
    return plans


def _check_neuron_memory(measures: list, A: list, B: list | None, names: list[str],
                         options: dict) -> None:
    """Refuse, before any work, measures that read wide layers neuron by neuron when the
    matrix of their neurons' products would not fit in half of this machine's memory: the
    d1 x d2 products of two layers' neurons (:attr:`~.registry.Measure.neuron_pairs`) or a
    layer's own d x d ``G``. The message names the measure, the layers, the size and the
    measures that read a wide layer by its rows."""
    from .registry import REGISTRY

    def width(x) -> int:
        return int(np.shape(x)[1]) if np.ndim(x) == 2 else 0

    layers = A + (B or [])
    widths = [width(x) for x in layers]
    order = sorted(range(len(layers)), key=lambda k: -widths[k])
    if B is None:  # pairs within A: the two widest layers
        pair = order[:2] if len(order) > 1 else order * 2
    else:
        pair = [max(range(len(A)), key=lambda k: widths[k]),
                len(A) + max(range(len(B)), key=lambda k: widths[len(A) + k])]
    worst: tuple[int, list[int]] = (0, [])
    heavy = []
    for r in measures:
        gram = "G" in r.layer_needs(options_of(r.name, options))
        if gram:
            worst = max(worst, (widths[order[0]] ** 2, [order[0]]))
        if r.neuron_pairs:
            worst = max(worst, (widths[pair[0]] * widths[pair[1]], pair))
        if gram or r.neuron_pairs:
            heavy.append(r.name)
    need, which = 8 * worst[0], worst[1]
    budget = _memory_bytes() // 2
    if need > budget:
        shape = " x ".join(f"{widths[k]:,}" for k in (which * 2)[:2])
        by_rows = ", ".join(r.name for r in REGISTRY.values() if r.row_space)
        raise ValueError(
            f"{', '.join(heavy)} on {' and '.join(dict.fromkeys(names[k] for k in which))} "
            f"needs a {shape} matrix of products of neurons ({need / 2**30:.1f} GiB), more "
            f"than half this machine's memory ({2 * budget / 2**30:.1f} GiB); reduce the "
            "neurons first (a PCA to a few thousand directions), or use a measure that reads "
            f"a wide layer through its rows ({by_rows}, or linear_cka)")


def _run_group(group: list, A: list, B: list | None, taken: dict, pairs: list, out: dict,
               show: bool, bk, labels) -> None:
    """One plan of :func:`matrices`: prepare the layers once, then every pair, row by
    row (rows from the last: with symmetry, row i then finds every later layer ready)."""
    same = B is None
    kind = group[0].layer
    shared = {o: v for r in group for o, v in taken[r.name].items()}
    if B is None:
        PA = PB = prepare_layers(A, labels[0], kind, shared, bk)
    else:
        prepared = prepare_layers(A + B, labels[0] + labels[1], kind, shared, bk)
        PA, PB = prepared[:len(A)], prepared[len(A):]
    needs = [q for r in group for q in r.layer_needs(taken[r.name])]
    for quantity in dict.fromkeys(needs):
        LAYER_QUANTITIES[quantity](PA, PB, same, shared)
    pair_needs = list(dict.fromkeys(q for r in group for q in r.pair_needs))
    rows: dict[int, list[int]] = {}
    for i, j in pairs:
        rows.setdefault(i, []).append(j)
    bar = tqdm(total=len(pairs), desc=", ".join(r.name for r in group), unit="pair",
               disable=not show, leave=False)
    for i, row in rows.items():
        found = {j: Pair.of(PA[i], PB[j]) for j in row}
        for quantity in pair_needs:
            users = [r for r in group if quantity in r.pair_needs]
            todo = [p for p in found.values()
                    if not (p.alike and all(r.one_with_itself(taken[r.name])
                                            for r in users))]
            for p, value in zip(todo, PAIR_QUANTITIES[quantity](todo, shared)):
                p.provide(quantity, value)
        for j, p in found.items():
            wanted = (True, same and i != j)  # (A[i] to B[j], B[j] to A[i])
            for r in group:
                _fill(out[r.name], i, j, p, r, taken[r.name], wanted)
            bar.update(1)
    bar.close()


def prepare_layers(layers: list, names: list[str], kind: str, options: dict, bk) -> list:
    """Layers prepared as ``kind`` (:data:`LAYER_KINDS`), checked to cover the same rows."""
    prepared = LAYER_KINDS[kind](layers, names, options, bk)
    same_rows({name: p.n for name, p in zip(names, prepared) if hasattr(p, "n")})
    return prepared


def _fill(M: np.ndarray, i: int, j: int, p: Pair, r, options: dict,
          wanted: tuple[bool, bool]) -> None:
    """Write the pair's values of measure ``r`` into ``M[i, j]`` (and ``M[j, i]`` when
    wanted): 1 for two equal layers when the measure is 1 by definition there, else its
    kernel's values, read in the pair's own order."""
    if p.alike and r.one_with_itself(options):
        ij = ji = 1.0
    else:
        directions = (wanted[1], wanted[0]) if p.flipped else wanted
        ab, ba = r.kernel(p.a, p.b, p, options, directions)
        ij, ji = (ba, ab) if p.flipped else (ab, ba)
    M[i, j] = ij
    if wanted[1]:
        M[j, i] = ji


def _layer_list(layers, name: str) -> tuple[list, list]:
    """``layers`` as a list of layers and their keys: a list or tuple (Hugging Face's
    ``hidden_states`` among them: each (1, n, d) layer is read as (n, d)), a dict (its keys
    name the layers: ``{("minilm", 3): X}``), a model output with ``hidden_states``, or a
    3-D array of stacked layers (layers x stimuli x neurons). The keys are the dict's, else
    the positions. An error names the confusion when ``layers`` is one layer's rows (a 2-D
    array, or a list of 1-D rows of numbers) instead."""
    # a Hugging Face model output is a mapping too (of last_hidden_state, pooler_output,
    # hidden_states, ...): its layers are its hidden_states
    if _is_model_output(layers) or (hasattr(layers, "hidden_states")
                                    and not isinstance(layers, Mapping)):
        layers = getattr(layers, "hidden_states", None)
        if layers is None:
            raise ValueError(f"{name} is a model output without hidden states; run the model "
                             "with output_hidden_states=True")
    if isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__"):
        raise TypeError(f"{name} must be a list of layers (arrays of stimuli x neurons), got "
                        f"{type(layers).__name__}")
    if isinstance(layers, Mapping):
        keys, found = list(layers.keys()), list(layers.values())
    else:
        found = list(layers)
        keys = list(range(len(found)))
    if not found:
        raise ValueError(f"{name} must hold at least one layer")
    if len(found) > 1 and all(_is_row(x) for x in found):
        raise ValueError(
            f"{name} looks like the rows of one layer ({len(found)} rows of numbers), not a "
            f"list of layers; pass [X] for one layer, or a list of 2-D arrays (stimuli x "
            f"neurons), one per layer")
    return found, keys


#: the keyword arguments of :func:`pairwise_suite` besides the measures' options (named when
#: an option is misspelt)
ENGINE_ARGUMENTS = ("measures", "progress", "device", "backend", "as_frame", "undefined")


def _is_model_output(x: Any) -> bool:
    """Whether ``x`` is a Hugging Face ``ModelOutput`` (found by its class's module, so that
    transformers need not be imported)."""
    return any(c.__name__ == "ModelOutput" and c.__module__.startswith("transformers")
               for c in type(x).__mro__)


def _labelled(matrix: np.ndarray, keys_a: list, keys_b: list) -> pd.DataFrame:
    """A matrix as a data frame, its rows and columns named by the layers' keys (tuples of
    keys, such as ``(model, layer)``, become the levels of a MultiIndex)."""
    return pd.DataFrame(matrix, index=pd.Index(keys_a), columns=pd.Index(keys_b))


def _is_row(x) -> bool:
    """Whether ``x`` is a 1-D run of numbers (an array, list or tuple of them)."""
    if hasattr(x, "ndim"):
        return x.ndim == 1
    return isinstance(x, (list, tuple)) and bool(x) and all(
        isinstance(v, (int, float, np.number)) for v in x)


# ----------------------------------------------------------------------- layer kinds

def _activations(layers: list, names: list[str], options: dict, bk) -> list[LayerStats]:
    """Each layer's :class:`~.core.LayerStats` (:func:`~.core.prepare_given`)."""
    return [prepare_given(x, name, options.get("dtype"), bk) for x, name in zip(layers, names)]


class _Gram:
    """A layer's RBF Gram matrix, double-centred unless the debiased estimator reads it."""

    def __init__(self, x, name: str, threshold: float, debiased: bool):
        try:
            K = rbf_gram(x, threshold)
        except ValueError as error:  # name the layer: the message says what is wrong
            raise ValueError(f"{name}: {error}") from error
        self.K, self.n = (K if debiased else center_gram(K)), K.shape[0]
        self._source = np.asarray(x)

    def summary(self) -> bytes:
        return digest(self._source)

    digest = summary


def _rbf_grams(layers: list, names: list[str], options: dict, bk) -> list[_Gram]:
    threshold = options.get("threshold", 1.0)
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    return [_Gram(x, name, threshold, options.get("debiased", False))
            for x, name in zip(layers, names)]


def _stimuli(layers: list, names: list[str], options: dict, bk) -> list:
    return [prepare_stimuli(x, name, options.get("kernel", "cosine"),
                            options.get("compare", "pearson")) for x, name in zip(layers, names)]


def _attention(layers: list, names: list[str], options: dict, bk) -> list[AttentionLayer]:
    return [x if isinstance(x, AttentionLayer) else AttentionLayer(check_maps(x, name))
            for x, name in zip(layers, names)]


#: how a layer is prepared, by :attr:`~.registry.Measure.layer` kind:
#: ``prepare(layers, names, options, backend) -> prepared layers``; each prepared layer
#: has ``summary()`` and ``digest()`` (:class:`Pair` orders a pair by them)
LAYER_KINDS: dict[str, Callable] = {
    "activations": _activations, "stimuli": _stimuli, "rbf_gram": _rbf_grams,
    "attention": _attention,
}


# ----------------------------------------------------------------------- layer quantities

def _principal(PA, PB, same, options) -> None:
    principal(PA + PB, options.get("variance", 0.99), options.get("cut", "reach"),
              bool(options.get("standardize")))


#: per-layer quantities a measure may declare (:attr:`~.registry.Measure.layer_needs`),
#: each computed for every layer at once: ``compute(PA, PB, same, options)``
LAYER_QUANTITIES: dict[str, Callable] = {
    "G": lambda PA, PB, same, options: grams(PA + PB),
    "principal": _principal,
    "eig": lambda PA, PB, same, options: eigs(PA + PB),
    # a neuron of A is projected onto the span of B (and of A, when A is compared with itself)
    "span": lambda PA, PB, same, options: spans(PA if same else PB),
}

#: per-pair quantities a measure may declare (:attr:`~.registry.Measure.pair_needs`),
#: each computed for a row of pairs at once: ``compute(pairs, options) -> values``
PAIR_QUANTITIES: dict[str, Callable] = {"canonical": canonical_of_pairs}
