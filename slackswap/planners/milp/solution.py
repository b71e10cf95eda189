"""What the ``milp`` planner (``planner``) and its path beyond the exact model (``beyond``) share:
reading decisions from column values (``_decisions``), the proven gap (``_gap``), the incumbent
search from the third aggregated pass's decisions (``chain_search``) and their tolerances."""

from __future__ import annotations

import math
import time

from ...core.plan import Decision, Plan
from ...timeline import simulate
from . import incumbent as _improve  # looked up at call time: tests replace incumbent.improve

AGGREGATE_PROOF_GAP = 1e-6
"""Above ``_IMPROVE_EXACT_MIN`` planning tensors the exact model is not built when the aggregated
MILP's bound is within this relative gap of the warm start (``_aggregate_proof``): the tolerance
that MILP is solved to."""
# the third aggregated pass's longest chain of RECOMPUTE tensors read by one re-run (``v_chain``;
# docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"): near its floor GPT-2 regenerates the residual stream down from the final
# norm before the head's backward step, about five tensors a layer (GPT-2 2 layers at 0.88: tight
# bound 31,418.58 us, 31,561.59 with 4, 31,865.80 with 6 and with 8, before the re-runs of later
# inputs; 4 layers at 0.79, with them: 44,548.97 with 8, 44,613.46 with 10, 44,732.49 with 12 and
# 16, and with ``v_chains`` too 44,548.97 with 8, 44,733.508 with 12, the optimum 44,733.521 to the
# MILP's tolerance, in 27.4 s)
CHAIN_DEPTH = 12
# the share of those simulations for a search from the third pass's decisions alone, while a gap is
# still open after it (``chain_search``): GPT-2 4 layers at 0.88, the decisions of the MILP with
# chain rows simulate to 41,180.05 us, and one two-tensor move from them (500 simulations, 0.9 s)
# reaches 41,027.994 us, within 1e-6 of its bound, where the search before the pass, from three
# other starts, had ended at 41,028.325 us
CHAIN_SEARCH_SHARE = 0.1


def chain_search(settings, problem, cand, bound: float, until: float | None):
    """``(plan, step_s, note)``: the incumbent search (``improve``) from the third pass's decisions
    ``cand`` alone, for ``CHAIN_SEARCH_SHARE`` of the planner's simulations (``settings.improve_work``: ``beyond.Settings``) and
    within ``until``; ``(None, inf, "")`` without a candidate that fits or without simulations.
    The search before the third pass started from the other candidates; this one starts where
    the relaxation with chain rows points (docs/journal/milp-full-size.md, "A search from the third pass's decisions")."""
    sims = round(CHAIN_SEARCH_SHARE * settings.improve_work)
    if cand is None or sims <= 0 or (until is not None and time.perf_counter() >= until):
        return None, math.inf, ""
    r = simulate(problem, cand, detail=False)
    if not (r.feasible and r.fits):
        return None, math.inf, ""
    better, s, note = _improve.improve(problem, cand, r.step_time_s, allow_swap=settings.allow_swap,
                              allow_recompute=settings.allow_recompute, max_sims=sims, until=until,
                              variants_too=False, bound=bound)
    if better is None or not s < r.step_time_s:
        return cand, r.step_time_s, "no move improved it"
    return (Plan(better.decisions, issue_points=better.issue_points, d2h_order=better.d2h_order, planner=settings.name, params=settings.params,
                 problem_key=problem.key), s, note)


def _decisions(problem, x, swap: dict, rec: dict) -> dict:
    """Read the decisions from column values ``x``: SWAP / RECOMPUTE where their binary column is
    set (``swap`` / ``rec``: tensor id -> column), else KEEP."""
    dec = {}
    for t in problem.planning_ids:
        if t in swap and x[swap[t]] > 0.5:
            dec[t] = Decision.SWAP
        elif t in rec and x[rec[t]] > 0.5:
            dec[t] = Decision.RECOMPUTE
        else:
            dec[t] = Decision.KEEP
    return dec


def _gap(obj, bound):
    if obj is None or bound is None or not obj:
        return None
    return max(0.0, (obj - bound) / abs(obj))
