"""Property: whatever JSON/TOML-like value reaches a schema, only ``SlackSwapError`` subclasses
escape (docs/errors.md). Each format gets random values over a valid document (known keys and
random ones, at the top and one level down) and random documents of any shape. Deterministic
(derandomized) and bounded, so the suite stays fast."""

from __future__ import annotations

import json
import math
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slackswap import models, planners
from slackswap.core import profile
from slackswap.core.errors import ParameterError, SlackSwapError
from slackswap.core.hardware import hardware_from_dict, link_from_file_dict
from slackswap.core.plan import Plan
from slackswap.experiments.sweepfiles import sweep_from_dict
from slackswap.models import TransformerSpec, from_hf_config
from slackswap.models.presets import models_dir, spec_from_dict
from slackswap.timeline.problem import resolve_budget

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from test_errors_table import BERT, GPT2, LINK, PLAN, PROFILE, SWEEP
from test_hardware import GOOD

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

scalars = (st.none() | st.booleans() | st.sampled_from([0, 1, -1, 0.0, 1.5, -0.5, 2**63, 10**10])
           | st.integers(-10**6, 10**12) | st.floats()
           | st.sampled_from(["", "x", "0", "1", "0.5", "nan", "inf", "1e400", "24GiB", "25GB/s", "10us",
                              "true", "false", "keep", "auto", "slack", "tiny", "pcie4-x16"])
           | st.text(max_size=6))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


def _docs(base: dict):
    """A valid document with some keys (known or not) replaced by random values, one level deep
    too, or any value at all."""
    keys = sorted(base) + ["colour", "x"]
    top = st.dictionaries(st.sampled_from(keys), values, max_size=3).map(lambda ch: {**base, **ch})
    nested = [k for k, v in base.items() if isinstance(v, dict)]
    if nested:
        def deeper(k, ch):
            return {**base, k: {**base[k], **ch}}
        sub = st.sampled_from(nested).flatmap(
            lambda k: st.dictionaries(st.sampled_from(sorted(base[k]) + ["y"]), values, max_size=2)
            .map(lambda ch: deeper(k, ch)))
        top = top | sub
    return top | values


TARGETS = {
    "sweep": (sweep_from_dict, tomllib.loads(SWEEP)),
    "sweep-range": (sweep_from_dict, {**tomllib.loads(SWEEP), "budgets": {"start": 0.3, "stop": 0.5, "step": 0.1},
                                      "variants": [{"label": "a", "planner": "slack"}], "planners": []}),
    "model": (spec_from_dict, tomllib.loads((models_dir() / "tiny.toml").read_text())),
    "hardware": (hardware_from_dict, tomllib.loads(GOOD)),
    "link": (link_from_file_dict, tomllib.loads(LINK)),
    "plan": (Plan.from_dict, PLAN),
    "profile": (lambda d: (lambda p: p.graph() if p.has_graph else p)(profile.from_dict(d)),
                json.loads(json.dumps(PROFILE))),
    "hf-gpt2": (from_hf_config, GPT2),
    "hf-bert": (from_hf_config, BERT),
}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_only_slackswap_errors_escape_a_file_schema(name):
    read, base = TARGETS[name]

    @SETTINGS
    @given(_docs(base))
    def check(doc):
        try:
            read(doc)
        except SlackSwapError:
            pass

    check()


PARAMS = {"milp": ["solver", "time_limit_s", "mip_rel_gap", "threads", "seed", "warm_start", "write_lp",
                   "allow_swap", "allow_recompute", "max_tree_nodes", "max_exact_tensors",
                   "aggregate_nodes", "aggregate_time_s", "presolve", "improve_sims", "cutoff",
                   "aggregate_rows", "hold_points", "aggregate_solver", "chain_recursion"],
          "slack": ["order", "mode", "prefetch", "min_swap_bytes", "keep_tail", "regen_masks", "pack",
                    "local_search", "max_sims", "margin"],
          "brute": ["max_tensors", "allow_swap", "allow_recompute"], "swap-all": ["min_swap_bytes"],
          "capuchin": ["min_swap_bytes"], "dp-checkpoint": ["max_rounds", "multilevel"], "keep-all": ["x"]}


@SETTINGS
@given(st.sampled_from(sorted(PARAMS)).flatmap(
    lambda n: st.tuples(st.just(n), st.dictionaries(st.sampled_from(PARAMS[n] + ["bogus"]), values, max_size=3))))
def test_only_slackswap_errors_escape_planner_parameters(case):
    name, params = case
    try:
        planners.get(name, **params)
    except SlackSwapError:
        pass


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: the newest parameters: (planner, parameter) -> whether a value is valid
NEWEST = {("milp", "aggregate_solver"): lambda v: isinstance(v, str) and v in ("highs", "scip", "highs+scip", "auto"),
          ("slack", "margin"): lambda v: _number(v) and 0 <= v <= 10,
          ("dp-checkpoint", "multilevel"): lambda v: isinstance(v, bool),
          ("milp", "chain_recursion"): lambda v: isinstance(v, bool)}
BAD = st.sampled_from([math.nan, -math.nan, math.inf, -math.inf, -1, -0.5, -1e-9, 11, 10.5, "nope", "", "1", "true",
                       "HIGHS", "highs ", None, [], [1], {"a": 1}, True, False, 0, 1, 0.5])


@SETTINGS
@given(st.sampled_from(sorted(NEWEST)), BAD | values)
def test_the_newest_planner_parameters_are_refused_by_name(key, value):
    """``milp.aggregate_solver``, ``slack.margin``, ``dp-checkpoint.multilevel`` and
    ``milp.chain_recursion`` under NaN, infinities, negative and out-of-range numbers, wrong types
    and unknown strings: a valid value is taken as given, any other raises the package's one-line
    error naming the planner and the field."""
    name, field = key
    if NEWEST[key](value):
        assert getattr(planners.get(name, **{field: value}), field) == value   # not every planner has .params
        return
    with pytest.raises(ParameterError) as e:
        planners.get(name, **{field: value})
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{name}: {field}: "), text


@SETTINGS
@given(st.dictionaries(st.sampled_from(list(TransformerSpec.fields()) + ["bogus"]), values, max_size=3))
def test_only_slackswap_errors_escape_spec_overrides(overrides):
    try:
        models.spec("tiny", **overrides)   # the spec only: a graph of 10**12 layers is not built here
    except SlackSwapError:
        pass


@SETTINGS
@given(st.lists(st.lists(st.sampled_from(["mm", "x", "", "1", "-1", "nan", "1e400", "fast", '"a,b"', " "]),
                         max_size=4), max_size=4),
       st.sampled_from(["name,fwd_ms,bwd_ms", "name,fwd_ms", "name,fwd_ms,bwd_ms,colour", ""]))
def test_only_slackswap_errors_escape_a_csv_profile(tmp_path_factory, rows, header):
    path = tmp_path_factory.mktemp("csv") / "p.csv"
    path.write_text("\n".join([header] + [",".join(r) for r in rows]) + "\n")
    try:
        profile.read(path)
    except SlackSwapError:
        pass


@SETTINGS
@given(values)
def test_only_slackswap_errors_escape_a_budget(budget):
    try:
        out = resolve_budget(budget, 10**9)
    except SlackSwapError:
        return
    assert out > 0
