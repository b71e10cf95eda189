"""Better incumbents for problems beyond the exact model (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps").

Above ``max_exact_tensors`` the ``milp`` planner certifies a bound with the aggregated
relaxation, and the proven gap is the distance from its incumbent to that bound. Measured on
the full-size presets, the incumbent was the loose side as often as the bound: slack's own
plan is a local optimum for single-tensor moves, but not for two-tensor moves, and a variant
of slack's switches is sometimes better (bert-large at budget 0.5: `keep_tail=False` lowers the
proven gap from 0.46% to 0.08%). So the planner, with the time and the simulations it has left:

1. judges slack with each switch setting of ``VARIANTS`` (about 0.3 s each at full size);
2. runs a first-improvement local search from the best plan: first single moves (an evicted
   tensor changes its decision: back to KEEP, or SWAP <-> RECOMPUTE), then two-tensor moves (such
   a change while a tensor at least half its size is evicted, or turns from SWAP to RECOMPUTE, to
   pay for it). Single moves matter where the best plan came from one of slack's variants:
   llama-7b at budget 0.2 went from 1803.31 to 1801.24 ms with them (docs/journal/benchmarks-readme-2026-12-04.md). Moves are tried
   largest tensors first, the scan continues after each improvement, and a memory lower bound
   prunes moves that cannot fit before any simulation (``Judge``);
3. runs the same search from the other candidates it is given (beyond the exact model: the
   aggregated MILP's decisions, or the warm start when those are faster), each with a share of
   the work that shrinks with its distance from the bound, and keeps the fastest end. A slower
   start can lead to a better local optimum: at bert-large 0.3 (2,000 simulations) the search
   from the aggregated MILP's decisions ended at 230.87 ms, the one from slack's plan at
   231.36 ms, before the relaxation's `chain` rows changed those decisions (231.38 ms without
   step 4: docs/journal/benchmarks-readme-2026-12-04.md, "The `chain` rows moved the second start");
4. with two starts or more, keeps ``RELINK_SHARE`` of the work for **relinking by layer**
   (``relink``): from each end, take another end's decisions for one transformer layer at a time
   (``blocks``), keeping each exchange that simulates faster, then search on from the fastest
   result (when no exchange is kept, the fastest end's search goes on with that work). The
   blocks are identical, so a layer's decisions that work in one plan often work in another at
   the same place; two ends far apart (146 of 370 decisions at bert-large 0.3, each search
   given 2,000 simulations: scripts/relink_experiment.py of commit 40df6bb) mix into a plan that no two-tensor move reaches from
   either: through the planner 230.72 ms there at 2,000 simulations, against 231.38 ms without
   relinking.

The simulator judges every candidate, so the result is a plan that fits, with its simulated
time; nothing here changes the bound.
"""

from __future__ import annotations

import math
import time

from ...core.errors import SlackSwapError
from ...core.plan import Decision, Plan
from ...timeline import simulate
from ..base import get
from ..slack.judge import Judge, issue_points

K, S, R = Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE
#: with two starts or more, the share of the search's simulations (and time) kept for relinking
#: their ends (``relink``) and searching on from the result
RELINK_SHARE = 0.1
RELINKED = "relinking"
#: slack's switch settings judged besides its default
VARIANTS = ({"keep_tail": False}, {"regen_masks": False}, {"keep_tail": False, "regen_masks": False},
            {"order": "position"})


def _mode(allow_swap: bool, allow_recompute: bool) -> str:
    return "hybrid" if allow_swap and allow_recompute else ("swap_only" if allow_swap else "recompute_only")


def variants(problem, allow_swap: bool, allow_recompute: bool, until: float | None):
    """``[(label, Plan)]``: slack with each setting of ``VARIANTS`` (in the mode the switches
    allow); none is started after ``until`` (a ``time.perf_counter()`` value)."""

    out = []
    mode = _mode(allow_swap, allow_recompute)
    for kw in VARIANTS:
        if until is not None and time.perf_counter() >= until:
            break
        try:
            plan = get("slack", mode=mode, **kw).plan(problem)
        except SlackSwapError:
            continue
        out.append(("slack(" + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")", plan))
    return out


def _pair_moves(cur: dict, ids: list, size: dict, ok):
    """The moves of ``cur`` (module doc) in scan order, ``(a, da, c, dc)``: first every evicted
    tensor alone (``c`` None), then the two-tensor moves; reads ``cur`` as it changes, so a move
    made during the scan is seen by the rest of it."""
    for a in ids:
        if cur[a] is K:
            continue
        for da in (K, S, R):
            if da is not cur[a] and ok(a, da):
                yield a, da, None, None
    for a in ids:
        if cur[a] is K:
            continue
        for da in (K, S, R):
            if da is cur[a] or not ok(a, da):
                continue
            for c in ids:
                if c == a or cur[c] is R or 2 * size[c] < size[a]:
                    continue
                for dc in (S, R):
                    if dc is not cur[c] and ok(c, dc) and cur[a] is not da:
                        yield a, da, c, dc


