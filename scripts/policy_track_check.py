"""What a step run with ``slackswap.torch.policy`` holds, against the region schedule, on many plans.

    python scripts/policy_track_check.py --plans 30
    python scripts/policy_track_check.py --plans 10 --models bert --seed 4

On the small HF GPT-2, Llama and BERT of the tests (``tests/exec_models.py``: 2-3 layers, hidden
32, batch 2 x seq 8, CPU, fp32), traced once each: ``slack`` planned for per-layer regions at
0.9, 0.8, 0.7, 0.6 and 0.5 of the keep-all peak, then ``--plans`` random plans (each planning
tensor KEEP, RECOMPUTE or SWAP at random), each with a random ``swap`` ("save" or "recompute")
and either per-layer regions or the first layer alone. Each plan runs one step with the policy
inside ``pol.track()``; the script prints, per model, the plans run, those whose
``run.peak_saved_bytes`` differs from ``simulated_saved_peak(graph, plan, regions=..., swap=...)``
(must be 0; each is listed) and those whose gradients differ from the plain step's (must be 0).
Exit code 1 when any differs (docs/policy.md, "What a policy run holds")."""

from __future__ import annotations

import argparse
import copy
import random
import sys
from pathlib import Path

import torch

from slackswap import Decision, Plan, Problem, planners
from slackswap.cli.common import positive_int
from slackswap.timeline.regions import layer_regions
from slackswap.torch import policy, simulated_saved_peak, trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from exec_models import build, checkpointed  # noqa: E402

MODELS = ("gpt2", "llama", "bert")


def check(name: str, n_plans: int, seed: int) -> tuple[int, list[str], int]:
    model, inputs = build(name)
    if name != "bert":          # checkpointing turns the KV cache off: trace the step as it runs
        inputs = dict(inputs, use_cache=False)
    g = trace(model, inputs, device="cpu")
    ref = copy.deepcopy(model)
    ref(**inputs).loss.backward()
    ref_grads = [p.grad for p in ref.parameters()]
    lay = layer_regions(g)
    first = {o: 0 for o, lab in lay.items() if lab == min(lay.values())}
    cases = []
    for b in (0.9, 0.8, 0.7, 0.6, 0.5):
        plan = planners.get("slack").plan(Problem.build(g, "a100-80gb", budget=b).with_regions("layers"))
        cases.append((f"slack at {b}", plan, "save", "layers"))
    rng = random.Random(seed)
    ids = [t.id for t in g.planning_tensors()]
    choices = (Decision.KEEP, Decision.RECOMPUTE, Decision.SWAP)
    for i in range(n_plans):
        plan = Plan({t: rng.choice(choices) for t in ids})
        cases.append((f"random {i}", plan, rng.choice(["save", "recompute"]), rng.choice(["layers", "first"])))
    bad, grads_bad = [], 0
    for label, plan, swap, which in cases:
        pol = policy(plan, g, swap=swap)
        m = checkpointed(copy.deepcopy(model), name, pol, which)
        m.train()
        with pol.track() as run:
            m(**inputs).loss.backward()
        want = simulated_saved_peak(g, plan, regions=lay if which == "layers" else first, swap=swap)
        if run.peak_saved_bytes != want:
            bad.append(f"{label} (swap={swap}, regions={which}): run {run.peak_saved_bytes} bytes, "
                       f"schedule {want}")
        if any(not torch.equal(p.grad, q) for p, q in zip(m.parameters(), ref_grads, strict=True)):
            grads_bad += 1
    return len(cases), bad, grads_bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=positive_int, default=30, help="random plans per model (default 30)")
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated, of {', '.join(MODELS)} (default all)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        ap.error(f"--models: must be names of {', '.join(MODELS)}; got {args.models!r}")
    torch.set_num_threads(1)
    failed = False
    for name in names:
        n, bad, grads_bad = check(name, args.plans, args.seed)
        print(f"{name}: {n} plans, {len(bad)} peaks differ, {grads_bad} gradients differ")
        for line in bad:
            print(f"  {line}")
        failed |= bool(bad) or grads_bad > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
