"""Compile decisions into the compute sequence and tensor lifetimes (docs/timeline.md, 1-3).

Everything here depends on the decisions only, never on time: the step sequence (forward ops,
then per backward stage the recompute steps and the backward op, then the optimizer), which
tensors every step allocates and frees, and the first and last use of every swapped tensor.
The timing pass (``simulate.py``) then assigns start and end times.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.graph import Graph
from ..core.plan import Decision

FWD, REC, BWD, OPT = "fwd", "rec", "bwd", "opt"


@dataclass
class Schedule:
    """The step sequence of one training step under fixed decisions.

    ``hold[t]`` lists ``(first_step, last_step, bytes)`` intervals during which tensor (or
    gradient / workspace) bytes are counted, steps inclusive. Swapped tensors appear in
    ``swap_fwd`` (forward life: producer step, last forward-use step) and ``swap_bwd`` (first and
    last backward use step) instead: their counting depends on copy times and issue points.
    """

    kinds: list[str]
    ops: list[int]
    stage: list[int]                      # backward stage of each step (n_ops for forward steps)
    n_fwd: int
    intervals: list[tuple[int, int, int, str]] = field(default_factory=list)  # (a, f, bytes, label)
    uses: list[list[int]] = field(default_factory=list)  # per step: swapped tensors it needs resident
    swap_fwd: dict[int, tuple[int, int]] = field(default_factory=dict)
    swap_bwd: dict[int, tuple[int, int]] = field(default_factory=dict)
    stage_first_step: dict[int, int] = field(default_factory=dict)
    recomputed: list[int] = field(default_factory=list)  # op ids re-run in the backward pass (per re-run)
    reads: list[tuple[int, ...]] = field(default_factory=list)  # per step: tensors it reads, in order
    tensor_spans: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # fixed lives per tensor id

    @property
    def n_steps(self) -> int:
        return len(self.kinds)

    def static_memory(self) -> np.ndarray:
        """Bytes counted at every step from the fixed intervals (swapped tensors excluded)."""
        diff = np.zeros(self.n_steps + 1, dtype=np.int64)
        for a, f, b, _ in self.intervals:
            diff[a] += b
            diff[f + 1] -= b
        return np.cumsum(diff[:-1])

    def h2d_queue(self) -> list[int]:
        """Swapped tensors in H2D issue order: first backward use, then the position of the
        tensor in what that step reads (``reads``: a re-run's ``Op.inputs``, a backward op's
        ``Op.saves``); independent of tensor numbering."""
        return sorted(self.swap_bwd, key=lambda t: (self.swap_bwd[t][0],
                                                    self.reads[self.swap_bwd[t][0]].index(t)))

    def d2h_queue(self, graph: Graph) -> list[int]:
        """Default D2H order of this schedule's swapped tensors (``default_d2h_order``)."""
        return default_d2h_order(graph, self.swap_fwd)


def default_d2h_order(graph: Graph, swapped) -> list[int]:
    """The default D2H order of the tensors ``swapped``: production order, then position in the
    producer's outputs (docs/timeline.md 2)."""
    return sorted(swapped, key=lambda t: (graph.tensors[t].producer, graph.ops[graph.tensors[t].producer].outputs.index(t)))


