"""Robustness of a plan: how much slower is it when the cost model is wrong? (docs/robustness.md)

A plan is made against one ``CostModel``. Real op times, bandwidths and copy latencies differ, so
``robustness`` re-simulates the *same* plan under ``samples`` seeded random multiplicative
perturbations of the costs and compares each step with the nominal prediction.

Noise model, for a noise level ``sigma`` (coefficient of variation, 0.2 = 20%) and a correlation
``rho`` in [0, 1]: every time x becomes ``x * exp(sigma * Y - sigma**2 / 2)`` (log-normal, mean
factor 1) with ``Y = sqrt(rho) * Z_engine + sqrt(1 - rho) * Z_item``, standard normals drawn per
*engine* (shared by every item of that engine) and per *item*. The engines and items:

* ``compute``: every forward op, every backward op, the optimizer (one item each);
* ``d2h`` and ``h2d``: the bandwidth part of every tensor's copy (``time - latency``);
* ``latency``: the latency part of every copy (both directions), when the problem's hardware
  names a link latency (analytical costs; 0 otherwise).

The normals are drawn for sample ``i`` from ``numpy.random.default_rng([seed, i])`` in a fixed
order and then scaled by ``sigma``, so every noise level and every plan sees the same draws
(common random numbers): results are deterministic for a seed, and at ``sigma = 0`` every factor
is exactly 1.0, so the simulation equals the nominal one bit for bit. The problem is never
mutated: each sample is ``dataclasses.replace(problem, costs=...)``.

The robust planning option: ``with_transfer_margin(problem, m)`` is the same problem with every
copy ``(1 + m)`` times slower; ``plan_with_margin`` plans against it with any planner and judges
the plan on the nominal problem (the ``slack`` planner's ``margin`` parameter does this itself).
"""

from __future__ import annotations

import itertools
import json
import math
import time
from dataclasses import replace

import numpy as np

from .. import experiments, planners
from ..core import hardware as hw_mod
from ..core.errors import SlackSwapError
from ..planners.base import make_plan
from ..timeline import simulate
from ..timeline.problem import (
    Problem,
    with_transfer_margin,  # noqa: F401 - robustness's API as before
)
from .options import ENGINES, MAX_SAMPLES, check_robustness

COLUMNS = ("planner", "noise", "samples", "nominal_step_s", "nominal_ratio", "mean_slowdown",
           "p95_slowdown", "max_slowdown", "spread", "ratio_mean", "ratio_p5", "over_budget",
           "infeasible", "mean_stall_s")


def latency_of(problem) -> float:
    """The per-copy latency inside the problem's transfer times (its hardware link's; else 0)."""
    link = getattr(getattr(problem, "hardware", None), "link", None)
    return float(getattr(link, "latency_s", 0.0)) if problem.costs.mode == "analytical" else 0.0


class Draws:
    """The standard normals of one sample (per engine and per item), independent of the level."""

    def __init__(self, problem, seed: int, index: int):
        c = problem.costs
        n, m = len(c.fwd_s), len(c.d2h_s)
        rng = np.random.default_rng([seed, index])
        self.engine = dict(zip(ENGINES, rng.standard_normal(len(ENGINES)), strict=True))
        self.fwd, self.bwd, self.opt = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal()
        self.d2h, self.h2d = rng.standard_normal(m), rng.standard_normal(m)
        self.lat_d2h, self.lat_h2d = rng.standard_normal(m), rng.standard_normal(m)


def _factor(level: float, rho: float, z_engine: float, z_item):
    y = math.sqrt(rho) * z_engine + math.sqrt(1.0 - rho) * np.asarray(z_item, dtype=float)
    return np.exp(level * y - level * level / 2.0)


def _engines(engines) -> frozenset:
    """``engines`` checked as every robustness function checks it (``options.check_robustness``)."""
    if isinstance(engines, frozenset) and engines <= set(ENGINES) and engines:
        return engines                      # already checked (robustness passes its own set)
    return frozenset(check_robustness([0.0], 1, 0, 0.0, engines).engines)


