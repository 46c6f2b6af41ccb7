"""Sweeps: a study's grid declared once (:mod:`.spec`) and run in this process or on any
Dask cluster (:mod:`.run`), with every unit a cached step of the library."""

from .run import SweepResult, read_table, run_sweep, run_unit
from .spec import SweepSpec, Unit, Variant, check_spec, load_spec, plan, variants

__all__ = ["SweepResult", "SweepSpec", "Unit", "Variant", "check_spec", "load_spec", "plan",
           "read_table", "run_sweep", "run_unit", "variants"]
