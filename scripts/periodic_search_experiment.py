"""Experiment: block-periodic moves for the milp planner's incumbent search (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps").

Question: above 40 planning tensors, the proven gap stays above 0.1% at 9 preset settings
(a100-80gb). Does a neighbourhood that exploits the identical transformer blocks find faster
plans that fit than today's search (slack's switch variants, then ``pair_search``)?

Block structure: planning tensors named ``L<i>.<suffix>`` belong to layer ``i`` at block
position ``<suffix>`` (the graph builder in slackswap/models/transformer.py names them so); every
other tensor (embedding, head) is a position of its own with one "layer".

Moves (each judged by the simulator alone, ``detail=False``, no prefetch issue points, like
``pair_search``; a candidate counts only if feasible and fits):

* ``single``: one block position gets decision K, S or R in a layer range: all layers, the
  first k or the last k layers (k = 1..L-1);
* ``pair``: position A changes its decision (evicted -> K, or S <-> R) in a range while position
  B (at least half A's size) is evicted more (K -> S/R or S -> R) in the same range, to pay for
  it: ``pair_search``'s rule lifted to block positions; ranges: all layers, first/last L/4, L/2,
  3L/4 layers;
* ``shift``: the boundary between two runs of decisions of one position moves by 1-3 layers
  (the run on one side grows into the other), alone or paid by a pair-rule move of another
  position over the same layers.

Scan order: singles over all layers, pairs over all layers, singles and pairs over the coarse
ranges, shifts, then singles over first/last k layers for every k. First improvement; the scan
repeats until a whole scan finds nothing or the periodic share of the time (``--share``, default
half) is up; then ``pair_search`` (today's search: single, then two-tensor moves) runs from the
result with the time left. The moves are not part of the planner: they did not pay
(benchmarks/README.md, "Block-periodic moves").

Runs per setting (all with the same wall-clock limit, default 60 s, counted from the start of
slack's variants; the bound is not recomputed, it is the certified bound of benchmarks/README.md):

* ``control``: slack + ``VARIANTS`` + ``pair_search`` for the whole limit (today's search with
  all the time, where the milp planner gives half of it to the aggregated MILP);
* ``periodic``: slack + ``VARIANTS`` + the periodic moves + ``pair_search`` with the time left.

    PYTHONPATH=. python scripts/periodic_search_experiment.py [--limit 60] [--only bert-large@0.3 ...]
        [--modes control periodic] [--json out.json]

Measured results and the conclusion: benchmarks/README.md, "Block-periodic moves".
"""

from __future__ import annotations

import argparse
import json
import re
import time

from slackswap import Problem
from slackswap.core.plan import Decision, Plan
from slackswap.planners.milp.incumbent import pair_search, variants
from slackswap.planners.slack.judge import Judge
from slackswap.timeline import simulate

K, S, R = Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE
EVICT_ORDER = {K: 0, S: 1, R: 2}   # pair rule: B is "evicted more" when its order rises

#: the 9 settings whose proven gap stayed above 0.1% (benchmarks/README.md, "Proven gaps at
#: every budget"): (model, budget, today's incumbent ms, certified bound ms)
SETTINGS = [
    ("bert-large", 0.3, 231.33, 229.75), ("bert-large", 0.4, 222.10, 221.54),
    ("bert-large", 0.6, 206.24, 205.98), ("gpt2-xl", 0.2, 523.74, 521.50),
    ("gpt2-xl", 0.3, 505.59, 504.66), ("gpt2-xl", 0.4, 488.73, 487.89),
    ("gpt2-xl", 0.5, 472.64, 471.19), ("llama-7b", 0.2, 1801.24, 1798.20),
    ("llama-7b", 0.3, 1741.31, 1732.52),
]


def block_positions(problem):
    """``(positions, L)``: positions = [(name, {layer: tensor id})], block positions first
    (largest tensors first), then each non-layer planning tensor as a position of its own
    (layer 0)."""
    g = problem.graph
    pos: dict[str, dict[int, int]] = {}
    other = []
    for t in problem.planning_ids:
        m = re.match(r"L(\d+)\.(.+)$", g.tensors[t].name)
        if m:
            pos.setdefault(m.group(2), {})[int(m.group(1))] = t
        else:
            other.append(t)
    L = 1 + max((max(v) for v in pos.values()), default=0)
    size = lambda v: max(g.tensors[t].bytes for t in v.values())   # noqa: E731
    blocks = sorted(pos.items(), key=lambda kv: (-size(kv[1]), kv[0]))
    singles = [(g.tensors[t].name, {0: t}) for t in sorted(other, key=lambda t: -g.tensors[t].bytes)]
    return blocks + singles, L


