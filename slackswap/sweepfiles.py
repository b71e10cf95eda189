"""Sweep files: one TOML per ablation in ``data/sweeps/`` (docs/experiments.md section 4).

``experiments`` re-exports ``load_sweep``, ``run_sweep_file``, ``sweeps_dir`` and ``SWEEP_KEYS``.
"""

from __future__ import annotations

from pathlib import Path

from ._paths import user_path
from .errors import ConfigError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["SWEEP_KEYS", "load_sweep", "run_sweep_file", "sweeps_dir"]

SWEEP_KEYS = {"name", "description", "models", "hardware", "budgets", "planners", "planner_params",
              "variants", "links", "overrides", "workers", "by", "bound"}


def sweeps_dir() -> Path:
    """The shipped sweep files (``data/sweeps/*.toml``)."""
    from ._paths import data_dir

    return data_dir() / "sweeps"


def budget_range(start, stop, step, max_runs: int | None = None, file: str = "sweep file") -> list[float]:
    """``start, start + step, ... stop`` (stop included, rounded to 6 digits), counted before it is
    expanded: more than ``max_runs`` budgets raise ``ConfigError`` with the count."""
    import math

    from .experiments import check_runs

    vals = {"start": start, "stop": stop, "step": step}
    for k, v in vals.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"{file}: budgets.{k}: must be a finite number, got {v!r}")
    if step <= 0:
        raise ConfigError(f"{file}: budgets.step: must be > 0, got {step!r}")
    if stop < start:
        raise ConfigError(f"{file}: budgets.stop: must be >= budgets.start ({start!r}), got {stop!r}")
    n = int(round((stop - start) / step)) + 1
    check_runs(n, max_runs, f"{file}: budgets")
    return [round(start + i * step, 6) for i in range(n)]


def load_sweep(path, max_runs: int | None = None) -> dict:
    """Read a sweep file (``data/sweeps/*.toml``) into ``sweep()`` keyword arguments plus ``name``,
    ``description`` and ``by`` (the ablation column). Unknown keys raise ``ConfigError``.
    ``budgets`` is a list or a table ``{start, stop, step}`` (stop included; more than
    ``max_runs`` budgets are refused before the list is made)."""
    p = user_path(path)
    if not p.exists():
        raise ConfigError(f"sweep file: {p} does not exist")
    try:
        doc = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"sweep file {p.name}: not valid TOML ({e})") from None
    extra = sorted(set(doc) - SWEEP_KEYS)
    if extra:
        raise ConfigError(f"sweep file {p.name}: unknown key {extra[0]!r}; allowed: {', '.join(sorted(SWEEP_KEYS))}")
    for k in ("models", "budgets", "planners"):
        if k not in doc and not (k == "planners" and "variants" in doc):
            raise ConfigError(f"sweep file {p.name}: missing key {k!r}")
    budgets = doc["budgets"]
    if isinstance(budgets, dict):
        bad = sorted(set(budgets) - {"start", "stop", "step"})
        if bad or set(budgets) != {"start", "stop", "step"}:
            raise ConfigError(f"sweep file {p.name}: budgets table needs exactly start, stop, step; got {sorted(budgets)}")
        budgets = budget_range(budgets["start"], budgets["stop"], budgets["step"], max_runs, p.name)
    params = doc.get("planner_params")
    if "variants" in doc:
        if params is not None:
            raise ConfigError(f"sweep file {p.name}: give planner_params or variants, not both")
        for v in doc["variants"]:
            bad = sorted(set(v) - {"label", "planner", "params"})
            if bad:
                raise ConfigError(f"sweep file {p.name}: unknown key {bad[0]!r} in a variant; allowed: label, planner, params")
        params = [(v.get("label"), v.get("planner"), v.get("params", {})) for v in doc["variants"]]
    out = {"name": doc.get("name", p.stem), "description": doc.get("description", ""),
           "models": doc["models"], "hardware": doc.get("hardware", ["a100-80gb"]), "budgets": budgets,
           "planners": doc.get("planners", []), "planner_params": params, "link": doc.get("links"),
           "overrides": doc.get("overrides"), "workers": int(doc.get("workers", 2)),
           "bound": doc.get("bound", True), "by": doc.get("by", "budget")}
    from .experiments import variants

    variants(out["planners"], out["planner_params"])  # validate now, not in the middle of a sweep
    return out


def run_sweep_file(path, out=None, **kw):
    """Run a sweep file; write the rows as CSV to ``out`` when given. ``kw`` overrides
    ``sweep()`` arguments (e.g. ``workers``, ``executor``, ``cache``, ``progress``)."""
    from .experiments import MAX_RUNS

    cfg = load_sweep(path, max_runs=kw.get("max_runs", MAX_RUNS))
    if out is not None:   # before any run: a sweep never computes rows it cannot write
        from ._cliutil import check_output

        check_output(out, "out")
    args = {k: v for k, v in cfg.items() if k not in ("name", "description", "by")}
    args.update(kw)
    from .experiments import sweep

    df = sweep(**args)
    df.attrs["by"] = cfg["by"]
    if out is not None:
        out = user_path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(out, index=False)
    return df