def compile_schedule(graph: Graph, decisions: dict[int, Decision],
                     hold_points: dict[int, int] | None = None, *,
                     regions: dict[int, object] | None = None,
                     cached: frozenset[int] = frozenset()) -> Schedule:
    """Build the ``Schedule`` of ``graph`` under ``decisions`` (planning tensor id -> Decision)
    and ``hold_points`` (tensor id -> stage from which a regenerated copy is held; above it a copy
    is freed after its last read in its stage: multi-level recompute, docs/timeline.md 3).

    ``regions`` (op id -> region label; ``region_schedule`` builds the arguments): replay as
    selective activation checkpointing does (docs/regions.md, "Checkpointed regions"): at the
    first backward stage of a region that unpacks something, the region's ops up to the last one
    that made a tensor the region's backward saves are re-run in forward order, except the
    ``cached`` ops. A kept tensor lives at least to its last forward use, and a region's input
    (made outside it, kept) until the region's last backward step that unpacks something: the
    checkpoint holds the inputs it replays from until then. A cached op's outputs live until the
    replay takes them (the step before the region's first backward step) or, when the replay
    stops before the op, until the region's last backward step that unpacks something; a kept
    tensor whose producer the replay re-runs gets a copy from that re-run to its last read by the
    region's re-runs and backward steps, which the kept one no longer serves."""
    ops, tensors = graph.ops, graph.tensors
    n = len(ops)
    kinds: list[str] = [FWD] * n
    step_ops: list[int] = list(range(n))
    stage: list[int] = [n] * n
    uses: list[list[int]] = [[] for _ in range(n)]
    intervals: list[tuple[int, int, int, str]] = []
    last_fwd = [graph.last_forward_use(t.id) for t in tensors]
    dec = decisions.get

    # ---- forward: step i = op i; outputs allocated at i; workspace only during i ----
    for op in ops:
        if op.workspace_bytes:
            intervals.append((op.id, op.id, op.workspace_bytes, f"ws:{op.name}"))
    resident: set[int] = set()
    spans: dict[int, list[tuple[int, int]]] = {}
    swap_fwd: dict[int, tuple[int, int]] = {}
    bwd_alloc: dict[int, list[int]] = {}  # tensor -> steps it (re)appears in the backward pass
    hold = hold_points or {}
    transient: list[int] = []           # copies made in this stage that end with it
    keep_from: dict[int, int] = {}      # KEEP tensors: producer step
    for t in tensors:
        if t.producer is None:
            resident.add(t.id)
            continue
        d = dec(t.id)
        if d is Decision.KEEP:
            keep_from[t.id] = t.producer
            resident.add(t.id)
        elif d is Decision.SWAP:
            swap_fwd[t.id] = (t.producer, max(last_fwd[t.id], t.producer))
        else:  # RECOMPUTE, or not a planning tensor: freed after its last forward use
            intervals.append((t.producer, max(last_fwd[t.id], t.producer), t.bytes, t.name))
            spans.setdefault(t.id, []).append(intervals[-1][:2])

    # ---- backward: stages n-1 .. 0 ----
    use_steps: dict[int, list[int]] = {}
    stage_first: dict[int, int] = {}
    recomputed: list[int] = []
    cur_stage = [n - 1]

    def add_step(kind: str, op_id: int) -> int:
        kinds.append(kind)
        step_ops.append(op_id)
        stage.append(cur_stage[0])
        uses.append([])
        stage_first.setdefault(cur_stage[0], len(kinds) - 1)
        return len(kinds) - 1

    def need(t: int) -> None:
        """Make tensor ``t`` available for the step about to be appended."""
        if t in resident:
            return
        if dec(t) is Decision.SWAP:
            resident.add(t)
            return
        p = tensors[t].producer
        for x in dict.fromkeys(ops[p].inputs):
            need(x)
        rerun(p)

    def rerun(p: int) -> None:
        """Append the re-run of op ``p`` (its inputs resident)."""
        op = ops[p]
        s = add_step(REC, p)
        recomputed.append(p)
        for x in dict.fromkeys(op.inputs):
            use_steps.setdefault(x, []).append(s)
        for y in op.outputs:
            if y not in resident and dec(y) is not Decision.SWAP and dec(y) is not Decision.KEEP:
                resident.add(y)
                bwd_alloc.setdefault(y, []).append(s)
                if cur_stage[0] > hold.get(y, n - 1):
                    transient.append(y)
                use_steps.setdefault(y, []).append(s)   # alive at least during its re-run
        if op.workspace_bytes:
            intervals.append((s, s, op.workspace_bytes, f"ws:{op.name}"))

    replay_upto: dict[object, int] = {}  # region -> last op re-run when it is replayed
    region_ops: dict[object, list[int]] = {}
    if regions:
        for o in sorted(regions):
            region_ops.setdefault(regions[o], []).append(o)
        for o, r in regions.items():
            for t in ops[o].saves:
                p = tensors[t].producer
                if p is not None and regions.get(p) == r:
                    replay_upto[r] = max(replay_upto.get(r, -1), p)
    replayed: set = set()
    region_end: dict[object, int] = {}
    replay_bwd: dict[object, int] = {}   # region -> the backward step its replay runs before
    replay_copy: dict[int, int] = {}     # kept tensor -> the step its region's replay re-made it
    grad_from: dict[int, int] = {}
    for j in range(n - 1, -1, -1):
        cur_stage[0] = j
        op = ops[j]
        saves = list(dict.fromkeys(op.saves))
        r = regions.get(j) if regions else None
        first = r is not None and saves and r not in replayed
        if first:
            replayed.add(r)
            for o in region_ops[r]:
                if o <= replay_upto.get(r, -1) and o not in cached:
                    for x in dict.fromkeys(ops[o].inputs):
                        need(x)
                    rerun(o)
                    for y in ops[o].outputs:   # kept for a reader outside: the replay makes a copy
                        if dec(y) is Decision.KEEP:
                            replay_copy[y] = len(kinds) - 1
        for t in saves:
            need(t)
        s = add_step(BWD, j)
        if first:
            replay_bwd[r] = s
        for t in saves:
            use_steps.setdefault(t, []).append(s)
        for x in dict.fromkeys(op.inputs):
            if tensors[x].requires_grad and x not in grad_from:
                grad_from[x] = s
        for y in op.outputs:
            if y in grad_from:
                intervals.append((grad_from[y], s, tensors[y].bytes, f"grad:{tensors[y].name}"))
        if op.workspace_bytes:
            intervals.append((s, s, op.workspace_bytes, f"ws:{op.name}"))
        if r is not None and saves:
            region_end[r] = s      # the region's last backward step that unpacks something
        resident.difference_update(transient)
        transient.clear()
    cur_stage[0] = -1
    s_opt = add_step(OPT, -1)
    last_step = s_opt

    # ---- lifetimes from uses ----
    swap_bwd: dict[int, tuple[int, int]] = {}
    for t in tensors:
        u = use_steps.get(t.id)
        if t.producer is None:
            intervals.append((0, last_step, t.bytes, t.name))
        elif t.id in keep_from:
            if t.id in replay_copy:
                # the region's own re-runs and backward steps read the replay's copy; the kept
                # original serves the readers outside the region
                a, r = replay_copy[t.id], regions[t.producer]
                mine = {x for x in u or () if x >= a and kinds[x] != FWD and regions.get(step_ops[x]) == r}
                intervals.append((a, max(mine, default=a), t.bytes, f"re:{t.name}"))
                spans.setdefault(t.id, []).append(intervals[-1][:2])
                u = [x for x in u or () if x not in mine]
            end = max(u) if u else keep_from[t.id]
            if regions:   # a kept tensor no backward op reads: a region's input, held for its replay
                end = max(end, last_fwd[t.id], *(region_end.get(regions.get(o), -1)
                                                  for o in graph.consumers[t.id]
                                                  if regions.get(o) not in (None, regions.get(t.producer))))
            if t.producer in cached:   # the policy's cache holds it until the replay takes it
                r = regions[t.producer]
                if r in replay_bwd and t.producer <= replay_upto.get(r, -1):
                    end = max(end, replay_bwd[r] - 1)    # taken by the replay; its frames drop it after
                else:
                    end = max(end, region_end.get(r, end))   # never taken: until the checkpoint goes
            intervals.append((keep_from[t.id], end, t.bytes, t.name))
            spans.setdefault(t.id, []).append(intervals[-1][:2])
        elif t.id in swap_fwd:
            if u:
                swap_bwd[t.id] = (min(u), max(u))
                for s in set(u):
                    uses[s].append(t.id)
        elif t.id in bwd_alloc:   # each copy lives until the last read before the next copy
            starts = bwd_alloc[t.id]
            for a, nxt in zip(starts, [*starts[1:], last_step + 1], strict=True):
                intervals.append((a, max(x for x in u if a <= x < nxt), t.bytes, f"re:{t.name}"))
                spans.setdefault(t.id, []).append(intervals[-1][:2])
    for s in range(len(uses)):
        uses[s].sort()
    reads = [tuple(dict.fromkeys(ops[o].saves if k == BWD else ops[o].inputs)) if o >= 0 else ()
             for k, o in zip(kinds, step_ops, strict=True)]
    return Schedule(kinds=kinds, ops=step_ops, stage=stage, n_fwd=n, intervals=intervals, uses=uses,
                    swap_fwd=swap_fwd, swap_bwd=swap_bwd, stage_first_step=stage_first,
                    recomputed=recomputed, reads=reads, tensor_spans=spans)


