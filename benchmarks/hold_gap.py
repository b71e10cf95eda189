"""What ``apply(..., hold_budget=True)`` can hold a swapping plan to, from the simulator alone.

In that mode the allocator sees every swapped source released at the step where the simulator
releases it, and every prefetch allocated when its issue stage opens: the simulator's *accounted*
memory (docs/timeline.md, "Memory and the budget"), at most the budget for a plan that fits. The
simulated peak is the memory curve at actual times (a source freed when its copy ends, a prefetch
from its copy's start), which is never higher. This script prints both for the fidelity rows'
models and plans, planned on analytical costs of a hardware preset (no GPU needed):

    python benchmarks/hold_gap.py                         # the gpu-size presets on h200 costs
    python benchmarks/hold_gap.py --size cpu --hardware a100-80gb

``accounted / peak`` above 1.02 means that even a run holding the simulator's accounting exactly
cannot meet the goal of a peak within 2% of the simulated one on that row.
"""

import argparse
import sys
import time

from fidelity import CPU_SHAPE, MODELS  # the same rows as benchmarks/fidelity.py (this folder)

from slackswap import BudgetError, Problem, planners, simulate
from slackswap.core import hardware
from slackswap.core.errors import SlackSwapError
from slackswap.torch import _ledger, trace
from slackswap.torch import hf_models as zoo


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=("cpu", "gpu"), default="gpu")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--hardware", default="h200", help="hardware preset of the analytical costs")
    ap.add_argument("--budgets", default="0.5,0.3")
    args = ap.parse_args(argv)
    try:
        budgets = [float(b) for b in args.budgets.split(",")]
        if not all(0 < b <= 1 for b in budgets):
            raise ValueError
    except ValueError:
        ap.error(f"--budgets: expected fractions in (0, 1] separated by commas; got {args.budgets!r}")
    shape = CPU_SHAPE if args.size == "cpu" else {}
    try:
        hardware.load(args.hardware)
        for name in args.models.split(","):
            zoo.check_shape(name, device="meta", where="hold_gap")
    except SlackSwapError as e:
        ap.error(str(e))
    print("model,budget,keep/swap/rec,fits,sim peak MiB,accounted peak MiB,accounted / peak,"
          "budget MiB,releases,waited")
    for name in args.models.split(","):
        t0 = time.perf_counter()
        model, inputs = zoo.build(name, device="meta", **shape)
        graph = trace(model, inputs, device="meta")
        for b in budgets:
            try:
                p = Problem.build(graph, args.hardware, budget=b)
            except BudgetError as e:          # below the smallest feasible budget: no plan fits
                print(f"{name},{b},,,,,,,,  # {e}", flush=True)
                continue
            plan = planners.get("slack").plan(p)
            issue = _ledger.resolved_issue_points(p if simulate(p, plan, detail=False).feasible
                                                  else p.with_budget(None), plan)
            h = _ledger.hold_schedule(p, plan, issue)
            c = plan.counts()
            print(f"{name},{b},{c['keep']}/{c['swap']}/{c['recompute']},{'yes' if h.fits else 'no'},"
                  f"{h.sim_peak / 2**20:.1f},{h.accounted_peak / 2**20:.1f},"
                  f"{h.accounted_peak / h.sim_peak:.4f},{p.budget_bytes / 2**20:.1f},"
                  f"{sum(map(len, h.releases.values()))},{sum(map(len, h.waited.values()))}",
                  flush=True)
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
