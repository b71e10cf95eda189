"""Speed of the ``slack`` planner (its own simulations included); plain script, prints a table.

    python benchmarks/bench_slack.py

Targets (task brief): a Llama-7B step in <= 0.5 s; the three published rows in <= 5 s together;
the growth of planning time with the number of layers (llama-7b, layers = 8, 16, 32, 64).
"""

import time

from slackswap.planners.slack import SlackPlanner
from slackswap.problem import Problem
from slackswap.timeline import simulate


def timed(problem, repeat=3):
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


if __name__ == "__main__":
    main()
