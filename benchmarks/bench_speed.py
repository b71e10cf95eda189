"""The inner loop's two figures on the three published presets at budget 0.5: a `slack` plan and
one simulated step (``detail=False``, the `slack` plan), best and median over repeats, in one
process; also that plan simulated under per-layer checkpointed regions (``simulate_regions_ms``:
``Problem.with_regions("layers")``, docs/regions.md). Prints one JSON line, so two trees can be compared side by side, alternating, e.g.
against a release checked out into /tmp/base (docs/journal/benchmarks-readme-2026-12-04.md, "Latest run"):

    git archive e8dcd62 slackswap | tar -x -C /tmp/base && ln -s $PWD/data /tmp/base/data
    for i in 1 2 3; do
      PYTHONPATH=/tmp/base python benchmarks/bench_speed.py
      PYTHONPATH=. python benchmarks/bench_speed.py
    done

The first plan and simulation of each preset are not timed (imports, the compiled core's load).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

MODELS = ("bert-large", "gpt2-xl", "llama-7b")


def _times(fn, repeat: int) -> tuple[float, float]:
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e3, statistics.median(ts) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=int, default=5, help="slack plans per preset (default 5)")
    ap.add_argument("--sims", type=int, default=50, help="simulations per preset (default 50)")
    a = ap.parse_args()
    if a.plans < 1 or a.sims < 1:
        ap.error(f"--plans and --sims: must be >= 1; got {a.plans}, {a.sims}")
    warnings.simplefilter("ignore")   # llama-7b's static memory exceeds one A100 (CapacityWarning)
    from slackswap import Problem, planners
    from slackswap.timeline import simulate

    out = {}
    for model in MODELS:
        p = Problem.build(model, "a100-80gb", 0.5)
        plan = planners.get("slack").plan(p)
        simulate(p, plan, detail=False)
        slack_ms = _times(lambda p=p: planners.get("slack").plan(p), a.plans)
        sim_ms = _times(lambda p=p, plan=plan: simulate(p, plan, detail=False), a.sims)
        pr = p.with_regions("layers")
        simulate(pr, plan, detail=False)
        reg_ms = _times(lambda p=pr, plan=plan: simulate(p, plan, detail=False), a.sims)
        out[model] = {"slack_ms": [round(x, 2) for x in slack_ms], "simulate_ms": [round(x, 3) for x in sim_ms],
                      "simulate_regions_ms": [round(x, 3) for x in reg_ms]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
