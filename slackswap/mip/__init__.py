"""Mixed-integer models of the timeline contract and their solvers, shared by the ``milp`` planner
(``slackswap/planners/milp/``) and the certified bounds (``slackswap/bounds/``); docs/milp.md.

* ``model``: the backend-neutral ``Model`` (and the exact formulation's memory rows);
* ``formulation``: the exact formulation (``build``);
* ``aggregate``: the aggregated relaxation, a certified bound for any size;
* ``backends`` / ``highs_process``: HiGHS, pulp-CBC and cvxpy, HiGHS with a hard time limit.

Nothing here imports from ``slackswap.planners``.
"""
