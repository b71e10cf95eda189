"""Reverse ("keep") greedy of the SlackSwap planner (``slack_planner.py``, step 3b). Private.

The recompute pass of the paper adds recomputes cheapest-first until enough bytes are evicted.
When most of the activations must go (low budgets), the decision that matters is the small set
of tensors that stay, and a forward greedy misjudges it: a tensor's rebuild cost depends on what
else is recomputed (docs/timeline.md, "Backward: recompute, prefetch, gradients": the re-run ops of a recompute set are the union
of the closures, each op re-run once), so the last recomputes it adds can be expensive ones
(matmul outputs) while cheaper combinations exist.

``keep_greedy`` starts from the opposite end, every candidate evicted (recomputed), and keeps
*units* by the exact seconds of re-run ops they save per byte, as long as the evicted bytes still
cover ``need``. A unit is one tensor, or all the recomputed planning outputs of one op (keeping
only some outputs of a multi-output op such as a fused QKV projection saves nothing, keeping all
of them saves the op). Savings are exact for the current recompute set (closures recomputed for
the affected tensors only) and re-evaluated lazily when popped (savings change as units are
kept), the same lazy scheme as the forward greedy.

The state is the recompute set ``rec`` and the set ``U`` of re-run ops (the union of the
closures). Keeping a unit drops the ops every one of whose *needers* is dropped too: a needer of
op ``o`` is a recomputed output of ``o`` (a root), or a re-run op reading a non-resident output of
``o``. Dropped ops are reached from the unit's producers through dropped ops only, so one pass in
descending op order (consumers come after producers) from the unit finds them: the cost is local
to the unit, never the length of a recompute chain.
"""

from __future__ import annotations

import heapq

from .judge import rerun_union


class _State:
    """Recompute set ``rec`` and re-run ops ``U`` (see the module docstring)."""

    def __init__(self, graph, rec: set[int], planning: set[int], fwd):
        self.ops, self.tensors, self.cons = graph.ops, graph.tensors, graph.consumers
        self.planning, self.fwd, self.rec = planning, fwd, set(rec)
        self.U = rerun_union(graph, self.rec, self.rec, planning)

    def _gone(self, x: int) -> bool:
        """Tensor ``x`` is not resident in the backward pass (unsaved intermediate or recomputed)."""
        return self.tensors[x].producer is not None and (x not in self.planning or x in self.rec)

    def dropped(self, unit) -> set[int]:
        """Re-run ops that keeping every tensor of ``unit`` makes unnecessary."""
        unit = set(unit)
        heap = sorted({-self.tensors[x].producer for x in unit})
        seen, out = set(heap), set()
        while heap:
            o = -heapq.heappop(heap)
            if o not in self.U or not self._unneeded(o, unit, out):
                continue
            out.add(o)
            for y in self.ops[o].inputs:
                p = self.tensors[y].producer
                if p is not None and y not in unit and self._gone(y) and -p not in seen:
                    seen.add(-p)
                    heapq.heappush(heap, -p)
        return out

    def _unneeded(self, o: int, unit: set[int], out: set[int]) -> bool:
        for x in self.ops[o].outputs:
            if x in unit:
                continue
            if x in self.rec:
                return False
            if self._gone(x) and any(q in self.U and q not in out for q in self.cons[x]):
                return False
        return True

    def saving(self, unit) -> float:
        """Forward seconds of re-run ops saved by keeping every tensor of ``unit``."""
        return sum(self.fwd[o] for o in self.dropped(unit))

    def keep(self, unit) -> None:
        self.U -= self.dropped(unit)
        self.rec -= set(unit)

    def frontier(self, p: int, max_unit: int) -> tuple[int, ...] | None:
        """The recomputed tensors to keep so that op ``p`` is no longer re-run (its recomputed
        outputs, and recursively those of the re-run ops reading its unsaved outputs), or None
        when more than ``max_unit``."""
        unit: set[int] = set()
        stack, seen = [p], {p}
        while stack:
            o = stack.pop()
            for x in self.ops[o].outputs:
                if x in self.rec:
                    unit.add(x)
                elif self._gone(x):
                    for q in self.cons[x]:
                        if q in self.U and q not in seen:
                            seen.add(q)
                            stack.append(q)
            if len(unit) > max_unit:
                return None
        return tuple(sorted(unit)) if unit else None


def keep_greedy(graph, fwd, planning: set[int], rec: list[int], sizes: dict[int, int],
                need: float, place=None, max_unit: int = 4) -> tuple[set[int], set[int]]:
    """Lazy greedy over the units of ``rec`` (all recomputed at first) by exact re-run seconds
    saved per byte. Each unit, best first, is offered to ``place(unit, spare)`` (the caller copies
    it out under the forward pass if the D2H engine has room and the rest of the unit fits
    ``spare``; it returns the tensors it swapped, or None); what is not swapped stays if the
    eviction can spare its bytes (``spare = sum(sizes of the recomputed) - need``, swapped bytes
    count as evicted). A unit is a tensor, the recomputed outputs of one op, or the frontier of
    one re-run op (``_State.frontier``). Returns (still recomputed, swapped)."""
    st = _State(graph, set(rec), planning, fwd)
    units = {(t,) for t in rec}
    for p in sorted(st.U):
        f = st.frontier(p, max_unit)
        if f is not None:
            units.add(f)
    units = sorted(units)
    spare = sum(sizes[t] for t in rec) - need
    swapped: set[int] = set()
    heap = [(-st.saving(u) / max(sum(sizes[t] for t in u), 1), i) for i, u in enumerate(units)]
    heapq.heapify(heap)
    while heap:
        _, i = heapq.heappop(heap)
        u = units[i]
        if any(t not in st.rec for t in u):
            continue
        b = sum(sizes[t] for t in u)
        val = -st.saving(u) / max(b, 1)
        if heap and val > heap[0][0] * (1 - 1e-9):
            heapq.heappush(heap, (val, i))
            continue
        if val >= 0:             # saves nothing (yet): may be worth it once its group mates stay
            continue
        sw = place(u, spare) if place is not None else None
        kept = b - sum(sizes[t] for t in sw or ())
        if kept > spare:         # place() never swaps a unit whose rest does not fit
            continue
        st.keep(u)
        swapped |= set(sw or ())
        spare -= kept
    return set(st.rec), swapped
