"""The keep/swap/recompute MILP over the timeline contract (docs/timeline.md; docs/milp.md).

One formulation, written against the backend-neutral ``Model``. Potential compute steps: the n
forward steps, then per backward stage j the nodes of stage j's *recompute tree* (the unpruned
``need()`` recursion of ``compile_schedule``) in post-order, each active iff ``rerun[v]``, then the
backward step of op j, then the optimizer. Times are in units of the ideal step, bytes in units of
the budget. Every simulator rule ``start >= ...`` becomes a ``>=`` row (big-M switched where it
only applies under some decisions); minimising the optimizer's end makes them tight (max-plus).
"""

from __future__ import annotations

import bisect
import itertools
import math
import time
from dataclasses import dataclass, field

from .aggregate import add_to
from .model import Model, prefix


class BuildTimeout(Exception):
    """Raised by ``build`` when its ``deadline`` passes (the planner then returns its warm start)."""


def _clock(deadline):
    """A check to call inside long loops: raises ``BuildTimeout`` once ``deadline`` has passed."""
    if deadline is None:
        return lambda: None

    def check():
        if time.perf_counter() > deadline:
            raise BuildTimeout
    return check


@dataclass
class Built:
    model: Model
    keep: dict[int, int]
    swap: dict[int, int]
    rec: dict[int, int]
    issue: dict[tuple[int, int], int]
    tau: float
    objective_col: int
    narrowed: list[str] = field(default_factory=list)
    reruns: dict[int, dict[int, list[int]]] = field(default_factory=dict)
    """With ``hold_points``: regenerable tensor -> stage -> the re-run columns of its producer there."""
    held: dict[int, dict[int, int]] = field(default_factory=dict)
    """With ``hold_points``: regenerable tensor -> stage -> the column ``held[y,j]`` (the copy made
    in stage j stays until its last use: j is the tensor's hold point)."""
    d2h_queue: list[int] = field(default_factory=list)
    """The swap columns' tensors in production order (the default D2H order)."""
    d2h_before: dict[tuple[int, int], int] = field(default_factory=dict)
    """With ``d2h_any``: ``(a, b)``, ``a`` produced before ``b`` -> the column ``d2h_before[a,b]``
    (1: ``a`` is copied out before ``b``)."""
    d2h_start: dict[int, int] = field(default_factory=dict)
    """Swap column's tensor -> the column ``d2h_start[t]``."""


def build(problem, allow_swap: bool = True, allow_recompute: bool = True, max_tree_nodes: int = 4000,
          deadline: float | None = None, d2h_fifo: bool = True, aggregate_rows: bool = True,
          hold_points: bool = False, d2h_any: bool = False) -> Built:
    """The model of ``problem``; ``deadline`` (a ``time.perf_counter()`` value) stops a build that
    takes too long with ``BuildTimeout``. ``d2h_fifo=False`` leaves out the production-order D2H
    rows (``d2h_fifo``): a relaxation of the plans with any ``d2h_order`` (``bounds.lower_bound``).
    ``aggregate_rows`` adds the aggregated relaxation's rows on the same decisions
    (``aggregate.add_to``, names ``agg.*``): no plan is cut off, the LP relaxation is stronger.
    ``hold_points`` describes multi-level plans too (docs/timeline.md 3; docs/milp.md, "Potential steps",
    "hold points"): an op may re-run once per stage, and a regenerated copy is held past its stage
    or freed after its last read there (columns ``held[y,j]``). The steps: ``_Form``'s methods,
    in the order below."""
    f = _Form(problem, _clock(deadline), hold_points)
    f.decisions(allow_swap, allow_recompute)
    f.potential_steps(max_tree_nodes)
    f.rerun_columns()
    if hold_points:
        f.hold_columns()
    f.tick()
    f.tree_rows()
    f.compute_stream()
    f.d2h_rows(d2h_fifo, d2h_any)
    f.use_events()
    f.h2d_rows()
    f.h2d_order()
    m, c, tau, B = f.m, f.c, f.tau, f.B
    if math.isfinite(B):
        _memory(m, problem, f.steps, f.nodes, f.x, f.act, f.keep, f.swap, f.rec, f.issue, f.uses, f.emits,
                f.bwd_pos, f.ready, f.d2h_end, f.Mt, B, f.rtype, f.tick,
                hold=(f.held, f.carried) if hold_points else None)
    start_opt = f.start[f.opt_pos]
    m.minimize([(1.0, start_opt)], c.optimizer_s / tau)
    if aggregate_rows and math.isfinite(B):
        f.tick()
        add_to(m, problem, f.rec, f.swap, start_opt, tau, c.optimizer_s)
    return Built(m, f.keep, f.swap, f.rec, f.issue, tau, start_opt, f.narrowed, f.reruns, f.held, f.d2h_queue,
                 f.d2h_before, f.d2h_start)


