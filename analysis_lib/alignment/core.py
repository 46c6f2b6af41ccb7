"""The alignment methods behind :func:`analysis_lib.alignment.fit` (see the package docs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..runtime import checks
from ..runtime import device as devices
from ..runtime.device import DeviceLike
from ..similarity.core import LayerStats, check_pair, real_array, tied_runs

METHODS = ("identity", "linreg", "ridge", "procrustes", "cca", "svcca", "pwcca", "inn", "mlp")
#: the methods that train a network (:mod:`.flows`; they need PyTorch)
NETWORKS = ("inn", "mlp")
#: the ridges ``ridge`` chooses from (times the mean eigenvalue of X's covariance)
RIDGES = tuple(10.0 ** k for k in np.arange(-3.0, 3.5, 0.5))
#: options each method takes
OPTIONS = {"identity": set(), "linreg": {"ridge"}, "ridge": {"ridges"}, "procrustes": {"scaled"},
           "cca": {"ridge"},
           "svcca": {"variance", "ridge"}, "pwcca": {"variance", "ridge"},
           "inn": {"layers", "hidden", "epochs", "batch_size", "learning_rate", "patience",
                   "progress"},
           "mlp": {"hidden", "epochs", "batch_size", "learning_rate", "patience", "progress"}}


#: the check of each option's value, run before any fitting
_OPTION_CHECKS = {
    "ridge": lambda v: checks.number(v, "ridge", 0.0),
    "ridges": lambda v: tuple(checks.number(x, "ridges", 0.0, open_low=True) for x in v),
    "variance": lambda v: checks.number(v, "variance", 0.0, 1.0, open_low=True),
    "layers": lambda v: checks.integer(v, "layers", 1),
    "hidden": lambda v: checks.integer(v, "hidden", 1),
    "epochs": lambda v: checks.integer(v, "epochs", 1),
    "batch_size": lambda v: checks.integer(v, "batch_size", 1),
    "learning_rate": lambda v: checks.number(v, "learning_rate", 0.0, open_low=True),
    "patience": lambda v: checks.integer(v, "patience", 1),
    "progress": lambda v: checks.boolean(v, "progress"),
    "scaled": lambda v: checks.boolean(v, "scaled"),
}


def relative_distance(A: np.ndarray, B: np.ndarray) -> float:
    """``sum ||a_i - b_i||^2 / sum ||b_i - mean(b)||^2`` over the rows (see the package
    docs): 0 for a perfect map, 1 for predicting B's mean."""
    A = real_array(A, "A").astype(np.float64)
    B = real_array(B, "B").astype(np.float64)
    if A.shape != B.shape:
        raise ValueError(f"mapped rows {A.shape} and targets {B.shape} differ in shape")
    spread = np.sum((B - B.mean(axis=0)) ** 2)
    if spread == 0:
        raise ValueError("the target rows are all the same; a relative distance is undefined")
    return float(np.sum((A - B) ** 2) / spread)


@dataclass
class Alignment:
    """A fitted map from X's space to Y's (or, for the CCA family, of both into their
    canonical space). ``info`` holds what the fit chose (dimensions kept, epochs, ...)."""

    method: str
    seed: int
    _x: Any = field(repr=False)
    _y: Any = field(repr=False)
    info: dict[str, Any] = field(default_factory=dict)
    widths: tuple[int, int] = (-1, -1)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """X mapped to where it is compared with Y."""
        return self._x(self._columns(X, 0, "X"))

    def target(self, Y: np.ndarray) -> np.ndarray:
        """Y where it is compared (itself, except for the CCA family's canonical space)."""
        return self._y(self._columns(Y, 1, "Y"))

    def _columns(self, A, side: int, name: str) -> np.ndarray:
        A = real_array(A, name).astype(np.float64)
        width = self.widths[side]
        if A.ndim != 2 or (width >= 0 and A.shape[1] != width):
            raise ValueError(f"{name} has shape {A.shape}; this {self.method} map was fitted "
                             f"on rows of {width} columns")
        return A

    def distance(self, X: np.ndarray, Y: np.ndarray) -> float:
        """:func:`relative_distance` of the mapped X from Y, on these rows."""
        X, Y = check_pair(X, Y, 2)
        return relative_distance(self.transform(X), self.target(Y))


