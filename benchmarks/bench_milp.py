"""MILP benchmark: proven gaps on the full-size models, growth with layers, and the exact model.

    python benchmarks/bench_milp.py full                 # the three published instances at 0.5
    python benchmarks/bench_milp.py layers               # bert-large / gpt2-xl at several depths
    python benchmarks/bench_milp.py backends             # the aggregated MILP on HiGHS, CBC, cvxpy
    python benchmarks/bench_milp.py exact tiny --layers 1 2 --time-limit 20 [--solver scip] [--cutoff off] [--aggregate-rows off] [--hold-points on]
    python benchmarks/bench_milp.py sizes tiny gpt2 --layers 1 2 3 4 --budget 0.95
    python benchmarks/bench_milp.py gaps --time-limit 60   # the presets at budgets 0.2-0.9
    python benchmarks/bench_milp.py defaults --time-limit 60   # the same with milp's defaults alone
    python benchmarks/bench_milp.py gaps bert-large --budgets 0.3 --time-limit none --improve-sims 2000
    python benchmarks/bench_milp.py gaps llama-7b --budgets 0.2 0.3 --time-limit 60 --aggregate-nodes none
    python benchmarks/bench_milp.py gaps --time-limit 60 --aggregate-solver highs+scip --aggregate-nodes none --improve-sims 0
    python benchmarks/bench_milp.py relax tiny --layers 1 2 3 4 --budget 0.7 --aggregate-nodes 2000
    python benchmarks/bench_milp.py small tiny --layers 3 4 --budgets 0.4 0.5 0.6 0.7
    python benchmarks/bench_milp.py binding llama-7b --budgets 0.2 0.3
    python benchmarks/bench_milp.py log llama-7b --budget 0.3 --aggregate-solver scip --aggregate-nodes none --time-limit 60 [--scip-param "heuristics/farkasdiving/freq = -1" ...] [--start slack]
    python benchmarks/bench_milp.py log llama-7b --budget 0.3 --aggregate-solver highs --aggregate-nodes none --time-limit 30 --probe 1736.87

``full`` / ``layers``: the ``milp`` planner above ``max_exact_tensors`` (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"):
wall time, incumbent, certified bound, proven gap and the aggregated model's size, once with the
LP bound only (``aggregate_nodes=0``) and once with the aggregated MILP (``--aggregate-nodes``
branch-and-bound nodes, a work limit; ``--aggregate-time`` seconds as a safety cap).
``gaps``: the ``milp`` planner on each preset at budgets 0.2, 0.3, ..., 0.9 under ``--time-limit``
seconds, once without the incumbent search (``improve_sims=0``) and once with it, bounded by the
time limit alone (issue 14's target: proven gap <= 0.1% within 60 s), or with ``--improve-sims N``
by N simulations (a work limit: with ``--time-limit none`` the same plans on any machine; 0:
only the first column);
the aggregated MILP stops after ``--aggregate-nodes`` nodes (20, the planner's default; ``none``:
at its share of the time limit only), on ``--aggregate-solver`` (HiGHS, SCIP, or both at once).
``defaults``: ``planners.get("milp", time_limit_s=...)`` with every other parameter at its
default (the ``gaps`` columns set ``improve_sims``), on each preset at ``--budgets``: proven gap,
wall, incumbent, certified bound and where the bound came from (no other option is read).
``exact``: the exact formulation ("Potential steps" to "Backends and LP files") on small models: build time, size, status.
``relax``: the aggregated relaxation alone ("Full-size models: the aggregated relaxation and proven gaps") on cut presets, without and with its
per-copy release rows (``releases``), and with those and its tight rows (``tight``, the
small models' second pass): columns, binaries, LP bound, and the
MILP's bound after ``--aggregate-nodes`` nodes (a work limit; ``--aggregate-time`` caps it).
``small``: the ``milp`` planner with its defaults (no time limit) on cut models at ``--layers``
x ``--budgets``: wall time, status, incumbent, certified bound, proven gap, and where each came
from (its message).
``binding``: where the aggregated relaxation's LP bound comes from (``bounds.binding_rows``): on
each model x ``--budgets``, the LP bound, how many rows bind (a nonzero dual) out of all, the
memory rows among them (the step and its op, the dual) and the count per row family.
``log``: the full-size path's aggregated MILP (no release rows) of one model at ``--budget`` on
one solver (``--aggregate-solver``: highs or scip), with the solver's own log, for
``--time-limit`` seconds or ``--aggregate-nodes`` nodes; ``--scip-param`` adds SCIP settings,
``--start slack`` hands SCIP slack's plan as its first solution (``bounds.aggregate_point``);
``--probe MS`` (HiGHS) makes it one cutoff probe (``bounds.probe_bound``): only solutions below a
step time of MS milliseconds count, and "none below the cutoff" is a proof that MS is a bound.
Then one row: nodes, the certified bound, the solver's incumbent (both as step times) and wall.
Prints markdown rows (the tables in benchmarks/README.md come from here).
"""

