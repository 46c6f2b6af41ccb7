"""How long a full run would take, projected from the build of its shape.

A profile named ``<name>-shape`` (``paper-shape``) runs every notebook of profile ``<name>``
with the same model configurations on a handful of inputs and a few training steps. Its
build's profile says how long each step took; this module scales each step by how much its
work grows from the shape to the full profile and adds them up.

The projection is first order, for this machine's CPU:

* each profiled step's *own* time (its wall time less that of the steps inside it) is
  multiplied by the ratio (full / shape) of the sizes its work grows with
  (:data:`GROWS_WITH`): extraction with inputs and models, fine-tuning with runs and
  optimizer steps, measures with rows and model pairs, resampling with rows and resamples;
* time outside any step (loading, plotting) is kept as it is;
* work that is quadratic in rows (kernel measures, RSA) and settings that add runs (more
  freezing depths or cut points) make it an underestimate; a GPU makes training and
  extraction far faster than the projection says.

It says whether a full run takes hours or weeks on this machine, not to the minute.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: the sizes each kind of step's work grows with (see :func:`sizes`)
GROWS_WITH = {
    "extract": ("rows", "models"),
    "finetune": ("runs", "steps"),
    "heads": ("runs", "examples"),
    "pretrain": (),
    "measure": ("rows", "pairs"),
    "measure suite": ("rows", "pairs"),
    "resampling": ("rows", "pairs", "resamples"),
    "alignment": ("rows",),
    "probe": ("rows",),
}


def _count(value: Any) -> float:
    """A list or mapping counts its entries; a number is itself."""
    return float(len(value)) if isinstance(value, (list, tuple, dict)) else float(value)


def optimizer_steps(grid) -> float:
    """Optimizer steps of one fine-tuning run of a
    :class:`~analysis_lib.training.grid.FinetuneGrid`: ``n_train`` examples for ``epochs``
    epochs in batches of the ``preset`` recipe, capped at its ``max_steps``."""
    from ..training.finetune import PRESETS

    preset = PRESETS[grid.preset]
    steps = math.ceil(math.ceil(grid.n_train / preset.batch_size) * grid.epochs)
    return float(min(steps, preset.max_steps) if preset.max_steps else steps)


def sizes(declared: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, float]:
    """The sizes of :data:`GROWS_WITH` for one notebook under one profile's parameters (the
    notebook's defaults where the profile sets none), read through the rules its parameters
    declare (``declared``: name -> :class:`~analysis_lib.book.params.Parameter`): a
    parameter with the rule ``rows`` counts the inputs its extractions, measures and maps
    work on, one with ``pairs`` the models of which every pair is compared, and those with
    ``resamples`` (added up) the resamples of a statistic. A notebook that fine-tunes (a
    ``finetune`` grid) counts its runs; without a ``pairs`` parameter its runs are its
    models."""
    from ..training.grid import FinetuneGrid

    p = {**{name: param.default for name, param in declared.items()}, **parameters}

    def total(rule: str) -> float | None:
        names = [name for name, param in declared.items() if param.rules.get(rule)]
        return float(sum(_count(p[name]) for name in names)) if names else None

    grid = FinetuneGrid.from_profile(p) if "finetune" in p else None
    runs = (float(len(grid.models) * len(grid.tasks) * len(grid.seeds)) if grid else 1.0)
    compared = total("pairs")
    return {
        "rows": total("rows") or 1.0,
        "models": compared or runs,
        "pairs": compared**2 if compared else runs,
        "runs": runs,
        "steps": optimizer_steps(grid) if grid else 1.0,
        "examples": float(grid.n_train + 2 * grid.n_heldout) if grid else 1.0,
        "resamples": total("resamples") or 1.0,
    }


def own_times(steps):
    """Each step's own wall time (``own_s``): its wall time less that of the steps recorded
    inside it. Records are in the order the steps ended, so a step's children are the
    deeper records just before it."""
    own, inner = [], {}  # inner[d]: wall time of finished steps at depth d not yet claimed
    for record in steps.itertuples():
        children = inner.pop(record.depth + 1, 0.0)
        own.append(max(record.wall_s - children, 0.0))
        inner[record.depth] = inner.get(record.depth, 0.0) + record.wall_s
    return steps.assign(own_s=own)


def project(table, shape: Mapping[str, Mapping[str, Any]],
            full: Mapping[str, Mapping[str, Any]],
            declared: Mapping[str, Mapping[str, Any]]):
    """Per notebook of a shape build's profile table (:func:`builder.write_profile`): its
    measured wall time and its projected wall time under the full profile (``shape`` and
    ``full``: each notebook's parameters; ``declared``: each notebook's declared parameters,
    :func:`analysis_lib.book.params.declared`), in seconds, with the factor of each kind."""
    import pandas as pd

    rows = []
    for book in table[table.kind == "notebook"].itertuples():
        steps = table[(table.notebook == book.notebook) & (table.kind != "notebook")]
        spec = declared[book.notebook]
        small, large = sizes(spec, shape[book.notebook]), sizes(spec, full[book.notebook])
        factors = {kind: math.prod(large[s] / small[s] for s in grows)
                   for kind, grows in GROWS_WITH.items()}
        projected = book.wall_s - steps[steps.depth == 1].wall_s.sum()  # outside any step
        if len(steps):
            mine = own_times(steps.sort_index())
            projected += sum(r.own_s * factors.get(r.kind, 1.0) for r in mine.itertuples())
        rows.append({"notebook": book.notebook, "measured_s": float(book.wall_s),
                     "projected_s": float(max(projected, book.wall_s)),
                     **{f"x {kind}": round(f, 1) for kind, f in factors.items()}})
    return pd.DataFrame(rows)


def summary(projected, full_name: str) -> list[str]:
    """The projection as printed lines."""
    lines = [f"projected time of the '{full_name}' profile on this machine's CPU (first "
             "order; see analysis_lib.book.projection):"]
    for row in projected.itertuples():
        lines.append(f"  {row.notebook:<18} {_duration(row.projected_s):>10}")
    lines.append(f"  {'all':<18} {_duration(projected.projected_s.sum()):>10}")
    return lines


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
