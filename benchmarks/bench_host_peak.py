"""What the host-memory peak adds to one simulation (docs/timeline.md, "Host memory").

    python benchmarks/bench_host_peak.py [--models gpt2-xl llama-2-7b] [--reps 300]

For each model on a100-80gb at budget 0.5, the slack planner's plan is simulated with
``detail=False``; the script prints the best time per call (over 7 rounds of ``--reps`` calls) of
``timeline.host.peak_bytes`` on that run's copy times, and of the whole ``simulate`` call, which
includes it.
"""

from __future__ import annotations

import argparse
import importlib
import time
import warnings

from slackswap import Problem, planners
from slackswap.timeline.host import peak_bytes


def _best(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["gpt2-xl", "llama-2-7b"])
    ap.add_argument("--reps", type=int, default=300)
    args = ap.parse_args()
    sim = importlib.import_module("slackswap.timeline.simulate")
    for model in args.models:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = Problem.build(model, "a100-80gb", budget=0.5)
        plan = planners.get("slack").plan(p)
        run = sim._Run(p, plan, None)
        copies = (run.ga.bytes, run.q, run.d2h_start, run.hq, run.h2d_end, float(run.E[-1]))
        host = _best(lambda c=copies: peak_bytes(*c), args.reps)
        whole = _best(lambda p=p, plan=plan: sim.simulate(p, plan, detail=False), args.reps)
        print(f"{model}: {len(run.q)} swapped tensors; peak_bytes {host * 1e6:.1f} us, "
              f"simulate {whole * 1e6:.1f} us ({host / whole:.1%})")


if __name__ == "__main__":
    main()