def perturbed_costs(problem, draws: Draws, level: float, correlation: float = 0.5, engines=ENGINES):
    """The problem's ``CostModel`` with every time multiplied by its noise factor (see the module
    doc); engines not in ``engines`` keep their times. ``level = 0`` gives times equal to the
    nominal ones bit for bit."""
    c, e, on = problem.costs, draws.engine, _engines(engines)
    f = lambda key, z: _factor(level if key in on else 0.0, correlation, e[key], z)  # noqa: E731
    fwd = np.asarray(c.fwd_s) * f("compute", draws.fwd)
    bwd = np.asarray(c.bwd_s) * f("compute", draws.bwd)
    opt = float(c.optimizer_s * f("compute", draws.opt))
    lat = latency_of(problem)
    out = []
    for times, z_bw, z_lat, key in ((c.d2h_s, draws.d2h, draws.lat_d2h, "d2h"),
                                    (c.h2d_s, draws.h2d, draws.lat_h2d, "h2d")):
        t = np.asarray(times)
        lat_t = np.minimum(lat, t)          # 0-byte tensors cost 0, latency included
        fb, fl = f(key, z_bw), f("latency", z_lat)
        out.append(t * fb + lat_t * (fl - fb))   # = (t - lat) * fb + lat * fl, exact at level 0
    return replace(c, fwd_s=tuple(fwd.tolist()), bwd_s=tuple(bwd.tolist()), d2h_s=tuple(out[0].tolist()),
                   h2d_s=tuple(out[1].tolist()), optimizer_s=opt)


def robustness(problem, plan, noise=(0.0, 0.1, 0.2, 0.3), samples: int = 50, seed: int = 0,
               correlation: float = 0.5, label: str | None = None, engines=ENGINES,
               max_samples: int = MAX_SAMPLES):
    """Simulate ``plan`` under ``samples`` perturbations per noise level; one row per level.
    ``engines``: which of ``ENGINES`` get noise (default all; ``("d2h", "h2d", "latency")``:
    copies only). ``samples`` above ``max_samples`` (default ``MAX_SAMPLES``, 10,000) is refused.

    Columns (``COLUMNS``): ``nominal_step_s`` and ``nominal_ratio`` (unperturbed); the slowdown
    ``step / nominal step``: ``mean_slowdown``, ``p95_slowdown``, ``max_slowdown``, ``spread``
    (p95 - p5); the throughput ratio under noise (perturbed ideal / perturbed step):
    ``ratio_mean``, ``ratio_p5``; ``over_budget``: fraction of samples whose plan does not fit
    (peak above the budget, or no feasible allocation); ``infeasible``: fraction with no feasible
    allocation; ``mean_stall_s``: mean stall (compute waiting for copies or memory).
    """
    import pandas as pd  # lazy: start-up cost (pandas)


    opts = check_robustness(noise, samples, seed, correlation, engines, max_samples)
    levels, engines = opts.noise, frozenset(opts.engines)
    nominal = simulate(problem, plan, detail=False)
    if not nominal.feasible:
        raise SlackSwapError(f"robustness: the plan is infeasible on the nominal costs ({nominal.reason})")
    draws = [Draws(problem, seed, i) for i in range(samples)]
    rows = []
    for level in levels:
        slow, ratio, over, infeas, stall = [], [], 0, 0, []
        for d in draws:
            p = replace(problem, costs=perturbed_costs(problem, d, level, correlation, engines))
            r = simulate(p, plan, detail=False)
            over += not r.fits
            infeas += not r.feasible
            if r.feasible:
                slow.append(r.step_time_s / nominal.step_time_s)
                ratio.append(r.throughput_ratio)
                stall.append(r.stall_s)
        s = np.asarray(slow) if slow else np.full(1, np.nan)
        q = np.asarray(ratio) if ratio else np.full(1, np.nan)
        rows.append({"planner": label or plan.planner, "noise": level, "samples": samples,
                     "nominal_step_s": nominal.step_time_s, "nominal_ratio": nominal.throughput_ratio,
                     "mean_slowdown": float(s.mean()), "p95_slowdown": float(np.percentile(s, 95)),
                     "max_slowdown": float(s.max()),
                     "spread": float(np.percentile(s, 95) - np.percentile(s, 5)),
                     "ratio_mean": float(q.mean()), "ratio_p5": float(np.percentile(q, 5)),
                     "over_budget": over / samples, "infeasible": infeas / samples,
                     "mean_stall_s": float(np.mean(stall)) if stall else math.nan})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def robustness_table(problem, planner_list=("slack",), noise=(0.0, 0.1, 0.2, 0.3), samples: int = 50,
                     seed: int = 0, correlation: float = 0.5, engines=ENGINES, max_samples: int = MAX_SAMPLES):
    """``robustness`` of every planner's plan for ``problem``, one table. ``planner_list``: names,
    or ``(label, name, params)`` triples (as ``experiments.variants``). Planners whose plan does
    not fit the nominal budget are left out (a row with ``nominal_ratio = 0``, nothing else).
    Column ``planner`` holds the label, ``planner_name`` the registered planner."""
    import pandas as pd  # lazy: start-up cost (pandas)


    check_robustness(noise, samples, seed, correlation, engines, max_samples)   # before any plan
    frames = []
    for item in planner_list:
        label, name, params = (item, item, {}) if isinstance(item, str) else item
        plan = planners.get(name, **params).plan(problem)
        if not simulate(problem, plan, detail=False).fits:
            frames.append(pd.DataFrame([{"planner": label, "nominal_ratio": 0.0}], columns=list(COLUMNS)))
        else:
            frames.append(robustness(problem, plan, noise, samples, seed, correlation, label, engines,
                                     max_samples))
        frames[-1]["planner_name"] = name   # the registered planner, for its colour in figures
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------- planning with a margin
def plan_with_margin(planner, problem, margin: float, **params):
    """Plan with any planner (name or instance) against ``with_transfer_margin(problem, margin)``,
    then judge the plan on the nominal ``problem`` (its status and objective are the nominal ones)."""

    t0 = time.perf_counter()
    inst = planners.get(planner, **params) if isinstance(planner, str) else planner
    plan = inst.plan(with_transfer_margin(problem, margin))
    return make_plan(problem, dict(plan.decisions), plan.planner, {**plan.params, "margin": margin}, t0,
                     issue_points=dict(plan.issue_points))


