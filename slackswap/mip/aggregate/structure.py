"""What the aggregated relaxation is built from: the keep-all memory excess, the fastest copy
rate, which re-runs need which, and the chains of RECOMPUTE tensors a copy back can wait behind
(the rows that use them: ``rows.py``; the model: ``slackswap.mip.aggregate``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...core.plan import Decision
from ...timeline import compile_schedule
from ..model import Model

#: the most nonzeros of the ``v_chain`` rows (``build(chains=K)``): chains are followed as deep as
#: ``K`` while their rows fit (``chain_depth``). The rows grow with the number of chains times the
#: backward steps a copy back can wait behind: GPT-2 with 4 layers at 0.79 has 32,825 at depth 12,
#: `tiny` with 5 layers at 0.5 (latency-bound copies, short steps) 2,118,278 at 8 and 15,731,858 at 12
CHAIN_NONZEROS = 250_000


@dataclass
class Aggregate:
    """The built model with what is needed to read it: ``t0`` (seconds per time unit: the
    objective times ``t0`` is extra seconds over the ideal step), the column of each decision
    (``rec``, ``swap``: tensor id -> column) and, with release rows, ``released``: ``(column,
    tensor, rank)`` of each release column (``u[t,k]``: released by forward step ``k``;
    ``v[t,j]``, ``o[t,j]``: copied out by the backward step of op ``j``), ``rank`` the step's
    place in time."""

    model: Model
    t0: float
    rec: dict[int, int]
    swap: dict[int, int]
    released: list[tuple[int, int, int]] = field(default_factory=list)


def needs(problem) -> tuple[np.ndarray, np.ndarray]:
    """Keep-all accounted memory minus the budget at every forward step (``[k]``) and at the
    backward step of every op (``[j]``), in bytes."""

    g = problem.graph
    n = len(g.ops)
    mem = compile_schedule(g, {t: Decision.KEEP for t in problem.planning_ids}).static_memory().astype(float)
    budget = float(problem.budget_bytes)
    return mem[:n] - budget, (mem[n:2 * n] - budget)[::-1].copy()


def bandwidth(planning, costs) -> float:
    """Bytes per second the D2H engine can move at best: the largest ``b / d2h_s`` over swappable
    tensors (a copy of ``b`` bytes takes ``latency + b / bw``, so big copies are the fastest)."""
    if any(t.swappable and t.bytes > 0 and costs.d2h_s[t.id] <= 0 for t in planning):
        return math.inf
    return max((t.bytes / costs.d2h_s[t.id] for t in planning if t.swappable and costs.d2h_s[t.id] > 0),
               default=0.0)


def prerequisites(graph, planning: set[int]) -> list[tuple[int, int]]:
    """Pairs (p, q): re-running op p needs op q re-run first (q produces an unsaved input of p,
    which is never resident in the backward pass)."""
    out = []
    for op in graph.ops:
        for x in set(op.inputs):
            q = graph.tensors[x].producer
            if q is not None and x not in planning:
                out.append((op.id, q))
    return out


def rebuilt_inputs(graph, planning: set[int], rec) -> dict[int, list[tuple[int, int]]]:
    """Op -> ``[(producer, input)]`` in input order: the inputs a re-run of that op may have to
    rebuild first, an unsaved intermediate (never resident in the backward pass) or a tensor that
    may be RECOMPUTE (in ``rec``)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for op in graph.ops:
        for inp in dict.fromkeys(op.inputs):
            p = graph.tensors[inp].producer
            if p is not None and (inp not in planning or inp in rec):
                out.setdefault(op.id, []).append((p, inp))
    return out


def _regenerating(graph, planning: set[int]):
    """``ops(y)``: the ops that re-run to regenerate tensor ``y``: its producer and, by the closure
    of ``prerequisites``, the producers of the unsaved inputs (never resident in the backward
    pass) of those; and that relation, op -> the ops it needs re-run first."""
    first: dict[int, set[int]] = {}
    for p, q in prerequisites(graph, planning):
        first.setdefault(p, set()).add(q)

    def ops(y: int) -> set[int]:
        c = graph.tensors[y].producer
        out, stack = {c}, [c]
        while stack:
            for q in first.get(stack.pop(), ()):
                if q not in out:
                    out.add(q)
                    stack.append(q)
        return out

    return ops, first


