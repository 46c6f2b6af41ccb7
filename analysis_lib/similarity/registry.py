"""One record per measure: everything the library knows about it, in one place.

A measure is one :class:`Measure` record: its name and options (with their defaults), its
symmetry and invariances, what a layer is prepared as, which per-layer and per-pair
quantities it reads, whether it streams or can be read from moments, its reference
definition (:mod:`.reference`) and its fast pair kernel. The all-pairs engine
(:mod:`.pairwise`) plans from these declarations and never names a measure; the single-pair
functions, the bootstrap, the permutation test, the leave-out matrices, the streamed
matrices and the parameter checks read this table too. Adding a measure is one record here,
its kernel and its reference function. An option passed to a measure that does not take it
is refused by name instead of being ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import kernels as k
from . import reference as ref
from .attention import attention_kernel, check_base
from .rsa import check_rsa_options, rsa_pair

#: the invariances a measure may declare: what may be done to the second layer (Y; its rows
#: are the stimuli, its columns the neurons) without changing the value. For a symmetric
#: measure the same holds of the first.
INVARIANCES = {
    "permutation": "reordering the neurons",
    "translation": "adding a constant vector to every stimulus",
    "isotropic_scaling": "multiplying every activation by one positive number",
    "orthogonal": "rotating or reflecting the neurons (an orthogonal map)",
    "invertible_linear": "any invertible linear map of the neurons",
    "neuron_scaling": "multiplying each neuron by its own positive number",
}


def _nothing(options: Mapping[str, Any]) -> tuple[str, ...]:
    return ()


def _always(options: Mapping[str, Any]) -> bool:
    return True


@dataclass(frozen=True)
class Measure:
    """A similarity measure, declared.

    Attributes
    ----------
    name : str
        The canonical name.
    symmetric : bool
        ``measure(X, Y) == measure(Y, X)``. Asymmetric measures average over the first
        argument's neurons (or heads).
    layer : {'activations', 'stimuli', 'rbf_gram', 'attention'}
        What a layer is prepared as, once per layer (:data:`.pairwise.LAYER_KINDS`): its
        centred activations and their statistics, row-normalised stimuli (RSA), an RBF Gram
        matrix, or per-sentence attention maps.
    kernel : callable
        The pair kernel, ``kernel(a, b, pair, options, directions) -> (value of (a, b),
        value of (b, a))`` (see :mod:`.kernels`).
    reference : callable
        The plain definition in :mod:`.reference`, ``reference(X, Y, **options)``.
    options : mapping
        The keyword options it takes and their defaults.
    invariances : tuple of str
        Keys of :data:`INVARIANCES`: the changes of the second layer that leave the value
        unchanged (with the default options); :func:`invariant_to` asks.
    layer_needs : callable
        ``layer_needs(options)``: the per-layer quantities it reads, computed for every layer
        at once before any pair (:data:`.pairwise.LAYER_QUANTITIES`).
    pair_needs : tuple of str
        The per-pair quantities it reads beyond the cross-products, computed for a row of
        pairs at once and shared by every measure that names them
        (:data:`.pairwise.PAIR_QUANTITIES`).
    one_with_itself : callable
        ``one_with_itself(options)``: whether a layer compared with itself is 1 by
        definition (so no work is done for it).
    streams : bool
        Computed from batches of rows by :func:`~.streaming.stream_pairwise`.
    from_moments : bool
        Read from a pair's centred second moments alone (the leave-out matrices use this).
    rows : bool
        A layer is an (n, d) array of rows (stimuli), which the bootstrap and the
        permutation test resample; False for per-sentence attention maps.
    row_space : bool
        A layer with more neurons than rows may be given to it as its rotation into its
        row space (:func:`~.core.row_space`), with the same value: it is unchanged by an
        orthogonal map of either layer's neurons, or (PWCCA) reads the neurons only through
        :meth:`~.core.LayerStats.loadings`, which maps back. Its memory then grows with
        the rows, not with the square of the neurons.
    neuron_pairs : bool
        Reads the products of every neuron of one layer with every neuron of the other
        (a d1 x d2 matrix) whatever the number of rows: its memory grows with the square of
        the neurons, so a very wide layer is refused before any work
        (:func:`~.pairwise.pairwise_suite` names the measures that read it by rows).
    check : callable or None
        ``check(options)`` raises on an invalid option value before any work.
    aliases : tuple of str
        Other names for it (Wu et al.'s ``ckasim``, ``svsim``, ``pwsim``).
    """

    name: str
    symmetric: bool
    layer: str
    kernel: Callable
    reference: Callable
    options: Mapping[str, Any] = field(default_factory=dict)
    invariances: tuple[str, ...] = ()
    layer_needs: Callable[[Mapping[str, Any]], tuple[str, ...]] = _nothing
    pair_needs: tuple[str, ...] = ()
    one_with_itself: Callable[[Mapping[str, Any]], bool] = _always
    streams: bool = False
    from_moments: bool = False
    rows: bool = True
    row_space: bool = False
    neuron_pairs: bool = False
    check: Callable[[Mapping[str, Any]], None] | None = None
    aliases: tuple[str, ...] = ()


_ROTATION = ("permutation", "translation", "isotropic_scaling", "orthogonal")
_NEURONS = ("permutation", "translation", "isotropic_scaling", "neuron_scaling")
_CANONICAL = {"variance": 0.99, "standardize": False, "cut": "reach"}
_WORK = {"dtype": None}  # the work dtype of the cross-products (see core.work_dtype)
_ATTENTION = ("permutation",)  # of the heads

MEASURE_TABLE: tuple[Measure, ...] = (
    Measure("neuronsim", False, "activations", k.neuronsim_pair, ref.neuronsim,
            {"top_k": None, **_WORK}, _NEURONS, streams=True, from_moments=True,
            neuron_pairs=True),
    # every neuron of X regressed on all of Y: any invertible map of Y keeps its span
    Measure("mixedsim", False, "activations", k.mixedsim_pair, ref.mixedsim,
            {"top_k": None, **_WORK}, _NEURONS + ("orthogonal", "invertible_linear"),
            layer_needs=lambda options: ("G", "span"), neuron_pairs=True),
    Measure("svcca", True, "activations", k.svcca_pair, ref.svcca,
            {**_CANONICAL, "top_k": None, **_WORK}, _ROTATION,
            layer_needs=lambda options: ("G", "principal"), pair_needs=("canonical",),
            row_space=True, check=k.check_canonical_options, aliases=("svsim",)),
    # the weights sum |<h_i, x_k>| over X's own neurons: a rotation of X changes them, one
    # of Y does not
    Measure("pwcca", False, "activations", k.pwcca_pair, ref.pwcca,
            {**_CANONICAL, **_WORK}, _ROTATION,
            layer_needs=lambda options: ("G", "principal"), pair_needs=("canonical",),
            row_space=True, check=k.check_canonical_options, aliases=("pwsim",)),
    Measure("linear_cka", True, "activations", k.linear_cka_pair, ref.linear_cka,
            {"debiased": False, "form": "auto", **_WORK}, _ROTATION,
            layer_needs=lambda options: ("G",) if options.get("form") == "feature" else (),
            streams=True, from_moments=True,
            check=k.check_cka_options,
            aliases=("ckasim", "cka")),
    Measure("procrustes", True, "activations", k.procrustes_pair, ref.procrustes, dict(_WORK),
            _ROTATION, row_space=True),
    Measure("cca", True, "activations", k.cca_pair, ref.mean_cca, {"reg": 0.0, **_WORK},
            _ROTATION + ("invertible_linear", "neuron_scaling"),
            layer_needs=lambda options: ("G", "eig"), row_space=True,
            one_with_itself=lambda options: not options.get("reg", 0.0),
            check=lambda options: k.check_reg(options.get("reg", 0.0))),
    Measure("rsa", True, "stimuli", rsa_pair, ref.rsa,
            {"kernel": "cosine", "compare": "pearson"},
            ("permutation", "isotropic_scaling", "orthogonal"), check=check_rsa_options),
    Measure("rbf_cka", True, "rbf_gram", k.cka_of_prepared_grams, ref.rbf_cka,
            {"threshold": 1.0, "debiased": False}, _ROTATION),
    Measure("attention_js", False, "attention", attention_kernel("js"), ref.attention_js,
            {"base": 2.0}, _ATTENTION, rows=False, check=check_base, aliases=("attn_js",)),
    Measure("attention_pearson", False, "attention", attention_kernel("pearson"),
            ref.attention_pearson, {}, _ATTENTION, rows=False, aliases=("attn_pearson",)),
    Measure("attention_frobenius", False, "attention", attention_kernel("frobenius"),
            ref.attention_frobenius, {}, _ATTENTION, rows=False, aliases=("attn_frobenius",)),
)
REGISTRY: dict[str, Measure] = {m.name: m for m in MEASURE_TABLE}
ALIASES: dict[str, str] = {a: m.name for m in MEASURE_TABLE for a in m.aliases}
MEASURES: tuple[str, ...] = tuple(REGISTRY)
#: the measure the all-pairs functions compute when none is named
DEFAULT = "linear_cka"
SYMMETRIC = {m.name for m in MEASURE_TABLE if m.symmetric}
#: the measures :func:`~.streaming.stream_pairwise` computes from batches of rows
STREAM_MEASURES: tuple[str, ...] = tuple(m.name for m in MEASURE_TABLE if m.streams)
#: the measures whose leave-out matrices are read from per-group moments
FROM_MOMENTS: tuple[str, ...] = tuple(m.name for m in MEASURE_TABLE if m.from_moments)


def canonical(name: str) -> str:
    """The canonical name of a measure, whatever its case and with ``-`` or a space for
    ``_`` (``"CKA"``, ``"Linear-CKA"``, ``"svsim"``): aliases such as 'ckasim' resolved."""
    if not isinstance(name, str):
        raise TypeError(f"measure must be a string, got {type(name).__name__}")
    plain = "_".join(name.strip().lower().replace("-", " ").split())
    key = ALIASES.get(plain, plain)
    if key not in REGISTRY:
        import difflib

        close = difflib.get_close_matches(plain, [*MEASURES, *ALIASES], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown measure {name!r}{hint}; valid: {', '.join(MEASURES)} "
                         f"(aliases: {', '.join(ALIASES)})")
    return key


def invariant_to(name: str, invariance: str) -> bool:
    """Whether measure ``name`` declares itself unchanged by ``invariance`` (a key of
    :data:`INVARIANCES`)."""
    if invariance not in INVARIANCES:
        raise ValueError(f"unknown invariance {invariance!r}; valid: {', '.join(INVARIANCES)}")
    return invariance in REGISTRY[canonical(name)].invariances


def check_options(names: Sequence[str], options: Mapping[str, Any],
                  arguments: Sequence[str] = ()) -> None:
    """Refuse any option that none of the chosen measures takes, naming who would take it
    and the closest name among the measures' options and the caller's own ``arguments``
    (a misspelt ``as_frame`` lands among the options); then each measure's own check of
    its options' values."""
    import difflib

    taken = {o for n in names for o in REGISTRY[n].options}
    every = sorted({o for m in MEASURE_TABLE for o in m.options} | set(arguments))
    for option in options:
        if option in taken:
            continue
        takers = [m.name for m in MEASURE_TABLE if option in m.options]
        close = difflib.get_close_matches(str(option), every, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        where = (f"it applies to {', '.join(takers)}" if takers else
                 f"{hint}no measure takes it; the measures' options are "
                 f"{sorted({o for m in MEASURE_TABLE for o in m.options})}"
                 + (f", and the function's own {sorted(arguments)}" if arguments else ""))
        raise TypeError(f"option {option!r} is not taken by {', '.join(names)}: {where}")
    for n in names:
        record = REGISTRY[n]
        if record.check is not None:
            record.check({o: v for o, v in options.items() if o in record.options})


def options_of(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The options a measure takes, from those given, with its defaults filled in."""
    record = REGISTRY[name]
    return {o: options.get(o, default) for o, default in record.options.items()}