def pair_search(problem, decisions: dict, step_s: float, *, allow_swap: bool = True,
                allow_recompute: bool = True, max_sims: int = 2000, until: float | None = None):
    """First-improvement local search over two-tensor moves (module doc) from ``decisions``
    (simulated at ``step_s`` seconds). Stops after ``max_sims`` simulations, at ``until``, or
    after a whole scan without improvement. Returns ``(decisions, step_s, moves, sims)``."""
    g = problem.graph
    judge = Judge(problem, max_sims)
    size = {t: g.tensors[t].bytes for t in problem.planning_ids}

    def ok(t, d):
        return d is K or (d is S and allow_swap and g.tensors[t].swappable) or \
            (d is R and allow_recompute and g.tensors[t].recomputable)

    ids = sorted(problem.planning_ids, key=lambda t: (-size[t], t))
    cur, best, moves = dict(decisions), step_s, 0
    improved = True
    while improved:
        improved = False
        for a, da, c, dc in _pair_moves(cur, ids, size, ok):
            if judge.left <= 0 or (until is not None and time.perf_counter() >= until):
                return cur, best, moves, judge.calls
            cand = {**cur, a: da} if c is None else {**cur, a: da, c: dc}
            s, _ = judge.score(cand, issue_points(problem, cand, "auto"), prefilter=True)
            if s < best * (1 - 1e-12):
                cur.update(cand)               # in place: the scan goes on from the new plan
                best, moves, improved = s, moves + 1, True
    return cur, best, moves, judge.calls


def blocks(problem) -> list[list[int]]:
    """The planning tensors grouped by the transformer layer of their producer (``Op.layer``), in
    layer order, then one group of those outside every layer (embeddings, head): the units that
    ``relink`` exchanges between two plans."""
    g = problem.graph
    by: dict[int | None, list[int]] = {}
    for t in problem.planning_ids:
        p = g.tensors[t].producer
        by.setdefault(None if p is None else g.ops[p].layer, []).append(t)
    return [by[k] for k in sorted(k for k in by if k is not None)] + ([by[None]] if None in by else [])


def relink(problem, decisions: dict, step_s: float, guide: dict, *, max_sims: int, until: float | None = None):
    """Path relinking by blocks: from ``decisions`` (simulated at ``step_s``), take ``guide``'s
    decisions for one block (``blocks``: a layer's tensors) at a time, keeping each exchange that
    simulates faster, and scan the blocks again until a whole scan keeps none. Two local optima of
    ``pair_search`` can be far apart (module doc item 4: 146 of 370 decisions) with each
    layer's decisions consistent in itself; a plan that takes some layers from one and the rest
    from the other is a move of dozens of tensors that no two-tensor move reaches. Stops after
    ``max_sims`` simulations or at ``until``. Returns ``(decisions, step_s, blocks taken,
    simulations)``."""
    judge = Judge(problem, max_sims)
    cur, best, taken = dict(decisions), step_s, 0
    groups = blocks(problem)
    improved = True
    while improved:
        improved = False
        for grp in groups:
            diff = [t for t in grp if cur[t] is not guide[t]]
            if not diff:
                continue
            if judge.left <= 0 or (until is not None and time.perf_counter() >= until):
                return cur, best, taken, judge.calls
            cand = {**cur, **{t: guide[t] for t in diff}}
            s, _ = judge.score(cand, issue_points(problem, cand, "auto"), prefilter=True)
            if s < best * (1 - 1e-12):
                cur, best, taken, improved = cand, s, taken + 1, True
    return cur, best, taken, judge.calls


