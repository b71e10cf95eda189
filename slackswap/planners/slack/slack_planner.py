"""SlackSwap greedy planner ``slack`` (paper arXiv 2610.13003).

The paper's idea: profile one step, treat the copy time that can be *hidden under forward
computation* as a budget ("slack"), spend it swapping the activations most costly to rebuild,
recompute the rest. The algorithm, step by step (``SlackPlanner.plan``):

1. **Profile** (``_Profile``, from the cost model, no simulation): forward end time of every op,
   ``T_fwd``, D2H seconds per tensor, and every tensor's *rebuild cost per byte* ``rpb``: the
   forward seconds of the ops re-run to rebuild it alone, cascading through unsaved
   intermediates (``rerun_closure``). Bytes to evict: ``need = keep_all_peak - budget``.
2. **Slack / swap pass** (paper): the D2H engine copies swaps FIFO in production order
   (docs/timeline.md, "Forward lifetimes"). A swap is accepted, in ``order``, only while every accepted copy
   still ends before the forward pass does, ``end_i = max(end_{i-1}, producer_end_i) + d2h_i <=
   T_fwd`` (incremental check: ``Fifo``), until ``need`` bytes are evicted.
3. **Recompute pass** (paper: recompute the rest): lazy greedy on the *marginal* rebuild seconds
   per byte, i.e. the forward time of the ops the tensor adds to the union of re-run ops of the
   recomputes chosen so far (a swapped input comes back by H2D and stops the cascade).
   **Keep pass** (beyond the paper; the candidates marked ``keep``, ``keep.py``): the
   reverse greedy instead, everything the swap pass left recomputed, then tensors, op output
   groups and op frontiers kept back by exact re-run seconds saved per byte, each copied out
   when the D2H FIFO still has room, else kept while the eviction can spare its bytes.
4. **Reclaim** (beyond the paper): copy time the swap pass left (gaps too short for its
   candidates) goes to the costliest recomputes, then to kept tensors; recomputes the eviction
   no longer needs are kept again, costliest first.
5. **Candidates** (beyond the paper): the greedy in ``order``; with ``pack``, the same greedy
   packing the copy engine largest tensor first (``order="size"``: fewer idle gaps between
   copies, measured better on 5 of the 18 model x budget settings); in hybrid mode the
   recompute-only greedy (no slack spent), so hybrid is never worse than recompute_only by
   construction; each slack candidate also with the keep pass; on problems with at most 64
   planning tensors a keep/recompute plan grown from keep-all by peak lowered per re-run second
   (``recompute_fit``: the greedies can end at recompute-all, which the simulator's rule makes
   no smaller). Identical candidates are judged once.
   Every baseline's plan the mode allows is a candidate too, judged as it is (``search.py``).
6. **Evict-more loop** (beyond the paper): the simulator judges each candidate; while it does not
   fit, more tensors are recomputed (in chunks that double), or swapped when nothing is left to
   recompute (costliest to rebuild first, whatever ``order``), taking first the tensors resident
   where a lower bound of the accounted memory is over the budget. The fastest fitting candidate
   wins.
7. **Local search** (beyond the paper): simulator-judged moves, strict improvements only, within
   ``max_sims`` simulations per ``plan`` call: on problems of at most 64 planning tensors every
   single-tensor change (at most 10: every two-tensor change too, from each of the best three
   candidates) until none improves; above, a few single-tensor moves (un-recompute to swap or keep, latest
   swaps to recompute), two passes. A move that a lower bound of the accounted memory proves
   infeasible, or whose compute alone (every step once plus the re-run ops) is no faster than
   the current plan, is pruned without a simulation (``Judge``).
8. Prefetch issue points follow ``prefetch``; the plan's status and objective come from the
   simulator (``make_plan``).
9. **D2H order** (beyond the paper; ``reorder``, ``order.py``): when the winner stalls and swaps
   two or more tensors, other orders of its copies out (deadline first, largest first, smallest
   first, then neighbour exchanges), at most ``order.ORDER_SIMS`` simulations; an order is kept
   only when faster than production order (with ``margin``: and no slower on the nominal costs).

The paper's estimate of slack ignores the engine's idle gaps and the exact (union) rebuild cost;
steps 4 to 7 and the pruning are ours. Measured numbers: docs/planners.md, section "slack".

>>> from slackswap.timeline.problem import Problem
>>> p = Problem.build("tiny", "a100-80gb", budget=0.5)
>>> plan = SlackPlanner().plan(p)
>>> plan.info.status.value
'FEASIBLE'
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Annotated, Literal

from pydantic import Field

from ...core.plan import Decision, Plan, Status
from ...core.schema import NonNegInt, PosInt, Schema
from ...timeline import simulate
from ...timeline.pipeline import pipeline_of
from ...timeline.problem import with_transfer_margin
from ...timeline.simulate import time_tolerance
from ..base import Parameterised, Tags, make_plan, register
from ..dp import multilevel_plan
from .judge import Fifo, Judge, issue_points, recompute_fit, rerun_closure, rerun_union
from .keep import keep_greedy
from .order import better_order
from .search import PAIRS, SMALL, baseline_plans, descend, judge_all, moves, over_budget

ORDERS = ("rebuild_per_byte", "size", "position")
MODES = ("hybrid", "swap_only", "recompute_only")
PREFETCH = ("auto", "first_use", "lookahead")
#: producer kinds whose outputs are cheap to regenerate (memory-bound, no tensor cores)
CHEAP_KINDS = frozenset({"elementwise", "dropout", "norm"})
K, S, R = Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE


@register("slack")
class SlackPlanner(Parameterised):
    """Greedy slack planner with ablation switches.

    Parameters are declared once, in ``Params`` (a description each; docs/planners.md,
    "Parameters", and ``slackswap planners slack`` list them); the constructor validates and
    stores them, nothing is computed there. ``margin`` plans against slower copies
    (``robustness.with_transfer_margin``; 0 = nominal), judged on the nominal costs
    (docs/robustness.md).
    """

    name = "slack"
    tags = Tags(exact=False, supports_swap=True, supports_recompute=True)

    class Params(Schema):
        order: Literal[ORDERS] = Field("rebuild_per_byte", description=(
            "swap priority: most costly to rebuild per byte freed first, largest first, or earliest produced first"))
        mode: Literal[MODES] = Field("hybrid", description="swap and recompute, never recompute, or never swap")
        prefetch: Literal[PREFETCH] = Field("auto", description=(
            "prefetch issue: as early as the budget allows, at the stage of first use, or the latest stage "
            "whose backward compute covers the copy"))
        min_swap_bytes: NonNegInt = Field(1 << 20, description="tensors smaller than this many bytes are never swapped")
        keep_tail: bool = Field(True, description="never evict the last block's tensors in the first pass")
        regen_masks: bool = Field(True, description=(
            "leave masks, statistics and cheap elementwise/norm outputs to the recompute pass"))
        pack: bool = Field(True, description="also judge the swap pass packing the largest tensor first; keep the faster")
        local_search: bool = Field(True, description="simulator-judged single-tensor moves, strict improvements only")
        max_sims: PosInt = Field(1000, description="simulations of the local search in the whole plan call, at most")
        reorder: bool = Field(True, description=(
            "try other D2H orders of the winner's swaps (deadline first, largest first, smallest first, "
            "neighbour exchanges), judged by the simulator; kept only when faster"))
        margin: Annotated[float, Field(ge=0, le=10)] = Field(0.0, description=(
            "plan against copies 1 + margin times slower (0.2: 20% slower), judged on the nominal costs"))

    def _checked(self) -> None:
        self.margin = float(self.margin)

    # ------------------------------------------------------------------ plan
    def plan(self, problem):
        t0 = time.perf_counter()
        nominal = problem
        if self.margin:
            problem = with_transfer_margin(problem, self.margin)   # plan against slower copies
        prof = _Profile(problem)
        judge = Judge(problem, self.max_sims)
        if problem.budget_bytes >= problem.keep_all_peak:
            dec = dict.fromkeys(problem.planning_ids, K)
            return make_plan(nominal, dec, self.name, self.params, t0)
        cands = [self._greedy(prof, 1.0, self.order)]
        if self.pack and self.order != "size" and self.mode != "recompute_only":
            cands.append(self._greedy(prof, 1.0, "size"))   # packing by size (see module doc)
        if self.mode != "swap_only":
            cands += [self._greedy(prof, 1.0, self.order, keep=True)]
            if self.pack and self.order != "size" and self.mode != "recompute_only":
                cands.append(self._greedy(prof, 1.0, "size", keep=True))
        if self.mode == "hybrid":
            # 0.0 = no slack spent: the recompute_only greedy, so that without local search
            # hybrid is never worse than recompute_only (by construction)
            cands.append(self._greedy(prof, 0.0, self.order))
        if self.mode != "swap_only":
            grown = recompute_fit(problem)      # small problems only: see its docstring
            if grown is not None:
                cands.append(grown)
        small = len(prof.planning) <= SMALL
        fitted, seen = [], []

        def fit(d):
            return self._fit(prof, judge, d)

        def as_is(d):   # a baseline's plan is judged as it is (see search.py)
            return d, judge.score(d, issue_points(problem, d, self.prefetch))[0]

        def baselines(costly):
            out = []
            for d, plan in baseline_plans(problem, self.mode, costly):
                if (self.prefetch == "auto" and plan.problem_key == problem.key and not plan.issue_points
                        and not plan.hold_points and plan.d2h_order is None and plan.decisions == d
                        and plan.info.status in (Status.FEASIBLE, Status.INFEASIBLE)):
                    # judged by the simulator in the baseline's make_plan: not simulated again
                    judge.record(d, {}, plan.info.objective if plan.info.status is Status.FEASIBLE else math.inf)
                out.append(d)
            return out

        judge_all(cands, fitted, seen, fit)
        judge_all(baselines(small), fitted, seen, as_is)
        if not small and not any(math.isfinite(s) for s, _, _ in fitted):   # the costly ones
            judge_all(baselines(None), fitted, seen, as_is)
        tol = time_tolerance(problem.costs)   # equal times (any unit): the earlier candidate
        low = min(s for s, _, _ in fitted)
        fitted.sort(key=lambda x: (0, x[1]) if x[0] <= low + tol else (1, x[0], x[1]))
        best_s, _, best = fitted[0]
        if self.local_search and math.isfinite(best_s):
            starts = [(s, d) for s, _, d in fitted[:3 if len(prof.planning) <= PAIRS else 1] if math.isfinite(s)]
            for s0, start in starts:
                dec, s = descend(judge, start, s0, self.prefetch,
                                 lambda cur: moves(prof, cur, self.mode, self._moves(prof, cur)),
                                 passes=len(prof.planning) if small else 2)
                if s < best_s - tol:
                    best, best_s = dec, s
        if not math.isfinite(best_s) and self.mode != "swap_only":
            ml = multilevel_plan(problem)
            if ml is not None:   # no single-level plan found fits: dp-checkpoint's multi-level one
                return make_plan(nominal, dict(ml.decisions), self.name, self.params, t0,
                                 hold_points=ml.hold_points, message=f"{judge.calls} simulations; "
                                 "no single-level plan found fits: dp-checkpoint's multi-level plan")
        ip = issue_points(problem, best, self.prefetch)
        # the judge's result of the winner when it has one on the nominal costs (no margin)
        known = judge.result(best, ip) if nominal is problem else None
        message = f"{judge.calls} simulations, {judge.pruned} pruned"
        order = None
        if self.reorder and math.isfinite(best_s):
            order, known, message = self._reorder(nominal, problem, best, ip, known, message)
        return make_plan(nominal, best, self.name, self.params, t0, issue_points=ip, result=known,
                         message=message, d2h_order=order)

    @staticmethod
    def _reorder(nominal, problem, dec, ip, known, message):
        """Step 8 (``order.better_order``): ``(order, result, message)``, the D2H order of the
        winner's swaps that is faster than production order on the planning costs and no slower
        on the nominal ones (None: production order), its nominal simulation and the message."""
        base = known if known is not None else simulate(problem, Plan(dec, issue_points=ip), detail=False)
        order, r, label, sims = better_order(problem, dec, ip, base)
        if order is None:
            return None, known, message
        if nominal is not problem:      # a margin: no slower on the nominal costs either
            r = simulate(nominal, Plan(dec, issue_points=ip, d2h_order=order), detail=False)
            plain = simulate(nominal, Plan(dec, issue_points=ip), detail=False)
            if not (r.fits and r.step_time_s <= plain.step_time_s):
                return None, known, message + f"; D2H order: {label} not kept (slower on the nominal costs)"
        return order, r, message + f"; D2H order: {label} ({sims} simulations)"

    # ------------------------------------------------------------ greedy
    def _greedy(self, prof: _Profile, slack_scale: float, order: str, keep: bool = False) -> dict:
        """One greedy pass: regenerate cheap tensors, spend the slack on swaps (in ``order``),
        recompute the rest. ``slack_scale`` scales the D2H deadline (1.0 = end of the forward
        pass, 0.0 = no swap: the recompute_only greedy)."""
        deadline = prof.t_fwd * slack_scale if self.mode == "hybrid" else math.inf
        if (deadline, order) not in prof.slack_passes:   # the keep and recompute passes share it
            dec = dict.fromkeys(prof.planning, K)
            left = prof.need
            evicted: set[int] = set()
            fifo = Fifo()                              # accepted copies, in production order
            if self.mode != "recompute_only" and left > 0:
                left = self._spend_slack(prof, dec, evicted, left, deadline, fifo, order)
            prof.slack_passes[deadline, order] = (dec, evicted, left, fifo)
        dec, evicted, left, fifo = prof.slack_passes[deadline, order]
        dec, evicted, fifo = dict(dec), set(evicted), fifo.copy()
        if left > 0 and self.mode != "swap_only":
            if keep:
                self._keep_pass(prof, dec, evicted, left, deadline, fifo)
            else:
                self._recompute(prof, dec, evicted, left, prof.body_for(self.keep_tail))
            if self.mode == "hybrid" and slack_scale > 0:
                self._reclaim(prof, dec, deadline, fifo)
        return dec

    def _keep_pass(self, prof: _Profile, dec, evicted, need: float, deadline: float, fifo: Fifo) -> None:
        """Step 3b: every tensor the swap pass left recomputed, then units kept back best first
        (``keep_greedy``), each copied out under the forward pass when the D2H FIFO still meets
        ``deadline`` (``fifo`` is updated), else kept while the eviction can spare its bytes."""
        pool = [t for t in prof.body_for(self.keep_tail) if t not in evicted and prof.recomputable[t]]

        def place(unit, spare):
            if self.mode == "recompute_only":
                return None
            big = [t for t in unit if prof.swappable[t] and prof.bytes[t] >= self.min_swap_bytes]
            if not big or sum(prof.bytes[t] for t in unit if t not in big) > spare:
                return None
            return big if fifo.insert_all([prof.item[t] for t in big], deadline) else None

        rec, swapped = keep_greedy(prof.graph, prof.fwd, prof.pset, pool, prof.bytes, need, place)
        for t in rec:
            dec[t] = R
        for t in swapped:
            dec[t] = S
        evicted |= rec | swapped

    def _swap_order(self, prof: _Profile, pool, order: str | None = None) -> list[int]:
        key = {"rebuild_per_byte": lambda t: (-prof.rpb[t], t), "size": lambda t: (-prof.bytes[t], t),
               "position": lambda t: (prof.producer[t], t)}[order or self.order]
        return sorted(pool, key=key)

    def _spend_slack(self, prof: _Profile, dec, evicted, left: float, deadline: float, fifo: Fifo,
                     order: str) -> float:
        cheap = set(prof.cheap) if self.regen_masks else set()
        pool = [t for t in prof.body_for(self.keep_tail) if t not in evicted and prof.swappable[t]
                and prof.bytes[t] >= self.min_swap_bytes and t not in cheap]
        for t in self._swap_order(prof, pool, order):
            if left <= 0:
                break
            if not fifo.insert(prof.item[t], deadline):
                continue
            dec[t] = S
            evicted.add(t)
            left -= prof.bytes[t]
        return left

    def _recompute(self, prof: _Profile, dec, evicted, left: float, pool) -> float:
        """Lazy greedy on marginal rebuild seconds per byte (the closure of re-run ops)."""
        rec = {t for t in evicted if dec[t] is R}   # swapped inputs come back by H2D
        rerun = rerun_union(prof.graph, rec, rec, prof.pset)
        heap = [(prof.rpb[t], t) for t in pool if t not in evicted and prof.recomputable[t]]
        heapq.heapify(heap)
        while heap and left > 0:
            _, t = heapq.heappop(heap)
            ops = rerun_closure(prof.graph, t, rec | {t}, prof.pset) - rerun
            cost = sum(prof.fwd[o] for o in ops) / max(prof.bytes[t], 1)
            if heap and cost > heap[0][0] * (1 + 1e-9):
                heapq.heappush(heap, (cost, t))
                continue
            dec[t] = R
            evicted.add(t)
            rec.add(t)
            rerun |= ops
            left -= prof.bytes[t]
        return left

    def _reclaim(self, prof: _Profile, dec, deadline: float, fifo) -> None:
        """Spend the copy time the swap pass left (gaps too short for its candidates) on the
        recomputes costliest to rebuild, then keep the recomputes the eviction no longer needs
        (costliest first): every byte of D2H slack replaces a rebuild."""
        cost = self._rebuild_costs(prof, dec)
        rec = sorted(cost, key=lambda t: (-cost[t], t))
        kept = sorted((t for t, d in dec.items() if d is K), key=lambda t: (-prof.bytes[t], t))
        for t in rec + kept:
            if prof.swappable[t] and prof.bytes[t] >= self.min_swap_bytes and fifo.insert(prof.item[t], deadline):
                dec[t] = S
        surplus = sum(prof.bytes[t] for t, d in dec.items() if d is not K) - prof.need
        for t in rec:
            if dec[t] is R and prof.bytes[t] <= surplus:
                dec[t] = K
                surplus -= prof.bytes[t]

    @staticmethod
    def _rebuild_costs(prof: _Profile, dec) -> dict[int, float]:
        """Per recomputed tensor: seconds of re-run ops saved by keeping it instead (its closure
        minus the ops the other recomputes re-run anyway)."""
        rec = {t for t, d in dec.items() if d is R}
        clos = {t: rerun_closure(prof.graph, t, rec, prof.pset) for t in rec}
        count: dict[int, int] = {}
        for ops in clos.values():
            for o in ops:
                count[o] = count.get(o, 0) + 1
        return {t: sum(prof.fwd[o] for o in ops if count[o] == 1) for t, ops in clos.items()}

    # --------------------------------------------------------- budget loop
    def _fit(self, prof: _Profile, judge: Judge, dec: dict) -> tuple[dict, float]:
        """Evict more (recompute, or swap in swap_only mode) until the simulator says the plan
        fits, or nothing is left to evict."""
        dec = dict(dec)
        chunk = max(prof.need * 0.05, 1.0)
        while True:
            s, r = judge.score(dec, issue_points(prof.problem, dec, self.prefetch))
            if math.isfinite(s) or judge.left <= 0:
                return dec, s
            evicted = {t for t, d in dec.items() if d is not K}
            before = dict(dec)
            hot = over_budget(prof.problem, dec)   # resident where over the budget
            for pool in ([t for t in prof.planning if t in hot], prof.planning):
                if self.mode != "swap_only":
                    self._recompute(prof, dec, evicted, chunk, pool)
                if dec == before and self.mode != "recompute_only":
                    # nothing left to recompute (or swap_only): swap, ignoring min_swap_bytes, the
                    # costliest to rebuild first (whatever ``order``: never size-first to swap-all)
                    got = 0
                    for t in self._swap_order(prof, pool, "rebuild_per_byte"):
                        if got >= chunk:
                            break
                        if dec[t] is not S and prof.swappable[t]:
                            dec[t] = S
                            got += prof.bytes[t]
                if dec != before:
                    break
            if dec == before:
                return dec, s
            chunk *= 2

    def _moves(self, prof: _Profile, dec: dict) -> list[tuple[int, Decision]]:
        """Local-search moves, most promising first: un-evict the costliest recomputes, turn the
        latest swaps (the copies most likely to stall) into recomputes."""
        rec = sorted((t for t, d in dec.items() if d is R), key=lambda t: (-prof.rpb[t] * prof.bytes[t], t))
        swp = sorted((t for t, d in dec.items() if d is S), key=lambda t: (-prof.producer[t], t))
        moves: list[tuple[int, Decision]] = []
        if self.mode != "recompute_only":
            moves += [(t, S) for t in rec[:4] if prof.swappable[t]]
        moves += [(t, K) for t in rec[:4]]
        if self.mode != "swap_only":
            moves += [(t, R) for t in swp[:4] if prof.recomputable[t]]
        return moves


class _Profile:
    """What the greedy needs from one problem (read only; the problem is never mutated)."""

    def __init__(self, problem):
        self.problem = problem
        g, c = problem.graph, problem.costs
        self.graph = g
        self.planning = list(problem.planning_ids)
        self.pset = set(self.planning)
        self.fwd = c.fwd_s
        ends, acc = [], 0.0
        for f in c.fwd_s:
            acc += f
            ends.append(acc)
        self.t_fwd = acc
        self.bytes = {t: g.tensors[t].bytes for t in self.planning}
        self.producer = {t: g.tensors[t].producer for t in self.planning}
        self.prod_end = {t: ends[self.producer[t]] for t in self.planning}
        self.d2h = {t: c.d2h_s[t] for t in self.planning}
        self.item = {t: (self.producer[t], self.prod_end[t], self.d2h[t]) for t in self.planning}
        self.swappable = {t: g.tensors[t].swappable for t in self.planning}
        self.recomputable = {t: g.tensors[t].recomputable for t in self.planning}
        self.need = problem.keep_all_peak - problem.budget_bytes
        pipe = pipeline_of(problem)
        if pipe is not None and self.need > 0:
            # a byte evicted by a shared plan leaves every micro-batch in flight: about
            # ``in_flight`` bytes off the peak (the evict-more loop adds what is still over)
            self.need = math.ceil(self.need / pipe.in_flight)
        self.rpb, self.cheap = {}, []
        for t in self.planning:
            ops = rerun_closure(g, t, {t}, self.pset)
            self.rpb[t] = sum(c.fwd_s[o] for o in ops) / max(self.bytes[t], 1)
            p = g.ops[self.producer[t]]
            if (len(ops) == 1 and self.recomputable[t]
                    and (p.kind in CHEAP_KINDS or g.tensors[t].kind in ("mask", "stats"))):
                self.cheap.append(t)
        layers = [op.layer for op in g.ops if op.layer is not None]
        last = max(layers) if layers else None
        first_tail = next((op.id for op in g.ops if op.layer == last), len(g.ops)) if last is not None else len(g.ops)
        self.tail = {t for t in self.planning if self.producer[t] >= first_tail}
        self.body = [t for t in self.planning if t not in self.tail]
        #: (deadline, order) -> (decisions, evicted, bytes left, Fifo) after the swap pass
        self.slack_passes: dict = {}

    def body_for(self, keep_tail: bool) -> list[int]:
        return self.body if keep_tail else self.planning


__all__ = ["SlackPlanner", "ORDERS", "MODES", "PREFETCH"]
