"""Maps between two representations of the same stimuli, fitted then applied (Ren et al. 2023).

``fit(X, Y, method=..., seed=...)`` returns an :class:`Alignment` with ``transform(X)`` (X in
the space where it is compared with Y) and ``distance(X, Y)`` (how far the mapped X lies from
Y, on any rows: pass rows the fit never saw). :func:`held_out` splits rows, fits on one part
and measures both parts, as Ren et al.'s Table 4 does; :func:`fit_transform` returns only
the mapped rows of a fit (what a worker process sends back).

Methods (``method=``):

``identity``
    no map: X is compared with Y as it is (both the same width), the distance two models
    start from before any alignment;
``linreg``
    least squares ``Y ~ X W + b`` (``ridge`` adds ``ridge * mean eigenvalue`` to the
    covariance diagonal);
``ridge``
    ``linreg`` with the ridge from ``ridges`` (default ``core.RIDGES``) that predicts
    left-out training rows best (leave-one-out), so it fits on fewer rows than columns;
``procrustes``
    the best orthogonal map after centring (the narrower side zero-padded), no scaling;
    with ``scaled=True`` also the best single scale factor after it, so that the distance
    no longer depends on either side's overall size and is at most 1 on the fitted rows;
``cca``, ``svcca``, ``pwcca``
    both sides are mapped into their canonical space (whitened canonical variates; SVCCA
    first keeps each side's principal directions covering ``variance`` of its variance;
    PWCCA weights the canonical directions by how much of X they account for), and the
    distance is measured there, as Ren et al. measure these methods;
``inn``
    an invertible network of affine coupling layers (RealNVP, Dinh et al. 2017) from X to Y
    (:mod:`.flows`); both sides must have the same width;
``mlp``
    a plain non-invertible network (Ren et al.'s sanity check).

**Distance.** Ren et al. report the L2 distance between ``g(X)`` and ``Y``. Layers differ in
scale (and the canonical spaces are whitened), so the distance here is *relative*: the mean
squared distance between mapped rows and target rows divided by the mean squared distance of
the target rows from their mean, ``sum ||g(x_i) - y_i||^2 / sum ||y_i - mean(y)||^2`` (0: a
perfect map; 1: no better than predicting the mean). :func:`relative_distance` computes it.
"""

from __future__ import annotations

from .core import (
    METHODS,
    Alignment,
    fit,
    fit_rows,
    fit_transform,
    held_out,
    relative_distance,
    rows_needed,
)

__all__ = ["METHODS", "Alignment", "fit", "fit_rows", "fit_transform", "held_out",
           "relative_distance", "rows_needed"]