def _ranges(L: int, fine: bool):
    """Layer ranges as (label, tuple of layers): all, first k, last k."""
    out = [("all", tuple(range(L)))]
    ks = range(1, L) if fine else sorted({max(1, round(L * f)) for f in (0.25, 0.5, 0.75)} - {L})
    for k in ks:
        out.append((f"first {k}", tuple(range(k))))
        out.append((f"last {k}", tuple(range(L - k, L))))
    return out


def _runs(cur, layers: dict):
    """Boundaries of ``cur``'s decisions along the layers of one position: [(l, left d, right d)]
    where layer l-1 has ``left d`` and layer l ``right d``."""
    ls = sorted(layers)
    return [(ls[i], cur[layers[ls[i - 1]]], cur[layers[ls[i]]]) for i in range(1, len(ls))
            if cur[layers[ls[i - 1]]] is not cur[layers[ls[i]]]]


class PeriodicSearch:
    def __init__(self, problem, allow_swap=True, allow_recompute=True):
        self.problem = problem
        g = problem.graph
        self.positions, self.L = block_positions(problem)
        self.size = {t: g.tensors[t].bytes for t in problem.planning_ids}
        self.judge = Judge(problem, 10**9)
        self.ok = lambda t, d: d is K or (d is S and allow_swap and g.tensors[t].swappable) or \
            (d is R and allow_recompute and g.tensors[t].recomputable)
        self.log: list[str] = []
        self.tried: dict[str, int] = {}
        self.hits: dict[str, int] = {}

    def _apply(self, cur, changes):
        """``changes`` = [(layers dict, layer tuple, d)] -> candidate or None (no change, or a
        decision a tensor does not allow)."""
        cand, changed = dict(cur), False
        for layers, ls, d in changes:
            for layer in ls:
                t = layers.get(layer)
                if t is None or cand[t] is d:
                    continue
                if not self.ok(t, d):
                    return None
                cand[t], changed = d, True
        return cand if changed else None

    def _singles(self, ranges):
        for name, layers in self.positions:
            rs = ranges if len(layers) > 1 else [("all", (0,))]
            for d in (K, S, R):
                for rl, ls in rs:
                    yield "single", f"{name}->{d.value[0].upper()} [{rl}]", [(layers, ls, d)]

    def _pairs(self, ranges):
        """pair_search's rule on block positions: A changes its decision while B (at least half
        A's size) is evicted more, both over the same layers."""
        P = [(n, la) for n, la in self.positions if len(la) > 1]
        for rl, ls in ranges:
            for na, la in P:
                ta = next(iter(la.values()))
                for da in (K, S, R):
                    for nb, lb in P:
                        if nb == na or 2 * self.size[next(iter(lb.values()))] < self.size[ta]:
                            continue
                        for db in (S, R):
                            yield ("pair", f"{na}->{da.value[0].upper()} + {nb}->{db.value[0].upper()} [{rl}]",
                                   [(la, ls, da), (lb, ls, db)])

    def _shifts(self, cur):
        """The boundary between two runs of one position's decisions moves by 1-3 layers, alone
        or paid by another position's eviction over the same layers."""
        P, L = self.positions, self.L
        for name, layers in P:
            if len(layers) < 2:
                continue
            for b, dl, dr in _runs(cur, layers):
                for w in (1, 2, 3):
                    for ls, d, side in ((tuple(range(b, min(L, b + w))), dl, "right"),
                                        (tuple(range(max(0, b - w), b)), dr, "left")):
                        lab = f"{name} boundary@{b} {side} by {w} ->{d.value[0].upper()}"
                        yield "shift", lab, [(layers, ls, d)]
                        for nb, lb in P:
                            if len(lb) < 2 or nb == name:
                                continue
                            for db in (S, R):
                                yield "shift", f"{lab} + {nb}->{db.value[0].upper()}", [(layers, ls, d), (lb, ls, db)]

    def _moves(self, cur):
        """Yield (kind, label, changes) in scan order (phases: the whole block, i.e. all layers;
        then first/last L/4, L/2, 3L/4 layers; then boundary shifts; then first/last k layers
        for every k); reads ``cur`` as it changes."""
        L = self.L
        all_ = [("all", tuple(range(L)))]
        coarse = [r for r in _ranges(L, False) if r[0] != "all"]
        fine = [r for r in _ranges(L, True) if r[0] != "all" and r not in coarse]
        yield from self._singles(all_)
        yield from self._pairs(all_)
        yield from self._singles(coarse)
        yield from self._pairs(coarse)
        yield from self._shifts(cur)
        yield from self._singles(fine)

    def run(self, decisions, step_s, until):
        cur, best = dict(decisions), step_s
        improved = True
        while improved:
            improved = False
            for kind, label, changes in self._moves(cur):
                if time.perf_counter() >= until:
                    return cur, best
                cand = self._apply(cur, changes)
                if cand is None:
                    continue
                s, _ = self.judge.score(cand, {}, prefilter=False)
                self.tried[kind] = self.tried.get(kind, 0) + 1
                if s < best * (1 - 1e-12):
                    self.hits[kind] = self.hits.get(kind, 0) + 1
                    self.log.append(f"{kind} {label}: {best * 1e3:.3f} -> {s * 1e3:.3f} ms")
                    cur.clear()
                    cur.update(cand)
                    best, improved = s, True
        return cur, best


