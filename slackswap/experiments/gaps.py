"""Where a heuristic loses against the exact optimum, over instance families (docs/planners.md,
section "slack", "Where the greedy loses").

``compare`` plans every instance (``synthetic.Instance``: a problem and its family) with the
exact planner (``brute`` by default) and with each heuristic variant; ``summary`` and
``family_table`` aggregate the gaps by budget level, link speed and graph shape (the figure:
``report.gap_figure``); ``worst_cases`` and ``side_by_side`` put the optimum's and a heuristic's decisions for one
instance next to each other. ``gap = step / optimal step - 1``.

>>> from slackswap.experiments import synthetic
>>> df = compare(synthetic.random_suite(3), {"slack": ("slack", {})})
>>> list(summary(df)["worst_gap"])
[0.0]
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import planners as _planners
from ..core.errors import SlackSwapError
from ..core.plan import Decision
from ..timeline import simulate
from .synthetic import Instance

#: the default variants: the planner, and its constructive part alone (no local search)
VARIANTS = {"slack": ("slack", {}), "slack, no search": ("slack", {"local_search": False})}
#: budget-level bins of ``family_table`` and ``gap_figure`` (left edges; the last bin ends at 1)
LEVEL_BINS = (0.0, 0.25, 0.5, 0.75)
FAMILIES = {"level": "budget level (floor -> keep-all)", "link": "copy s/byte + latency s",
            "shape": "graph shape"}


def instances_of(problems, scale: float = 0.5) -> list[Instance]:
    """Wrap plain problems (e.g. ``synthetic.exact_suite(transfer_scale=scale)``) as instances:
    the shape from the graph name (``chain*``, ``residual*``, ``dag*`` = random, ``mixed*``;
    else the name), no latency, backward 1 s, budget level from the budget."""
    prefixes = {"chain": "chain", "residual": "residual", "dag": "random", "random": "random", "mixed": "mixed"}
    out = []
    for p in problems:
        shape = next((v for k, v in prefixes.items() if p.graph.name.startswith(k)), p.graph.name)
        lo, hi = p.min_feasible_bytes, p.keep_all_peak
        level = (p.budget_bytes - lo) / (hi - lo) if hi > lo else 0.0
        out.append(Instance(p, shape, scale, 0.0, 1.0, level))
    return out


def _step(problem, plan) -> float:
    r = simulate(problem, plan, detail=False)
    return r.step_time_s if r.feasible and r.fits else math.inf


def compare(instances, variants=None, exact: str = "brute"):
    """One row per (instance, variant): the family columns, ``fits``, ``step_s``, ``optimum_s``
    (the ``exact`` planner's, NaN where no plan fits), ``gap`` (NaN where either does not fit),
    ``wall_s`` and the ``plan``; the exact planner's plan is in ``exact_plan``."""
    import pandas as pd  # lazy: start-up cost (pandas)

    variants = VARIANTS if variants is None else dict(variants)
    if not variants:
        raise SlackSwapError("compare.variants: must name at least one (label -> (planner, params))")
    rows = []
    for k, inst in enumerate(instances):
        if not isinstance(inst, Instance):
            raise SlackSwapError(f"compare.instances: item {k} is {type(inst).__name__}, "
                                 "expected synthetic.Instance (see instances_of)")
        p = inst.problem
        best = _planners.get(exact).plan(p)
        opt = _step(p, best)
        for label, (name, params) in variants.items():
            t0 = time.perf_counter()
            plan = _planners.get(name, **params).plan(p)
            wall = time.perf_counter() - t0
            s = _step(p, plan)
            rows.append({"instance": p.graph.name, "budget_bytes": p.budget_bytes, "shape": inst.shape,
                         "scale": inst.scale, "latency": inst.latency, "bwd": inst.bwd, "level": inst.level,
                         "link": f"{inst.scale:g} + {inst.latency:g}", "tensors": len(p.planning_ids),
                         "label": label, "planner": name, "fits": math.isfinite(s),
                         "step_s": s if math.isfinite(s) else math.nan,
                         "optimum_s": opt if math.isfinite(opt) else math.nan,
                         "gap": s / opt - 1 if math.isfinite(s) and math.isfinite(opt) else math.nan,
                         "wall_s": wall, "plan": plan, "exact_plan": best, "problem": p})
    return pd.DataFrame(rows)


def summary(df):
    """Per variant: instances, how many the optimum fits, how many the variant fits, how many it
    leaves INFEASIBLE although the optimum fits, how many it solves optimally (gap < 1e-9), mean
    and worst gap, mean plan seconds."""
    import pandas as pd  # lazy: start-up cost (pandas)

    out = []
    for label, d in df.groupby("label", sort=False):
        solvable = d["optimum_s"].notna()
        g = d["gap"].dropna()
        out.append({"label": label, "instances": len(d), "optimum_fits": int(solvable.sum()),
                    "fits": int(d["fits"].sum()), "infeasible_but_solvable": int((solvable & ~d["fits"]).sum()),
                    "optimal": int((g < 1e-9).sum()), "mean_gap": float(g.mean()) if len(g) else math.nan,
                    "worst_gap": float(g.max()) if len(g) else math.nan, "mean_plan_s": float(d["wall_s"].mean())})
    return pd.DataFrame(out)


def family_key(df, family: str):
    if family == "level":
        edges = list(LEVEL_BINS) + [1.0]
        idx = np.clip(np.searchsorted(edges, df["level"], side="right") - 1, 0, len(LEVEL_BINS) - 1)
        return [f"{edges[i]:.2f}-{edges[i + 1]:.2f}" for i in idx]
    if family not in FAMILIES:
        raise SlackSwapError(f"family: got {family!r}; allowed: {', '.join(map(repr, FAMILIES))}")
    return list(df[family])


def family_table(df, family: str = "level"):
    """Mean and worst gap (and count) per variant and bin of ``family`` (one of ``FAMILIES``:
    budget level in quarters, link = copy seconds per byte + per-copy latency, graph shape);
    instances the optimum cannot fit are left out."""
    d = df[df["optimum_s"].notna()].assign(bin=lambda x: family_key(x, family))
    t = d.groupby(["bin", "label"], sort=True)["gap"].agg(n="size", mean_gap="mean", worst_gap="max")
    return t.unstack("label").swaplevel(0, 1, axis=1).sort_index(axis=1, level=0, sort_remaining=False)


def worst_cases(df, label: str, k: int = 3):
    """The ``k`` rows of variant ``label`` with the largest gap (the optimum fits; a variant that
    does not fit counts as an infinite gap)."""
    d = df[(df["label"] == label) & df["optimum_s"].notna()]
    if not len(d):
        raise SlackSwapError(f"worst_cases.label: got {label!r}; allowed: {sorted(set(df['label']))}")
    key = d["gap"].fillna(math.inf)
    return d.assign(_k=key).sort_values(["_k", "instance"], ascending=[False, True]).head(k).drop(columns="_k")


def side_by_side(problem, plans: dict):
    """One row per planning tensor: name, bytes, producer op, then each plan's decision
    (``keep`` / ``swap`` / ``recompute``), and ``differs`` where the plans disagree; a last row
    ``step time`` holds each plan's simulated step time."""
    import pandas as pd  # lazy: start-up cost (pandas)

    g = problem.graph
    rows = []
    for t in problem.planning_ids:
        row = {"tensor": g.tensors[t].name, "bytes": g.tensors[t].bytes,
               "producer": g.ops[g.tensors[t].producer].name}
        vals = [plan.decisions.get(t, Decision.KEEP).value for plan in plans.values()]
        row.update(dict(zip(plans, vals, strict=True)))
        row["differs"] = len(set(vals)) > 1
        rows.append(row)
    rows.append({"tensor": "step time", "bytes": None, "producer": None,
                 **{k: f"{_step(problem, p):g}" for k, p in plans.items()}, "differs": None})
    return pd.DataFrame(rows)


__all__ = ["FAMILIES", "LEVEL_BINS", "VARIANTS", "compare", "family_key", "family_table", "instances_of",
           "side_by_side", "summary", "worst_cases"]