from __future__ import annotations

import argparse
import math
import time

from slackswap import Problem, planners, simulate
from slackswap.bounds import AGGREGATE_SOLVERS
from slackswap.core.errors import BudgetError, SlackSwapError

FULL = ["bert-large", "gpt2-xl", "llama-7b"]


def _fmt_size(s: dict) -> str:
    return " | ".join(f"{s.get(k, 0):,}" for k in ("vars", "constraints", "binaries", "nonzeros"))


def _ms(v, t0: float) -> str:
    return "-" if v is None else f"{v * t0 * 1e3:.3f} ms"


def _gap_row(p, label: str, nodes: int, agg_time: float, threads) -> str:
    t0 = time.perf_counter()
    plan = planners.get("milp", aggregate_nodes=nodes, aggregate_time_s=agg_time, threads=threads).plan(p)
    wall = time.perf_counter() - t0
    i = plan.info
    r = simulate(p, plan, detail=False)
    assert r.fits and abs(r.step_time_s - i.objective) <= 1e-9 * r.step_time_s
    return (f"| {label} | {len(p.planning_ids)} | {nodes} | {wall:.1f} s | {i.objective * 1e3:.2f} ms | "
            f"{i.lower_bound * 1e3:.2f} ms | {100 * i.gap:.3f}% | {i.status.value} | {_fmt_size(i.model_size)} |")


def full(a) -> None:
    print("| model | planning tensors | aggregate_nodes | plan() wall | incumbent | certified bound | proven gap "
          "| status | vars | constraints | binaries | nonzeros |")
    print("|---" * 12 + "|")
    for name in a.models or FULL:
        p = Problem.build(name, a.hardware, a.budget)
        for nodes in (0, a.aggregate_nodes):
            print(_gap_row(p, name, nodes, a.aggregate_time, a.threads), flush=True)


def _settings(a, blanks: int):
    """``(name, budget, Problem)`` for each preset (or ``a.models``) x ``--budgets``; for a budget
    below the model's floor a row that says so (``blanks`` empty cells after it) instead."""
    for name in a.models or FULL:
        for b in a.budgets:
            try:
                p = Problem.build(name, a.hardware, b)
            except BudgetError as e:
                print(f"| {name} | {b} | no problem: {e} |" + " |" * blanks, flush=True)
                continue
            yield name, b, p


def _timed(p, **params):
    """``(SolveInfo, wall seconds)`` of the milp planner with ``params`` on ``p``; its plan must fit
    and its objective be its simulated time."""
    t0 = time.perf_counter()
    plan = planners.get("milp", **params).plan(p)
    wall = time.perf_counter() - t0
    r = simulate(p, plan, detail=False)
    assert r.fits and abs(r.step_time_s - plan.info.objective) <= 1e-9 * r.step_time_s
    return plan.info, wall


def gaps(a) -> None:
    print("| model | budget | proven gap, improve off | wall | proven gap, improve on | wall | incumbent | "
          "certified bound |")
    print("|---" * 8 + "|")
    for name, b, p in _settings(a, 5):
        # --improve-sims 0: the search is off in both columns, so the second is not run
        cells = [_timed(p, time_limit_s=a.time_limit, improve_sims=sims, aggregate_nodes=a.aggregate_nodes,
                        threads=a.threads, aggregate_solver=a.aggregate_solver)
                 for sims in ((0,) if a.improve_sims == 0
                              else (0, 10**9 if a.improve_sims is None else a.improve_sims))]
        (i0, w0), (i1, w1) = cells[0], cells[-1]
        on = f"{100 * i1.gap:.3f}% | {w1:.1f} s" if len(cells) > 1 else "not run (--improve-sims 0) |"
        print(f"| {name} | {b} | {100 * i0.gap:.3f}% | {w0:.1f} s | {on} | "
              f"{i1.objective * 1e3:.2f} ms | {i1.lower_bound * 1e3:.2f} ms |", flush=True)


