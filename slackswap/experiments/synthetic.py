"""Small synthetic graphs for tests, examples and property checks (unit-cost friendly).

>>> g = chain(3, sizes=[1, 2, 3])
>>> [t.name for t in g.planning_tensors()]
['a1', 'a2']
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from ..core.costs import CostModel
from ..core.errors import SlackSwapError
from ..core.graph import Graph, Op, Tensor
from ..core.plan import Decision, Plan
from ..timeline import compile_schedule, simulate
from ..timeline.problem import Problem


def chain(n_ops: int, sizes=None, input_bytes: int = 0, name: str = "chain") -> Graph:
    """A chain ``a0 -> op0 -> a1 -> op1 -> ... -> a_n``; op i saves its input ``a_i``.

    ``a0`` is the step input; the planning tensors are ``a1 .. a_{n-1}``. ``sizes[i]`` is the
    size of ``a_{i+1}`` (default 1 byte each), so ``sizes`` has ``n_ops`` entries.
    """
    if n_ops < 1:
        raise SlackSwapError(f"chain: n_ops must be >= 1, got {n_ops}")
    sizes = [1] * n_ops if sizes is None else [int(s) for s in sizes]
    if len(sizes) != n_ops:
        raise SlackSwapError(f"chain: sizes needs {n_ops} entries, got {len(sizes)}")
    tensors = [Tensor(0, "a0", input_bytes, None, kind="input")]
    tensors += [Tensor(i + 1, f"a{i + 1}", sizes[i], i) for i in range(n_ops)]
    ops = [Op(i, f"op{i}", i, "matmul", 1.0, 1.0, 2.0, 2.0, inputs=(i,), outputs=(i + 1,), saves=(i,))
           for i in range(n_ops)]
    return Graph(name, tuple(ops), tuple(tensors))


def residual_block(sizes=(1, 1, 1, 1), name: str = "residual") -> Graph:
    """x -> f -> h -> g -> y;  z = x + y (a residual branch); loss(z).

    ops: f(x)->h saves x; g(h)->y saves h; add(x, y)->z saves nothing; loss(z)->l saves z.
    Planning tensors: x, h, z. ``sizes`` = bytes of (x, h, y, z).
    """
    sx, sh, sy, sz = (int(s) for s in sizes)
    tensors = [Tensor(0, "in", 0, None, kind="input"), Tensor(1, "x", sx, 0), Tensor(2, "h", sh, 1),
               Tensor(3, "y", sy, 2), Tensor(4, "z", sz, 3), Tensor(5, "l", 0, 4, kind="loss")]
    ops = [Op(0, "embed", None, "embedding", inputs=(0,), outputs=(1,), saves=(0,)),
           Op(1, "f", 0, "matmul", inputs=(1,), outputs=(2,), saves=(1,)),
           Op(2, "g", 0, "matmul", inputs=(2,), outputs=(3,), saves=(2,)),
           Op(3, "add", 0, "elementwise", inputs=(1, 3), outputs=(4,), saves=()),
           Op(4, "loss", None, "loss", inputs=(4,), outputs=(5,), saves=(4,))]
    return Graph(name, tuple(ops), tuple(tensors))


def random_dag(seed: int, n_ops: int = 6, max_bytes: int = 4, p_save: float = 0.7,
               p_extra_input: float = 0.3, name: str | None = None) -> Graph:
    """A random DAG in forward order: every op reads the previous op's output and, with
    probability ``p_extra_input``, one earlier tensor (a residual edge); it saves each input with
    probability ``p_save``. Seeded: the same ``seed`` gives the same graph."""
    rng = np.random.default_rng(seed)
    tensors = [Tensor(0, "in", int(rng.integers(0, max_bytes + 1)), None, kind="input")]
    ops = []
    for i in range(n_ops):
        ins = [i]
        if i >= 1 and rng.random() < p_extra_input:
            extra = int(rng.integers(0, i))
            if extra not in ins:
                ins.append(extra)
        saves = tuple(t for t in ins if rng.random() < p_save)
        tensors.append(Tensor(i + 1, f"t{i + 1}", int(rng.integers(1, max_bytes + 1)), i))
        ops.append(Op(i, f"op{i}", i, "matmul", inputs=tuple(ins), outputs=(i + 1,), saves=saves))
    return Graph(name or f"random{seed}", tuple(ops), tuple(tensors))


def mixed_dag(seed: int, n_ops: int = 6) -> Graph:
    """A richer random DAG for oracle tests: 1-2 outputs per op (some masks, without gradients),
    1-3 inputs in random order (residual edges, the step input too), a random subset of inputs
    and outputs saved in random order, some workspaces, some tensors neither recomputable nor
    swappable. Seeded: the same ``seed`` gives the same graph."""
    rng = np.random.default_rng(seed)
    tensors = [Tensor(0, "in", int(rng.integers(0, 3)), None, kind="input")]
    ops = []
    for i in range(n_ops):
        ins = [tensors[-1].id]
        for _ in range(int(rng.integers(0, 3))):
            e = int(rng.choice([t.id for t in tensors]))
            if e not in ins:
                ins.append(e)
        rng.shuffle(ins)
        outs = []
        for k in range(1 + int(rng.random() < 0.3)):
            tid = len(tensors)
            kind = "mask" if k == 1 and rng.random() < 0.5 else "activation"
            tensors.append(Tensor(tid, f"t{tid}", int(rng.integers(1, 5)), i, kind=kind,
                                  recomputable=bool(rng.random() < 0.9), swappable=bool(rng.random() < 0.9)))
            outs.append(tid)
        cand = [t for t in ins if tensors[t].producer is not None or rng.random() < 0.5] + \
               [o for o in outs if rng.random() < 0.2]
        saves = [t for t in cand if rng.random() < 0.7]
        rng.shuffle(saves)
        ws = int(rng.integers(0, 3)) if rng.random() < 0.3 else 0
        ops.append(Op(i, f"op{i}", i, "matmul", inputs=tuple(ins), outputs=tuple(outs), saves=tuple(saves),
                      workspace_bytes=ws))
    return Graph(f"mixed{seed}", tuple(ops), tuple(tensors))


def exact_suite(levels=(0.0, 0.25, 0.5, 0.75), transfer_scale: float = 0.5) -> list:
    """Small problems on which the exact MILP is proven optimal in seconds (docs/milp.md 8): four
    graphs (a chain, a residual block, a random DAG, a DAG with multi-output ops and masks) with
    unit costs (``CostModel.unit``; copies ``transfer_scale`` times as long), each at budgets
    ``min_feasible + level * (keep_all_peak - min_feasible)`` (rounded down to whole bytes; equal
    budgets once). Returns a list of ``Problem``; ``problem.graph.name`` names the graph.

    >>> [(p.graph.name, round(p.budget_fraction, 3)) for p in exact_suite(levels=(0.0,))][:2]
    [('chain8', 0.412), ('residual', 0.7)]
    """


    if not (isinstance(transfer_scale, (int, float)) and transfer_scale > 0):
        raise SlackSwapError(f"exact_suite.transfer_scale: must be a positive number, got {transfer_scale!r}")
    bad = [v for v in levels if not (isinstance(v, (int, float)) and 0 <= v <= 1)]
    if bad or not len(levels):
        raise SlackSwapError(f"exact_suite.levels: must be numbers in [0, 1], got {levels!r}")
    graphs = [chain(8, sizes=[1, 2, 3, 1, 2, 2, 3, 1], name="chain8"), residual_block((2, 1, 3, 2), name="residual"),
              random_dag(2, 9, name="dag9"), mixed_dag(962190, 7)]
    out = []
    for g in graphs:
        c = CostModel.unit(g)
        c = replace(c, d2h_s=tuple(v * transfer_scale for v in c.d2h_s),
                    h2d_s=tuple(v * transfer_scale for v in c.h2d_s))
        base = Problem.from_graph(g, c, math.inf)
        lo, hi = base.min_feasible_bytes, base.keep_all_peak
        budgets = dict.fromkeys(int(math.floor(lo + v * (hi - lo))) for v in levels)   # distinct, in order
        out += [base.with_budget(b) for b in budgets]
    return out


def five_op_swaps() -> Problem:
    """Five ops where the D2H order decides (docs/milp.md, "The D2H order"): a chain
    (``chain(5)``, nothing recomputable) whose first activation ``a1`` (8 B) is produced before a
    small ``a2`` (1 B), with a 14 B workspace at ``op3``; ops of 10, 10, 10, 25, 65 s forward and
    10, 10, 35, 10, 70 s backward, copies of 20 s per byte, budget 24 B. In production order the
    spike at ``op3`` waits for the long copy of ``a1`` (swapping both takes 520 s, as swapping
    ``a1`` alone, the best plan in that order); copying ``a2`` first frees it at once, and
    swapping both in that order takes 390 s.

    >>> p = five_op_swaps()
    >>> swaps = {1: Decision.SWAP, 2: Decision.SWAP, 3: Decision.KEEP, 4: Decision.KEEP}
    >>> [simulate(p, Plan(swaps, d2h_order=o)).step_time_s for o in (None, (2, 1))]
    [520.0, 390.0]
    """
    g0 = chain(5, sizes=[8, 1, 1, 1, 2])
    ops = tuple(replace(op, workspace_bytes=14 if op.id == 3 else 0) for op in g0.ops)
    g = Graph("five-op-swaps", ops, tuple(replace(t, recomputable=False) for t in g0.tensors))
    copy = tuple(20.0 * t.bytes for t in g.tensors)
    costs = CostModel("unit", (10.0, 10.0, 10.0, 25.0, 65.0), (10.0, 10.0, 35.0, 10.0, 70.0), copy, copy)
    return Problem.from_graph(g, costs, budget_bytes=24)


def spike_problem(seed: int) -> Problem:
    """A seeded five-op problem with a workspace spike, random op and copy times and a random
    budget: a chain (six in ten) or a random DAG of five ops (activations of 1-8 B), one op of
    2-4 with a workspace of 0-15 B, nothing recomputable in half of them, forward 1-6 s and
    backward 1-7 s per op, copies of 1, 2 or 3 s per byte, at a budget between the smallest
    feasible one and the keep-all peak. Where the D2H order decides more often than in
    ``random_suite`` (the oracle of ``milp``'s D2H order: ``brute(d2h_orders=True)``)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SlackSwapError(f"spike_problem.seed: must be an int >= 0, got {seed!r}")
    rng = np.random.default_rng(seed)
    if rng.random() < 0.6:
        g = chain(5, sizes=[int(v) for v in rng.integers(1, 9, 5)])
    else:
        g = random_dag(int(rng.integers(0, 10**6)), 5, max_bytes=8, p_extra_input=0.4)
    spike = int(rng.integers(2, 5))
    ops = tuple(replace(o, workspace_bytes=int(rng.integers(0, 16)) if o.id == spike else 0) for o in g.ops)
    rec = rng.random() < 0.5
    g = Graph(f"spike{seed}", ops, tuple(replace(t, recomputable=rec and t.recomputable) for t in g.tensors))
    fwd = tuple(float(v) for v in rng.integers(1, 7, 5))
    bwd = tuple(float(v) for v in rng.integers(1, 8, 5))
    scale = float(rng.choice([1.0, 2.0, 3.0]))
    copy = tuple(scale * t.bytes for t in g.tensors)
    base = Problem.from_graph(g, CostModel("unit", fwd, bwd, copy, copy))
    lo, hi = base.min_feasible_bytes, base.keep_all_peak
    return base.with_budget(int(lo + rng.random() * (hi - lo)))


SHAPES = ("chain", "residual", "random", "mixed")


@dataclass(frozen=True)
class Instance:
    """One problem of ``random_suite`` and its family: graph ``shape`` (one of ``SHAPES``),
    copy seconds per byte ``scale``, per-copy ``latency`` (s), backward seconds per op ``bwd``,
    budget ``level`` in [0, 1) between the smallest feasible budget and the keep-all peak."""

    problem: object
    shape: str
    scale: float
    latency: float
    bwd: float
    level: float


def random_suite(n: int = 200, seed: int = 0, max_tensors: int = 7) -> list:
    """``n`` seeded random problems small enough for the ``brute`` planner (at most
    ``max_tensors`` planning tensors): a graph shape from ``SHAPES``, unit compute costs
    (backward 1 or 2 s per op), copies of ``scale`` s per byte (0.25-2) plus a per-copy latency
    (0, or 1-3 s: latency-dominated links), at a budget ``min_feasible + level * (keep_all_peak -
    min_feasible)``, level uniform in [0, 1). Returns a list of ``Instance`` (the problem and
    its family); ``instance.problem.graph.name`` is ``shape/index``.

    >>> [i.problem.graph.name for i in random_suite(2)]
    ['mixed/0', 'mixed/1']
    """


    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise SlackSwapError(f"random_suite.n: must be an int >= 0, got {n!r}")
    if isinstance(max_tensors, bool) or not isinstance(max_tensors, int) or max_tensors < 1:
        raise SlackSwapError(f"random_suite.max_tensors: must be an int >= 1, got {max_tensors!r}")
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        i = len(out)
        shape = SHAPES[int(rng.integers(0, len(SHAPES)))]
        s = int(rng.integers(0, 10**6))
        k = int(rng.integers(4, 11))
        if shape == "chain":
            g = chain(k, sizes=[int(v) for v in rng.integers(1, 5, k)])
        elif shape == "residual":
            g = residual_block(tuple(int(v) for v in rng.integers(1, 5, 4)))
        elif shape == "random":
            g = random_dag(s, k, p_extra_input=float(rng.choice([0.3, 0.6])))
        else:
            g = mixed_dag(s, int(rng.integers(4, 8)))
        scale = float(rng.choice([0.25, 0.5, 1.0, 2.0]))
        latency = float(rng.choice([0.0, 0.0, 1.0, 3.0]))
        bwd = float(rng.choice([1.0, 2.0]))
        level = float(rng.random())
        if not 0 < len(g.planning_tensors()) <= max_tensors:
            continue
        g = Graph(f"{shape}/{i}", g.ops, g.tensors)
        c = CostModel.unit(g, bwd_factor=bwd)
        xfer = tuple(scale * b + (latency if b > 0 else 0.0) for b in (t.bytes for t in g.tensors))
        c = CostModel("unit", c.fwd_s, c.bwd_s, xfer, xfer, 0.0, 1.0)
        base = Problem.from_graph(g, c, math.inf)
        lo, hi = base.min_feasible_bytes, base.keep_all_peak
        budget = max(lo, int(math.floor(lo + level * (hi - lo))))
        out.append(Instance(base.with_budget(budget), shape, scale, latency, bwd, level))
    return out


def chain_multilevel_optimum(problem) -> float:
    """Least re-run seconds of any plan that fits on a ``chain`` problem, hold points included:
    every ``a_t`` KEEP, or RECOMPUTE with hold point ``k`` in ``t..l-1`` (a hold point below
    ``t`` acts like ``t``: stage ``t`` is ``a_t``'s last use). ``l!`` plans: the oracle of the
    multi-level ``dp-checkpoint`` on chains of up to 10 ops. ``math.inf`` if none fits."""


    g = problem.graph
    ids = [t.id for t in g.planning_tensors()]
    n = len(g.ops)
    is_chain = ids == list(range(1, n)) and all(
        op.inputs == (i,) and op.outputs == (i + 1,) and op.saves == (i,) for i, op in enumerate(g.ops))
    if not is_chain or n > 10:
        raise SlackSwapError(f"chain_multilevel_optimum: a synthetic.chain problem of at most 10 ops; "
                             f"got {g.name!r} with {n} ops")
    opts = [[(Decision.KEEP, None)] + [(Decision.RECOMPUTE, k) for k in range(t, n)] for t in ids]
    best = math.inf
    for combo in itertools.product(*opts):
        plan = Plan({t: d for t, (d, _) in zip(ids, combo, strict=True)},
                    hold_points={t: k for t, (_, k) in zip(ids, combo, strict=True) if k is not None})
        r = simulate(problem, plan, detail=False)
        if r.fits:
            best = min(best, r.recompute_s)
    return best


def multilevel_optimum(problem, max_plans: int = 6000) -> tuple[float | None, int]:
    """Least step time of the plans that fit among those it enumerates: every keep/swap/recompute
    decision vector (the choices each tensor allows), and for each every hold point (stage
    ``0..n-1``) of every tensor its single-level schedule regenerates in the backward pass (other
    tensors get none), simulated with default issue points and D2H order. Returns
    ``(seconds, plans)`` (``math.inf`` if none fits), or, without simulating, ``(None, count)``
    with a count above ``max_plans`` as soon as there are more: the oracle of
    ``milp(hold_points=True)`` on tiny problems (docs/milp.md, "Exactness checks and resolved issues")."""


    if isinstance(max_plans, bool) or not isinstance(max_plans, int) or max_plans < 1:
        raise SlackSwapError(f"multilevel_optimum.max_plans: must be an int >= 1, got {max_plans!r}")
    g, ids, n = problem.graph, list(problem.planning_ids), len(problem.graph.ops)
    opts = [[Decision.KEEP] + [Decision.SWAP] * g.tensors[t].swappable
            + [Decision.RECOMPUTE] * g.tensors[t].recomputable for t in ids]
    cases, total = [], 0
    for combo in itertools.product(*opts):
        dec = dict(zip(ids, combo, strict=True))
        spans = compile_schedule(g, dec).tensor_spans
        regen = [t.id for t in g.tensors if t.producer is not None and dec.get(t.id, Decision.RECOMPUTE)
                 is Decision.RECOMPUTE and any(a >= n for a, _ in spans.get(t.id, ()))]
        cases.append((dec, regen))
        total += n ** len(regen)
        if total > max_plans:
            return None, total
    best = math.inf
    for dec, regen in cases:
        for ks in itertools.product(range(n), repeat=len(regen)):
            r = simulate(problem, Plan(dec, hold_points=dict(zip(regen, ks, strict=True))), detail=False)
            if r.fits:
                best = min(best, r.step_time_s)
    return best, total
