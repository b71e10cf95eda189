"""Workload and hardware together (docs/calibration.md, "Workload assumptions").

``RowEvaluator`` simulates one target row under one workload (spec overrides) and one hardware
setting, each built problem and each result cached. Two searches use it:

* ``fit_workload`` (``calibrate`` given workload parameters): at every start point of the
  hardware grid, each model's best values of the per-model parameters are chosen independently
  (a row depends only on its own model's values and the shared ones), for every combination of
  the shared parameters; the best few assignments are then fitted by ``fit.fit`` (least squares
  over the hardware parameters) and the best fit is reported, with a discrete profile of every
  workload value (the best RMS residual with that value fixed, the rest free).
* ``search_assumptions``: the smallest set of stated assumptions (workload values other than the
  model's own) under which every row is reproduced within ``tol`` at one plausible hardware
  setting: every set of 0, 1, 2, ... assumptions is judged on a hardware grid, the most promising
  sets of each size are then fitted, and the search stops at the first size that reproduces every
  row; otherwise it reports, per row, the closest any setting tried gets.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from .. import models, planners
from ..core import costs
from ..core.errors import BudgetError, SlackSwapError
from ..timeline import simulate
from ..timeline.problem import Problem
from .fit import _simplex, _to_unit, _to_value, fit, relative_residuals
from .parameters import PARAMETERS, apply, bounds_for
from .workload import WORKLOAD, candidates, label


def _key(d: dict) -> tuple:
    return tuple(sorted((k, round(float(v), 12) if isinstance(v, float) else v) for k, v in d.items()))


class RowEvaluator:
    """Simulated metric of target row ``i`` under workload ``w`` (spec overrides) and hardware
    ``values`` (``PARAMETERS``), cached; ``sims`` counts the simulations run."""

    def __init__(self, targets, hw, planner_params=None):
        self.targets, self.hw, self.params = list(targets), hw, dict(planner_params or {})
        self.specs = [models.spec(t.model, **t.overrides) for t in self.targets]
        self._base: dict = {}
        self.cache: dict = {}
        self.sims = 0

    def model_of(self, i: int) -> str:
        return self.targets[i].model

    def problem(self, i: int, w: dict) -> Problem:
        key = (i, _key(w))
        if key not in self._base:
            t = self.targets[i]
            self._base[key] = Problem.build(self.specs[i].replace(**w) if w else self.specs[i], self.hw, t.budget)
        return self._base[key]

    def value(self, i: int, w: dict, values: dict) -> float:
        key = (i, _key(w), _key(values))
        if key not in self.cache:
            try:
                base = self.problem(i, w)
            except BudgetError:   # the row's budget under this workload is below the smallest feasible
                self.cache[key] = math.nan
                return math.nan
            t = self.targets[i]
            hw = apply(self.hw, values)
            p = replace(base, costs=costs.analytical(base.graph, hw), hardware=hw)
            plan = planners.get(t.planner, **(self.params if t.planner == "slack" else {})).plan(p)
            r = simulate(p, plan, detail=False)
            self.cache[key] = r.throughput_ratio if t.metric == "throughput_ratio" else r.step_time_s
            self.sims += 1
        return self.cache[key]

    def residual(self, i: int, w: dict, values: dict) -> float:
        """Relative residual ``simulated / target - 1`` (an infeasible row counts as 100% off)."""
        t = self.targets[i]
        r = (self.value(i, w, values) - t.value) / t.value
        return r if math.isfinite(r) else 1.0

    def closest(self) -> np.ndarray:
        """Per row, the residual of smallest magnitude over every workload and setting tried."""
        best = np.full(len(self.targets), np.inf)
        for (i, _, _), v in self.cache.items():
            t = self.targets[i]
            r = (v - t.value) / t.value if math.isfinite(v) else 1.0
            r = r if math.isfinite(r) else 1.0
            if abs(r) < abs(best[i]):
                best[i] = r
        return best


class Fixed:
    """``fit.fit``'s evaluator for one workload per row (``ws``), over ``RowEvaluator``'s cache."""

    def __init__(self, rev: RowEvaluator, ws: list[dict]):
        self.rev, self.ws, self.targets, self.hw = rev, ws, rev.targets, rev.hw
        self.cache: dict = {}

    @property
    def sims(self) -> int:
        return len(self.cache)

    def __call__(self, values: dict) -> np.ndarray:
        key = _key(values)
        if key not in self.cache:
            self.cache[key] = np.array([self.rev.value(i, w, values) for i, w in enumerate(self.ws)], dtype=float)
        return self.cache[key]

    def residuals(self, values: dict) -> np.ndarray:
        return relative_residuals(self(values), self.targets)


def check_workload(rev: RowEvaluator, names) -> None:
    """Refuse a workload parameter a row cannot search: one a row's own columns set (``batch``,
    ``seq``) or a shared value that some row's model does not take."""
    for t in rev.targets:
        for n in names:
            if n in t.overrides:
                raise SlackSwapError(f"calibrate.params: {n} is set by target row {t.label!r}; search it "
                                     "or give it in the targets, not both")
    for n in names:
        if WORKLOAD[n].shared:
            first = candidates(n, rev.specs[0])
            for i, spec in enumerate(rev.specs):
                if set(candidates(n, spec)) != set(first):
                    raise SlackSwapError(f"calibrate.params: {n} takes {first} on {rev.targets[0].model!r} but "
                                         f"{candidates(n, spec)} on {rev.targets[i].model!r} (a shared "
                                         "parameter needs the same candidates on every row)")