def defaults(a) -> None:
    print("| model | budget | proven gap | wall | incumbent | certified bound | bound |")
    print("|---" * 7 + "|")
    for name, b, p in _settings(a, 4):
        i, wall = _timed(p, time_limit_s=a.time_limit)
        how = i.message.rpartition("bound: ")[2] if "bound: " in i.message else i.message
        print(f"| {name} | {b} | {100 * i.gap:.3f}% | {wall:.1f} s | {i.objective * 1e3:.2f} ms | "
              f"{i.lower_bound * 1e3:.2f} ms | {how} |", flush=True)


def layers(a) -> None:
    print("| model | layers | planning tensors | aggregate_nodes | plan() wall | incumbent | certified bound "
          "| proven gap | status | vars | constraints | binaries | nonzeros |")
    print("|---" * 13 + "|")
    for name, depths in (("bert-large", (12, 24, 48, 96)), ("gpt2-xl", (12, 24, 48, 96))):
        for L in depths:
            try:
                p = Problem.build(name, a.hardware, a.budget, layers=L)
            except BudgetError as e:      # shallow models: the loss alone can exceed the budget
                print(f"| {name} | {L} | - | - | - | - | - | - | {e} |")
                continue
            row = _gap_row(p, name, a.aggregate_nodes, a.aggregate_time, a.threads)
            print(row.replace(f"| {name} |", f"| {name} | {L} |", 1), flush=True)


def backends(a) -> None:
    """The aggregated MILP itself on each backend (HiGHS via highspy, CBC via pulp, cvxpy):
    objective of its incumbent and, where the backend reports one, its dual bound."""
    from slackswap.mip.aggregate import build
    from slackswap.mip.backends import solve

    print("| model | backend | wall | status | aggregated MILP incumbent | dual bound | vars | constraints "
          "| binaries | nonzeros |")
    print("|---" * 10 + "|")
    for name in a.models or FULL:
        p = Problem.build(name, a.hardware, a.budget)
        agg = build(p, integral=True)
        for solver in ("highs", "cbc", "cvxpy"):
            t0 = time.perf_counter()
            try:
                res = solve(agg.model, solver, time_limit_s=a.aggregate_time, mip_rel_gap=1e-6, threads=a.threads)
            except Exception as e:  # a missing optional backend is a row, not a crash
                print(f"| {name} | {solver} | - | {type(e).__name__}: {e} | | | |")
                continue
            wall = time.perf_counter() - t0
            print(f"| {name} | {solver} | {wall:.1f} s | {res.status} | {_ms(res.objective, agg.t0)} | "
                  f"{_ms(res.bound, agg.t0)} | "
                  f"{_fmt_size(agg.model.size())} |", flush=True)


def exact(a) -> None:
    print("| model | layers | budget | solver | planning tensors | vars | constraints | binaries | nonzeros | build "
          "| plan() wall | status | objective | certified bound | proven gap | slack |")
    print("|---" * 16 + "|")
    for name in a.models or ["tiny"]:
        for L in a.layers:
            p = Problem.build(name, a.hardware, a.budget, layers=L)
            presolve = {"auto": "auto", "on": True, "off": False}[a.presolve]
            mp = planners.get("milp", time_limit_s=a.time_limit, threads=a.threads, solver=a.solver,
                              max_exact_tensors=10**6, presolve=presolve, cutoff=a.cutoff == "on",
                              aggregate_nodes=a.aggregate_nodes, aggregate_rows=a.aggregate_rows == "on",
                              hold_points=a.hold_points == "on")
            t0 = time.perf_counter()
            built = mp.build(p)
            t_build = time.perf_counter() - t0
            t0 = time.perf_counter()
            plan = mp.plan(p)
            wall = time.perf_counter() - t0
            i = plan.info
            slack = simulate(p, planners.get("slack").plan(p), detail=False).step_time_s
            print(f"| {name} | {L} | {a.budget} | {a.solver} | {len(p.planning_ids)} | {_fmt_size(built.model.size())} | "
                  f"{t_build:.2f} s | {wall:.1f} s | {i.status.value} | {i.objective * 1e6:.2f} us | "
                  f"{i.lower_bound * 1e6:.2f} us | {100 * i.gap:.2f}% | {slack * 1e6:.2f} us |", flush=True)


