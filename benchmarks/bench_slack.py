"""Speed of the ``slack`` planner (its own simulations included); plain script, prints a table.

    python benchmarks/bench_slack.py

Targets: a Llama-7B step in <= 0.5 s; the three published rows in <= 5 s together;
the growth of planning time with the number of layers (llama-7b, layers = 8, 16, 32, 64);
with ``--grid``: slack vs the best other heuristic on every model x budget 0.3..0.8;
``--switches`` (alone): each switch away from its default, its step time against the default's
(the problems of ``tests/test_slack.py``);
``--modes`` (alone): the throughput ratio of the default, ``order="size"``, ``recompute_only`` and
``swap_only`` on every model x budget 0.25..0.9 (0 = does not fit);
``--split [N]`` (alone): each published row planned N times (default 5) in this process: median
plan time, the part of it inside ``simulate`` and ``compile_schedule`` (outermost calls) and the
rest, and the number of calls of each (run it with ``PYTHONPATH`` at another tree to compare);
``--gaps [N]`` (alone): slack's gap to the exact optimum (``brute``) on ``synthetic.exact_suite()``
and on ``synthetic.random_suite(N, seed=0)`` (default 200), with and without its local search
(targets: mean gap <= 0.5%, worst <= 5%, never INFEASIBLE where the optimum fits).
"""

import sys
import time

from slackswap.planners.slack import SlackPlanner
from slackswap.timeline import simulate
from slackswap.timeline.problem import Problem


def timed(problem, repeat=5):
    best, plan = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        plan = SlackPlanner().plan(problem)
        best = min(best, time.perf_counter() - t0)
    return best, plan


def main():
    print(f"{'model':12s} {'layers':>6s} {'tensors':>7s} {'plan s':>7s} {'sims':>5s} {'ratio':>7s} fits")
    total = 0.0
    for model in ("bert-large", "gpt2-xl", "llama-7b"):
        p = Problem.build(model, "a100-80gb", budget=0.5)
        s, plan = timed(p)
        total += s
        r = simulate(p, plan, detail=False)
        print(f"{model:12s} {len(p.graph.layers):6d} {len(p.planning_ids):7d} {s:7.3f} "
              f"{plan.info.message.split()[0]:>5s} {r.throughput_ratio:7.4f} {r.fits}")
    print(f"three published rows: {total:.3f} s (target <= 5 s)")
    for layers in (8, 16, 32, 64):
        p = Problem.build("llama-7b", "a100-80gb", 0.5, layers=layers)
        s, plan = timed(p)
        r = simulate(p, plan, detail=False)
        print(f"{'llama-7b':12s} {layers:6d} {len(p.planning_ids):7d} {s:7.3f} "
              f"{plan.info.message.split()[0]:>5s} {r.throughput_ratio:7.4f} {r.fits}")


OTHERS = ("capuchin", "dp-checkpoint", "chen-greedy", "chen-sqrt", "checkpoint-layers", "swap-all")


def grid():
    from slackswap import planners

    print(f"{'model':12s} {'budget':>6s} {'slack':>7s} {'best other':>10s} planner")
    for model in ("bert-large", "gpt2-xl", "llama-7b"):
        base = Problem.build(model, "a100-80gb", budget=0.5)
        for b in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
            p = base.with_budget(b)
            r = simulate(p, SlackPlanner().plan(p), detail=False)
            best = (0.0, "-")
            for name in OTHERS:
                o = simulate(p, planners.get(name).plan(p), detail=False)
                if o.feasible and o.fits and o.throughput_ratio > best[0]:
                    best = (o.throughput_ratio, name)
            print(f"{model:12s} {b:6.1f} {r.throughput_ratio:7.5f} {best[0]:10.5f} {best[1]}")


# each switch away from its default, on the problem where it matters (tests/test_slack.py)
SWITCHES = (({"order": "size"}, "bert-large", 0.5), ({"order": "position"}, "bert-large", 0.5),
            ({"mode": "swap_only"}, "bert-large", 0.5), ({"mode": "recompute_only"}, "bert-large", 0.5),
            ({"prefetch": "first_use"}, "bert-large", 0.5), ({"prefetch": "lookahead"}, "bert-large", 0.5),
            ({"keep_tail": False}, "bert-large", 0.4), ({"regen_masks": False}, "llama-7b", 0.5),
            ({"pack": False}, "gpt2-xl", 0.5), ({"local_search": False}, "tiny", 0.4))


