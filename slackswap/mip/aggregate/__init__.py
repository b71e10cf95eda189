"""The aggregated relaxation: a small model whose optimum is a certified lower bound for any size.

The exact formulation (``formulation.py``) follows every potential step and copy; it is
exact but grows with tensors x steps and with the recompute trees, so it stops at a few dozen
planning tensors. This model keeps one variable per decision and per op, and replaces the
timeline by **capacities**: what the D2H engine can have copied out by a given time, what the
H2D engine can have copied back before a backward step, and the memory that every step must
free. Every plan (with any issue points and any ``d2h_order``) maps to a feasible point whose
objective is at most the plan's extra time, so:

* its LP optimum is a lower bound (``slackswap.bounds.capacity_bound``, every size, ~1 s);
* with integral decisions (``integral=True``) it is a small MILP whose solver dual bound is a
  tighter lower bound (the MILP planner uses it above ``max_exact_tensors``).

Times are scaled by the forward time ``t0``, bytes by the largest excess ``b0``. With ``T_k`` the
forward time before step ``k``, ``A(s)`` the keep-all accounted memory of step ``s``, ``B`` the
budget, ``bw`` the fastest D2H rate of any swappable tensor, and ``ms(t)`` the highest op id that
saves ``t`` (its first backward use):

Variables (names as in the LP file):

* ``r[p]`` op ``p`` is re-run in the backward pass (its first re-run); ``x[t]`` tensor ``t`` is
  RECOMPUTE; ``s[t]`` tensor ``t`` is SWAP (binary with ``integral``, else in [0, 1]); ``y[t]``,
  ``again[p]``: multi-level recompute (``mem_bwd`` below);
* ``sigma[k]`` stall before forward step ``k`` (cumulative; ``sigma[n]`` also holds the stall of
  the first backward stage); ``beta[j]`` backward stall before the backward step of op ``j``
  (cumulative), plus the time of every repeated re-run before it (hold points); ``rho``
  first-re-run time, ``rho_first`` recompute time run before the first backward step;
* ``C[k]`` swapped bytes produced by ops ``< k``; ``M[k] = min_{j<k} (C[j] - bw E_j)`` (a running
  minimum, ``E_j = T_{j+1} + sigma[j]`` the end of op ``j``); ``W[k]`` / ``Wb[j]`` swapped bytes
  released by forward step ``k`` / backward step ``j``; ``rf[q]``, ``z[...]``: op ``q`` re-run in
  the first backward stage, and why.

Rows:

* ``one_of[t]: x + s <= 1``; ``x_needs_r[t]: x[t] <= r[producer]``; ``prereq[p,q]: r[p] <= r[q]``
  when ``q`` produces an unsaved input of ``p``; ``rho_total: rho <= sum c_p r[p]``;
* ``mem_fwd[k]``: ``sum_{t: forward use over} b_t x[t] + W[k] >= A(k) - B``, with
  ``W_src[k]: W[k] <= sum b_t s[t]`` over the same tensors and ``W_d2h[k]: W[k] <= M[k] + bw S_k``
  (``S_k = T_k + sigma[k]``): the copies of the outputs of ops ``>= j`` start after ``E_j`` on one
  serial engine, whatever their order;
* ``mem_bwd[j]``: the same at the backward step of op ``j`` (``A`` of keep-all's backward step),
  where tensors with ``ms(t) < j`` can be absent (not needed yet), and with hold points
  (multi-level recompute, docs/timeline.md 3) also a RECOMPUTE tensor at a step ``j`` between two
  of its savers that is not one (``y[t]``, gap steps only): a copy regenerated for a stage above
  ``j`` may be freed before ``j``. It is needed again below ``j``, so its producer re-runs at
  least twice: ``again[p] >= y[t]`` and ``again_in_beta: sum c_p again[p] <= beta[0]`` (every
  re-run after an op's first is counted in ``beta``, which holds the backward stall and these
  repeats; the time rows below only get looser, since every backward step starts later by
  them). Without hold points a tensor first needed at a stage ``>= j`` is resident from then to
  its last use (fetched, regenerated or kept). The backward step of op ``j`` starts by
  ``S^b_j = T_n + sigma[n] + rho + sum_{i>j} bwd_i + beta[j]`` (``rho_first`` for ``j = n-1``;
  with ``tight=True``, ``rho_by[j]`` for every ``j``, below);
* ``d2h_back[j]`` / ``h2d_back[j]``: every swapped tensor with ``ms(t) >= j`` has been copied out
  (D2H capacity as above) and copied back (``sum h2d_t s[t]``, on the H2D engine, which starts
  no earlier than the end of the forward pass) by ``S^b_j``;
* ``chain[t]``: a swapped tensor's copy back follows its copy out, which starts when its
  producer ``p`` ends: ``S^b_{ms(t)} >= E_p + (d2h_t + h2d_t) s[t]``, latency included (the
  capacity rows above count D2H bytes at the fastest rate, where kilobyte copies are all but
  free);
* without ``releases``, ``Wb_pend``, ``d2h_first[i]``: at the first backward step (op ``n-1``),
  ``pend[t] <= s[t]`` is the part of SWAP tensor ``t``'s copy out (``ms(t) < n-1``) still pending at
  ``S^b_{n-1}`` (binary with ``integral``: a copy frees its bytes whole): ``Wb[n-1] <= sum
  b_t (s[t] - pend[t])``, and for every op ``i`` that makes a SWAP tensor ``PT[i] = sum d2h_t (s[t] -
  pend[t])`` over the tensors of ops ``>= i`` (a tensor needed in stage ``n-1`` has no ``pend``: its
  copy counts whole) ``<= S^b_{n-1} - E_i``: a source is released only when its copy has ended, and
  the copies of ops ``>= i`` run after ``E_i`` one at a time, whole, in any order. ``Wb_d2h`` counts
  bytes at the fastest rate, and its ``M[n]`` subtracts every copy of the ops ``< i``, also those still
  pending, so a few small early copies left pending let the late ones end early. Not with
  ``releases``: there the ``v``/``o`` rows count copy time per copy, and these rows changed
  HiGHS's search enough that GPT-2 with 3 layers at 0.9 and 4 at 0.95 lost their proofs;
* with ``releases=True`` (the exact path; the rows grow with tensors x steps), per-copy latency in
  the forward memory rows: ``u[t,k]``, swapped tensor ``t`` released (copied out in full) by forward
  step ``k``, ``u[t,k] <= s[t]``; ``mem_rel[k]``: ``RXf[k] + sum b_t u[t,k] >= A(k) - B``;
  ``u_time[t,k]``: ``S_k >= E_p + d2h_t u[t,k]``; ``u_d2h[k]``: ``sum d2h_t u[t,k] <= S_k + MT[k]``,
  ``MT[k] = min_{j<k} (CT[j] - E_j)`` with ``CT[j]`` the D2H time of the tensors swapped from ops
  ``< j`` (the copies of outputs of ops ``>= j`` run after ``E_j`` one at a time, each whole);
  ``d2h_time_back[j]``: ``sum d2h_t s[t]`` over ``ms(t) >= j`` ``<= S^b_j + MT[n]``. The ``W[k]``
  rows let a fraction of a copy free that fraction of its bytes, latency prorated; these do not. The
  same at backward steps: ``v[t,j] <= s[t]``, swapped tensor ``t`` (``ms(t) < j``) absent at the
  backward step of op ``j``: copied out in full by ``S^b_j`` (``v_time``, ``v_d2h`` as above; with
  ``tight=True`` the ``o`` rows instead) and not yet copied back, so its issue stage is below
  ``j`` and its copy back, ``h2d_t`` long, starts after the backward step of op ``j`` ends (the
  ready time of the next stage's first step, docs/timeline.md 3) and ends before
  ``S^b_{ms(t)}``: the backward steps strictly between (``G`` of nominal time) are stretched by
  ``h2d_t - G`` (``v_back[t,j]``: ``(h2d_t - G) v[t,j] <= D(ms(t), j)``, where ``D(i, j)`` is
  ``S^b_i - S^b_j`` less its nominal part: with ``tight``, and at ``j = n-1``, ``beta[i] -
  beta[j]`` plus ``rho_by[i] - rho_by[j]`` (``rho - rho_first``), the stall and the re-runs
  between; else ``extra``, the objective, since ``rho`` there counts every re-run at every
  step). A re-run may also read ``t`` before ``ms(t)`` (``rerun_readers``): a RECOMPUTE ``y``
  regenerated by an op that reads ``t`` (directly or through the unsaved inputs it rebuilds) is
  regenerated in a stage ``>= ms(y)``, so ``t`` is resident at every ``j <= ms(y)`` (``v_held[t,j,y]:
  v[t,j] + x[y] <= 1``), and below, the same window ends at ``S^b_{ms(y)}`` (``v_read[t,j,y]``:
  ``(h2d_t - G_y) (v[t,j] + x[y] - 1) <= D(ms(y), j)``). Without these rows a plan that swaps the
  last layer's output and recomputes the final norm, whose re-run opens the backward pass, was
  charged no stall for the copy back that waits for the loss's backward step to end (GPT-2 with
  4 layers at 0.8: 1.0 ms, benchmarks/README.md). With ``chains=K`` (and ``tight``; the planner's
  third pass) the same along a chain of up to ``K`` RECOMPUTE tensors (``rerun_chains``): ``t``
  read by an op ``q`` that regenerates ``y_m``, read by one that regenerates ``y_{m-1}``, ... up to
  ``y_1``; when all are RECOMPUTE the copy back ends before ``q`` starts, and the ops from ``q`` to
  the end of ``y_1``'s regeneration (``A``) all re-run after that, within the window
  (``v_chain[t,j,k]``: ``(h2d_t + c_A - G)(v[t,j] + sum x[y_l] - m) <= D(ms(y_1), j)``), and
  the copies back that chains read in one stage ``i`` together, on the one H2D engine after step
  ``j``, the fewest re-runs after a read, ``a_i``, following the last (``v_chains[j,i]``: ``sum
  h2d_t w[t,j,i] + a_i z[j,i] - G <= D(i, j)``, ``w[t,j,i] >= v[t,j] + c[t,i] - 1``, ``c[t,i]`` at
  least each inclusion-minimal chain's condition, ``z >= w``: docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"); ``Wb_rel[j]``: ``Wb[j] <= sum b_t v[t,j]``. A copy
  back issued early holds its memory until the use. With ``tight=True``, ``o[t,j]``: swapped tensor
  ``t`` copied out in full by ``S^b_j``; a copy out once done stays done, so ``o[t,j] >= v[t,j]``,
  ``>= o`` at every earlier backward step (``o_mono``) and ``>=`` every ``u[t,k]`` (``o_fwd``), ``<=
  s[t]``; ``o_time[t,j]``: ``S^b_j >= E_p + d2h_t o[t,j]``; ``o_d2h[j]``: ``sum d2h_t o[t,j] +
  DTb[j] <= S^b_j + MT[n]`` (``DTb[j]``: the D2H time of the swapped tensors with ``ms(t) >= j``,
  all copied out by then). Without ``o`` a tensor released at one step and another at a later one
  were each charged alone, as if the engine had copied only that one;
* with ``tight=True`` (and ``releases``), ``rho_by[j]`` (the recompute before the backward step of
  op ``j``, in ``S^b_j``) ``<= sum c_q rf[j,q]`` over the ops ``q`` that may be first re-run in a
  stage ``>= j`` (the ``rf_*`` rows below for the RECOMPUTE tensors with ``ms(t) >= j``, two rows
  per op without ``z``): the simulator re-runs an op in stage ``i`` only to rebuild what stage ``i``
  needs, and repeated re-runs are in ``beta``. Without it ``S^b_j`` counted every re-run of the
  backward pass, which lets a copy out end "before" a step it really delays;
* with ``tight=True`` (and ``releases``), ``seg[j,t]`` (``segments``): a RECOMPUTE tensor ``t``
  with ``ms(t) < j`` whose producer re-runs in a stage ``>= j`` (to rebuild a tensor needed
  there, directly or through a chain of RECOMPUTE and unsaved inputs: ``g[j,q]``) is resident
  at the backward step of op ``j`` (``hold[j,t]`` takes its bytes out of ``mem_bwd[j]``), unless
  the producer re-runs again (``again[p]``: a transient copy, hold points). Without it a layer
  rebuilt as one segment counted its lower tensors as absent above their own stages;
* ``rf_*``: ``rho_first <= sum c_q rf[q]``, where ``rf[q] <= r[q]`` and ``rf[q] <= sum z`` over the
  reasons ``q`` may be re-run in stage ``n-1``: it produces a RECOMPUTE tensor that op ``n-1``
  saves (``z <= x[y]``) or a non-resident input of an op re-run in that stage (``z <= rf[p]``,
  and ``z <= x[y]`` when that input is a planning tensor).

Objective: ``minimize sigma[n] + beta[0] + sum c_p r[p]`` (the extra time over the ideal step).

The package: ``structure.py`` (what the rows are built from: ``needs``, ``bandwidth``, the re-run
relations and chains), ``rows.py`` (``build``: the rows, in named steps), ``add_to`` here,
``solve.py`` (solving it with ``mip.backends``' HiGHS and OR-Tools' SCIP, and what a result
certifies) and ``race.py`` (two solvers at once, SCIP in a second thread, stopping them). The
bounds built on it: ``slackswap.bounds``; its solutions as plans: ``planners/milp/beyond.py``.
"""

