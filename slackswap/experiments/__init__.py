"""Experiments: runs of planners on many settings, as one tidy DataFrame (docs/experiments.md).

* ``runs``: ``sweep`` / ``grid`` / ``run_problems`` (one row per run; the API re-exported here);
* ``sweepfiles``: the sweep files of ``data/sweeps/`` (``load_sweep``, ``run_sweep_file``);
* ``runcache``: the on-disk cache of finished runs;
* ``synthetic``: small synthetic graphs and problem suites for tests, examples and gap studies;
* ``gaps``: heuristics against exact optima on synthetic instances.
"""

from .runs import (
    INT_COLUMNS,
    MAX_RUNS,
    SETTING_COLUMNS,
    WALL_COLUMNS,
    RunRow,
    RunSpec,
    check_runs,
    count_runs,
    error_row,
    finish,
    grid,
    run_one,
    run_problems,
    sweep,
    variants,
)
from .sweepfiles import SWEEP_KEYS, load_sweep, run_sweep_file, sweeps_dir

__all__ = [
    "INT_COLUMNS", "MAX_RUNS", "SETTING_COLUMNS", "SWEEP_KEYS", "WALL_COLUMNS", "RunRow", "RunSpec",
    "check_runs", "count_runs", "error_row", "finish", "grid", "load_sweep", "run_one", "run_problems",
    "run_sweep_file", "sweep", "sweeps_dir", "variants",
]
