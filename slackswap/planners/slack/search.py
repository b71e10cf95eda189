"""Candidates from the baselines and the neighbourhood search of the SlackSwap planner
(``slack_planner.py``, steps 5 to 7). Private: the public API is ``SlackPlanner``.

Why (measured against the brute-force optimum, docs/planners.md, section "slack"): the greedy
passes only ever *add* evictions. On small graphs the evict-more loop overshoots (its chunks
double) and nothing brought a swapped tensor back, so the plan swapped tensors the optimum keeps
(a copy whose latency alone exceeds the compute it could hide under); and where recomputing
more cannot lower the peak (regenerated tensors stay until their last use), the loop ended at
recompute-all, then swapped in the swap order, down to swap-all. Three remedies live here:

* ``baseline_candidates``: every classic planner's plan that the mode allows is a candidate, so
  the greedy is never behind a baseline that fits (above ``SMALL`` planning tensors, one of
  ``COSTLY`` only when nothing else fits; the chain-aware ``dp-checkpoint`` and
  ``checkpoint-layers`` keep the block inputs that break the recompute chains).
* ``over_budget``: the steps at which a lower bound of the accounted memory exceeds the budget;
  evict-more takes tensors resident there first, never blindly in swap order.
* ``moves``: the neighbourhood of the local search. On small problems (at most ``SMALL``
  planning tensors) every single-tensor change, and on the smallest (at most ``PAIRS``) every
  change of two tensors at once, until no move improves; on larger ones the few most promising
  moves (``SlackPlanner._moves``).
"""

from __future__ import annotations

import itertools

import numpy as np

from ...core.errors import SlackSwapError
from ...core.plan import Decision
from ...timeline import compile_schedule
from ...timeline.regions import region_schedule
from ...timeline.simulate import memory_bound
from ..base import get
from .judge import issue_points

K, S, R = Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE
#: the registry planners whose plans are candidates, per mode (their decisions must fit the mode)
BASELINES = {
    "hybrid": ("swap-all", "recompute-all", "checkpoint-layers", "chen-sqrt", "capuchin", "dp-checkpoint",
               "chen-greedy"),
    "recompute_only": ("recompute-all", "checkpoint-layers", "chen-sqrt", "dp-checkpoint", "chen-greedy"),
    "swap_only": ("swap-all",),
}
#: baselines that cost seconds on a full-size model (a DP over the chain of blocks, a simulated
#: greedy): on problems above ``SMALL`` planning tensors they are candidates only
#: when nothing else fits
COSTLY = ("dp-checkpoint", "chen-greedy")
SMALL = 64   # planning tensors: every single-tensor move
PAIRS = 10   # planning tensors: every two-tensor move too


def allowed(prof, t: int, mode: str) -> tuple[Decision, ...]:
    """Decisions tensor ``t`` may take in ``mode``."""
    out = [K]
    if mode != "recompute_only" and prof.swappable[t]:
        out.append(S)
    if mode != "swap_only" and prof.recomputable[t]:
        out.append(R)
    return tuple(out)


def baseline_candidates(problem, mode: str, costly: bool | None = True) -> list[dict]:
    """Decisions of the planners of ``BASELINES[mode]`` on ``problem``: all (``costly=True``),
    all but ``COSTLY`` (False) or only ``COSTLY`` (None). A planner that refuses the graph (a
    chain-only planner on a graph without blocks) is skipped."""
    return [dec for dec, _ in baseline_plans(problem, mode, costly)]


def baseline_plans(problem, mode: str, costly: bool | None = True) -> list[tuple[dict, object]]:
    """``baseline_candidates`` with each planner's ``Plan`` (its status and objective are the
    simulator's, so a plan with nothing but decisions need not be simulated again)."""

    out = []
    for name in BASELINES[mode]:
        if (costly is False and name in COSTLY) or (costly is None and name not in COSTLY):
            continue
        try:
            plan = get(name).plan(problem)
        except SlackSwapError:
            continue
        dec = {t: plan.decisions.get(t, K) for t in problem.planning_ids}
        if (mode == "recompute_only" and S in dec.values()) or (mode == "swap_only" and R in dec.values()):
            continue
        out.append((dec, plan))
    return out


