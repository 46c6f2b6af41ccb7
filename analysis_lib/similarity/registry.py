"""One record per measure: what it is called, what it computes from, the options it takes.

Adding a measure is one :class:`Measure` record here (and its kernel in
:data:`.kernels.KERNELS`, its definition in :mod:`.reference`): :func:`pairwise`, the
bootstrap, the permutation test and the parameter checks read this table. An option passed to
a measure that does not take it is refused by name instead of being ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Measure:
    """A similarity measure.

    Attributes
    ----------
    name : str
        The canonical name.
    family : {'cross_product', 'rsa', 'gram', 'attention'}
        What the all-pairs computation builds from: the centred cross-products of two layers
        (shared by every measure of the family), row-normalised stimulus matrices (RSA), Gram
        matrices (RBF CKA), or per-sentence attention maps.
    symmetric : bool
        ``measure(X, Y) == measure(Y, X)``. Asymmetric measures average over the first
        argument's neurons (or heads).
    options : tuple of str
        Keyword options it accepts (besides ``dtype`` where the family computes products).
    held_out : bool
        Whether it needs rows not used to fit it (alignments do; none of these measures).
    aliases : tuple of str
        Other names for it (Wu et al.'s ``ckasim``, ``svsim``, ``pwsim``).
    """

    name: str
    family: str
    symmetric: bool
    options: tuple[str, ...] = ()
    held_out: bool = False
    aliases: tuple[str, ...] = ()


_CP = "cross_product"
MEASURE_TABLE: tuple[Measure, ...] = (
    Measure("neuronsim", _CP, False, ("top_k", "dtype")),
    Measure("mixedsim", _CP, False, ("top_k", "dtype")),
    Measure("svcca", _CP, True, ("variance", "standardize", "cut", "top_k", "dtype"),
            aliases=("svsim",)),
    Measure("pwcca", _CP, False, ("variance", "standardize", "cut", "dtype"),
            aliases=("pwsim",)),
    Measure("linear_cka", _CP, True, ("debiased", "dtype"), aliases=("ckasim", "cka")),
    Measure("procrustes", _CP, True, ("dtype",)),
    Measure("cca", _CP, True, ("reg", "dtype")),
    Measure("rsa", "rsa", True, ("kernel", "compare")),
    Measure("rbf_cka", "gram", True, ("threshold", "debiased")),
    Measure("attention_js", "attention", False, ("base",), aliases=("attn_js",)),
    Measure("attention_pearson", "attention", False, (), aliases=("attn_pearson",)),
    Measure("attention_frobenius", "attention", False, (), aliases=("attn_frobenius",)),
)
REGISTRY: dict[str, Measure] = {m.name: m for m in MEASURE_TABLE}
ALIASES: dict[str, str] = {a: m.name for m in MEASURE_TABLE for a in m.aliases}
MEASURES: tuple[str, ...] = tuple(REGISTRY)
CROSS_PRODUCT_MEASURES = tuple(m.name for m in MEASURE_TABLE if m.family == _CP)
SYMMETRIC = {m.name for m in MEASURE_TABLE if m.symmetric}


def canonical(name: str) -> str:
    """The canonical name of a measure (resolving aliases such as 'ckasim')."""
    if not isinstance(name, str):
        raise TypeError(f"measure must be a string, got {type(name).__name__}")
    key = ALIASES.get(name, name)
    if key not in REGISTRY:
        raise ValueError(f"unknown measure {name!r}; valid: {', '.join(MEASURES)} "
                         f"(aliases: {', '.join(ALIASES)})")
    return key


def check_options(names: Sequence[str], options: Mapping[str, Any]) -> None:
    """Refuse any option that none of the chosen measures takes, naming who would take it."""
    taken = {o for n in names for o in REGISTRY[n].options}
    for option in options:
        if option in taken:
            continue
        takers = [m.name for m in MEASURE_TABLE if option in m.options]
        where = (f"it applies to {', '.join(takers)}" if takers else
                 f"no measure takes it; options are "
                 f"{sorted({o for m in MEASURE_TABLE for o in m.options})}")
        raise TypeError(f"option {option!r} is not taken by {', '.join(names)}: {where}")
