"""A measure is one unit: its record declares it, the engine plans from the records, and the
single-pair functions, the matrices and a suite give the same number to the last bit."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from analysis_lib import similarity as sim
from analysis_lib.similarity import kernels, reference
from analysis_lib.similarity.registry import INVARIANCES, MEASURE_TABLE, REGISTRY, invariant_to

ROOT = Path(__file__).resolve().parents[1]
pairwise = importlib.import_module("analysis_lib.similarity.pairwise")
ROW_MEASURES = [m.name for m in MEASURE_TABLE if m.rows]
ATTENTION = [m.name for m in MEASURE_TABLE if not m.rows]


def single(name: str, X, Y, backend: str = "numpy", **options) -> float:
    """The public single-pair function of a registered measure."""
    if name in ATTENTION:
        return sim.attention_similarity(X, Y, name.split("_", 1)[1], **options)
    if name == "cca":
        return sim.cca(X, Y, warn=False, backend=backend, **options).mean
    fn = getattr(sim, name)
    if name in ("rsa", "rbf_cka"):
        return fn(X, Y, **options)
    return fn(X, Y, backend=backend, **options)


def layers(dtype, count: int = 4, n: int = 240, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, 12))
    return [(base @ rng.standard_normal((12, 10 + 3 * k)) + 0.5 * rng.standard_normal(
        (n, 10 + 3 * k)) + 4.0).astype(dtype) for k in range(count)]


def attention_layers(count: int = 3, seed: int = 0) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        maps = []
        for t in (5, 7, 4):
            a = rng.random((3, t, t)) ** 3
            maps.append(a / a.sum(-1, keepdims=True))
        out.append(maps)
    return out


def test_the_engine_names_no_measure():
    """The all-pairs engine plans from the records: no measure's name or alias is a string
    in its source."""
    names = set(REGISTRY) | {a for m in MEASURE_TABLE for a in m.aliases}
    tree = ast.parse(inspect.getsource(pairwise))
    literals = {node.value for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not names & literals


def test_every_record_is_complete():
    for m in MEASURE_TABLE:
        assert m.reference.__module__ == reference.__name__, m.name
        assert m.layer in pairwise.LAYER_KINDS, m.name
        assert set(m.layer_needs(dict(m.options))) <= set(pairwise.LAYER_QUANTITIES), m.name
        assert set(m.pair_needs) <= set(pairwise.PAIR_QUANTITIES), m.name
        assert set(m.invariances) <= set(INVARIANCES), m.name
        assert m.symmetric == (m.name in sim.SYMMETRIC)
    assert set(sim.registry.STREAM_MEASURES) == {"linear_cka", "neuronsim"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("name", ROW_MEASURES)
def test_single_pair_and_all_pairs_are_bit_identical(name, backend, dtype):
    L = layers(dtype)
    M = sim.pairwise(L, measure=name, backend=backend)
    other = sim.pairwise(L[:2], L[1:], measure=name, backend=backend)
    for i in range(len(L)):
        for j in range(len(L)):
            assert M[i, j] == single(name, L[i], L[j], backend), (i, j)
    for i in range(2):
        for j in range(3):
            assert other[i, j] == M[i, j + 1], (i, j)


@pytest.mark.parametrize("name", ATTENTION)
def test_attention_single_and_all_pairs_are_bit_identical(name):
    L = attention_layers()
    M = sim.pairwise(L, measure=name)
    for i in range(len(L)):
        for j in range(len(L)):
            assert M[i, j] == single(name, L[i], L[j]), (i, j)


def test_no_measure_depends_on_the_others_of_a_suite():
    L = layers(np.float32)
    alone = {x: sim.pairwise(L, measure=x, backend="numpy")
             for x in ("svcca", "pwcca", "mixedsim", "linear_cka", "cca")}
    for together in (["svcca", "pwcca"], ["pwcca", "svcca", "cca", "mixedsim", "linear_cka"],
                     ["cca", "svcca"]):
        found = sim.pairwise_suite(L, measures=together, backend="numpy")
        for x in together:
            np.testing.assert_array_equal(found[x], alone[x], err_msg=f"{x} in {together}")


def test_a_layer_and_its_copy_are_one_pair_whichever_way_asked():
    L = layers(np.float64, count=2)
    copy = L[0].copy()
    for name in ROW_MEASURES:
        assert single(name, L[0], copy) == single(name, copy, L[0]), name
        assert single(name, L[0], L[1]) == sim.pairwise([L[1]], [L[0]], measure=name,
                                                        backend="numpy")[0, 0] or not \
            REGISTRY[name].symmetric, name
    assert sim.linear_cka(L[0], copy) == 1.0


def low_rank_plus_noise(seed: int = 0, n: int = 2000, d: int = 256, factors: int = 8,
                        noise: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((n, factors))
    return tuple(F @ rng.standard_normal((factors, d)) + noise * rng.standard_normal((n, d))
                 for _ in range(2))


def geometric_spectrum(seed: int = 1, n: int = 1500, d: int = 96, condition: float = 5e3
                       ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)

    def one():
        Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
        return rng.standard_normal((n, d)) * np.geomspace(1, 1 / condition, d) @ Q

    X = one()
    return X, 0.3 * X @ rng.standard_normal((d, d)) + one()


@pytest.mark.parametrize("make", [low_rank_plus_noise, geometric_spectrum])
def test_float32_and_float64_copies_give_the_same_number(make):
    """A rank decision follows the data's spectrum (read in float64), not the input's
    dtype: a float32 copy of well-conditioned data (condition number below 1e4) gives every
    measure's float64 value to 1e-6, full-space CCA included."""
    X, Y = make()
    assert np.linalg.cond(X - X.mean(0)) < 1e4 and np.linalg.cond(Y - Y.mean(0)) < 1e4
    X32, Y32 = X.astype(np.float32), Y.astype(np.float32)
    X64, Y64 = X32.astype(np.float64), Y32.astype(np.float64)
    for name in ROW_MEASURES:
        if name in ("rsa", "rbf_cka") and len(X) > 1500:
            continue  # n x n work; covered by the smaller case
        a, b = single(name, X32, Y32), single(name, X64, Y64)
        assert a == pytest.approx(b, abs=1e-6), name
        assert sim.svcca(X32, Y32, None) == pytest.approx(sim.svcca(X64, Y64, None), abs=1e-6)


