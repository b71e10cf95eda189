"""Capuchin (Peng et al., ASPLOS 2020, "Capuchin: Tensor-based GPU Memory Management for Deep
Learning"), simplified to one measured step.

Measure: from the cost model (keep-all timeline, no stalls), every planning tensor's **free time
window** is the compute time between the end of its last forward use and the start of its first
backward use: ``FT = sum(fwd_s[last_fwd+1:]) + sum(bwd_s[first_bwd+1:])``. Its swap is hidden when
``d2h + h2d <= FT`` (Sec. 4.2, "free time"). Decide:

1. swap candidates: swappable tensors with ``d2h + h2d <= FT`` and at least ``min_swap_bytes``,
   in order of decreasing slack ``FT - (d2h + h2d)``, while the copy engines' cumulative busy
   time stays within the forward time (D2H) and the backward time (H2D);
2. recompute candidates: the other recomputable tensors, in order of decreasing MSPS (memory
   saving per second of recomputation, ``bytes / fwd_s[producer]``, Sec. 4.3), one hop deep:
   a tensor is skipped when an input of its producer, or a tensor it is an input for, is already
   chosen (so every recompute reads resident tensors and rebuilds nothing else);
3. the eviction list is 1 then 2; the plan evicts the shortest prefix of it for which the
   simulator says the plan fits (exponential then binary search over the prefix length, which
   assumes fitting is monotone in the prefix; the result always fits if it says FEASIBLE), and
   keeps the rest. If even the whole list does not fit, that plan is returned, INFEASIBLE.
   A prefix whose accounted memory a lower bound already puts over the budget
   (``timeline.memory_bound``, on the forward steps first: the slack planner's
   ``ForwardBound``), and keep-all under a budget below its peak, are known not to fit without
   a simulation.

On a problem with checkpointed regions (``Problem.with_regions``) nothing is copied out: each
swap candidate of step 1 becomes a recompute candidate at its place (dropped if not
recomputable), every prefix is judged by the region simulation (its memory bound is then the
region schedule's exact memory; no forward-step bound), and keep-all is simulated too.
"""

from __future__ import annotations

import time

from pydantic import Field

from ..core.plan import Decision, Plan
from ..core.schema import NonNegInt, Schema
from ..timeline import simulate
from ..timeline.simulate import memory_bound, time_tolerance
from .base import Parameterised, Tags, make_plan, register
from .slack.judge import ForwardBound


def free_windows(problem) -> dict[int, float]:
    """Capuchin's free time ``FT`` of every planning tensor (seconds, keep-all timeline)."""
    g, c = problem.graph, problem.costs
    n = len(g.ops)
    fwd_suffix = [0.0] * (n + 1)
    bwd_suffix = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        fwd_suffix[i] = fwd_suffix[i + 1] + c.fwd_s[i]
        bwd_suffix[i] = bwd_suffix[i + 1] + c.bwd_s[i]
    out = {}
    for t in problem.planning_ids:
        lf = max(g.last_forward_use(t), g.tensors[t].producer)
        fb = problem.first_backward_use(t)
        out[t] = fwd_suffix[lf + 1] + bwd_suffix[fb + 1]
    return out