def rerun_readers(graph, planning: set[int], x) -> dict[int, list[int]]:
    """Tensor ``t`` -> the RECOMPUTE candidates ``y`` (in ``x``) whose regeneration reads ``t``: the
    producer of ``y`` reads ``t``, or an op that rebuilds one of its unsaved inputs (never resident
    in the backward pass, so re-run with it: the closure of ``prerequisites``) does. When ``y`` is
    RECOMPUTE the producer re-runs in a stage ``>= ms(y)``, so ``t`` is needed by then, whatever
    ``ms(t)``. The chains of one tensor of ``rerun_chains``."""
    return {t: list(dict.fromkeys(ch[0] for ch, _ in chains))
            for t, chains in rerun_chains(graph, planning, x, 1).items()}


def rerun_chains(graph, planning: set[int], x, depth: int) -> dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """Tensor ``t`` -> ``[(chain, after)]``: the regeneration of ``chain[0]`` (in ``x``) reads
    ``t`` through the RECOMPUTE tensors of ``chain`` (each ``chain[k+1]`` is read by an op that
    regenerates ``chain[k]``, at most ``depth`` tensors), and ``after`` holds the ops that re-run
    between that read and the end of ``chain[0]``'s regeneration: the reader itself, the
    producers of ``chain[1:]`` and of ``chain[0]``, and the ops between (each once, a set). When
    every tensor of ``chain`` is RECOMPUTE, ``t`` is read by the re-run of an op of ``after``,
    and the others follow it, before the backward step of op ``ms(chain[0])``. The ops that re-run
    to regenerate a tensor are its producer and the producers of its unsaved inputs, by the
    closure of ``prerequisites``; an op downstream of the reader is one that reads its output
    within that closure. ``after`` also holds the ops that rebuild the unsaved inputs a chain's op
    reads after the input on the way down to ``t`` (``siblings``): a re-run first makes its inputs
    available in input order (docs/timeline.md, "Backward: recompute, prefetch, gradients"), so those re-runs follow the read; but
    not the reader's own later inputs, which are there before the reader starts, nor an op that
    something else may have re-run before. A later input ``z`` that may be RECOMPUTE adds an
    entry ``(chain + (z,), after | the ops of z's regeneration)``, where nothing can have needed
    ``z`` before (docs/journal/milp-full-size.md, "The re-runs of later inputs")."""
    regen, first = _regenerating(graph, planning)
    out: dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}

    def downstream(ops: set[int], q: int) -> set[int]:
        """``q`` and the ops of ``ops`` that need it, directly or through others of ``ops``."""
        down, grew = {q}, True
        while grew:
            grew = False
            for o in ops:
                if o not in down and first.get(o, set()) & down:
                    down.add(o)
                    grew = True
        return down

    readers = [set(c) for c in graph.consumers]       # per tensor: the ops that read it
    owners: dict[int, set[int]] = {}        # op -> the planning tensors whose regeneration re-runs it
    for z in planning:
        if graph.tensors[z].producer is not None:
            for o in regen(z):
                owners.setdefault(o, set()).add(z)

    def siblings(y: int, chain: tuple[int, ...], ops: set[int], q: int, t: int, top: int):
        """The ops of ``ops`` (``y``'s regeneration, ``y`` the last of ``chain``, in stage ``top``) that re-run after ``q``, not
        downstream of it, in the depth-first order of the backward pass (docs/timeline.md, "Backward: recompute, prefetch, gradients": a re-run first makes its inputs available, in input order): those after ``q``'s own
        re-run (``q`` reads ``t``), and those after ``q`` has made ``t`` available (a deeper op
        reads it, within ``t``'s regeneration). Only ops that nothing else can have re-run
        before (``private``). Third, for a deeper read: the RECOMPUTE candidates ``z`` read after
        ``q`` has made ``t`` available (``q``'s later inputs too) that nothing can have needed
        before, with the ops of their regeneration: when ``z`` is RECOMPUTE those re-run after the
        read too (``fresh``)."""
        seq: list = []
        later_reads: list[int] = []

        def visit(o: int) -> None:
            if o in seq:
                return
            for inp in dict.fromkeys(graph.ops[o].inputs):
                if o == q and inp == t and "read" not in seq:
                    seq.append("read")
                elif "read" in seq and inp in x and inp != t:
                    later_reads.append(inp)
                pr = graph.tensors[inp].producer
                if pr is not None and pr in first.get(o, ()):
                    visit(pr)
            seq.append(o)

        visit(graph.tensors[y].producer)
        if "read" not in seq:
            return set(), set(), []
        down = downstream(ops, q)

        def needed(z: int) -> bool:      # may be needed before the backward step of op top
            return bool(readers[z]) or max(graph.saved_by[z], default=-1) >= top

        def private(o: int, seen: frozenset) -> bool:
            """Op ``o`` re-runs only within ``y``'s regeneration: it regenerates no other planning
            tensor that may be needed by then, and each output is unsaved and read only by ops of
            ``ops`` that are on the way up to ``y`` or private themselves, or saved only below stage
            ``top`` and read by no op."""
            if any(z != y and needed(z) for z in owners.get(o, ())):
                return False
            for w in graph.ops[o].outputs:
                if w in planning:
                    if needed(w):
                        return False
                else:
                    for r in readers[w]:
                        if r not in ops or (r not in down and (r in seen or not private(r, seen | {r}))):
                            return False
            return True

        def after(mark) -> set[int]:
            return {o for o in seq[seq.index(mark) + 1:] if o not in down and private(o, frozenset({o}))}

        deeper = after("read")
        late = deeper | down        # ops that re-run after a read below q's input t (q too)

        def fresh(z: int) -> bool:
            """``z`` is needed first after the read: saved only below stage ``top``, read only by
            ops of ``late``, and the ops of its regeneration make nothing else that may be needed
            before (their other planning outputs likewise, their unsaved ones read only there)."""
            rz = regen(z)
            for w in {z} | {w for o in rz for w in graph.ops[o].outputs}:
                if w in planning:
                    if max(graph.saved_by[w], default=-1) >= top or not readers[w] <= late:
                        return False
                elif not readers[w] <= late | rz:
                    return False
            return True

        return after(q), deeper, [(z, frozenset(regen(z))) for z in dict.fromkeys(later_reads)
                                  if z not in chain and fresh(z)]

    def walk(y: int, chain: tuple[int, ...], tail: frozenset, later: tuple = ()) -> None:
        """``later``: ``(z, ops)`` of the levels above, RECOMPUTE candidates read after the reads
        below (``siblings``): each adds an entry ``(chain + (z,), after | ops)``, so its row holds
        when ``z`` is RECOMPUTE too."""
        ops = regen(y)
        top = max(graph.saved_by[chain[0]])
        for q in sorted(ops):
            after = tail | downstream(ops, q)
            for t in dict.fromkeys(graph.ops[q].inputs):
                if t not in planning or t in chain:
                    continue
                direct, deeper, new = siblings(y, chain, ops, q, t, top)
                out.setdefault(t, []).append((chain, tuple(sorted(after | direct))))
                for z, zops in later:
                    if z != t:
                        out[t].append((chain + (z,), tuple(sorted(after | direct | zops))))
                if t in x and len(chain) < depth:
                    walk(t, chain + (t,), after | deeper, later + tuple(f for f in new if f[0] != t))

    for y in x:
        walk(y, (y,), frozenset())
    return out