def relax(a) -> None:
    from slackswap.bounds import aggregate_bound

    print("| model | layers | budget | rows | columns | binaries | LP bound | MILP bound | nodes | wall |")
    print("|---" * 10 + "|")
    for name in a.models or ["tiny"]:
        for L in a.layers:
            try:
                p = Problem.build(name, a.hardware, a.budget, layers=L)
            except SlackSwapError as e:
                raise SystemExit(f"bench_milp.py relax: {e}") from None
            unit, u = (1e6, "us") if p.ideal_step_s < 1e-3 else (1e3, "ms")
            for rel, tight in ((False, False), (True, False), (True, True)):
                t0 = time.perf_counter()
                lp = p.ideal_step_s + aggregate_bound(p, releases=rel, tight=tight)[0]
                extra, agg, res = aggregate_bound(p, integral=True, node_limit=a.aggregate_nodes,
                                                  time_limit_s=a.aggregate_time, releases=rel, tight=tight,
                                                  solver="highs" if a.aggregate_solver == "auto" else a.aggregate_solver)
                wall = time.perf_counter() - t0
                cols = len(agg.model.names) if agg is not None else 0
                bins = sum(agg.model.integer) if agg is not None else 0
                nodes = getattr(res, "mip_node_count", "-") if res is not None else "-"
                rows = "release + tight" if tight else "release" if rel else "off"
                print(f"| {name} | {L} | {a.budget} | {rows} | {cols:,} | {bins:,} | "
                      f"{lp * unit:.4f} {u} | {(p.ideal_step_s + extra) * unit:.4f} {u} | {nodes} | {wall:.1f} s |",
                      flush=True)


def sizes(a) -> None:
    """The exact formulation's size per model and depth (no solve): columns, rows, binaries,
    nonzeros, build time, and whether the recompute trees had to be capped (narrowed)."""
    from slackswap.mip.formulation import build

    print("| model | layers | budget | planning tensors | tree nodes | vars | constraints | binaries | nonzeros | build "
          "| narrowed |")
    print("|---" * 11 + "|")
    for name in a.models or ["tiny", "gpt2"]:
        for L in a.layers:
            try:
                p = Problem.build(name, a.hardware, a.budget, layers=L)
            except BudgetError as e:
                print(f"| {name} | {L} | {a.budget} | - | {e} |")
                continue
            t0 = time.perf_counter()
            b = build(p, aggregate_rows=a.aggregate_rows == "on", hold_points=a.hold_points == "on")
            t = time.perf_counter() - t0
            nodes = sum(nm.startswith("rerun[") for nm in b.model.names)
            print(f"| {name} | {L} | {a.budget} | {len(p.planning_ids)} | {nodes:,} | {_fmt_size(b.model.size())} | "
                  f"{t:.2f} s | "
                  f"{'; '.join(b.narrowed) or 'no'} |", flush=True)


def _limit(text: str):
    """``--time-limit``: seconds, or ``none`` for no limit."""
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds or 'none'; got {text!r}") from None