def _groups(rev: RowEvaluator) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i in range(len(rev.targets)):
        out.setdefault(rev.model_of(i), []).append(i)
    return out


def hardware_starts(hw, params, box, grid: int) -> list[dict]:
    """The preset's values, then every point of a ``grid`` per parameter grid of the box."""
    spec = [(box[p][0], box[p][1], PARAMETERS[p].log) for p in params]
    starts = [{p: PARAMETERS[p].get(hw) for p in params}]
    if grid > 1:
        for u in itertools.product(np.linspace(0, 1, grid), repeat=len(params)):
            starts.append({p: _to_value(x, *s) for p, x, s in zip(params, u, spec, strict=True)})
    return starts


@dataclass(frozen=True)
class WorkloadFit:
    """What ``fit_workload`` adds to a ``Calibration``: the chosen ``values`` (shared: one value;
    per model: ``{model: value}``), their ``profile`` (one row per parameter, model and value: the
    best RMS with that value fixed, over the settings tried) and identifiability per parameter."""

    values: dict
    profile: object
    identifiability: dict
    assignments: int


def fit_workload(rev: RowEvaluator, hw_params, wl_params, box, grid, profile, max_evals, tol, top: int = 3):
    """The best workload assignment and hardware fit; returns ``(Calibration, WorkloadFit)``."""
    import pandas as pd  # lazy: start-up cost (pandas)

    check_workload(rev, wl_params)
    shared = [n for n in wl_params if WORKLOAD[n].shared]
    local = [n for n in wl_params if not WORKLOAD[n].shared]
    groups = _groups(rev)
    spec0 = rev.specs[0]
    g_list = [dict(zip(shared, c, strict=True)) for c in itertools.product(*(candidates(n, spec0) for n in shared))]
    l_lists = {m: [dict(zip(local, c, strict=True)) for c in
                   itertools.product(*(candidates(n, rev.specs[idx[0]]) for n in local))]
               for m, idx in groups.items()}
    starts = hardware_starts(rev.hw, hw_params, box, grid)
    wts = [t.weight for t in rev.targets]

    def score(m, w, h):
        return sum(wts[i] * rev.residual(i, w, h) ** 2 for i in groups[m])

    ranked, prof = [], []
    for g in g_list:
        for h in starts:
            per_m = {m: [(score(m, {**g, **loc}, h), k) for k, loc in enumerate(l_lists[m])] for m in groups}
            best_l = {m: l_lists[m][min(sc)[1]] for m, sc in per_m.items()}
            total = sum(min(sc)[0] for sc in per_m.values())
            for m, sc in per_m.items():
                rest = total - min(sc)[0]
                for n in local:   # the best of model m with n fixed to each value, the rest free
                    for v in candidates(n, rev.specs[groups[m][0]]):
                        prof.append((n, m, v, min(s for s, k in sc if l_lists[m][k][n] == v), rest))
            ranked.append((total, len(ranked), g, h, best_l))
    n_rows = len(rev.targets)
    # profile rows: (param, model, value) -> best RMS; shared: over g; local: own model's best + rest
    prof_best: dict = {}
    for total, _, g, _h, _ in ranked:
        for n in shared:
            k = (n, "", g[n])
            prof_best[k] = min(prof_best.get(k, math.inf), total)
    for n, m, v, sv, rest in prof:
        k = (n, m, v)
        prof_best[k] = min(prof_best.get(k, math.inf), sv + rest)
    ranked.sort(key=lambda r: r[0])
    tried, fits = set(), []
    for _total, _, g, _h, best_l in ranked:
        key = _key(g)
        if key in tried:
            continue
        tried.add(key)
        ws = [{**g, **best_l[rev.model_of(i)]} for i in range(n_rows)]
        cal = fit(Fixed(rev, ws), hw_params, box, grid, 0, max_evals, tol)
        # the per-model values chosen on the grid may not be the best at the fitted point: re-choose once
        again = {m: min(l_lists[m], key=lambda loc, m=m: score(m, {**g, **loc}, cal.values)) for m in groups}
        if again != best_l:
            ws = [{**g, **again[rev.model_of(i)]} for i in range(n_rows)]
            cal2 = fit(Fixed(rev, ws), hw_params, box, grid, 0, max_evals, tol)
            if cal2.rms < cal.rms:
                cal, best_l = cal2, again
        fits.append((cal.rms, len(fits), g, best_l, ws, cal))
        for n in shared:
            prof_best[(n, "", g[n])] = min(prof_best[(n, "", g[n])], cal.rms ** 2 * n_rows)
        if len(tried) >= top:
            break
    rms, _, g, best_l, ws, cal = min(fits, key=lambda f: f[0])
    if profile:
        cal = fit(Fixed(rev, ws), hw_params, box, grid, profile, max_evals, tol)
    for m, loc in best_l.items():
        for n, v in loc.items():
            k = (n, m, v)
            prof_best[k] = min(prof_best.get(k, math.inf), cal.rms ** 2 * n_rows)
    prof_df = pd.DataFrame([{"parameter": n, "model": m, "value": v, "rms": math.sqrt(s / n_rows)}
                            for (n, m, v), s in prof_best.items()])
    ident = {}
    for (n, m), part in prof_df.groupby(["parameter", "model"], sort=False):
        floor = part["rms"].min()
        ok = part[part["rms"] <= floor + tol]["value"].tolist()
        name = f"{n} for {m}" if m else n
        ident[name] = ("one candidate on this model (nothing to choose)" if len(part) == 1 else
                       "not identifiable: every value fits as well" if len(ok) == len(part) else
                       f"identifiable: only {ok[0]!r} fits within tol" if len(ok) == 1 else
                       f"within tol: {', '.join(repr(v) for v in ok)} of {len(part)} values")
    values = {n: g[n] for n in shared}
    for n in local:
        values[n] = {m: loc[n] for m, loc in best_l.items()}
    closest = rev.closest()
    rows = cal.rows.copy()
    rows["workload"] = [label({k: v for k, v in w.items() if getattr(rev.specs[i], k) != v})
                        for i, w in enumerate(ws)]
    rows["closest"] = closest
    cal = replace(cal, rows=rows, evaluations=rev.sims)
    return cal, WorkloadFit(values, prof_df, ident, len(ranked))