def memory_floor(graph: Graph) -> tuple[int, str]:
    """A lower bound on the peak of any plan: what some step cannot avoid holding.

    Forward op i holds the step inputs, its workspace and every tensor produced so far and not
    past its last forward use (its own inputs and outputs included): under every decision a
    tensor lives at least from its producer to its last forward reader (KEEP and SWAP longer,
    RECOMPUTE and unsaved tensors exactly that). Backward op j needs what it saves, its
    workspace, the step inputs and every gradient alive at that moment (gradients do not depend
    on the plan). Returns the bytes and the step that attains them.
    """
    ops, tensors = graph.ops, graph.tensors
    n = len(ops)
    inputs_bytes = sum(t.bytes for t in tensors if t.producer is None)
    # tensors alive at forward op i in every plan: producer <= i <= last forward use
    diff = np.zeros(n + 1, dtype=np.int64)
    for t in tensors:
        if t.producer is not None:
            diff[t.producer] += t.bytes
            diff[max(graph.last_forward_use(t.id), t.producer) + 1] -= t.bytes
    alive = np.cumsum(diff[:-1])
    # gradients alive during backward of op j: grad of x lives over ops [producer(x), last consumer(x)]
    gdiff = np.zeros(n + 1, dtype=np.int64)
    for t in tensors:
        if t.requires_grad and graph.consumers[t.id]:
            gdiff[t.producer] += t.bytes
            gdiff[graph.consumers[t.id][-1] + 1] -= t.bytes
    grads = np.cumsum(gdiff[:-1])
    best, where = 0, ""
    for op in ops:
        f = int(alive[op.id]) + op.workspace_bytes + inputs_bytes
        b = (sum(tensors[x].bytes for x in set(op.saves) if tensors[x].producer is not None)
             + op.workspace_bytes + inputs_bytes + int(grads[op.id]))
        if f > best:
            best, where = f, f"forward of {op.name}"
        if b > best:
            best, where = b, f"backward of {op.name}"
    return best, where


