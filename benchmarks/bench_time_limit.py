"""How long ``milp(time_limit_s=L).plan(problem)`` takes against ``L`` (docs/milp.md, "Time limit").

Each measurement runs in a fresh Python process (the first call of a process pays the imports, the
worst case); the problem is built before the clock starts. Prints one markdown row per (model,
limit): the largest wall time over the repetitions and its overshoot ``wall - L``.

    python benchmarks/bench_time_limit.py --limits 2 3 5 10 --reps 2
    python benchmarks/bench_time_limit.py --heuristics     # what the warm start's heuristics take
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASES = {   # name: (model, budget, spec overrides)
    "tiny": ("tiny", 0.5, {}),
    "tiny-2-layers": ("tiny", 0.7, {"layers": 2}),
    "bert-large": ("bert-large", 0.5, {}),
    "gpt2-xl": ("gpt2-xl", 0.5, {}),
    "llama-7b": ("llama-7b", 0.5, {}),
}

_CHILD = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
from slackswap import Problem, planners
model, budget, ov, limit = json.loads(sys.argv[1])
p = Problem.build(model, "a100-80gb", budget, **ov)
t = time.perf_counter()
plan = planners.get("milp", time_limit_s=limit).plan(p)
print(json.dumps([time.perf_counter() - t, plan.info.status.value]))
"""


def measure(case: str, limit: float) -> tuple[float, str]:
    model, budget, ov = CASES[case]
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([model, budget, ov, limit])],
                         capture_output=True, text=True, check=True)
    wall, status = json.loads(out.stdout.strip().splitlines()[-1])
    return wall, status


def heuristics(cases) -> None:
    """Seconds each warm-start heuristic takes on each problem (second call: imports paid)."""
    import time
    import warnings

    from slackswap import Problem, planners

    names = [n for n in planners.available() if n not in ("milp", "brute", "keep-all", "recompute-all")]
    print("| problem | " + " | ".join(names) + " | total |")
    print("|---|" + "---|" * (len(names) + 1))
    for case in cases:
        model, budget, ov = CASES[case]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = Problem.build(model, "a100-80gb", budget, **ov)
        secs = []
        for n in names:
            planners.get(n).plan(p)
            t = time.perf_counter()
            planners.get(n).plan(p)
            secs.append(time.perf_counter() - t)
        print(f"| {case} | " + " | ".join(f"{s:.2f} s" for s in secs) + f" | {sum(secs):.2f} s |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--limits", nargs="+", type=float, default=[2.0, 3.0, 5.0, 10.0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--heuristics", action="store_true", help="time the warm start's heuristics instead")
    a = ap.parse_args()
    if a.heuristics:
        heuristics(a.cases)
        return
    print("| problem | limit | wall (max) | overshoot | statuses |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for case in a.cases:
        for limit in a.limits:
            runs = [measure(case, limit) for _ in range(a.reps)]
            wall = max(w for w, _ in runs)
            worst = max(worst, wall - limit)
            print(f"| {case} | {limit:g} s | {wall:.2f} s | {wall - limit:+.2f} s | "
                  f"{', '.join(sorted({s for _, s in runs}))} |", flush=True)
    print(f"\nlargest overshoot: {worst:+.2f} s")


if __name__ == "__main__":
    main()