def _minimax(fx: Fixed, params, box, start: dict, grid, max_evals, tol):
    """Hardware values (within ``box``) making the largest row residual of ``fx`` small: the least
    squares fit (``fit.fit``), then a bounded Nelder-Mead on the largest residual from the better
    of that fit and ``start``. Returns ``(values, residuals)``."""
    from scipy.optimize import minimize  # lazy: start-up cost (scipy)

    spec = [(box[p][0], box[p][1], PARAMETERS[p].log) for p in params]
    values = lambda u: {p: _to_value(x, *s) for p, x, s in zip(params, u, spec, strict=True)}  # noqa: E731
    worst = lambda u: float(np.abs(fx.residuals(values(u))).max())  # noqa: E731
    cal = fit(fx, params, box, grid, 0, max_evals, tol)
    u0 = min((np.array([_to_unit(v[p], *s) for p, s in zip(params, spec, strict=True)])
              for v in (cal.values, start)), key=worst)
    nm = minimize(worst, u0, method="Nelder-Mead", bounds=[(0.0, 1.0)] * len(params),
                  options={"maxfev": 2 * max_evals, "xatol": 1e-4, "fatol": 1e-7,
                           "initial_simplex": _simplex(u0)})
    best = min((nm.x, u0), key=worst)
    return values(best), fx.residuals(values(best))