from __future__ import annotations

from ..model import Model
from .rows import build, segments
from .structure import (
    CHAIN_NONZEROS,
    Aggregate,
    bandwidth,
    chain_depth,
    minimal_sets,
    needs,
    prerequisites,
    rebuilt_inputs,
    rerun_chains,
    rerun_readers,
)

__all__ = ["CHAIN_NONZEROS", "Aggregate", "add_to", "bandwidth", "build", "chain_depth", "minimal_sets",
           "needs", "prerequisites", "rebuilt_inputs", "rerun_chains", "rerun_readers", "segments"]


def add_to(m: Model, problem, rec: dict[int, int], swap: dict[int, int], step_col: int, tau: float,
           offset: float = 0.0) -> None:
    """Add this relaxation to another model ``m`` of ``problem`` (the exact formulation), as
    valid rows: its columns are copied (continuous, names prefixed ``agg.``), its decisions are
    ``m``'s (``rec`` / ``swap``: tensor id -> column of ``m``; a tensor missing there is never
    RECOMPUTE / SWAP in ``m``, so its term is left out), and the row ``agg.link`` says that the
    step time ``tau * m[step_col] + offset`` (seconds) is at least the ideal step plus the
    relaxation's objective. Every plan maps to a point of the relaxation whose objective is at
    most its extra time (module docstring), so no plan is cut off; what it adds is a stronger LP
    relaxation of ``m`` (docs/milp.md, "Constraints (names as in the LP file)"). Nothing is added when the relaxation is empty
    (no step exceeds the budget under keep-all)."""
    agg = build(problem)
    if agg is None:
        return
    a = agg.model
    shared = {col: rec.get(t) for t, col in agg.rec.items()}
    shared.update({col: swap.get(t) for t, col in agg.swap.items()})
    cmap = [shared[i] if i in shared else m.var(f"agg.{name}", a.lb[i], a.ub[i])
            for i, name in enumerate(a.names)]
    for name, row, lo, hi in zip(a.row_names, a.rows, a.lo, a.hi, strict=True):
        m._row(f"agg.{name}", [(cf, cmap[v]) for v, cf in row.items() if cmap[v] is not None], lo, hi)
    k = agg.t0 / tau
    m.add_ge("agg.link", [(1.0, step_col)] + [(-k * cf, cmap[v]) for v, cf in a.obj.items()],
             (problem.ideal_step_s - offset) / tau + k * a.obj_const)
