"""The D2H order as a decision (docs/milp.md, "The D2H order"): the exact model with and without
order columns, the oracle over decisions and orders, and slack's order pass.

    python benchmarks/bench_d2h_order.py exact tiny llama-7b gpt2@0.95 --layers 1 --budget 0.7
    python benchmarks/bench_d2h_order.py oracle --seeds 0 200
    python benchmarks/bench_d2h_order.py slack
    python benchmarks/bench_d2h_order.py speed llama-7b gpt2-xl --budgets 0.3 0.5 0.7 --repeat 9
    python benchmarks/bench_d2h_order.py suite --repeat 3

``exact``: ``milp`` with ``d2h_order="production"`` and ``"any"`` on ``synthetic.five_op_swaps()``
and on each model cut to ``--layers`` at ``--budget`` (``MODEL@B``: at budget B) (``--time-limit``
seconds each): swappable
tensors, status, step time, whether the plan has its own order, wall time and model size.
``oracle``: on ``synthetic.spike_problem(seed)`` for seeds in ``[--seeds A, B)`` with at most
four swappable tensors: brute force in production order, brute force over decisions and D2H
orders, and ``milp`` (defaults); counts the problems, those where another order is faster, those
where ``milp`` differs from the oracle, and those with a bound above it (``slackswap.bounds`` and
``milp``'s own).
``slack``: ``slack`` with and without ``reorder`` on every preset x ``--hardware-list`` x
``--budgets``: settings, those where the winner stalls, those where an order is kept (listed),
those where the plan got slower.
``speed``: ``slack`` with and without ``reorder``, interleaved in one process, best of
``--repeat`` wall times each, the pass alone (``order.better_order`` on the winner, its
simulation given), and the step times.
``suite``: ``milp`` with ``d2h_order="production"`` and ``"any"``, interleaved, on
``synthetic.exact_suite()`` and ``random_suite(30, seed=0, max_tensors=7)``: the total wall time
of each over the suite (best of ``--repeat``), and the problems whose optima differ.
Step times come from the simulator and do not depend on the machine; wall times do.
"""

from __future__ import annotations

import argparse
import time
import warnings

from slackswap import Problem, Status, planners, simulate
from slackswap.bounds import aggregate_bound, capacity_bound, lower_bound
from slackswap.core.errors import SlackSwapError
from slackswap.experiments.synthetic import five_op_swaps, spike_problem
from slackswap.models import presets
from slackswap.planners.slack.order import better_order


def _swappable(p) -> int:
    return sum(p.graph.tensors[t].swappable for t in p.planning_ids)


def exact(a) -> None:
    cases = [("five_op_swaps", five_op_swaps())]
    for spec in a.models:
        m, _, b = spec.partition("@")
        b = float(b) if b else a.budget
        for n in a.layers:
            cases.append((f"{m} {n} layer(s) at {b}", Problem.build(m, a.hardware, b, layers=n)))
    print("| problem | swappable | d2h_order | status | step time | own order | wall | size |")
    print("|---|---|---|---|---|---|---|---|")
    for name, p in cases:
        for mode in ("production", "any"):
            t0 = time.perf_counter()
            mp = planners.get("milp", d2h_order=mode, time_limit_s=a.time_limit).plan(p)
            wall = time.perf_counter() - t0
            size = mp.info.model_size
            print(f"| {name} | {_swappable(p)} | {mode} | {mp.info.status.value} | {mp.info.objective!r} s | "
                  f"{'yes' if mp.d2h_order else 'no'} | {wall:.2f} s | {size.get('binaries', '-')} binaries, "
                  f"{size.get('nonzeros', '-')} nonzeros |", flush=True)


def oracle(a) -> None:
    n = gain = differ = above = infeasible = 0
    for seed in range(*a.seeds):
        p = spike_problem(seed)
        if _swappable(p) > 4:
            continue
        n += 1
        best = planners.get("brute", d2h_orders=True).plan(p)
        mp = planners.get("milp").plan(p)
        if best.info.status is Status.INFEASIBLE:     # no single-level plan fits: milp proves it, or
            infeasible += 1                           # returns dp-checkpoint's multi-level plan (FEASIBLE)
            multi = mp.info.status is Status.FEASIBLE and mp.hold_points and simulate(p, mp, detail=False).fits
            differ += not (mp.info.status is Status.INFEASIBLE or multi)
            continue
        o = best.info.objective
        plain = planners.get("brute").plan(p).info.objective
        if o < plain:
            gain += 1
            print(f"spike_problem({seed}): {plain!r} s in production order, {o!r} s in order {best.d2h_order}; "
                  f"milp {mp.info.status.value} {mp.info.objective!r} s, order {mp.d2h_order}", flush=True)
        r = simulate(p, mp, detail=False)
        if mp.info.status is not Status.OPTIMAL or abs(r.step_time_s - o) > 1e-9 * o:
            differ += 1
            print(f"spike_problem({seed}): milp {mp.info.status.value} {r.step_time_s!r} s, oracle {o!r} s")
        bounds = [capacity_bound(p), p.ideal_step_s + aggregate_bound(p)[0],
                  p.ideal_step_s + aggregate_bound(p, integral=True)[0], lower_bound(p)[0], mp.info.lower_bound]
        if any(b > o * (1 + 1e-9) for b in bounds):
            above += 1
            print(f"spike_problem({seed}): a bound above the optimum {o!r} s: {bounds}")
    print(f"{n} problems (seeds {a.seeds[0]}-{a.seeds[1] - 1}, at most 4 swappable tensors), {infeasible} with no "
          f"single-level plan that fits; another D2H order faster on {gain}; milp differs from the oracle on {differ}; "
          f"a bound above the optimum on {above}")


