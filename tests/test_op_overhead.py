"""Per-op overhead (docs/profile.md, "Per-op overhead"): the profile field, its validation, and the
simulator's step charged with it, hand-computed on unit costs."""

import json
import math

import pytest

from slackswap import CostModel, Decision, Plan, Problem, SlackSwapError, simulate
from slackswap.core import costs, profile
from slackswap.core.errors import ConfigError
from slackswap.core.paths import data_dir
from slackswap.experiments.synthetic import chain

K, R = Decision.KEEP, Decision.RECOMPUTE
EXAMPLE = data_dir() / "profiles" / "example.json"


def _step(g, cm, decision):
    plan = Plan({t.id: decision for t in g.planning_tensors()})
    return simulate(Problem.from_graph(g, cm, budget_bytes=math.inf), plan)


def test_keep_all_grows_by_ops_times_overhead_recompute_by_the_reruns_too():
    """Chain of 4 unit ops: keep-all 8 s; with 0.25 s per forward and 0.5 s per backward op,
    8 + 4 * 0.25 + 4 * 0.5 = 11 s. Recompute-all re-runs op0..op2 (3 ops, 11 s at unit cost):
    11 + 4 * 0.25 + 3 * 0.25 (re-runs) + 4 * 0.5 = 14.75 s."""
    g = chain(4, sizes=[2, 2, 2, 2])
    unit = CostModel.unit(g)
    ov = unit.with_op_overhead(0.25, 0.5)
    assert ov.fwd_s == (1.25,) * 4 and ov.bwd_s == (1.5,) * 4
    assert (ov.fwd_overhead_s, ov.bwd_overhead_s) == (0.25, 0.5)
    keep0, keep1 = _step(g, unit, K), _step(g, ov, K)
    assert keep0.step_time_s == 8.0 and keep1.step_time_s == 11.0
    assert keep1.step_time_s - keep0.step_time_s == 4 * 0.25 + 4 * 0.5
    rec0, rec1 = _step(g, unit, R), _step(g, ov, R)
    assert rec0.step_time_s == 11.0 and rec1.step_time_s == 14.75
    assert rec1.step_time_s - rec0.step_time_s == (4 + 3) * 0.25 + 4 * 0.5
    assert rec1.recompute_s == 3 * 1.25


def test_zero_overhead_is_the_same_cost_model():
    g = chain(3)
    cm = CostModel.unit(g)
    assert cm.with_op_overhead() is cm and cm.with_op_overhead(0.0, 0) is cm


@pytest.mark.parametrize("bad", [math.nan, -1e-6, math.inf, True, "1"])
def test_with_op_overhead_refuses_a_bad_number(bad):
    cm = CostModel.unit(chain(2))
    with pytest.raises(SlackSwapError, match=r"^with_op_overhead: bwd_s: must be a finite number of seconds >= 0; got"):
        cm.with_op_overhead(0.0, bad)
    with pytest.raises(SlackSwapError, match=r"^CostModel.fwd_overhead_s: must be"):
        CostModel("unit", (1.0,), (1.0,), (), (), fwd_overhead_s=bad)


def test_a_profile_without_the_field_loads_as_before():
    """No ``per_op_overhead_ms``: the op times are the file's, times 1e-3, and nothing is added."""
    doc = json.loads(EXAMPLE.read_text())
    assert "per_op_overhead_ms" not in doc
    g, cm = profile.load(EXAMPLE)
    assert cm.fwd_s == tuple(o["fwd_ms"] * 1e-3 for o in doc["ops"])
    assert cm.bwd_s == tuple(o["bwd_ms"] * 1e-3 for o in doc["ops"])
    assert (cm.fwd_overhead_s, cm.bwd_overhead_s) == (0.0, 0.0)
    assert profile.read(EXAMPLE).op_overhead_s == (0.0, 0.0)
    assert "per_op_overhead_ms" not in profile.to_dict(g, cm)