# ---------------------------------------------------------------- the smallest assumption set
@dataclass(frozen=True)
class Assumption:
    """One stated assumption: ``name = value``, for one model (``model``) or every row (None)."""

    name: str
    value: object
    model: str | None = None

    def __str__(self) -> str:
        where = f" for {self.model}" if self.model else ""
        return f"{label({self.name: self.value})}{where}"


def assumption_options(rev: RowEvaluator, names) -> list[Assumption]:
    """Every single assumption of the workload parameters ``names``: each candidate other than the
    model's own (shared parameters once, per-model ones for each model of the targets)."""
    check_workload(rev, names)
    out = []
    groups = _groups(rev)
    for n in names:
        if WORKLOAD[n].shared:
            out += [Assumption(n, v) for v in candidates(n, rev.specs[0])[1:]]
        else:
            for m, idx in groups.items():
                out += [Assumption(n, v, m) for v in candidates(n, rev.specs[idx[0]])[1:]]
    return out


def row_workload(rev: RowEvaluator, i: int, assumptions) -> dict:
    m = rev.model_of(i)
    return {a.name: a.value for a in assumptions if a.model is None or a.model == m}


@dataclass(frozen=True)
class SearchResult:
    """``search_assumptions``'s answer: ``found`` (the reproducing sets of the smallest size, each
    ``(assumptions, hardware values, residuals)``), ``sizes`` (per size: sets judged, the best
    set and its largest row residual), ``closest`` per row, ``tol``, simulations run."""

    found: list
    sizes: object
    closest: object
    tol: float
    sims: int
    max_size: int

    def summary(self) -> str:
        lines = []
        if self.found:
            k = len(self.found[0][0])
            lines.append(f"{len(self.found)} set(s) of {k} assumption(s) reproduce every row within "
                         f"{self.tol:.2%} at one plausible hardware setting:")
            for assumptions, values, res in self.found:
                hw = ", ".join(f"{p}={v:.4g}" for p, v in values.items())
                lines.append(f"  {'; '.join(map(str, assumptions)) or 'defaults'} | {hw} | residuals "
                             + " ".join(f"{r:+.4f}" for r in res))
        else:
            lines.append(f"no set of up to {self.max_size} assumptions reproduces every row within "
                         f"{self.tol:.2%} at one plausible hardware setting tried")
            last = self.sizes.iloc[-1]
            if last["fitted_best"]:
                lines.append(f"  closest set of {int(last['size'])}: {last['fitted_best']} at {last['fitted_hardware']}: "
                             f"largest row residual {last['fitted_max_residual']:+.4f} ({last['fitted_residuals']})")
        for r in self.closest.itertuples():
            lines.append(f"  {r.row}: closest residual of any setting tried {r.closest:+.4f}"
                         + ("" if abs(r.closest) <= self.tol else "  (NOT reached)"))
        return "\n".join(lines)