def robustness_sweep(path, noise=(0.0, 0.1, 0.2, 0.3), samples: int = 50, seed: int = 0,
                     correlation: float = 0.5, engines=ENGINES, max_samples: int = MAX_SAMPLES):
    """``robustness_table`` for every (model, hardware, budget) of a sweep file and its planner
    variants (``data/sweeps/slack_margin.toml``: the margin ablation). Adds the setting columns
    ``model``, ``hardware``, ``budget`` in front (and ``parallel`` when the file gives one). Links,
    overrides and parallel settings of the file apply."""
    import pandas as pd  # lazy: start-up cost (pandas)


    check_robustness(noise, samples, seed, correlation, engines, max_samples)   # before the file is read
    cfg = experiments.load_sweep(path)
    var = experiments.variants(cfg["planners"], cfg["planner_params"])
    hws = cfg["hardware"] if isinstance(cfg["hardware"], list) else [cfg["hardware"]]
    links = cfg["link"] if isinstance(cfg["link"], list) else [cfg["link"]]
    ovs = cfg["overrides"] if isinstance(cfg["overrides"], list) else [cfg["overrides"] or {}]
    pars = cfg["parallel"] if isinstance(cfg["parallel"], list) else [cfg["parallel"]]
    frames = []
    for model, hw, link, ov, par in itertools.product(cfg["models"], hws, links, ovs, pars):
        base = Problem.build(model, hw_mod.load(hw, link=link), None, parallel=par, **ov)
        for b in cfg["budgets"]:
            df = robustness_table(base.with_budget(b), var, noise, samples, seed, correlation, engines,
                                  max_samples)
            df.insert(0, "budget", b)
            if par is not None:   # only sweeps over parallel settings have the column
                df.insert(0, "parallel", par if isinstance(par, str) else json.dumps(par, sort_keys=True))
            df.insert(0, "link", link or base.hardware.link.name)
            df.insert(0, "hardware", hw)
            df.insert(0, "model", model)
            frames.append(df)
    return pd.concat(frames, ignore_index=True)