def test_a_profile_with_the_field_charges_every_op(tmp_path):
    doc = json.loads(EXAMPLE.read_text())
    doc["per_op_overhead_ms"] = {"fwd": 0.02, "bwd": 0.03, "hooks_fwd": 0.005, "method": "test"}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    g, base = profile.load(EXAMPLE)
    g2, cm = profile.load(path)
    n = len(g.ops)
    assert cm.fwd_s == tuple(f + 0.02e-3 for f in base.fwd_s)
    assert cm.bwd_s == tuple(b + 0.03e-3 for b in base.bwd_s)
    assert cm.ideal_step_s == pytest.approx(base.ideal_step_s + n * 0.05e-3, rel=1e-12)
    assert costs.measured(g, path).fwd_s == cm.fwd_s
    # written back: kernel times and overhead apart, the extra keys kept
    out = profile.to_dict(g2, cm, per_op_overhead_ms=doc["per_op_overhead_ms"])
    ov = out["per_op_overhead_ms"]
    assert ov == {"fwd": pytest.approx(0.02, rel=1e-12), "bwd": pytest.approx(0.03, rel=1e-12),
                  "hooks_fwd": 0.005, "method": "test"}   # ms -> s -> ms: one rounding each way
    for o, want in zip(out["ops"], doc["ops"], strict=True):
        assert o["fwd_ms"] == pytest.approx(want["fwd_ms"], rel=1e-9, abs=1e-15)
        assert o["bwd_ms"] == pytest.approx(want["bwd_ms"], rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("value, message", [
    ({"fwd": math.nan, "bwd": 0}, "per_op_overhead_ms.fwd: expected a finite number; got nan"),
    ({"fwd": 0, "bwd": -1}, "per_op_overhead_ms.bwd: must be >= 0; got -1"),
    ({"fwd": 0.1}, "per_op_overhead_ms.bwd: missing required key"),
    ({"fwd": 0.1, "bwd": "0.1"}, "per_op_overhead_ms.bwd: expected a number; got '0.1'"),
    ({"fwd": 0.1, "bwd": 0.1, "hook": 0}, "per_op_overhead_ms.hook: unknown key; allowed: bwd, fwd, hooks_bwd, hooks_fwd, method"),
    ({"fwd": 0.1, "bwd": 0.1, "hooks_bwd": 0.2}, "per_op_overhead_ms: hooks_bwd: the hooks' part of the overhead must be <= bwd"),
])
def test_a_malformed_overhead_is_one_line_naming_the_field(tmp_path, value, message):
    path = tmp_path / "p.json"
    text = json.dumps({"ops": [{"name": "a", "fwd_ms": 1, "bwd_ms": 2}], "per_op_overhead_ms": value})
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        profile.read(path)
    assert str(err.value).startswith(f"p.json: {message}") and "\n" not in str(err.value)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, None, [], {}, True, "", [0.1]])
@pytest.mark.parametrize("key", ["fwd", "bwd", "hooks_fwd", "hooks_bwd"])
def test_any_other_bad_overhead_value_is_a_config_error_naming_the_key(tmp_path, key, bad):
    value = {"fwd": 0.1, "bwd": 0.1, key: bad}
    if key.startswith("hooks") and bad is None:
        value[key] = "none"                   # None is the default of the hooks' parts: valid
    with pytest.raises(ConfigError, match=rf"^profile: per_op_overhead_ms\.{key}: "):
        profile.from_dict({"ops": [{"name": "a", "fwd_ms": 1, "bwd_ms": 2}], "per_op_overhead_ms": value})
    doc = {"ops": [{"name": "a", "fwd_ms": 1, "bwd_ms": 2}], "per_op_overhead_ms": bad}
    if bad is None:                            # null: as if absent, like the other optional keys
        assert profile.from_dict(doc).op_overhead_s == (0.0, 0.0)
        return
    whole = r"per_op_overhead_ms\.fwd: missing required key" if bad == {} else \
        "per_op_overhead_ms: expected a table"
    with pytest.raises(ConfigError, match="^profile: " + whole):
        profile.from_dict(doc)
