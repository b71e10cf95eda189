"""Speed of the foundation and the simulator (issues: foundation, timeline).

Run:  python benchmarks/bench_core.py
Prints: Llama-7B graph build, analytical costs and Problem.build times; simulation time of one
Llama-7B step under several plans; how simulation time grows with the number of layers.
Times are the median of repeated runs (``time.perf_counter``) on whatever machine runs it.
"""

from __future__ import annotations

import statistics
import time

from slackswap import Decision, Plan, Problem, hardware, models, simulate
from slackswap import costs as costs_mod


def median_s(fn, repeat: int = 7) -> float:
    fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def mixed(problem):
    return Plan({t: [Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE][i % 3]
                 for i, t in enumerate(problem.planning_ids)})


def main() -> None:
    hw = hardware.load("a100-80gb")
    g = models.build("llama-7b")
    print(f"llama-7b: {len(g.ops)} ops, {len(g.tensors)} tensors, {len(g.planning_tensors())} planning tensors")
    print(f"  graph build          {median_s(lambda: models.build('llama-7b')) * 1e3:8.1f} ms")
    print(f"  analytical costs     {median_s(lambda: costs_mod.analytical(g, hw)) * 1e3:8.1f} ms")
    print(f"  Problem.build        {median_s(lambda: Problem.build('llama-7b', hw, 0.5)) * 1e3:8.1f} ms")
    p = Problem.build("llama-7b", hw, 0.5)
    plans = {
        "keep-all (no limit)": (p.with_budget(None), Plan({t: Decision.KEEP for t in p.planning_ids})),
        "swap-all (50%)": (p, Plan({t: Decision.SWAP for t in p.planning_ids})),
        "mixed 1/3 each (50%)": (p, mixed(p)),
    }
    print("simulate one llama-7b step (detail=False / detail=True):")
    for name, (pr, plan) in plans.items():
        a = median_s(lambda pr=pr, plan=plan: simulate(pr, plan, detail=False))
        b = median_s(lambda pr=pr, plan=plan: simulate(pr, plan, detail=True))
        print(f"  {name:22s} {a * 1e3:8.1f} ms  {b * 1e3:8.1f} ms")
    print("scaling with layers (llama-7b shape, mixed plan, budget 50%, detail=False):")
    base = None
    for layers in (8, 32, 128):
        pr = Problem.build("llama-7b", hw, 0.5, layers=layers)
        t = median_s(lambda pr=pr: simulate(pr, mixed(pr), detail=False), repeat=5)
        base = base or t / layers
        print(f"  layers={layers:4d} ops={len(pr.graph.ops):5d}  {t * 1e3:8.1f} ms  "
              f"({t / layers / base:.2f}x the per-layer time at 8 layers)")


if __name__ == "__main__":
    main()