def start_plan(problem, until):
    """The best of slack's default plan and its VARIANTS (as ``improve`` judges them)."""
    from slackswap.planners.base import get

    best = get("slack").plan(problem)
    bs, src = simulate(problem, best, detail=False).step_time_s, "slack"
    for label, p in variants(problem, True, True, until):
        r = simulate(problem, p, detail=False)
        if r.feasible and r.fits and r.step_time_s < bs * (1 - 1e-12):
            best, bs, src = p, r.step_time_s, label
    # the searches judge decisions without issue points; keep the start comparable
    r0 = simulate(problem, Plan(dict(best.decisions)), detail=False)
    if r0.feasible and r0.fits and r0.step_time_s <= bs * (1 + 1e-12):
        bs = r0.step_time_s
    return dict(best.decisions), bs, src


def run_setting(model, budget, mode, limit, share=0.5):
    problem = Problem.build(model, "a100-80gb", budget)
    t0 = time.perf_counter()
    until = t0 + limit
    dec, s, src = start_plan(problem, until)
    notes = [f"start {src} {s * 1e3:.3f} ms"]
    t_per = 0.0
    if mode == "periodic":
        ps = PeriodicSearch(problem)
        t1 = time.perf_counter()
        dec, s2 = ps.run(dec, s, t0 + share * limit)
        t_per = time.perf_counter() - t1
        notes.append(f"periodic: {len(ps.log)} moves, {ps.judge.calls} sims, {t_per:.1f} s, {s * 1e3:.3f} -> "
                     f"{s2 * 1e3:.3f} ms")
        notes.append(f"  simulations per kind {ps.tried}, improving moves per kind {ps.hits}")
        notes += ["  " + x for x in ps.log]
        s = s2
    if time.perf_counter() < until:
        dec2, s3, moves, sims = pair_search(problem, dec, s, max_sims=10**9, until=until)
        notes.append(f"pair_search: {moves} moves, {sims} sims, {s * 1e3:.3f} -> {s3 * 1e3:.3f} ms")
        dec, s = dec2, s3
    wall = time.perf_counter() - t0
    r = simulate(problem, Plan(dec), detail=False)    # the final judge
    assert r.feasible and r.fits and abs(r.step_time_s - s) <= 1e-9 * s, (r.feasible, r.fits, r.step_time_s, s)
    return {"model": model, "budget": budget, "mode": mode, "step_ms": s * 1e3, "wall_s": wall,
            "periodic_s": t_per, "notes": notes, "decisions": {str(k): v.value for k, v in dec.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--modes", nargs="*", default=["control", "periodic"])
    ap.add_argument("--only", nargs="*", default=None, help="model@budget, e.g. gpt2-xl@0.5")
    ap.add_argument("--json", default=None)
    ap.add_argument("--share", type=float, default=0.5,
                    help="periodic mode: the periodic moves stop at this share of the limit, pair_search gets the rest")
    a = ap.parse_args(argv)
    known = [f"{m}@{b}" for m, b, _, _ in SETTINGS]
    bad = [x for x in a.only or () if x not in known]
    if bad:
        ap.error(f"--only: {', '.join(bad)} is not one of {', '.join(known)}")
    if any(m not in ("control", "periodic") for m in a.modes):
        ap.error(f"--modes: each must be control or periodic; got {a.modes}")
    out = []
    for model, budget, today, bound in SETTINGS:
        if a.only and f"{model}@{budget}" not in a.only:
            continue
        for mode in a.modes:
            res = run_setting(model, budget, mode, a.limit, a.share)
            res.update(today_ms=today, bound_ms=bound, gap=(res["step_ms"] - bound) / res["step_ms"])
            out.append(res)
            print(f"{model} {budget} {mode}: {res['step_ms']:.3f} ms (README today {today:.2f}, bound {bound:.2f}, "
                  f"gap {100 * res['gap']:.3f}%) wall {res['wall_s']:.1f} s", flush=True)
            for n in res["notes"]:
                print("    " + n, flush=True)
            if a.json:
                with open(a.json, "w") as f:
                    json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