def _neg(terms):
    return [(-cf, col) for cf, col in terms]


class _Form:
    """The exact model under construction (``build``) and the steps that add its columns and rows."""

    def __init__(self, problem, tick, hold_points: bool):
        self.problem, self.tick, self.hold_points = problem, tick, hold_points
        g = problem.graph
        self.g, self.c = g, problem.costs
        self.T, self.ops, self.n = g.tensors, g.ops, len(g.ops)
        self.planning = list(problem.planning_ids)
        self.pset = set(self.planning)
        self.tau = problem.ideal_step_s if problem.ideal_step_s > 0 else 1.0
        self.B = float(problem.budget_bytes)
        self.m = Model(f"slackswap_{g.name}")
        self.narrowed: list[str] = []
        self.reruns: dict[int, dict[int, list[int]]] = {}
        self.held: dict[int, dict[int, int]] = {}
        self.carried_run: dict[int, tuple[list[int], object]] = {}

    def decisions(self, allow_swap: bool, allow_recompute: bool) -> None:
        """``keep``, ``swap``, ``rec`` and ``one_decision`` per planning tensor."""
        m, T = self.m, self.T
        self.keep, self.swap, self.rec = keep, swap, rec = {}, {}, {}
        for t in self.planning:
            keep[t] = m.var(f"keep[{t}]", binary=True)
            row = [(1.0, keep[t])]
            if allow_swap and T[t].swappable:
                swap[t] = m.var(f"swap[{t}]", binary=True)
                row.append((1.0, swap[t]))
            if allow_recompute and T[t].recomputable:
                rec[t] = m.var(f"rec[{t}]", binary=True)
                row.append((1.0, rec[t]))
            m.add_eq(f"one_decision[{t}]", row, 1.0)

    def rtype(self, t):  # None: never recompute-type; "one": always; else the rec column
        if self.T[t].producer is None:
            return None
        if t not in self.pset:
            return "one"
        return self.rec.get(t)

    def groups(self, ts, seen):
        """Consecutive recompute-type tensors of one producer, in the order ``need()`` visits them,
        leaving out those ``need()`` has surely visited before in this stage (``seen``: they are
        resident by then and add no step): the first of a group that needs its producer re-runs
        it and the others are then resident, so a group is one node ("Potential steps")."""
        T = self.T
        ts = [t for t in dict.fromkeys(ts) if self.rtype(t) is not None and t not in seen]
        return [list(grp) for _, grp in itertools.groupby(ts, key=lambda t: T[t].producer)]

    def visit(self, ts, parent, stage, budget_left, seen):
        nodes, steps = self.nodes, self.steps
        if budget_left[0] <= 0:
            self.pruned.extend((parent, t, stage) for t in ts)
            return
        budget_left[0] -= 1
        v = len(nodes)
        nd = {"ts": ts, "op": self.T[ts[0]].producer, "parent": parent, "stage": stage, "enter": self.clock[0],
              "first": len(steps)}
        self.clock[0] += 1
        nodes.append(nd)
        seen = set(seen)     # visited whenever this node is: its ancestors' earlier children, ...
        for grp in self.groups(self.ops[nd["op"]].inputs, seen):
            self.visit(grp, v, stage, budget_left, seen)
            seen.update(grp)     # ... and its own earlier children
        nd["exit"] = self.clock[0]
        self.clock[0] += 1
        nd["pos"] = len(steps)
        steps.append(("rec", nd["op"], stage, v))

    def potential_steps(self, max_tree_nodes: int) -> None:
        """The potential steps and the recompute trees (``steps``, ``nodes``, ``bwd_pos``)."""
        n = self.n
        self.steps = steps = [("fwd", i, n, -1) for i in range(n)]  # kind, op, stage, node
        self.nodes = []
        self.clock = [0]
        self.pruned = []   # (parent node, tensor, stage): not expanded (cap)
        self.bwd_pos = bwd_pos = {}
        for j in range(n - 1, -1, -1):
            self.tick()
            left = [max_tree_nodes]
            seen: set[int] = set()
            for grp in self.groups(self.ops[j].saves, seen):
                self.visit(grp, None, j, left, seen)
                seen.update(grp)
            bwd_pos[j] = len(steps)
            steps.append(("bwd", j, j, -1))
        self.opt_pos = len(steps)
        steps.append(("opt", -1, -1, -1))
        if self.pruned:
            self.narrowed.append(f"recompute trees capped at {max_tree_nodes} nodes per stage "
                                 f"({len(self.pruned)} deeper re-runs forbidden)")

    def rerun_columns(self) -> None:
        """``rerun[op,stage]#v`` per node and the running sums ``done[op]``."""
        m, nodes = self.m, self.nodes
        self.x = x = [m.var(f"rerun[{nd['op']},{nd['stage']}]#{v}", binary=True) for v, nd in enumerate(nodes)]
        self.by_op = by_op = {}
        for v, nd in enumerate(nodes):
            by_op.setdefault(nd["op"], []).append(v)
        for us in by_op.values():
            us.sort(key=lambda u: nodes[u]["pos"])
        # done(v): re-runs of v's op finished before v is entered = the nodes of that op at positions
        # before v's subtree (post-order), a prefix of the op's nodes by position: one running-sum
        # column instead of the whole list ("Constraints (names as in the LP file)", "prefix sums")
        self.op_pos = {op: [nodes[u]["pos"] for u in us] for op, us in by_op.items()}
        self.done_col = {op: prefix(m, f"done[{op}]", [x[u] for u in us]) for op, us in by_op.items()}

    def done_upto(self, op, pos):     # sum of rerun[u], u of op at a position < pos, as terms
        return self.done_col[op](bisect.bisect_left(self.op_pos[op], pos)) if op in self.by_op else []

    def rt_terms(self, t, coef):
        r = self.rtype(t)
        return ([], coef) if r == "one" else ([(coef, r)], 0.0)

    def stage_first(self, stage):      # position of the first potential step of a backward stage
        return self.n if stage == self.n - 1 else self.bwd_pos[stage + 1] + 1

    def in_stage(self, op, stage, pos):    # re-runs of op in ``stage`` at positions before pos
        return self.done_upto(op, pos) + _neg(self.done_upto(op, self.stage_first(stage)))

    def hold_columns(self) -> None:
        """Hold points (multi-level recompute): held[y,j] = 1 keeps the copy of y regenerated in
        stage j until its last use; else it is freed after its last read in stage j. carried(y, j):
        a held copy made in an earlier-processed stage, resident when stage j starts."""
        m, nodes, x, by_op, reruns, held = self.m, self.nodes, self.x, self.by_op, self.reruns, self.held
        stage_nodes: dict[tuple[int, int], list[int]] = {}
        for v, nd in enumerate(nodes):
            stage_nodes.setdefault((nd["op"], nd["stage"]), []).append(x[v])
        for op in sorted(by_op):
            stages = sorted({nodes[u]["stage"] for u in by_op[op]}, reverse=True)
            for y in self.ops[op].outputs:
                if self.rtype(y) is None or y in reruns:
                    continue
                reruns[y] = {j: stage_nodes[(op, j)] for j in stages}
                # a held copy counts as resident after its last read too (a later re-run does not
                # allocate it again, docs/timeline.md 3): a column at every stage but the last
                cols = {j: m.var(f"held[{y},{j}]", binary=True) for j in stages if j > 0}
                if not cols:
                    continue
                held[y] = cols
                order = list(cols)        # stages in processing order (descending)
                run = prefix(m, f"carried[{y}]", [cols[j] for j in order])
                self.carried_run[y] = (order, run)
                rterm, rconst = self.rt_terms(y, -1.0)
                for i, j in enumerate(order):
                    # only a copy made there (a re-run of op in stage j, y not carried) can be held
                    m.add_le(f"held_if_rerun[{y},{j}]", [(1.0, cols[j])] + _neg(self.in_stage(op, j, self.bwd_pos[j])), 0.0)
                    m.add_le(f"held_once[{y},{j}]", [(1.0, cols[j])] + run(i) + rterm, -rconst)

    def carried(self, t, stage):
        """Terms of ``carried(t, stage)``: 1 iff a copy of t held from an earlier stage is resident."""
        if t not in self.carried_run:
            return []
        order, run = self.carried_run[t]
        return run(sum(j > stage for j in order))

    def tree_rows(self) -> None:
        """The rows of the recompute trees (``tree``, ``rerun_if_rec``, ``once``, ``cascade``) and
        the capped subtrees (``capped``)."""
        m, x, hold_points, rtype, rt_terms, carried = self.m, self.x, self.hold_points, self.rtype, self.rt_terms, self.carried
        for v, nd in enumerate(self.nodes):
            q = nd["parent"]
            j = nd["stage"]
            done = self.done_upto(nd["op"], nd["first"]) if not hold_points else self.in_stage(nd["op"], j, nd["first"])
            if q is not None:
                m.add_le(f"tree[{v}]", [(1.0, x[v]), (-1.0, x[q])], 0.0)
            always = any(rtype(t) == "one" for t in nd["ts"])
            if hold_points:   # re-run only if some tensor of the group is recompute-type and not carried
                row, rhs = [(1.0, x[v])], 0.0
                for t in nd["ts"]:
                    rterm, rconst = rt_terms(t, -1.0)
                    row += rterm + carried(t, j)
                    rhs -= rconst
                m.add_le(f"rerun_if_rec[{v}]", row, rhs)
            elif not always:     # re-run only if some tensor of the group is RECOMPUTE
                m.add_le(f"rerun_if_rec[{v}]", [(1.0, x[v])] + [(-1.0, rtype(t)) for t in nd["ts"]], 0.0)
            m.add_le(f"once[{v}]", [(1.0, x[v])] + done, 1.0)
            # cascade: x[v] >= x[parent] + rt[t] - done_before - 1 (parent = 1 at the root), every t;
            # with hold points also - carried(t): a held copy is resident
            par = [(-1.0, x[q])] if q is not None else []
            # without hold points an always-group (a tensor no op saves) triggers the re-run whenever
            # it is not done: one row; with them each tensor may be carried, so one row per tensor
            one_row = always and not hold_points
            for t in ([nd["ts"][0]] if one_row else nd["ts"]):
                rterm, rconst = ([], -1.0) if one_row else rt_terms(t, -1.0)
                rhs = -1.0 + (0.0 if q is not None else 1.0) + (1.0 if rconst else 0.0)
                m.add_ge(f"cascade[{v},{t}]", [(1.0, x[v])] + par + rterm + done + carried(t, j), rhs)
        for (q, t, stage) in self.pruned:   # narrowing: a capped subtree must never be needed
            if hold_points:
                done = _neg(carried(t, stage))
            else:      # earlier stages lie before it
                done = _neg(self.done_upto(self.T[t].producer, self.stage_first(stage)))
            rterm, rconst = rt_terms(t, 1.0)
            par = [(1.0, x[q])] if q is not None else []
            m.add_le(f"capped[{q},{t}]", par + rterm + done, (1.0 if q is not None else 0.0) - rconst)

    def compute_stream(self) -> None:
        """The compute stream: ``ready``/``start`` per potential step, ``seq`` and ``after_ready``."""
        m, c, tau, steps, x = self.m, self.c, self.tau, self.steps, self.x
        self.act = [None if k != "rec" else x[nd] for (k, _, _, nd) in steps]  # None = always active
        self.S = S = len(steps)
        self.ftau = ftau = [0.0] * S
        for s, (k, op, _, _) in enumerate(steps):
            ftau[s] = (c.fwd_s[op] if k in ("fwd", "rec") else c.bwd_s[op] if k == "bwd" else c.optimizer_s) / tau
        self.Mt = (2 * sum(c.fwd_s) + sum(c.bwd_s) + c.optimizer_s + sum(c.d2h_s) + sum(c.h2d_s) / c.duplex_factor) / tau + 1.0
        self.ready = ready = [m.var(f"ready[{s}]") for s in range(S)]
        self.start = start = [m.var(f"start[{s}]") for s in range(S)]
        for s in range(S):
            if s:
                et, ec = self.end_terms(s - 1, -1.0)
                m.add_ge(f"seq[{s}]", [(1.0, ready[s])] + et, -ec)
            m.add_ge(f"after_ready[{s}]", [(1.0, start[s]), (-1.0, ready[s])], 0.0)

    def end_terms(self, s, coef=1.0):
        act, ftau = self.act, self.ftau
        return [(coef, self.start[s])] + ([(coef * ftau[s], act[s])] if act[s] is not None else []), coef * (
            ftau[s] if act[s] is None else 0.0)

    def d2h_rows(self, d2h_fifo: bool, d2h_any: bool = False) -> None:
        """D2H: FIFO in production order; with ``d2h_any`` FIFO in an order the model chooses."""
        m, T, ops, swap = self.m, self.T, self.ops, self.swap
        swq = sorted(swap, key=lambda t: (T[t].producer, ops[T[t].producer].outputs.index(t)))
        self.d2h_queue, self.d2h_before = swq, {}
        self.d2h_start, self.d2h_end = d2h_start, d2h_end = {}, {}
        prev = None
        for t in swq:
            ds = d2h_start[t] = m.var(f"d2h_start[{t}]")
            d2h_end[t] = m.var(f"d2h_end[{t}]")
            et, ec = self.end_terms(T[t].producer, -1.0)
            m.add_ge(f"d2h_after_producer[{t}]", [(1.0, ds)] + et, -ec)
            if prev is not None and d2h_fifo and not d2h_any:
                m.add_ge(f"d2h_fifo[{t}]", [(1.0, ds), (-1.0, d2h_end[prev])], 0.0)
            # >=, not =: an end only delays what follows it, so the optimum makes it tight (and a
            # solver with times on a grid, CP-SAT, may round it up)
            m.add_ge(f"d2h_dur[{t}]", [(1.0, d2h_end[t]), (-1.0, ds), (-self.c.d2h_s[t] / self.tau, swap[t])], 0.0)
            prev = t
        if d2h_fifo and d2h_any:
            self.d2h_order(swq)

    def d2h_order(self, swq) -> None:
        """The D2H order as a decision: for each pair ``a`` before ``b`` in production order a
        binary ``o = d2h_before[a,b]``; a copy that goes first, if swapped, ends before the other
        starts. The predecessor's ``swap`` switches its row off when it is not copied (its times are
        then free), so any order of the swapped tensors is a solution, and every solution's swapped
        copies run one at a time in the order of their starts: the simulator's FIFO queue in that
        order, as ``d2h_fifo`` is in production order (docs/milp.md, "The D2H order")."""
        m, Mt, swap, d2h_start, d2h_end = self.m, self.Mt, self.swap, self.d2h_start, self.d2h_end
        for i, a in enumerate(swq):
            for b in swq[i + 1:]:
                self.tick()
                o = self.d2h_before[a, b] = m.var(f"d2h_before[{a},{b}]", binary=True)
                m.add_ge(f"d2h_order[{a},{b}]", [(1.0, d2h_start[b]), (-1.0, d2h_end[a]), (-Mt, o), (-Mt, swap[a])],
                         -2 * Mt)
                m.add_ge(f"d2h_order[{b},{a}]", [(1.0, d2h_start[a]), (-1.0, d2h_end[b]), (Mt, o), (-Mt, swap[b])],
                         -Mt)

    def use_events(self) -> None:
        """The use and emit events per tensor ((position, activity column or None)) and the first
        active step of each stage (for issue points)."""
        m, ops, x, act, steps = self.m, self.ops, self.x, self.act, self.steps
        self.uses = uses = {}
        for j in range(self.n):
            for t in dict.fromkeys(ops[j].saves):
                uses.setdefault(t, []).append((self.bwd_pos[j], None))
        for v, nd in enumerate(self.nodes):
            for t in dict.fromkeys(ops[nd["op"]].inputs):
                uses.setdefault(t, []).append((nd["pos"], x[v]))
        self.emits = emits = {}
        for v, nd in enumerate(self.nodes):
            for y in ops[nd["op"]].outputs:
                emits.setdefault(y, []).append((nd["pos"], x[v]))
        self.stage_steps = stage_steps = {}
        for s, (k, _, st, _) in enumerate(steps):
            if k in ("rec", "bwd"):
                stage_steps.setdefault(st, []).append(s)
        self.first_act = first_act = {}
        for st, ss in stage_steps.items():
            before = prefix(m, f"stage_active[{st}]", [act[p] for p in ss if act[p] is not None])
            for i, s in enumerate(ss):
                if i == 0 and act[s] is None:
                    first_act[s] = None
                    continue
                if all(act[p] is None for p in ss[:i]) and i:
                    continue   # an always-active step precedes: never first
                fa = m.var(f"first_in_stage[{s}]", 0.0, 1.0)
                row = [(1.0, fa)] + ([(-1.0, act[s])] if act[s] is not None else []) \
                    + before(sum(act[p] is not None for p in ss[:i]))
                m.add_ge(f"first_in_stage[{s}]", row, 0.0 if act[s] is not None else 1.0)
                first_act[s] = fa
        self.starts = {}

    def stage_start(self, k):
        """Column >= the ready time of the first active step of stage k (its value at the optimum),
        shared by every tensor issued at k instead of one row per (tensor, step)."""
        m, starts, Mt = self.m, self.starts, self.Mt
        if k not in starts:
            starts[k] = m.var(f"stage_start[{k}]")
            for s in self.stage_steps[k]:
                if s in self.first_act:
                    fa = self.first_act[s]
                    row = [(1.0, starts[k]), (-1.0, self.ready[s])] + ([(-Mt, fa)] if fa is not None else [])
                    m.add_ge(f"stage_start[{k},{s}]", row, -Mt if fa is not None else 0.0)
        return starts[k]

    def qkey(self, pos, t):
        """H2D queue key of t first used at step pos: (pos, position of t in the list that step
        asks for: a re-run's inputs, a backward op's saves), as the simulator's Schedule.h2d_queue."""
        kind, op = self.steps[pos][0], self.steps[pos][1]
        asked = dict.fromkeys(self.ops[op].inputs if kind == "rec" else self.ops[op].saves)
        return float(pos * self.R + list(asked).index(t))

    def h2d_rows(self) -> None:
        """H2D: issue points, waits and the first use of each swapped tensor (``fpos``)."""
        m, c, tau, n, g, Mt, steps, uses, start = self.m, self.c, self.tau, self.n, self.g, self.Mt, self.steps, self.uses, self.start
        swap, qkey = self.swap, self.qkey
        self.issue = issue = {}
        self.h2d_start, self.h2d_end, self.fpos = h2d_start, h2d_end, fpos = {}, {}, {}
        self.R = 1 + max(max(len(op.inputs), len(op.saves)) for op in self.ops)
        for t in swap:
            self.tick()
            lo = max(g.saved_by[t])
            cols = {k: m.var(f"issue[{t},{k}]", binary=True) for k in range(lo, n)}
            issue.update({(t, k): v for k, v in cols.items()})
            m.add_eq(f"one_issue[{t}]", [(1.0, v) for v in cols.values()] + [(-1.0, swap[t])], 0.0)
            hs, he = m.var(f"h2d_start[{t}]"), m.var(f"h2d_end[{t}]")
            h2d_start[t], h2d_end[t] = hs, he
            m.add_ge(f"h2d_dur[{t}]", [(1.0, he), (-1.0, hs), (-c.h2d_s[t] / tau, swap[t])], 0.0)
            m.add_ge(f"h2d_after_d2h[{t}]", [(1.0, hs), (-1.0, self.d2h_end[t]), (-Mt, swap[t])], -Mt)
            for pos, a in uses.get(t, ()):
                st = steps[pos][2]
                if a is not None and st > lo:
                    m.add_le(f"issue_before_use[{t},{pos}]", [(1.0, cols[k]) for k in range(lo, st)] + [(1.0, a)], 1.0)
                row = [(1.0, start[pos]), (-1.0, he), (-Mt, swap[t])] + ([(-Mt, a)] if a is not None else [])
                m.add_ge(f"wait_h2d[{t},{pos}]", row, -Mt * (2.0 if a is not None else 1.0))
            for k, col in cols.items():
                m.add_ge(f"h2d_after_issue[{t},{k}]", [(1.0, hs), (-1.0, self.stage_start(k)), (-Mt, col)], -Mt)
            p0 = self.bwd_pos[lo]
            cand = sorted({pos for pos, a in uses.get(t, ()) if a is not None and pos < p0})
            if not cand:
                fpos[t] = ([], qkey(p0, t), qkey(p0, t), qkey(p0, t))
                continue
            acts = {pos: a for pos, a in uses[t] if a is not None and pos < p0}
            fu = {}
            earlier = prefix(m, f"used_before[{t}]", [acts[q] for q in cand])
            for i, pos in enumerate(cand + [p0]):
                fu[pos] = m.var(f"first_use[{t},{pos}]", binary=True)
                if pos != p0:
                    m.add_le(f"first_use_active[{t},{pos}]", [(1.0, fu[pos]), (-1.0, acts[pos])], 0.0)
                row = [(1.0, fu[pos])] + ([(-1.0, acts[pos])] if pos != p0 else []) + earlier(i)
                m.add_ge(f"first_use_min[{t},{pos}]", row, 0.0 if pos != p0 else 1.0)
            m.add_eq(f"one_first_use[{t}]", [(1.0, v) for v in fu.values()], 1.0)
            fpos[t] = ([(qkey(pos, t), v) for pos, v in fu.items()], 0.0, qkey(cand[0], t), qkey(p0, t))

    def h2d_order(self) -> None:
        """H2D: FIFO in first-use order; a pair whose first uses can come in either order gets an
        order column ``h2d_before``."""
        m, Mt, fpos, h2d_start, h2d_end = self.m, self.Mt, self.fpos, self.h2d_start, self.h2d_end
        P = float((self.S + 1) * self.R)
        hq = sorted(self.swap, key=lambda t: fpos[t][3])   # keys are distinct between tensors
        variable = [(a, b) for i, a in enumerate(hq) for b in hq[i + 1:]
                    if not (fpos[a][3] < fpos[b][2] or fpos[b][3] < fpos[a][2])]
        if not variable:
            for a, b in zip(hq, hq[1:], strict=False):
                m.add_ge(f"h2d_fifo[{b}]", [(1.0, h2d_start[b]), (-1.0, h2d_end[a])], 0.0)
            return
        var_set = {frozenset(p) for p in variable}
        for i, a in enumerate(hq):
            for b in hq[i + 1:]:
                if frozenset((a, b)) not in var_set:
                    first, second = (a, b) if not fpos[b][3] < fpos[a][2] else (b, a)
                    m.add_ge(f"h2d_fifo[{first},{second}]", [(1.0, h2d_start[second]), (-1.0, h2d_end[first])], 0.0)
                    continue
                y, z = (a, b) if a < b else (b, a)
                o = m.var(f"h2d_before[{y},{z}]", binary=True)
                ty, cy = fpos[y][0], fpos[y][1]
                tz, cz = fpos[z][0], fpos[z][1]
                m.add_le(f"h2d_order_le[{y},{z}]", ty + _neg(tz) + [(P, o)], P + cz - cy)
                m.add_le(f"h2d_order_gt[{y},{z}]", tz + _neg(ty) + [(-P, o)], -1.0 + cy - cz)
                m.add_ge(f"h2d_fifo[{y},{z}]", [(1.0, h2d_start[z]), (-1.0, h2d_end[y]), (-Mt, o)], -Mt)
                m.add_ge(f"h2d_fifo[{z},{y}]", [(1.0, h2d_start[y]), (-1.0, h2d_end[z]), (Mt, o)], 0.0)


from .model import _memory  # noqa: E402
