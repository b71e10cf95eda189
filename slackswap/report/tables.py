"""Tables of sweep rows in which one row is one full setting (docs/experiments.md, "Reports").

``report`` re-exports every function here. A *setting* is the tuple of ``SETTINGS`` columns: a
table keeps every one of them that the sweep varies, so two runs of different settings never share
a row unless an explicit aggregation (``agg`` + ``over``) says so.
"""

from __future__ import annotations

from ..core.errors import ConfigError

__all__ = ["AGGREGATIONS", "SETTINGS", "ablation_table", "capacity_notes", "optimality_table", "setting_index"]

SETTINGS = ("model", "hardware", "link", "overrides", "parallel", "regions", "region_swap", "budget")
"""The columns that together name one setting of a sweep (``experiments.SETTING_COLUMNS``)."""

AGGREGATIONS = ("mean", "median", "min", "max")


def setting_index(df, by: str = "budget") -> list[str]:
    """The row index of a table of ``df``: ``model``, then every other setting column that takes
    more than one value in ``df`` (a swept dimension), then ``by``; one row is one full setting."""
    varying = [c for c in SETTINGS if c != "model" and c != by and c in df.columns and df[c].nunique(dropna=False) > 1]
    return list(dict.fromkeys(["model", *varying, by]))


def ablation_table(df, by: str = "budget", value: str = "throughput_ratio", columns: str = "label",
                   agg: str | None = None, over=()):
    """``value`` with one row per full setting and one column per ``columns`` (planner label), in
    sweep order with ``by`` varying fastest. The row index is ``setting_index(df, by)``: every
    swept setting column stays, so a row never shows runs of different settings side by side.
    Runs that do not fit show as NaN.

    ``agg`` (one of ``AGGREGATIONS``) with ``over`` (setting columns) aggregates over those
    columns explicitly (the caption must say so); without it, two runs of one label in one row
    are an error, never a silent pick."""
    if by not in df.columns:
        raise ConfigError(f"ablation_table: by={by!r} is not a column; allowed: {', '.join(df.columns)}")
    over = [over] if isinstance(over, str) else list(over)
    bad = [c for c in over if c not in SETTINGS or c in ("model", by)]
    if bad:
        raise ConfigError(f"ablation_table: over={bad[0]!r} is not a setting column to aggregate over; allowed: "
                          f"{', '.join(c for c in SETTINGS if c not in ('model', by))}")
    if (agg is None) != (not over):
        raise ConfigError("ablation_table: give agg and over together (an aggregation names what it merges)")
    if agg is not None and agg not in AGGREGATIONS:
        raise ConfigError(f"ablation_table: agg={agg!r}; allowed: {', '.join(AGGREGATIONS)}")
    d = df.copy()
    d[value] = d[value].where(d["fits"].astype(bool))
    index = [c for c in setting_index(d, by) if c not in over]
    dup = d[d.duplicated([*index, columns], keep=False)]
    if agg is None and len(dup):
        first = dup.iloc[0]
        raise ConfigError(f"ablation_table: {len(dup)} runs share a row and a {columns!r} with another run "
                          f"(e.g. {', '.join(f'{c}={first[c]}' for c in [*index, columns])}); the settings that "
                          f"tell them apart are not columns of df, or the runs are repeated: drop them or give agg")
    t = d.pivot_table(index=index, columns=columns, values=value, aggfunc=agg or "first", sort=False, dropna=False)
    t.columns.name = None
    # dropna=False keeps settings where nothing fits, but also makes every combination of the
    # index: keep only the settings that were run, in run order, ``by`` varying fastest
    rows = d[index].drop_duplicates()
    outer = [c for c in index if c != by]
    if len(outer) > 1:
        keys = list(rows[outer].itertuples(index=False, name=None))
        rank = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        rows = rows.iloc[sorted(range(len(rows)), key=lambda i: rank[keys[i]])]
    return rows.merge(t.reset_index(), on=index, how="left")


def optimality_table(df, heuristics=None):
    """The optimality-gap table: per setting, each heuristic's throughput ratio, then what the
    ``milp`` planner certifies, each under its own name (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"):

    - ``milp plan``: the throughput ratio of the plan it returns (its incumbent),
    - ``milp plan is``: the heuristic (``slack`` first) whose run of the same setting has that
      plan's step time and decision counts (a warm start kept), else ``own``;
    - ``milp status``: OPTIMAL only when the gap is proven within its tolerance;
    - ``ceiling``: ideal step / the planner's certified bound, a throughput ratio no plan of any
      planner can beat in this simulator;
    - ``proven gap``: 1 - bound / step of the milp plan.

    The ``milp plan`` is not an independent optimum: on full-size problems it is often a
    heuristic's own plan; only ``ceiling`` and ``proven gap`` are certified."""
    index = setting_index(df, "budget")
    heur = df[df["planner"] != "milp"]
    if heuristics is not None:
        heur = heur[heur["label"].isin(list(heuristics))]
    t = ablation_table(heur, by="budget") if len(heur) else df[index].drop_duplicates()
    m = df[df["label"] == "milp"].copy()
    if m.empty:
        return t
    # Which heuristic's plan the milp planner returned: the first heuristic run of the same setting
    # (slack first) with the same step time and decision counts; "own" when none matches.
    key = ["step_time_s", "n_keep", "n_swap", "n_recompute"]
    runs = df[df["label"] != "milp"]
    order = ["slack"] + sorted(set(runs["label"]) - {"slack"})
    fits = m["fits"].astype(bool)
    source = []
    for (_, row), f in zip(m.iterrows(), fits, strict=True):
        same = runs[(runs[index] == row[index]).all(axis=1) & (runs[key] == row[key]).all(axis=1)]
        names = [n for n in order if n in set(same["label"])]
        source.append(names[0] if names and f else ("own" if f else ""))
    out = m[index].copy()
    out["milp plan"] = m["throughput_ratio"].where(fits)
    out["milp plan is"] = source
    out["milp status"] = m["status"]
    out["ceiling"] = m["ideal_step_time_s"] / m["planner_bound_s"]
    out["proven gap"] = (1 - m["planner_bound_s"] / m["step_time_s"]).where(fits)
    return t.merge(out, on=index, how="left")


def capacity_notes(df) -> list[str]:
    """One line per distinct ``warning`` of ``df`` (static memory plus budget above the GPU's
    memory), naming the models and hardware it concerns; empty when every run fits its GPU."""
    if "warning" not in df.columns:
        return []
    d = df[df["warning"].fillna("") != ""]
    out = []
    for text, g in d.groupby("warning", sort=False):
        where = ", ".join(dict.fromkeys(f"{r.model} on {r.hardware}" for r in g.itertuples()))
        out.append(f"{where}: {text}")
    return out