def eviction_order(problem, min_swap_bytes: int = 0) -> list[tuple[int, Decision]]:
    """The ordered eviction list (swaps by slack, then recomputes by MSPS)."""
    g, c = problem.graph, problem.costs
    ft = free_windows(problem)
    fwd_total, bwd_total = sum(c.fwd_s), sum(c.bwd_s)
    tol = time_tolerance(c)   # times this close are equal (docs/timeline.md 4): units do not matter
    swaps: list[tuple[int, Decision]] = []
    busy_d2h = busy_h2d = 0.0
    cands = [t for t in problem.planning_ids if g.tensors[t].swappable and g.tensors[t].bytes >= min_swap_bytes
             and g.tensors[t].bytes > 0 and c.d2h_s[t] + c.h2d_s[t] <= ft[t] + tol]
    for t in sorted(cands, key=lambda t: (-round((ft[t] - c.d2h_s[t] - c.h2d_s[t]) / tol), t) if tol else t):
        if busy_d2h + c.d2h_s[t] <= fwd_total + tol and busy_h2d + c.h2d_s[t] <= bwd_total + tol:
            busy_d2h += c.d2h_s[t]
            busy_h2d += c.h2d_s[t]
            swaps.append((t, Decision.SWAP))
    swapped = {t for t, _ in swaps}
    rec = [t for t in problem.planning_ids if t not in swapped and g.tensors[t].recomputable
           and g.tensors[t].bytes > 0]

    def msps(t):   # to 9 significant digits, so equal ratios stay equal in any unit of time
        s = c.fwd_s[g.tensors[t].producer]
        return float(f"{g.tensors[t].bytes / s:.9e}") if s > 0 else float("inf")

    chosen: list[int] = []
    blocked: set[int] = set()      # one-hop recompute: a producer's inputs are never recomputed
    for t in sorted(rec, key=lambda t: (-msps(t), t)):
        ins = set(g.ops[g.tensors[t].producer].inputs)
        if t in blocked or ins & set(chosen):
            continue
        chosen.append(t)
        blocked |= ins
    return swaps + [(t, Decision.RECOMPUTE) for t in chosen]


@register("capuchin")
class Capuchin(Parameterised):
    """Swap what hides in its free time, else recompute by MSPS, until the simulator fits."""

    name = "capuchin"
    tags = Tags(supports_swap=True, supports_recompute=True)
    plans_regions = True   # every prefix judged by the problem's simulate (docs/planners.md)

    class Params(Schema):
        min_swap_bytes: NonNegInt = Field(0, description="tensors smaller than this many bytes are never swap "
                                                         "candidates (they may still be recomputed)")

    def plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        order = eviction_order(problem, self.min_swap_bytes)
        if problem.regions is not None:
            # checkpointed regions copy nothing out (a SWAP is kept or recomputed there): each
            # swap candidate is a recompute candidate at its place in the order, if recomputable
            g = problem.graph
            order = [(t, Decision.RECOMPUTE) for t, d in order
                     if d is Decision.RECOMPUTE or g.tensors[t].recomputable]
        base = {t: Decision.KEEP for t in problem.planning_ids}

        def decisions(k: int) -> dict[int, Decision]:
            d = dict(base)
            d.update(order[:k])
            return d

        sims = {}   # prefix length -> SimResult (the chosen one is not simulated again)
        fwd = ForwardBound(problem)

        def fits(k: int) -> bool:
            if k == 0 and problem.budget_bytes < problem.keep_all_peak and problem.regions is None:
                return False   # keep-all: its simulated peak is keep_all_peak
            d = decisions(k)
            if fwd.over(d):
                return False   # the forward steps alone are over (no schedule compiled)
            lb = memory_bound(problem, d)
            if lb.size and lb.max() > problem.budget_bytes + 1e-9:
                return False   # a lower bound of the accounted memory is over: the simulator says infeasible
            sims[k] = simulate(problem, Plan(d, problem_key=problem.key), detail=False)
            return sims[k].fits

        n = len(order)
        if fits(0):
            k = 0
        elif not fits(n):
            k = n
        else:  # smallest fitting prefix: exponential then binary search (fits(n) holds)
            hi = 1
            while hi < n and not fits(hi):
                hi *= 2
            hi = min(hi, n)
            lo = hi // 2          # fits(lo) is False (or lo == 0, checked above)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if fits(mid):
                    hi = mid
                else:
                    lo = mid
            k = hi
        plan = make_plan(problem, decisions(k), self.name, self.params, t0, result=sims.get(k))
        if problem.regions is not None:
            msg = plan.info.message
            plan = plan.with_info(message=problem.regions_text + (f": {msg}" if msg else ""))
        return plan
