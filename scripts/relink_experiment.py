"""Experiment: relinking two ends of the milp planner's incumbent search by layer.

Runs ``pair_search`` with ``--sims`` simulations from each of the planner's two starts beyond the
exact model (the best of the warm start and slack's variants, as ``milp`` picks it, and the
aggregated MILP's decisions after 20 nodes), then ``relink`` from each end towards the other
(docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps", item 4), and prints how far apart the ends are, what relinking reaches
and with how many simulations, and where ``--after`` more simulations of the search take it.

    PYTHONPATH=. python scripts/relink_experiment.py [--sims 2000] [--after 1000] [--only bert-large@0.3 ...]

Measured results: benchmarks/README.md, "Relinking by layer".
"""

from __future__ import annotations

import argparse
import warnings

import _gap_settings as settings

from slackswap import Plan, planners
from slackswap.bounds import aggregate_bound
from slackswap.planners.milp.incumbent import pair_search, relink, variants
from slackswap.planners.milp.milp_planner import _decisions
from slackswap.timeline import simulate


def run(problem, sims: int, after: int) -> None:
    def step(decisions) -> float:
        return simulate(problem, Plan(decisions), detail=False).step_time_s

    warm, _ = planners.get("milp")._warm(problem)
    first = min([dict(warm.decisions)] + [dict(p.decisions) for _, p in variants(problem, True, True, None)],
                key=step)
    _, agg, res = aggregate_bound(problem, integral=True, node_limit=20, time_limit_s=60)
    ends = []
    for start in (first, _decisions(problem, res.x, agg.swap, agg.rec)):
        dec, s, _, _ = pair_search(problem, start, step(start), max_sims=sims)
        ends.append((dec, s))
    (a, sa), (b, sb) = ends
    print(f"  ends {sa * 1e3:.3f} ms and {sb * 1e3:.3f} ms, {sum(a[t] is not b[t] for t in a)} of {len(a)} "
          "decisions apart")
    for name, (x, sx), (y, _) in (("first <- second", ends[0], ends[1]), ("second <- first", ends[1], ends[0])):
        dec, s, taken, used = relink(problem, x, sx, y, max_sims=sims)
        _, s2, moves, _ = pair_search(problem, dec, s, max_sims=after)
        print(f"  {name}: {s * 1e3:.3f} ms ({taken} blocks taken, {used} simulations), "
              f"then {s2 * 1e3:.3f} ms after {moves} two-tensor moves")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=2000, help="simulations of each start's search (default 2000)")
    ap.add_argument("--after", type=int, default=1000, help="simulations of the search after relinking (default 1000)")
    ap.add_argument("--only", nargs="+", default=list(settings.SETTINGS), metavar="MODEL@BUDGET")
    a = ap.parse_args()
    for name in ("sims", "after"):
        if getattr(a, name) < 0:
            ap.error(f"--{name}: must be a whole number >= 0; got {getattr(a, name)}")
    warnings.simplefilter("ignore")
    for setting in a.only:
        p = settings.problem(ap, setting)
        print(setting, flush=True)
        run(p, a.sims, a.after)


if __name__ == "__main__":
    main()