def chain_depth(deep: dict, swapped: set[int], ms: dict[int, int], steps: list[int], charged) -> int:
    """The longest chain length whose ``v_chain`` rows (``deep``: ``rerun_chains``; one row per
    swapped tensor ``t``, chain and backward step ``j`` of ``steps`` with ``ms(y_1) < j``, ``ms(t) <
    ms(y_1)`` and ``charged(t, after, ms(y_1), j)``: the row is not void), counted with the
    rows of every shorter chain, have at most ``CHAIN_NONZEROS`` nonzeros."""
    per: dict[int, int] = {}
    seen: dict[tuple, int] = {}
    for t, ents in deep.items():
        if t not in swapped:
            continue
        for ch, after in ents:
            top = ms[ch[0]]
            if top <= ms[t]:
                continue
            key = (t, top, frozenset(after))
            if key not in seen:
                seen[key] = sum(1 for j in steps if j > top and charged(t, after, top, j))
            per[len(ch)] = per.get(len(ch), 0) + seen[key] * (len(ch) + 5)
    total, depth = 0, max(per, default=0)
    for d in sorted(per):
        total += per[d]
        if total > CHAIN_NONZEROS:
            return d - 1
    return depth


def minimal_sets(chains) -> list[tuple[int, ...]]:
    """The inclusion-minimal sets among ``chains`` (iterables of tensor ids), each as a sorted
    tuple: a condition "every tensor of some chain is RECOMPUTE" holds exactly when it holds for
    one of them."""
    kept: list[frozenset] = []
    for ch in sorted({frozenset(ch) for ch in chains}, key=len):
        if not any(k <= ch for k in kept):
            kept.append(ch)
    return [tuple(sorted(k)) for k in kept]