def switches():
    print("| switch | model | budget | default step | switched step | slower by |")
    print("|---|---|---|---|---|---|")
    for kw, model, b in SWITCHES:
        p = Problem.build(model, "a100-80gb", budget=b)
        d = simulate(p, SlackPlanner().plan(p), detail=False).step_time_s
        o = simulate(p, SlackPlanner(**kw).plan(p), detail=False).step_time_s
        (k, v), = kw.items()
        print(f"| `{k}={v}` | {model} | {b} | {d * 1e3:.3f} ms | {o * 1e3:.3f} ms | {100 * (o / d - 1):.3f}% |")


def modes():
    variants = ({}, {"order": "size"}, {"mode": "recompute_only"}, {"mode": "swap_only"})
    print("| model | budget | default | order=size | recompute_only | swap_only |")
    print("|---|---|---|---|---|---|")
    for model in ("bert-large", "gpt2-xl", "llama-7b"):
        base = Problem.build(model, "a100-80gb", budget=0.5)
        for b in (0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
            p = base.with_budget(b)
            rs = [simulate(p, SlackPlanner(**kw).plan(p), detail=False) for kw in variants]
            cells = " | ".join(f"{r.throughput_ratio if r.fits else 0:.5f}" for r in rs)
            print(f"| {model} | {b} | {cells} |", flush=True)


def gap_report():
    from slackswap import report
    from slackswap.experiments import gaps, synthetic

    i = sys.argv.index("--gaps")
    n = int(sys.argv[i + 1]) if len(sys.argv) > i + 1 else 200
    for name, inst in (("exact_suite()", gaps.instances_of(synthetic.exact_suite())),
                       (f"random_suite({n}, seed=0)", synthetic.random_suite(n, seed=0))):
        t0 = time.perf_counter()
        df = gaps.compare(inst)
        print(f"{name}: {len(inst)} instances, {time.perf_counter() - t0:.1f} s")
        print(report.to_markdown(gaps.summary(df)))


def split():
    """Plan time split into simulator time (``simulate`` and ``compile_schedule``, outermost
    calls, wherever called: slack's judge, the baselines' planners) and the rest."""
    import statistics

    import slackswap
    from slackswap import planners

    timeline = sys.modules["slackswap.timeline"]
    acc = {"s": 0.0, "depth": 0, "simulate": 0, "compile_schedule": 0}

    def counted(f):
        def g(*a, **k):
            acc[f.__name__] += 1
            if acc["depth"]:
                return f(*a, **k)
            acc["depth"] += 1
            t0 = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                acc["s"] += time.perf_counter() - t0
                acc["depth"] -= 1
        return g

    planners.available()   # load every planner module, then wrap every reference to the two
    wrapped = {f: counted(f) for f in (timeline.simulate, timeline.compile_schedule)}
    for name, mod in list(sys.modules.items()):
        if name.startswith("slackswap") and mod is not None:
            for k, v in list(vars(mod).items()):
                if callable(v) and v in wrapped:
                    setattr(mod, k, wrapped[v])
    i = sys.argv.index("--split")
    n = int(sys.argv[i + 1]) if len(sys.argv) > i + 1 else 5
    print(f"slackswap from {slackswap.__file__}")
    print(f"{'model':12s} {'plan ms':>8s} {'sim ms':>7s} {'rest ms':>7s} {'simulate':>8s} {'compile':>7s}")
    for model in ("bert-large", "gpt2-xl", "llama-7b"):
        p = Problem.build(model, "a100-80gb", budget=0.5)
        rows = []
        for _ in range(n):
            acc.update(s=0.0, simulate=0, compile_schedule=0)
            t0 = time.perf_counter()
            SlackPlanner().plan(p)
            rows.append((time.perf_counter() - t0, acc["s"]))
        med = [statistics.median(x) for x in zip(*rows, strict=True)]
        rest = statistics.median(a - b for a, b in rows)
        print(f"{model:12s} {med[0] * 1e3:8.1f} {med[1] * 1e3:7.1f} {rest * 1e3:7.1f} {acc['simulate']:8d} "
              f"{acc['compile_schedule']:7d}")


if __name__ == "__main__":
    if "--split" in sys.argv:
        split()
        sys.exit()
    if "--modes" in sys.argv:
        modes()
        sys.exit()
    if "--gaps" in sys.argv:
        gap_report()
        sys.exit()
    if "--switches" in sys.argv:
        switches()
        sys.exit()
    main()
    if "--grid" in sys.argv:
        grid()