def judge_all(cands, fitted: list, seen: list, evaluate) -> None:
    """Evaluate each candidate (``evaluate(decisions) -> (decisions, seconds)``) and append
    ``(seconds, index, decisions)`` to ``fitted``; identical plans (``seen`` before) are judged
    once."""
    for dec in cands:
        if dec in seen:
            continue
        seen.append(dec)
        dec, s = evaluate(dec)
        if not any(dec == d for _, _, d in fitted):
            fitted.append((s, len(fitted), dec))


def over_budget(problem, dec: dict, sched=None) -> set[int]:
    """Planning tensors resident (KEEP or SWAP in the forward pass) at a step where a lower bound
    of the accounted memory (``timeline.memory_bound``) exceeds the budget; empty when
    the bound fits everywhere (then the plan fails on copy timing, not on residency). ``sched``:
    the compiled schedule of ``dec`` when the caller has it."""

    if getattr(problem, "regions", None) is not None:   # the decisions as they run, no copies
        dec, sched = region_schedule(problem.graph, dec, problem.regions, problem.region_swap)
        lb = sched.static_memory()
    else:
        lb = memory_bound(problem, dec)
    sizes = problem.graph.tensors
    over = lb > problem.budget_bytes + 1e-9
    if not over.any():
        return set()
    sched = sched if sched is not None else compile_schedule(problem.graph, dec)
    hot = np.concatenate(([0], np.cumsum(over)))     # hot[f + 1] - hot[a]: over-budget steps in [a, f]
    ops = problem.graph.ops
    last: dict[int, int] = {}
    for step, (kind, o) in enumerate(zip(sched.kinds, sched.ops, strict=True)):
        if o >= 0:
            for t in (*ops[o].inputs, *ops[o].saves) if kind != "fwd" else ops[o].inputs:
                last[t] = step
    out = set()
    for t, d in dec.items():
        if d is K:
            spans = [(sizes[t].producer, last.get(t, sizes[t].producer))]
        elif d is S:
            spans = [sched.swap_fwd[t], sched.swap_bwd.get(t, (0, -1))]
        else:
            continue
        if any(f >= a and hot[f + 1] > hot[a] for a, f in spans):
            out.add(t)
    return out


def moves(prof, dec: dict, mode: str, few) -> list[dict]:
    """Neighbourhood of ``dec`` (each move a dict of changed decisions), most promising first:
    un-evictions, then swap <-> recompute, then (small problems) two-tensor changes. ``few``
    gives the moves of a large problem as (tensor, decision) pairs."""
    ids = prof.planning
    if len(ids) > SMALL:
        return [{t: d} for t, d in few]
    singles = [{t: d} for t in ids for d in allowed(prof, t, mode) if d is not dec[t]]
    singles.sort(key=lambda m: (next(iter(m.values())) is not K, -prof.bytes[next(iter(m))]))
    if len(ids) > PAIRS:
        return singles
    pairs = []
    for a, b in itertools.combinations(ids, 2):
        for da in allowed(prof, a, mode):
            for db in allowed(prof, b, mode):
                if da is not dec[a] and db is not dec[b]:
                    pairs.append({a: da, b: db})
    return singles + pairs


def descend(judge, start: dict, best: float, prefetch: str, neighbours, passes: int) -> tuple[dict, float]:
    """First-improvement local search: apply each move of ``neighbours(cur)`` that strictly
    lowers the simulated step time; repeat while a pass improves, at most ``passes`` passes and
    within the judge's simulation budget. Moves a memory lower bound proves infeasible, and moves
    whose compute alone (``Judge.compute_bound``) is no faster than the current plan, are pruned
    without a simulation (both counted in ``judge.pruned``)."""

    cur = dict(start)
    for _ in range(passes):
        improved = False
        for m in neighbours(cur):
            if judge.left <= 0:
                return cur, best
            if all(cur[t] is d for t, d in m.items()):
                continue
            cand = {**cur, **m}
            if judge.compute_bound(cand) >= best * (1 - 1e-12):   # cannot strictly improve
                judge.pruned += 1
                continue
            s, _ = judge.score(cand, issue_points(judge.problem, cand, prefetch), prefilter=True)
            if s < best * (1 - 1e-12):
                cur, best, improved = cand, s, True
        if not improved:
            break
    return cur, best