def _transform(kind: str, Y: np.ndarray, rng) -> np.ndarray:
    d = Y.shape[1]
    if kind == "permutation":
        return Y[:, rng.permutation(d)]
    if kind == "translation":
        return Y + rng.normal(0, 5, d)
    if kind == "isotropic_scaling":
        return 3.7 * Y
    if kind == "orthogonal":
        return Y @ np.linalg.qr(rng.standard_normal((d, d)))[0]
    if kind == "invertible_linear":
        return Y @ (np.eye(d) + 0.8 * rng.standard_normal((d, d)))
    if kind == "neuron_scaling":
        return Y * rng.uniform(0.3, 3.0, d)
    raise AssertionError(kind)


@pytest.mark.parametrize("name", ROW_MEASURES)
def test_declared_invariances_hold_and_undeclared_ones_do_not(name):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 8))
    Y = np.hstack([X[:, :4], rng.standard_normal((300, 4))]) @ rng.standard_normal((8, 6)) \
        + 0.3 * rng.standard_normal((300, 6)) + 1.0
    base = single(name, X, Y)
    for kind in INVARIANCES:
        moved = single(name, X, _transform(kind, Y, rng))
        if invariant_to(name, kind):
            assert moved == pytest.approx(base, abs=1e-6), (name, kind)
        else:
            assert abs(moved - base) > 1e-4, (name, kind)


