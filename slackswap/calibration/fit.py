"""The search of ``calibrate``: grid start, bounded least squares, profile scan, hardware file.

Parameters are searched in unit coordinates ``u`` in [0, 1] per parameter (linear between the
bounds, or linear in the logarithm for ``Parameter.log``), so one finite-difference step means
the same share of every range.
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core import hardware as hw_mod
from ..core.errors import ConfigError
from ..core.paths import user_path
from .parameters import PARAMETERS, apply


def _to_value(u: float, lo: float, hi: float, log: bool) -> float:
    u = float(u)
    if u <= 1e-9 or u >= 1.0 - 1e-9:   # at a bound (to the optimizer's precision): the bound itself
        return lo if u < 0.5 else hi
    return math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))) if log else lo + u * (hi - lo)


def _to_unit(v: float, lo: float, hi: float, log: bool) -> float:
    u = (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)) if log else (v - lo) / (hi - lo)
    return min(1.0, max(0.0, u))


@dataclass(frozen=True)
class Calibration:
    """The result of ``calibrate``: fitted ``values`` (within ``bounds``), the ``preset`` values,
    one row per target (``rows``), the fit's RMS relative residual, identifiability per parameter
    and the profile scan, the fitted ``hardware``."""

    params: tuple
    values: dict
    preset: dict
    bounds: dict
    rows: object
    rms: float
    identifiability: dict
    profiles: object
    jacobian_cond: float
    evaluations: int
    message: str
    hardware: object = field(repr=False)
    base: object = field(repr=False)
    tol: float = 0.002
    hardware_name: str = ""
    planner: str = "slack"
    wall_s: float = 0.0
    #: with workload parameters: ``search.WorkloadFit`` (values chosen, their profile); else None
    workload: object = None

    @property
    def reproduced(self) -> bool:
        """Every row within ``tol`` (relative) at the fitted values."""
        return bool(self.rows["reproduced"].all())

    def table(self):
        """One row per parameter: preset, fitted value, bounds, identifiability."""
        import pandas as pd  # lazy: start-up cost (pandas)

        return pd.DataFrame([{"parameter": p, "preset": self.preset[p], "fitted": self.values[p],
                              "lo": self.bounds[p][0], "hi": self.bounds[p][1],
                              "identifiable": self.identifiability[p]} for p in self.params])

    def summary(self) -> str:
        lines = [f"calibrate {', '.join(self.params)} on {self.hardware_name} with planner {self.planner}: "
                 f"RMS relative residual {self.rms:.4g}, Jacobian condition number {self.jacobian_cond:.3g} "
                 f"({self.evaluations} settings simulated, {self.wall_s:.1f} s)"]
        for p in self.params:
            lines.append(f"  {p} = {self.values[p]:.6g} (preset {self.preset[p]:.6g}, searched in "
                         f"[{self.bounds[p][0]:.4g}, {self.bounds[p][1]:.4g}]): {self.identifiability[p]}")
        if self.workload is not None:
            wl = self.workload
            lines.append(f"  workload: {wl.assignments} (shared values, hardware start) pairs judged, the values "
                         "of per-model parameters chosen for each model:")
            for n, v in wl.values.items():
                shown = ", ".join(f"{m}: {x!r}" for m, x in v.items()) if isinstance(v, dict) else repr(v)
                idents = "; ".join(f"{k}: {t}" for k, t in wl.identifiability.items()
                                   if k == n or k.startswith(n + " for "))
                lines.append(f"  {n} = {shown}: {idents}")
        for r in self.rows.itertuples():
            verdict = ("reproduced" if r.reproduced else
                       f"not at the joint fit (alone it is: closest residual {r.closest:+.4f})"
                       if abs(r.closest) <= self.tol else
                       f"NOT reproduced by any setting tried within the bounds (closest residual {r.closest:+.4f})")
            lines.append(f"  {r.row}: target {r.target:.6g}, preset {r.preset_sim:.6g}, fitted "
                         f"{r.fitted_sim:.6g} (residual {r.residual:+.4f}): {verdict}")
        return "\n".join(lines)

    def write_hardware(self, path, allow_presets: bool = False, overwrite: bool = False) -> Path:
        """Write the fitted hardware as a TOML file (loadable by ``hardware.load(path)``) with its
        provenance in ``[sources]``. Refuses to overwrite a preset, to write into
        ``data/hardware/`` unless ``allow_presets``, and to replace a file unless ``overwrite``."""

        path = check_hardware_out(path, allow_presets, overwrite)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_toml(path.stem))
        hw_mod.load(str(path))   # it must load back
        return path

    def to_toml(self, name: str) -> str:
        hw, base = self.hardware, self.base
        g, lk = hw.gpu, hw.link
        when = datetime.date.today().isoformat()
        fit = ", ".join(f"{p} = {self.values[p]:.6g}" for p in self.params)
        rows = "; ".join(f"{r.row}: target {r.target:.6g}, fitted {r.fitted_sim:.6g}" for r in self.rows.itertuples())
        prov = (f"calibrated {when} from preset {self.hardware_name!r} with planner {self.planner!r} "
                f"(slackswap.calibration.calibrate, docs/calibration.md): {fit}; RMS relative residual {self.rms:.4g}")
        if self.workload is not None:
            prov += f"; under the workload assumptions {self.workload.values}"
        q = json.dumps
        curve = lambda e: (f"{{ {e.per} = [{', '.join(repr(x) for x, _ in e.points)}], "  # noqa: E731
                           f"value = [{', '.join(repr(round(v, 9)) for _, v in e.points)}] }}")
        out = [f"# Calibrated hardware (not a preset): {prov}.", f"name = {q(name)}",
               f"description = {q('calibrated: ' + base.description)}", "", "[gpu]", f"name = {q(g.name)}",
               f"hbm_bandwidth = {g.hbm_bytes_per_s!r}", f"memory = {int(g.memory_bytes)}", "", "[gpu.peak]"]
        out += [f"{k} = {v!r}" for k, v in g.peak_flops.items()]
        out += ["", "[gpu.efficiency]", f"matmul = {curve(g.matmul_efficiency)}",
                f"attention = {curve(g.attention_efficiency)}", f"memory = {curve(g.memory_efficiency)}", "",
                "[link]", f"name = {q(lk.name + ' (calibrated)')}", f"description = {q(lk.description)}",
                f"d2h_bandwidth = {lk.d2h_bytes_per_s!r}", f"h2d_bandwidth = {lk.h2d_bytes_per_s!r}",
                f"theoretical_bandwidth = {lk.theoretical_bytes_per_s!r}", f"latency = {lk.latency_s!r}",
                f"duplex_factor = {lk.duplex_factor!r}", "", "[sources]"]
        src = {f"gpu.{k}": v for k, v in base.gpu.sources.items()}
        src.update({f"link.{k}": v for k, v in base.link.sources.items()})
        touched = {"compute_scale": ("gpu.efficiency.matmul", "gpu.efficiency.attention"),
                   "matmul_scale": ("gpu.efficiency.matmul",), "attention_scale": ("gpu.efficiency.attention",),
                   "memory_scale": ("gpu.efficiency.memory",), "bandwidth": ("link.d2h_bandwidth", "link.h2d_bandwidth"),
                   "d2h_bandwidth": ("link.d2h_bandwidth",), "h2d_bandwidth": ("link.h2d_bandwidth",),
                   "latency": ("link.latency",), "duplex_factor": ("link.duplex_factor",)}
        for p in self.params:
            for key in touched[p]:
                src[key] = f"Calibrated ({p} = {self.values[p]:.6g}): {prov}. Preset's source: {src.get(key, 'none')}"
        src["calibration.targets"] = rows
        out += [f"{q(k)} = {q(str(v))}" for k, v in src.items()]
        return "\n".join(out) + "\n"


def _simplex(u, step: float = 0.1):
    """A start simplex around ``u`` inside the unit box (steps away from the nearer bound)."""
    pts = [np.asarray(u, dtype=float)]
    for i in range(len(u)):
        v = pts[0].copy()
        v[i] = v[i] + step if v[i] + step <= 1.0 else v[i] - step
        pts.append(v)
    return np.array(pts)


def _jacobian(fun, u, r0, step: float = 0.02):
    """Finite-difference Jacobian of the residuals in unit coordinates at ``u``, one-sided
    steps pointing into the box (least_squares's own ``jac`` is scaled to zero at a bound)."""
    cols = []
    for i in range(len(u)):
        v = np.asarray(u, dtype=float).copy()
        h = step if v[i] + step <= 1.0 else -step
        v[i] += h
        cols.append((fun(v) - r0) / h)
    return np.array(cols).T


def fit(ev, params, box, grid, profile, max_evals, tol) -> Calibration:
    """Grid start, ``least_squares`` in unit coordinates, profile scan; see ``calibrate``."""
    import pandas as pd  # lazy: start-up cost (pandas)
    from scipy.optimize import least_squares, minimize  # lazy: start-up cost (scipy)


    spec = [(box[p][0], box[p][1], PARAMETERS[p].log) for p in params]
    values = lambda u: {p: _to_value(x, *s) for p, x, s in zip(params, u, spec, strict=True)}  # noqa: E731
    preset = {p: PARAMETERS[p].get(ev.hw) for p in params}
    u_preset = np.array([_to_unit(preset[p], *s) for p, s in zip(params, spec, strict=True)])
    starts = [u_preset] + ([np.array(u) for u in itertools.product(np.linspace(0, 1, grid), repeat=len(params))]
                           if grid > 1 else [])
    cost = lambda u: float(np.sum(ev.residuals(values(u)) ** 2))  # noqa: E731
    u0 = min(starts, key=cost)
    res = least_squares(lambda u: ev.residuals(values(u)), u0, bounds=(0.0, 1.0), diff_step=0.02,
                        max_nfev=max_evals, method="trf")
    # the planner's discrete choices put kinks in the residuals: polish with Nelder-Mead
    nm = minimize(cost, res.x, method="Nelder-Mead", bounds=[(0.0, 1.0)] * len(params),
                  options={"maxfev": 2 * max_evals, "xatol": 1e-4, "fatol": 1e-12, "initial_simplex": _simplex(res.x)})
    best = min([nm.x, res.x, u0], key=cost)
    r_fit = ev.residuals(values(best))
    rms = float(np.sqrt(np.mean(r_fit ** 2)))
    jac = _jacobian(lambda u: ev.residuals(values(u)), best, r_fit)
    cond = float(np.linalg.cond(jac)) if jac.size else math.nan

    prof_rows, ident = [], {}
    for i, p in enumerate(params):
        if profile == 0:
            col = np.linalg.norm(jac[:, i])
            ident[p] = "no effect on the targets" if col < 1e-9 else "not scanned (profile=0)"
            continue
        for u_i in np.linspace(0, 1, profile):
            u = best.copy()
            u[i] = u_i
            if len(params) > 1:
                others = [j for j in range(len(params)) if j != i]

                def sub(x, u=u, others=others):
                    v = u.copy()
                    v[others] = x
                    return ev.residuals(values(v))
                r = least_squares(sub, u[others], bounds=(0.0, 1.0), diff_step=0.02,
                                  max_nfev=max(6, max_evals // 4), method="trf")
                u[others] = r.x
            prof_rows.append({"parameter": p, "value": values(u)[p], "unit": u_i,
                              "rms": float(np.sqrt(np.mean(ev.residuals(values(u)) ** 2)))})
        fitted_pt = {"parameter": p, "value": values(best)[p], "unit": best[i], "rms": rms}
        prof = sorted([r for r in prof_rows if r["parameter"] == p] + [fitted_pt], key=lambda r: r["unit"])
        floor = min(r["rms"] for r in prof)
        ok = [k for k, r in enumerate(prof) if r["rms"] <= floor + tol]
        a, b = ok[0], ok[-1]
        lo = prof[a - 1]["value"] if a > 0 else prof[0]["value"]
        hi = prof[b + 1]["value"] if b + 1 < len(prof) else prof[-1]["value"]
        ident[p] = ("not identifiable: the whole searched range fits as well" if a == 0 and b == len(prof) - 1 else
                    f"bounded on one side only: within tol of the best fit on [{lo:.4g}, {hi:.4g}]" if a == 0 or b == len(prof) - 1
                    else f"identifiable: within tol of the best fit only inside ({lo:.4g}, {hi:.4g})")

    tgt = np.array([t.value for t in ev.targets])   # closest: over the settings tried, all within bounds
    all_res = np.array([(v - tgt) / tgt for v in ev.cache.values()])
    all_res = np.where(np.isfinite(all_res), all_res, np.inf)
    closest = all_res[np.argmin(np.abs(all_res), axis=0), np.arange(len(tgt))]
    sim_fit, sim_pre = ev(values(best)), ev(preset)   # the preset may lie outside user bounds: last
    rows = pd.DataFrame({"row": [t.label for t in ev.targets], "metric": [t.metric for t in ev.targets],
                         "target": tgt, "preset_sim": sim_pre, "fitted_sim": sim_fit,
                         "residual": (sim_fit - tgt) / tgt, "closest": closest})
    rows["reproduced"] = rows["residual"].abs() <= tol
    fitted = values(best)

    return Calibration(tuple(params), fitted, preset, dict(box), rows, rms, ident,
                       pd.DataFrame(prof_rows, columns=["parameter", "value", "unit", "rms"]), cond,
                       ev.sims, str(res.message), apply(ev.hw, fitted), ev.hw, tol)


def check_hardware_out(path, allow_presets: bool = False, overwrite: bool = False) -> Path:
    """The path a calibrated hardware file may be written to (``~`` expanded), else ``ConfigError``:
    it must end in ``.toml``, is never a preset, lies in ``data/hardware/`` only with
    ``allow_presets`` and replaces an existing file only with ``overwrite``."""

    path = user_path(path)
    if path.suffix != ".toml":
        raise ConfigError(f"calibrate.out: a hardware file must end in .toml, got {str(path)!r}")
    presets = hw_mod.hardware_dir().resolve()
    into = path.resolve().parent in (presets, presets / "links")
    if into and path.exists():
        raise ConfigError(f"calibrate.out: {path} is a preset; a calibration never overwrites a preset")
    if into and not allow_presets:
        raise ConfigError(f"calibrate.out: refusing to write into {presets} (the presets) unless asked "
                          "explicitly (allow_presets=True, CLI --into-presets)")
    if path.exists() and not overwrite:
        raise ConfigError(f"calibrate.out: {path} exists; pass overwrite=True (CLI --force) to replace it")
    return path


def relative_residuals(sim, targets) -> np.ndarray:
    """The weighted relative residuals of simulated values ``sim`` against ``targets`` (rows with
    ``value`` and ``weight``): ``sqrt(weight) * (sim - value) / value``; an infeasible row (a
    value that is not finite) counts as 100% off."""
    tgt = np.array([t.value for t in targets])
    w = np.sqrt([t.weight for t in targets])
    with np.errstate(invalid="ignore"):
        r = (np.asarray(sim, dtype=float) - tgt) / tgt
    return np.where(np.isfinite(r), r, 1.0) * w