#: step kinds in the order of the compiled core's codes (``_core.K_FWD`` .. ``K_OPT``)
KINDS = (FWD, REC, BWD, OPT)
KIND_CODES = {k: i for i, k in enumerate(KINDS)}


def core_arrays(sched: Schedule, nt: int) -> tuple:
    """The arrays ``_core.compile_plan`` returns, from a ``Schedule`` (``nt``: the graph's
    tensors): ``(kind, op, stage, need_pos, stage_first, iva, ivf, ivb, first_use, last_use,
    hq)``, then ``sw_lf`` (each swapped tensor's last forward step, else -1)."""
    kind = np.array([KIND_CODES[k] for k in sched.kinds], np.int64)
    op = np.array(sched.ops, np.int64)
    stage = np.array(sched.stage, np.int64)
    stage_first = np.array([sched.stage_first_step[k] for k in range(sched.n_fwd)], np.int64)
    iv = np.array([iv[:3] for iv in sched.intervals], np.int64).reshape(-1, 3)
    hq = np.array(sched.h2d_queue(), np.int64)
    hpos = {t: i for i, t in enumerate(hq.tolist())}
    need_pos = np.array([max((hpos[t] for t in u), default=-1) for u in sched.uses], np.int64)
    first_use = np.full(nt, -1, np.int64)
    last_use = np.full(nt, -1, np.int64)
    for t, (u, f) in sched.swap_bwd.items():
        first_use[t], last_use[t] = u, f
    sw_lf = np.full(nt, -1, np.int64)
    for t, (_, lf) in sched.swap_fwd.items():
        sw_lf[t] = lf
    return (kind, op, stage, need_pos, stage_first, np.ascontiguousarray(iv[:, 0]),
            np.ascontiguousarray(iv[:, 1]), np.ascontiguousarray(iv[:, 2]), first_use, last_use,
            hq, sw_lf)