def test_the_book_table_of_invariances_is_the_registry():
    rows = {"neuronsim": ["neuronsim"], "mixedsim": ["mixedsim"],
            "SVCCA / PWCCA (99%)": ["svcca", "pwcca"], "CCA (all directions)": ["cca"],
            "linear CKA": ["linear_cka"], "RSA, cosine kernel": ["rsa"],
            "Procrustes": ["procrustes"]}
    columns = {"permutation of neurons": "permutation", "rotation": "orthogonal",
               "isotropic scaling": "isotropic_scaling", "per-neuron scaling": "neuron_scaling",
               "any invertible linear map": "invertible_linear", "translation": "translation"}
    text = (ROOT / "book" / "measures.md").read_text()
    lines = [x for x in text.splitlines() if x.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    seen = set()
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] not in rows:
            continue
        seen.add(cells[0])
        for column, cell in zip(header[1:], cells[1:]):
            for name in rows[cells[0]]:
                assert cell.startswith("yes") == invariant_to(name, columns[column]), (
                    name, column)
    assert seen == set(rows)


def test_hsic_has_one_estimator_for_grams_and_for_moments():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((40, 5)), rng.standard_normal((40, 3))
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    K, L = Xc @ Xc.T, Yc @ Yc.T
    want = reference.hsic_unbiased(K, L)
    grams = kernels.unbiased_hsic(*kernels.gram_hsic_sums(K, L), 40)
    rx, ry = np.einsum("ij,ij->i", Xc, Xc), np.einsum("ij,ij->i", Yc, Yc)
    moments = kernels.unbiased_hsic(*kernels.linear_hsic_sums(
        float(np.sum((Xc.T @ Yc) ** 2)), rx @ ry, rx.sum(), ry.sum()), 40)
    assert grams == pytest.approx(want, rel=1e-10)
    assert moments == pytest.approx(want, rel=1e-10)
    # and one definition: no other module writes the estimator's correction term again
    pattern = re.compile(r"\(n - 1(\.0)?\) \* \(n - 2(\.0)?\)")
    homes = [p.name for p in (ROOT / "analysis_lib" / "similarity").glob("*.py")
             if pattern.search(p.read_text())]
    assert sorted(homes) == ["kernels.py", "reference.py"]


def test_one_rank_tolerance():
    from analysis_lib.similarity import core

    assert core.RANK_RTOL is reference.RANK_RTOL and isinstance(reference.RANK_RTOL, float)


@pytest.mark.parametrize("kind", ["repeated row", "one varying neuron", "rounding noise",
                                  "large offset", "float32 repeated row"])
def test_one_constant_layer_rule(kind):
    """A layer is constant by one rule wherever it is asked: ``constant_layer``, the
    matrices' NaN for an undefined layer, the measures' refusal, and the plain definitions'
    centring."""
    from analysis_lib.errors import UndefinedMeasure
    from analysis_lib.similarity import core

    rng = np.random.default_rng(3)
    row = rng.standard_normal(6)
    X = np.tile(row, (40, 1))
    if kind == "one varying neuron":
        X[:, 2] += 1e-3 * rng.standard_normal(40)
    elif kind == "rounding noise":
        X[::2] = np.nextafter(X[::2], np.inf)  # a float64 ulp: rounding, not signal
    elif kind == "large offset":
        X = X + 1e6
    elif kind == "float32 repeated row":
        X = X.astype(np.float32)
    constant = kind != "one varying neuron"
    assert core.constant_layer(X) is constant
    other = rng.standard_normal((40, 3))
    M = sim.pairwise([X, other], measure="linear_cka", undefined="nan")
    assert bool(np.isnan(M[0]).all() and np.isnan(M[:, 0]).all()) is constant
    assert M[1, 1] == pytest.approx(1.0)
    assert (not reference.centred(X).any()) is constant
    if constant:
        with pytest.raises(UndefinedMeasure, match="no variance"):
            sim.linear_cka(X, rng.standard_normal((40, 3)))
    else:
        assert np.isfinite(sim.linear_cka(X, rng.standard_normal((40, 3))))
