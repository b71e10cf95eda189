"""Time the classic planners on a long synthetic chain and on llama-7b (plain script).

    python benchmarks/bench_planners_classic.py [--ops 200]
"""

from __future__ import annotations

import argparse
import time

from slackswap import planners
from slackswap.core.costs import CostModel
from slackswap.experiments import synthetic
from slackswap.timeline import simulate
from slackswap.timeline.problem import Problem

NAMES = ["keep-all", "recompute-all", "checkpoint-layers", "swap-all", "chen-sqrt", "chen-greedy",
         "dp-checkpoint", "capuchin"]


def run(label, problem):
    print(f"\n{label}: {len(problem.graph.ops)} ops, {len(problem.planning_ids)} planning tensors, "
          f"budget {problem.budget_fraction:.2f} of keep-all peak")
    print(f"{'planner':20s} {'status':11s} {'solve s':>8s} {'ratio':>7s} {'peak/keep-all':>13s}")
    for name in NAMES:
        t0 = time.perf_counter()
        plan = planners.get(name).plan(problem)
        dt = time.perf_counter() - t0
        r = simulate(problem, plan)
        print(f"{name:20s} {plan.info.status.value:11s} {dt:8.3f} {r.throughput_ratio:7.4f} "
              f"{r.peak_bytes / problem.keep_all_peak:13.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--budget", type=float, default=0.5)
    a = ap.parse_args()
    g = synthetic.chain(a.ops, sizes=[1 + (i * 7) % 5 for i in range(a.ops)], input_bytes=1)
    run(f"chain({a.ops}) unit costs", Problem.from_graph(g, CostModel.unit(g)).with_budget(a.budget))
    try:
        p = Problem.build("llama-7b", "a100-80gb", budget=a.budget)
    except ImportError as e:
        print(f"\nllama-7b skipped: model zoo unavailable ({e})")
        return
    run("llama-7b on a100-80gb", p)


if __name__ == "__main__":
    main()