def _identity(Y: np.ndarray) -> np.ndarray:
    return Y


def _center(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = X.mean(axis=0)
    return X - mean, mean


def _whitener(Xc: np.ndarray, ridge: float, variance: float | None = None) -> np.ndarray:
    """Columns that whiten Xc within its principal directions above the rank cut, and of
    those the ones SVCCA keeps for ``variance``: the measures' own whitener
    (:meth:`analysis_lib.similarity.core.LayerStats.whitener`, the rules of
    :func:`analysis_lib.similarity.reference.principal_basis` and, with a ridge, of
    :func:`~analysis_lib.similarity.reference.cca`), for the covariance ``G / n``."""
    stats = LayerStats(Xc)
    k = stats.n_components(variance)
    if k == 0:
        raise ValueError("a representation has no variance; it cannot be aligned")
    return np.sqrt(len(Xc)) * stats.whitener(k, np.float64, ridge=ridge)


def _fit_linreg(X, Y, ridge: float = 0.0, **_):
    Xc, mx = _center(X)
    Yc, my = _center(Y)
    if ridge:
        G = Xc.T @ Xc
        G[np.diag_indices_from(G)] += ridge * np.trace(G) / len(G)
        W = np.linalg.solve(G, Xc.T @ Yc)
    else:  # least squares on the data itself: stabler than the normal equations
        W = np.linalg.lstsq(Xc, Yc, rcond=None)[0]
    return (lambda A: (A - mx) @ W + my), _identity, {"ridge": ridge}


def _fit_ridge(X, Y, ridges=RIDGES, **_):
    """Linear regression with the ridge (as ``linreg``'s ``ridge``) that predicts left-out
    rows best: scikit-learn's efficient leave-one-out over ``ridges``, one ridge for all of
    Y's columns. The map is then ``linreg``'s with that ridge."""
    from sklearn.linear_model import RidgeCV

    Xc = X - X.mean(axis=0)
    per_eigenvalue = np.sum(Xc**2) / X.shape[1]  # trace(Xc^T Xc) / d, as in _fit_linreg
    if per_eigenvalue == 0:
        raise ValueError("X has no variance; a ridge cannot be chosen")
    grid = np.asarray(ridges, dtype=np.float64)
    search = RidgeCV(alphas=grid * per_eigenvalue)  # the intercept refitted per left-out row
    search.fit(X, Y)
    chosen = float(grid[np.argmin(np.abs(grid * per_eigenvalue - search.alpha_))])
    fx, fy, _ = _fit_linreg(X, Y, ridge=chosen)
    return fx, fy, {"ridge": chosen}


def _fit_procrustes(X, Y, scaled: bool = False, **_):
    """The orthogonal ``Q`` that brings centred X closest to centred Y (the narrower side
    zero-padded), and with ``scaled`` the one factor ``s`` that does best after it:
    ``s = sum of the singular values of Xc^T Yc / ||Xc||^2``. Scaled, the training distance
    is ``1 - ||Xc^T Yc||_*^2 / (||Xc||^2 ||Yc||^2)``: at most 1, the same whichever side is
    mapped, and blind to either side's overall size."""
    Xc, mx = _center(X)
    Yc, my = _center(Y)
    d = max(X.shape[1], Y.shape[1])
    pad_x = np.zeros((len(X), d))
    pad_x[:, : X.shape[1]] = Xc
    pad_y = np.zeros((len(Y), d))
    pad_y[:, : Y.shape[1]] = Yc
    U, sv, Vt = np.linalg.svd(pad_x.T @ pad_y)
    Q = (U @ Vt)[: X.shape[1], : Y.shape[1]]
    size = float(np.sum(Xc**2))
    if scaled and size == 0:
        raise ValueError("X has no variance; a scale cannot be fitted")
    scale = float(sv.sum() / size) if scaled else 1.0
    return (lambda A: (A - mx) @ Q * scale + my), _identity, {"scale": scale}


def _fit_cca(X, Y, ridge: float = 0.0, variance: float | None = None, weighted: bool = False,
             **_):
    """The CCA family as the measures define it (:mod:`analysis_lib.similarity.reference`):
    the same rank and variance cuts, and for PWCCA's weights the same rotation of tied
    canonical directions."""
    Xc, mx = _center(X)
    Yc, my = _center(Y)
    Wx, Wy = _whitener(Xc, ridge, variance), _whitener(Yc, ridge, variance)
    U, rho, Vt = np.linalg.svd((Xc @ Wx).T @ (Yc @ Wy) / len(X), full_matrices=False)
    A, B = Wx @ U, Wy @ Vt.T  # canonical directions of X and of Y
    weights = np.ones(len(rho))
    if weighted:  # PWCCA: how much of X each canonical direction accounts for
        M = (Xc @ A).T @ Xc
        for start, end in tied_runs(np.clip(rho, 0.0, 1.0)):
            P = np.linalg.svd(M[start:end], full_matrices=False)[0]
            M[start:end] = P.T @ M[start:end]
            A[:, start:end], B[:, start:end] = A[:, start:end] @ P, B[:, start:end] @ P
        alpha = np.abs(M).sum(axis=1)
        weights = alpha / alpha.sum() * len(alpha)
    scale = np.sqrt(weights)
    info = {"dimensions": len(rho), "correlations": rho.tolist()}
    return (lambda M: ((M - mx) @ A) * scale), (lambda M: ((M - my) @ B) * scale), info


def rows_needed(method: str, x_columns: int, y_columns: int, ridge: float = 0.0) -> int:
    """The fewest rows :func:`fit` takes for ``method`` at these widths. Without a ridge, a
    linear fit (``linreg`` and the CCA family) needs more rows than columns: with fewer it
    matches any data exactly and its distance means nothing. Every method needs 3."""
    checks.choice(method, "alignment method", METHODS)
    if method in ("linreg", "cca", "svcca", "pwcca") and not ridge:
        return max(x_columns, y_columns) + 2
    return 3


def fit_rows(n: int, test: float = 0.2) -> int:
    """How many of ``n`` rows :func:`held_out` fits on (the rest are held out)."""
    return int(round((1 - test) * n))


def _check_device(method: str, device: Any) -> Any:
    """``device`` resolved (a bad one refused before any work), or left as it is where torch
    is not installed and it names the CPU or nothing: the closed-form maps need no torch, the
    network maps refuse to start without it."""
    if method in NETWORKS:
        devices.require_torch(f"the {method} alignment")
    if devices.torch_available() or not (device is None or devices.is_cpu(device)):
        return devices.resolve(device)
    return device


def fit(X: ArrayLike, Y: ArrayLike, method: str = "linreg", *, seed: int = 0,
        device: DeviceLike = None,
        **options: Any) -> Alignment:
    """Fit an alignment of X (n, d1) to Y (n, d2) on these rows (see the package docs).

    ``device`` is where the network maps (``mlp``, ``inn``) train and run (default: CUDA
    when available, else the CPU); the closed-form maps are solved with NumPy on the CPU and
    need no PyTorch (the network maps do: ``pip install "analysis_lib[torch]"``).

    Raises
    ------
    ValueError
        An unknown method, fewer rows than the method needs for the widths (a linear map
        needs more rows than X has columns), non-finite values, or unequal widths for
        ``inn``.
    TypeError
        An option the method does not take.
    ImportError
        A network map (``inn``, ``mlp``) or a device other than the CPU without PyTorch.
    """
    checks.choice(method, "alignment method", METHODS)
    unknown = set(options) - OPTIONS[method]
    if unknown:
        raise TypeError(f"option(s) {sorted(unknown)} are not taken by {method}; it takes "
                        f"{sorted(OPTIONS[method]) or 'none'}")
    seed = checks.integer(seed, "seed", 0)
    options = {k: _OPTION_CHECKS[k](v) for k, v in options.items()}
    device = _check_device(method, device)
    X, Y = check_pair(X, Y, 3)
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    needed = rows_needed(method, X.shape[1], Y.shape[1], options.get("ridge", 0.0))
    if len(X) < needed:
        raise ValueError(f"{method} with {X.shape[1]} and {Y.shape[1]} columns needs at least "
                         f"{needed} rows to fit, got {len(X)}: use more stimuli, fewer "
                         "dimensions, or ridge=... (linreg and the CCA family)")
    if method == "identity":
        if X.shape[1] != Y.shape[1]:
            raise ValueError(f"the identity map needs equal widths, got {X.shape[1]} and "
                             f"{Y.shape[1]}")
        fx, fy, info = _identity, _identity, {}
    elif method == "linreg":
        fx, fy, info = _fit_linreg(X, Y, **options)
    elif method == "ridge":
        fx, fy, info = _fit_ridge(X, Y, **options)
    elif method == "procrustes":
        fx, fy, info = _fit_procrustes(X, Y, **options)
    elif method in ("cca", "svcca", "pwcca"):
        variance = options.pop("variance", 0.99) if method != "cca" else None
        fx, fy, info = _fit_cca(X, Y, variance=variance, weighted=method == "pwcca", **options)
    else:
        from .flows import fit_network

        fx, fy, info = fit_network(X, Y, kind=method, seed=seed, device=device, **options)
    return Alignment(method, seed, fx, fy, info, (X.shape[1], Y.shape[1]))


def fit_transform(X: ArrayLike, Y: ArrayLike, new: ArrayLike, method: str = "linreg", *,
                  seed: int = 0, **options: Any) -> np.ndarray:
    """``new`` (rows of X's space) mapped by the alignment of X to Y that :func:`fit` fits:
    the map's result without the map, which can be sent from a worker process."""
    return fit(X, Y, method, seed=seed, **options).transform(np.asarray(new))


def held_out(X: ArrayLike, Y: ArrayLike, method: str = "linreg", *, test: float = 0.2,
             seed: int = 0, groups: ArrayLike | None = None, both_ways: bool = False,
             **options: Any) -> dict[str, float]:
    """Fit on a random share ``1 - test`` of the rows (whole ``groups``, e.g. sentences, when
    given) and return the distance on the fitted rows and on the held-out rows.

    ``both_ways``: also fit Y to X on the same split and return the mean of the two
    directions' distances, a distance that does not depend on which side is mapped."""
    both_ways = checks.boolean(both_ways, "both_ways")
    test = checks.number(test, "test", 0.0, 1.0, open_low=True, open_high=True)
    X, Y = check_pair(X, Y, 4)
    n = len(X)
    rng = np.random.default_rng(seed)
    if groups is None:
        order = rng.permutation(n)
        cut = fit_rows(n, test)
        train, held = order[:cut], order[cut:]
    else:
        g = np.asarray(groups)
        if g.shape != (n,):
            raise ValueError(f"groups must have one entry per row ({n}), got shape {g.shape}")
        ids = rng.permutation(np.unique(g))
        chosen = set(ids[: fit_rows(len(ids), test)].tolist())
        in_train = np.array([x in chosen for x in g])
        train, held = np.flatnonzero(in_train), np.flatnonzero(~in_train)
    if len(held) < 2 or len(train) < 3:
        raise ValueError(f"test={test} leaves {len(train)} rows to fit and {len(held)} to "
                         "test; use more rows or another split")
    pairs = [(X, Y), (Y, X)] if both_ways else [(X, Y)]
    found = {"train": 0.0, "test": 0.0}
    for A, B in pairs:
        model = fit(A[train], B[train], method, seed=seed, **options)
        found["train"] += model.distance(A[train], B[train]) / len(pairs)
        found["test"] += model.distance(A[held], B[held]) / len(pairs)
    return found