def slack(a) -> None:
    n = stalled = kept = worse = 0
    for model in presets.available():
        for hw in a.hardware_list:
            for b in a.budgets:
                try:
                    p = Problem.build(model, hw, b)
                except SlackSwapError:
                    continue
                off, on = planners.get("slack", reorder=False).plan(p), planners.get("slack").plan(p)
                n += 1
                if off.info.objective is None:
                    continue
                stalled += simulate(p, off, detail=False).stall_s > 0
                worse += on.info.objective > off.info.objective
                if on.d2h_order is not None:
                    kept += 1
                    print(f"{model} {hw} {b}: {off.info.objective * 1e3:.6f} -> {on.info.objective * 1e3:.6f} ms "
                          f"({on.info.message})", flush=True)
    print(f"{n} settings, {stalled} where slack's plan stalls, {kept} with an order kept, {worse} slower")


def speed(a) -> None:
    for model in a.models:
        for b in a.budgets:
            p = Problem.build(model, a.hardware, b)
            walls, plans = {False: [], True: []}, {}
            for _ in range(a.repeat):
                for ro in (False, True):
                    t0 = time.perf_counter()
                    plans[ro] = planners.get("slack", reorder=ro).plan(p)
                    walls[ro].append(time.perf_counter() - t0)
            won = plans[False]
            r = simulate(p, won, detail=False)
            alone = []
            for _ in range(a.repeat):       # the pass itself on the winner (its simulation given)
                t0 = time.perf_counter()
                better_order(p, dict(won.decisions), dict(won.issue_points), r)
                alone.append(time.perf_counter() - t0)
            print(f"{model} {b}: reorder off {min(walls[False]):.4f} s, on {min(walls[True]):.4f} s (best of "
                  f"{a.repeat}); the pass alone {min(alone) * 1e6:.0f} us; step "
                  f"{plans[False].info.objective * 1e3:.6f} -> {plans[True].info.objective * 1e3:.6f} ms", flush=True)


def suite(a) -> None:
    from slackswap.experiments.synthetic import exact_suite, random_suite

    probs = exact_suite() + [i.problem for i in random_suite(30, seed=0, max_tensors=7)]
    best = {"production": float("inf"), "any": float("inf")}
    objs = {}
    for _ in range(a.repeat):
        total = {"production": 0.0, "any": 0.0}
        for k, p in enumerate(probs):
            for mode in ("production", "any"):
                t0 = time.perf_counter()
                mp = planners.get("milp", d2h_order=mode).plan(p)
                total[mode] += time.perf_counter() - t0
                objs[k, mode] = mp.info.objective
        best = {m: min(best[m], total[m]) for m in best}
    differ = [k for k in range(len(probs)) if objs[k, "production"] != objs[k, "any"]
              and not (objs[k, "production"] is not None and objs[k, "any"] is not None
                       and abs(objs[k, "production"] - objs[k, "any"]) <= 1e-9 * objs[k, "production"])]
    print(f"{len(probs)} problems: production {best['production']:.2f} s, any {best['any']:.2f} s "
          f"(best of {a.repeat} totals); optima differ on {len(differ)}: "
          + ", ".join(f"{probs[k].graph.name} {objs[k, 'production']!r} -> {objs[k, 'any']!r} s" for k in differ))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["exact", "oracle", "slack", "speed", "suite"])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--hardware", default="a100-80gb")
    ap.add_argument("--hardware-list", nargs="+", default=["a100-80gb", "h100-sxm", "gh200"])
    ap.add_argument("--budget", type=float, default=0.7)
    ap.add_argument("--budgets", type=float, nargs="+", default=[0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    ap.add_argument("--layers", type=int, nargs="+", default=[1])
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--seeds", type=int, nargs=2, default=[0, 200])
    ap.add_argument("--repeat", type=int, default=9)
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")     # the presets' capacity warnings
    {"exact": exact, "oracle": oracle, "slack": slack, "speed": speed, "suite": suite}[a.mode](a)


if __name__ == "__main__":
    main()
