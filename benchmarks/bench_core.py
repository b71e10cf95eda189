"""Speed of the foundation and the simulator (issues: foundation, timeline).

Run:  python benchmarks/bench_core.py [--repeat N]
Prints: Llama-7B graph build, analytical costs and Problem.build times; one simulated step
(detail=False) of bert-large, gpt2-xl and llama-7b at budget 0.5 under the ``slack`` plan and of
Llama-7B under simple plans, by the compiled simulator (``slackswap.simulate``) and the reference
implementation (``slackswap.timeline.reference.simulate``), timed alternately in this one process;
how simulation time grows with the number of layers; and the first call's cost of the compiled
core in a fresh process, with an empty numba cache (compilation) and with a filled one (loading).
Times are ``time.perf_counter`` medians (and bests) of repeated runs on whatever machine runs it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

from slackswap import Decision, Plan, Problem, models, simulate
from slackswap.core import costs as costs_mod
from slackswap.core import hardware
from slackswap.core.plan import validate
from slackswap.planners import get
from slackswap.timeline import reference


def median_s(fn, repeat: int = 7) -> float:
    fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def side_by_side(fns: dict, repeat: int) -> dict:
    """Each function once per round, in turn, ``repeat`` rounds: {name: (median s, best s)}."""
    for fn in fns.values():
        fn()
    times: dict = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: (statistics.median(v), min(v)) for k, v in times.items()}


def mixed(problem):
    return Plan({t: [Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE][i % 3]
                 for i, t in enumerate(problem.planning_ids)})


def ms(x: float) -> str:
    return f"{x * 1e3:8.3f}"


_FIRST_CALL = """
import time, warnings
warnings.simplefilter("ignore")
from slackswap import Problem
t0 = time.perf_counter()
Problem.build("tiny", "a100-80gb", 0.5)   # its keep-all peak is the process's first simulation
t1 = time.perf_counter()
Problem.build("tiny", "a100-80gb", 0.5)
t2 = time.perf_counter()
print((t1 - t0) - (t2 - t1))
"""


def first_call_s(cache_dir: str) -> float:
    """Extra seconds of the first simulation in a fresh process using numba cache ``cache_dir``
    (importing numba, then compiling the core or loading it from the cache): the first
    ``Problem.build`` (which simulates keep-all) minus the second."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50, help="rounds of the side-by-side timings")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")   # CapacityWarning: llama-7b's static state exceeds one GPU
    hw = hardware.load("a100-80gb")
    g = models.build("llama-7b")
    print(f"llama-7b: {len(g.ops)} ops, {len(g.tensors)} tensors, {len(g.planning_tensors())} planning tensors")
    print(f"  graph build          {median_s(lambda: models.build('llama-7b')) * 1e3:8.1f} ms")
    print(f"  analytical costs     {median_s(lambda: costs_mod.analytical(g, hw)) * 1e3:8.1f} ms")
    print(f"  Problem.build        {median_s(lambda: Problem.build('llama-7b', hw, 0.5)) * 1e3:8.1f} ms")

    print(f"simulate one step, detail=False, compiled vs reference, alternately, {args.repeat} rounds "
          "(median / best, ms):")
    rows = []
    for m in ("bert-large", "gpt2-xl", "llama-7b"):
        p = Problem.build(m, hw, 0.5)
        rows.append((f"{m} slack 0.5", p, get("slack").plan(p)))
    p = Problem.build("llama-7b", hw, 0.5)
    rows += [("llama-7b keep-all no limit", p.with_budget(None), Plan({t: Decision.KEEP for t in p.planning_ids})),
             ("llama-7b swap-all 0.5", p, Plan({t: Decision.SWAP for t in p.planning_ids})),
             ("llama-7b mixed 0.5", p, mixed(p))]
    for name, pr, plan in rows:
        r = side_by_side({"new": lambda pr=pr, plan=plan: simulate(pr, plan, detail=False),
                          "ref": lambda pr=pr, plan=plan: reference.simulate(pr, plan, detail=False)},
                         args.repeat)
        (nm, nb), (rm, rb) = r["new"], r["ref"]
        print(f"  {name:28s} compiled {ms(nm)} / {ms(nb)}   reference {ms(rm)} / {ms(rb)}   "
              f"x{rm / nm:5.1f}")
    pr, plan = rows[2][1], rows[2][2]
    v = side_by_side({"validate": lambda: validate(pr, plan)}, args.repeat)["validate"]
    print(f"  {'of which plan.validate':28s}          {ms(v[0])} / {ms(v[1])}")
    r = side_by_side({"new": lambda: simulate(pr, plan, detail=True),
                      "ref": lambda: reference.simulate(pr, plan, detail=True)}, max(args.repeat // 5, 5))
    print(f"  {'llama-7b slack 0.5, detail on':28s} compiled {ms(r['new'][0])} / {ms(r['new'][1])}   "
          f"reference {ms(r['ref'][0])} / {ms(r['ref'][1])}")

    print("scaling with layers (llama-7b shape, mixed plan, budget 50%, detail=False; median ms):")
    base = None
    for layers in (8, 32, 128, 512):
        pr = Problem.build("llama-7b", hw, 0.5, layers=layers)
        plan = mixed(pr)
        fns = {"new": lambda pr=pr, plan=plan: simulate(pr, plan, detail=False)}
        if layers <= 128:
            fns["ref"] = lambda pr=pr, plan=plan: reference.simulate(pr, plan, detail=False)
        r = side_by_side(fns, max(args.repeat // 5, 5))
        t = r["new"][0]
        base = base or t / layers
        ref = f"{r['ref'][0] * 1e3:8.2f}" if "ref" in r else "       -"
        print(f"  layers={layers:4d} ops={len(pr.graph.ops):5d}  compiled {ms(t)}  "
              f"({t / layers / base:.2f}x the per-layer time at 8 layers)  reference {ref}")

    with tempfile.TemporaryDirectory() as d:
        cold = first_call_s(d)
        warm = first_call_s(d)
    print(f"first simulation in a fresh process, extra time: {cold:.1f} s with an empty numba cache "
          f"(imports numba, compiles the core), {warm:.2f} s with the cache filled (imports numba, "
          "loads the core)")


if __name__ == "__main__":
    main()