def search_assumptions(rev: RowEvaluator, hw_params, wl_params, box, grid: int = 4, max_size: int = 2,
                       refine: int = 3, max_evals: int = 30, tol: float = 0.002, progress=None) -> SearchResult:
    """The smallest assumption sets reproducing every row within ``tol`` (see the module doc).

    Every set of ``k`` assumptions (distinct parameter per model) is judged on the hardware grid
    (``hardware_starts``: the preset and ``grid`` points per parameter of ``box``, default the
    plausible ranges of ``parameters.bounds_for``): it reproduces when at one
    grid point every row is within ``tol``. If none does, the ``refine`` sets with the smallest
    largest-row residual on the grid are fitted (``fit.fit``, ``max_evals``) and judged at the fit.
    Sizes ``0..max_size`` in order; the first size with a reproducing set ends the search.
    """
    import pandas as pd  # lazy: start-up cost (pandas)

    from .options import check_search

    check_search(list(hw_params), list(wl_params), max_size, grid, refine, max_evals, tol)
    for p in hw_params:
        if p not in PARAMETERS:
            raise SlackSwapError(f"search_assumptions.params: unknown hardware parameter {p!r}; known: "
                                 f"{', '.join(PARAMETERS)}")
    for p in wl_params:
        if p not in WORKLOAD:
            raise SlackSwapError(f"search_assumptions.workload: unknown workload parameter {p!r}; known: "
                                 f"{', '.join(WORKLOAD)}")
    box = box or {p: bounds_for(p, rev.hw) for p in hw_params}   # the plausible ranges
    options = assumption_options(rev, wl_params)
    starts = hardware_starts(rev.hw, hw_params, box, grid)
    n = len(rev.targets)
    found, sizes = [], []
    for k in range(max_size + 1):
        judged = []
        for combo in itertools.combinations(options, k):
            if len({(a.name, a.model) for a in combo}) < k:
                continue
            ws = [row_workload(rev, i, combo) for i in range(n)]
            res = np.array([[rev.residual(i, ws[i], h) for i in range(n)] for h in starts])
            worst = np.abs(res).max(axis=1)
            j = int(np.argmin(worst))
            judged.append((float(worst[j]), combo, ws, starts[j], res[j]))
            if progress:
                progress(k, len(judged), combo, float(worst[j]))
        judged.sort(key=lambda r: r[0])
        ok = [(list(c), h, r) for w, c, _, h, r in judged if w <= tol]
        fitted = (math.inf, "", {}, None)
        if not ok:
            for _w, combo, ws, h, _r in judged[:refine]:
                values, r = _minimax(Fixed(rev, ws), hw_params, box, h, grid, max_evals, tol)
                if np.abs(r).max() < fitted[0]:
                    fitted = (float(np.abs(r).max()), "; ".join(map(str, combo)), values, r)
                if np.abs(r).max() <= tol:
                    ok.append((list(combo), values, r))
        best = judged[0] if judged else None
        sizes.append({"size": k, "sets": len(judged), "best": "; ".join(map(str, best[1])) if best else "",
                      "best_max_residual": best[0] if best else math.nan,
                      "fitted_best": fitted[1], "fitted_max_residual": fitted[0] if fitted[1] or not k else math.nan,
                      "fitted_hardware": ", ".join(f"{p}={v:.4g}" for p, v in fitted[2].items()),
                      "fitted_residuals": "" if fitted[3] is None else " ".join(
                          f"{t.model} {x:+.4f}" for t, x in zip(rev.targets, fitted[3], strict=True))})
        if ok:
            found = ok
            break
    closest = pd.DataFrame({"row": [t.label for t in rev.targets], "closest": rev.closest()})
    return SearchResult(found, pd.DataFrame(sizes), closest, tol, rev.sims, max_size)


__all__ = ["Assumption", "Fixed", "RowEvaluator", "SearchResult", "WorkloadFit", "assumption_options",
           "fit_workload", "hardware_starts", "search_assumptions"]