def improve(problem, plan: Plan | None, step_s: float | None, *, allow_swap: bool, allow_recompute: bool,
            max_sims: int, until: float | None, variants_too: bool = True, others=(),
            bound: float | None = None):
    """``(plan, step_s, note)``: the best of ``plan`` (simulated at ``step_s``) and, with
    ``variants_too``, slack's ``VARIANTS``, then ``pair_search`` from it and from each of
    ``others`` (``[(label, Plan, step_s)]``, plans that fit, e.g. the aggregated MILP's
    decisions; one equal to the first start is left out): a search from a second start reaches
    what the first does not (module doc).
    The starts share the simulations and the time left in proportion to ``1 / (step_s -
    bound)`` (equal shares without a ``bound``): a start twice as far from the lower bound gets
    half as much; what a start leaves unused goes to the next. With two starts or more they
    share all but ``RELINK_SHARE`` of it; the rest (and what they leave) goes to relinking their
    ends by layer and searching on from the result (``_relink_ends``, module doc item 4), or,
    when relinking keeps nothing, to the fastest end's search.
    ``note`` says what changed ("" when nothing)."""

    best, bs, src = plan, math.inf if step_s is None else step_s, None
    if variants_too and (allow_swap or allow_recompute):
        for label, p in variants(problem, allow_swap, allow_recompute, until):
            r = simulate(problem, p, detail=False)
            if r.feasible and r.fits and r.step_time_s < bs * (1 - 1e-12):
                best, bs, src = p, r.step_time_s, label
    if best is None:
        return plan, step_s, ""
    notes = [f"{src}'s plan is faster"] if src else []
    starts = [(None, best, bs)] + [(lab, p, s) for lab, p, s in others
                                   if p is not None and dict(p.decisions) != dict(best.decisions)]
    weight = [1.0 if bound is None else 1.0 / max(s0 - bound, 1e-9 * abs(s0)) for _, _, s0 in starts]
    # with two starts or more, RELINK_SHARE of the work waits for relinking their ends
    reserve = round(RELINK_SHARE * max_sims) if len(starts) > 1 else 0
    left = max_sims - reserve
    search_until = None if until is None else \
        time.perf_counter() + (until - time.perf_counter()) * (1 - (RELINK_SHARE if reserve else 0.0))
    found = []       # (step_s, decisions, label, moves, simulations) per start searched
    for i, (label, start, s0) in enumerate(starts):
        now = time.perf_counter()
        if left <= 0 or (search_until is not None and now >= search_until):
            break
        share = weight[i] / sum(weight[i:])
        stop = None if search_until is None else now + (search_until - now) * share
        dec, s, moves, sims = pair_search(problem, dict(start.decisions), s0, allow_swap=allow_swap,
                                          allow_recompute=allow_recompute, max_sims=max(1, round(left * share)),
                                          until=stop)
        left -= sims
        found.append((s, dec, label, moves, sims))
    if not found:
        return best, bs, "; ".join(notes)
    left += reserve
    relinked, used = _relink_ends(problem, found, left, until, allow_swap, allow_recompute)
    left -= used
    if relinked is not None:
        found.append(relinked)
    elif len(found) > 1 and left > 0 and (until is None or time.perf_counter() < until):
        # nothing relinked: the fastest end's search goes on with the rest
        k = min(range(len(found)), key=lambda j: found[j][0])
        s, dec, label, moves, sims = found[k]
        dec, s, more, extra = pair_search(problem, dec, s, allow_swap=allow_swap, allow_recompute=allow_recompute,
                                          max_sims=left, until=until)
        found[k] = (s, dec, label, moves + more, sims + extra)
    s, dec, label, moves = min(found, key=lambda f: f[0])[:4]
    searched = [f for f in found if f[2] != RELINKED]
    total = (f"{sum(f[4] for f in found) + used} simulations, {len(searched)} start{'s' if len(searched) > 1 else ''}")
    if s < bs * (1 - 1e-12):
        best, bs = Plan(dec), s
        if label is None:
            notes.append(f"{moves} two-tensor moves improved it ({total})")
        elif label == RELINKED:
            notes.append(f"relinking the searches' ends by layer did better: {relinked[5]} blocks taken, "
                         f"then {moves} two-tensor moves ({total})")
        else:
            notes.append(f"the search from {label} did better: {moves} two-tensor moves ({total})")
    else:
        notes.append(f"no two-tensor move improved it ({total})")
    return best, bs, "; ".join(notes)


def _relink_ends(problem, found: list, left: int, until: float | None, allow_swap: bool, allow_recompute: bool):
    """``relink`` every end in ``found`` (``(step_s, decisions, label, moves, simulations)`` of
    each start's search) towards every other, within ``left`` simulations, then ``pair_search``
    from the fastest result with the simulations left, if it is faster than every end. Returns
    ``(result, simulations spent relinking)``; ``result`` is ``(step_s, decisions, RELINKED,
    moves, simulations of that search, blocks taken)``, or None (fewer than two ends, or no
    relinked plan faster than the best end)."""
    if len(found) < 2:
        return None, 0
    ends = sorted(found, key=lambda f: f[0])
    used, cands = 0, []
    for a in ends:
        for b in ends:
            if a is b or left - used <= 0 or (until is not None and time.perf_counter() >= until):
                continue
            dec, s, taken, sims = relink(problem, a[1], a[0], b[1], max_sims=left - used, until=until)
            used += sims
            if taken:
                cands.append((s, dec, taken))
    if not cands:
        return None, used
    s, dec, taken = min(cands, key=lambda c: c[0])
    if not s < ends[0][0] * (1 - 1e-12):
        return None, used
    moves, sims = 0, 0
    if left - used > 0 and (until is None or time.perf_counter() < until):
        dec, s, moves, sims = pair_search(problem, dec, s, allow_swap=allow_swap, allow_recompute=allow_recompute,
                                          max_sims=left - used, until=until)
    return (s, dec, RELINKED, moves, sims, taken), used