def _count(text: str) -> int:
    """``--improve-sims``: a whole number >= 0."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0; got {text!r}")
    return int(text)


def _nodes(text: str):
    """``--aggregate-nodes``: a whole number >= 0, or ``none`` for no node limit."""
    if text.strip().lower() == "none":
        return None
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0 or 'none'; got {text!r}")
    return int(text)


def small(a) -> None:
    print("| model | layers | budget | planning tensors | plan() wall | status | incumbent | certified bound "
          "| proven gap | how |")
    print("|---" * 10 + "|")
    for name in a.models or ["tiny"]:
        for L in a.layers:
            for b in a.budgets:
                try:
                    p = Problem.build(name, a.hardware, b, layers=L)
                except BudgetError as e:
                    print(f"| {name} | {L} | {b} | no problem: {e} | | | | | | |", flush=True)
                    continue
                except SlackSwapError as e:
                    raise SystemExit(f"bench_milp.py small: {e}") from None
                t0 = time.perf_counter()
                plan = planners.get("milp", threads=a.threads).plan(p)
                wall = time.perf_counter() - t0
                i = plan.info
                r = simulate(p, plan, detail=False)
                assert r.fits and abs(r.step_time_s - i.objective) <= 1e-9 * r.step_time_s
                how = "; ".join(m for m in i.message.split("; ") if m.startswith(("incumbent", "bound", "proven")))
                print(f"| {name} | {L} | {b} | {len(p.planning_ids)} | {wall:.1f} s | {i.status.value} | "
                      f"{i.objective * 1e6:.3f} us | {i.lower_bound * 1e6:.3f} us | {100 * i.gap:.3f}% | {how} |",
                      flush=True)


def binding(a) -> None:
    from collections import Counter

    from slackswap.bounds import binding_rows
    from slackswap.mip.aggregate import build

    print("| model | budget | LP bound | binding rows | memory rows that bind (step: dual) | binding rows per family |")
    print("|---" * 6 + "|")
    for name in a.models or FULL:
        for b in a.budgets:
            try:
                p = Problem.build(name, a.hardware, b)
                extra, rows = binding_rows(p)
            except BudgetError as e:
                print(f"| {name} | {b} | no problem: {e} | | | |", flush=True)
                continue
            except SlackSwapError as e:
                raise SystemExit(f"bench_milp.py binding: {e}") from None
            if extra is None:
                print(f"| {name} | {b} | the ideal step: no step exceeds the budget under keep-all | | | |", flush=True)
                continue
            ops = p.graph.ops
            total = len(build(p).model.rows)
            mem = []
            for row, d in rows:
                fam, _, idx = row.partition("[")
                if fam in ("mem_fwd", "mem_bwd"):
                    k = int(idx.rstrip("]"))
                    where = f"forward step {k} ({ops[k].name})" if fam == "mem_fwd" else \
                        f"backward step of op {k} ({ops[k].name})"
                    mem.append(f"{where}: {d:.3g}")
            fams = ", ".join(f"{f} {c}" for f, c in Counter(r.split("[")[0] for r, _ in rows).most_common())
            unit, u = (1e6, "us") if p.ideal_step_s < 1e-3 else (1e3, "ms")
            print(f"| {name} | {b} | {(p.ideal_step_s + extra) * unit:.2f} {u} | {len(rows):,} of {total:,} | "
                  f"{'; '.join(mem) or 'none (the LP bound is the ideal step)'} | {fams} |", flush=True)


def log(a) -> None:
    from types import SimpleNamespace

    from slackswap.bounds import aggregate_point, probe_reading
    from slackswap.mip.aggregate import build
    from slackswap.mip.aggregate.solve import STATUS, dual, extra_seconds
    from slackswap.mip.backends import _flat, _highs, _run
    from slackswap.mip.ortools_backend import solve_ortools

    solver = "highs" if a.aggregate_solver == "auto" else a.aggregate_solver
    if solver not in ("highs", "scip"):
        raise SystemExit(f"bench_milp.py log: --aggregate-solver is highs or scip here; got {solver!r}")
    if (a.scip_param or a.start != "none") and solver != "scip":
        raise SystemExit("bench_milp.py log: --scip-param and --start need --aggregate-solver scip")
    if a.probe is not None and solver != "highs":
        raise SystemExit("bench_milp.py log: --probe needs --aggregate-solver highs")
    if len(a.models) > 1:
        raise SystemExit(f"bench_milp.py log: one model at a time; got {', '.join(a.models)}")
    name = (a.models or ["llama-7b"])[0]
    try:
        p = Problem.build(name, a.hardware, a.budget)
    except SlackSwapError as e:
        raise SystemExit(f"bench_milp.py log: {e}") from None
    agg = build(p, integral=True)
    cut = None
    if a.probe is not None:
        if not math.isfinite(a.probe) or a.probe * 1e-3 <= p.ideal_step_s:
            raise SystemExit(f"bench_milp.py log: --probe is a step time in ms above the ideal step "
                             f"({p.ideal_step_s * 1e3:.2f} ms here); got {a.probe}")
        cut = (a.probe * 1e-3 - p.ideal_step_s) / agg.t0
    t0 = time.perf_counter()
    start = None if a.start == "none" else aggregate_point(p, agg, planners.get(a.start).plan(p).decisions)
    if solver == "highs":       # as mip.aggregate.solve.solve_pooled runs it on the full-size presets, with its log
        h = _highs(_flat(agg.model))
        h.setOptionValue("output_flag", True)
        r = _run(h, True, time_limit_s=a.time_limit, mip_rel_gap=1e-6, threads=None, seed=0, relax=False,
                 deadline=None, node_limit=a.aggregate_nodes, strict=False, symmetry=False, cutoff=cut)
    else:
        try:
            r = solve_ortools(agg.model, "scip", mip_rel_gap=1e-6, node_limit=a.aggregate_nodes,
                              time_limit_s=a.time_limit, started=lambda s: s.EnableOutput(),
                              scip_params="\n".join(a.scip_param), start=start)
        except SlackSwapError as e:
            raise SystemExit(f"bench_milp.py log: {e}") from None
    wall = time.perf_counter() - t0
    # the certified bound as the planner reads it (mip.aggregate.solve.dual): the dual bound, or a proven
    # optimum less the gap; never the incumbent
    res = SimpleNamespace(mip_dual_bound=r.bound, fun=r.objective, x=r.x, status=STATUS.get(r.status, 4))
    bound = dual(res, 1e-6)
    inc = "none" if r.objective is None else \
        f"{(p.ideal_step_s + r.objective * agg.t0) * 1e3:.2f} ms"
    if cut is not None:     # a probe proves at most its cutoff, as the planner reads it
        proven, bound = probe_reading(res, cut)
        if proven:
            inc = "none below the cutoff (proven)" if r.objective is None else \
                f"none below the cutoff (proven; {inc} found)"
    print("| model | budget | solver | settings | nodes | certified bound | solver's incumbent | wall |")
    print("|---" * 8 + "|")
    settings = "; ".join(a.scip_param + ([f"{a.start}'s plan as the first solution"] if start else [])
                         + ([f"cutoff at {a.probe} ms"] if cut is not None else [])) or "the defaults"
    print(f"| {name} | {a.budget} | {solver} | {settings} | {r.nodes} | "
          f"{(p.ideal_step_s + extra_seconds(bound, agg, True)) * 1e3:.2f} ms | {inc} | {wall:.1f} s |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["full", "layers", "backends", "exact", "sizes", "gaps", "defaults", "relax",
                                         "small", "binding", "log"])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--hardware", default="a100-80gb")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--aggregate-nodes", type=_nodes, default=20, help="branch-and-bound nodes for the aggregated MILP, or 'none' (no node limit: its time cap only; exact mode: 0 always builds the exact model)")
    ap.add_argument("--aggregate-solver", choices=["auto", *AGGREGATE_SOLVERS], default="auto",
                    help="gaps and relax modes: the aggregated MILP's solver (milp aggregate_solver; relax mode: 'auto' is HiGHS)")
    ap.add_argument("--aggregate-time", type=float, default=60.0, help="safety cap in seconds for the aggregated MILP")
    ap.add_argument("--time-limit", type=_limit, default=20.0,
                    help="exact and gaps modes: time_limit_s in seconds, or 'none' (no limit)")
    ap.add_argument("--budgets", type=float, nargs="+", default=[0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
                    help="gaps, small and binding modes: budgets (fractions of the keep-all peak)")
    ap.add_argument("--improve-sims", type=_count, default=None,
                    help="gaps mode: the search's simulations in the 'improve on' column (default: until the time limit)")
    ap.add_argument("--layers", type=int, nargs="*", default=[1, 2], help="exact, sizes, relax and small modes: layer counts")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--presolve", choices=["auto", "on", "off"], default="auto", help="exact mode: HiGHS presolve")
    ap.add_argument("--cutoff", choices=["on", "off"], default="on",
                    help="exact mode: HiGHS searches only below the warm start's time (milp cutoff)")
    ap.add_argument("--hold-points", choices=["on", "off"], default="off",
                    help="exact and sizes modes: multi-level plans in the exact model (milp hold_points)")
    ap.add_argument("--aggregate-rows", choices=["on", "off"], default="on",
                    help="exact and sizes modes: the aggregated relaxation's rows in the exact model (milp aggregate_rows)")
    ap.add_argument("--solver", default="highs", help="exact mode: milp solver (highs, cbc, cvxpy, scip, cpsat)")
    ap.add_argument("--scip-param", action="append", default=[],
                    help="log mode with --aggregate-solver scip: a SCIP setting 'name = value' (repeatable)")
    ap.add_argument("--probe", type=float, default=None, metavar="MS",
                    help="log mode with --aggregate-solver highs: a cutoff probe, only solutions below "
                         "this step time in ms count (bounds.probe_bound)")
    ap.add_argument("--start", choices=["none", "slack"], default="none",
                    help="log mode with --aggregate-solver scip: a plan handed to SCIP as its first solution "
                         "(bounds.aggregate_point; the wall includes that planner)")
    a = ap.parse_args(argv)
    {"full": full, "layers": layers, "backends": backends, "exact": exact, "sizes": sizes, "gaps": gaps,
     "defaults": defaults, "relax": relax, "small": small, "binding": binding,
     "log": log}[a.mode](a)


if __name__ == "__main__":
    main()
