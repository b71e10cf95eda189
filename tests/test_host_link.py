"""A host shared by several GPUs (docs/hardware.md, "The node: GPUs sharing a host"): the share of
the link each GPU gets, the copy times that follow, and the host's pinned capacity."""

import dataclasses
import math
import warnings

import numpy as np
import pytest

from slackswap import CostModel, Decision, Plan, Problem, cli, simulate
from slackswap.core import costs, hardware
from slackswap.core.errors import ConfigError
from slackswap.core.hardware import Node
from slackswap.experiments.synthetic import chain
from slackswap.report import plan_summary
from slackswap.timeline.host import peak_bytes

GB = 10**9


def _node(**kw):
    base = dict(gpus_per_node=8, gpus_per_switch=2, switch_bytes_per_s=25 * GB,
                host_memory_bytes_per_s=400 * GB, pinned_capacity_bytes=512 * GB)
    return Node(**{**base, **kw})


# ---------------------------------------------------------------- the share, by hand
def test_one_gpu_alone_gets_the_full_link():
    n = _node()
    assert (n.copying(1), n.per_switch(1)) == (1, 1)
    assert n.share(25 * GB, 1) == 25 * GB
    # alone, its link is its path to host memory, whatever link it is given (link ablations)
    assert n.share(50 * GB, 1) == 50 * GB
    assert _node(switch_bytes_per_s=10 * GB, host_memory_bytes_per_s=10 * GB).share(50 * GB, 1) == 50 * GB
    hw = hardware.load("a100-80gb", link="pcie5")
    assert hw.copy_link(1) is hw.link and hw.copy_link(2).d2h_bytes_per_s == 12.5 * GB


def test_two_gpus_on_one_switch_each_get_half_the_uplink():
    n = _node()
    # a job of 2 GPUs: both under one switch, 25 / 2 = 12.5 GB/s each (host memory: 400 / 2 = 200)
    assert (n.copying(2), n.per_switch(2)) == (2, 2)
    assert n.share(25 * GB, 2) == 12.5 * GB
    # 8 GPUs: still 2 per switch; host memory 400 / 8 = 50 GB/s does not bind
    assert n.share(25 * GB, 8) == 12.5 * GB
    # a slower link binds before the uplink's half: min(10, 12.5, 50)
    assert n.share(10 * GB, 8) == 10 * GB


def test_host_memory_bandwidth_binds():
    # each GPU on its own switch (uplink = link), 8 GPUs through 100 GB/s of host memory: 12.5 each
    n = _node(gpus_per_switch=1, host_memory_bytes_per_s=100 * GB)
    assert n.per_switch(8) == 1 and n.copying(8) == 8
    assert n.share(25 * GB, 8) == 12.5 * GB
    assert n.share(25 * GB, 2) == 25 * GB          # 100 / 2 = 50: the link binds again
    assert n.share(25 * GB, 16) == 12.5 * GB       # a 16-GPU job: 8 of them in this node


def test_copying_gpus_overrides_the_lockstep_count():
    assert _node(copying_gpus=1).share(25 * GB, 8) == 25 * GB    # the neighbours are idle
    assert _node(copying_gpus=4, gpus_per_switch=4).share(25 * GB, 1) == 6.25 * GB


def test_presets_dgx_a100_halves_the_link_for_8_gpus_and_dgx_h100_does_not():
    a100, h100 = hardware.load("a100-80gb"), hardware.load("h100-sxm")
    assert a100.copy_link(1) is a100.link and h100.copy_link(8) is h100.link
    shared = a100.copy_link(8)
    assert (shared.d2h_bytes_per_s, shared.h2d_bytes_per_s) == (12.5 * GB, 12.5 * GB)
    assert (shared.latency_s, shared.duplex_factor) == (a100.link.latency_s, a100.link.duplex_factor)
    assert a100.with_node(gpus_per_switch=1).copy_link(8) is a100.link          # 409.6 / 8 > 25
    # one GPU per switch: its uplink is not shared; only host memory is (8 x 20 > 100)
    solo = a100.with_node(gpus_per_switch=1, switch_bandwidth="1GB/s", host_memory_bandwidth="100GB/s")
    assert solo.copy_link(8).d2h_bytes_per_s == 12.5 * GB and solo.copy_link(4).d2h_bytes_per_s == 25 * GB
    assert a100.with_node(copying_gpus=1).copy_link(8) is a100.link
    assert h100.with_node(gpus_per_switch=2).copy_link(8).d2h_bytes_per_s == 25 * GB


# ---------------------------------------------------------------- copy times follow
def test_copy_times_in_the_cost_model_follow_the_share():
    hw = hardware.load("a100-80gb")
    g = chain(3, sizes=[1000, 2000, 0])
    alone, shared = costs.analytical(g, hw), costs.analytical(g, hw, gpus=2)
    lat = hw.link.latency_s
    assert alone.d2h_s == (0.0, lat + 1000 / 25e9, lat + 2000 / 25e9, 0.0)
    assert shared.d2h_s == shared.h2d_s == (0.0, lat + 1000 / 12.5e9, lat + 2000 / 12.5e9, 0.0)
    assert shared.fwd_s == alone.fwd_s and shared.duplex_factor == alone.duplex_factor
    assert costs.build(g, hw, gpus=2) == shared


def test_measured_costs_share_the_hardware_link_not_the_profiles():
    from slackswap.core import profile
    from slackswap.core.paths import data_dir

    example = data_dir() / "profiles" / "example.json"   # op times only; copy times from a link
    g, own = profile.load(example)
    hw = hardware.load("a100-80gb")
    t = g.tensors[3]
    shared = costs.measured(g, example, hw, gpus=8)
    assert shared.d2h_s[3] == shared.h2d_s[3] == hw.link.latency_s + t.bytes / 12.5e9
    assert shared.fwd_s == own.fwd_s
    assert costs.measured(g, example, hw) == costs.measured(g, example, hw.with_node(None), gpus=8)
    assert costs.build(g, hw, mode="measured", profile=example, gpus=8) == shared


def test_problem_build_shares_the_link_among_the_jobs_gpus():
    hw = hardware.load("a100-80gb")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = Problem.build("tiny", hw, budget=None)
        dp2 = Problem.build("tiny", hw, budget=None, parallel={"dp": 2})
        alone = Problem.build("tiny", hw.with_node(None), budget=None, parallel={"dp": 2})
        idle = Problem.build("tiny", hw.with_node(copying_gpus=1), budget=None, parallel={"dp": 2})
    b = np.array([t.bytes for t in one.graph.tensors], dtype=float)
    lat = hw.link.latency_s
    assert dp2.costs.d2h_s == tuple(np.where(b > 0, lat + b / 12.5e9, 0.0).tolist())
    assert one.costs.d2h_s == alone.costs.d2h_s == idle.costs.d2h_s == tuple(
        np.where(b > 0, lat + b / 25e9, 0.0).tolist())


# ---------------------------------------------------------------- no node: today's results exactly
def test_no_node_is_todays_result_exactly():
    hw = hardware.load("a100-80gb")
    bare = hw.with_node(None)
    g = chain(4, sizes=[10**6] * 4)
    ref = CostModel("analytical", *(tuple(x.tolist()) for x in costs.op_seconds(g, hw)),
                    *(tuple(x.tolist()) for x in costs.transfer_seconds(g, hw.link)),
                    costs.optimizer_seconds(g.static_bytes, hw), hw.link.duplex_factor)
    for gpus in (1, 2, 8, 64):
        assert costs.analytical(g, bare, gpus=gpus) == ref
    assert costs.analytical(g, hw, gpus=1) == ref       # a node, one GPU: its link does not bind
    # the simulator: no node, no host limit, whatever the host holds
    p = Problem.from_graph(g, CostModel.unit(g), budget_bytes=3 * 10**6, hardware=bare)
    r = simulate(p, Plan({t.id: Decision.SWAP for t in g.planning_tensors()}))
    assert r.feasible and r.host_peak_bytes == 3 * 10**6


# ---------------------------------------------------------------- host memory
def _swap_all_worked_example(hw):
    """docs/timeline.md's worked example: chain(4) of 2-byte tensors, all swapped, budget 6.
    Host copies: a1 over [1, 14), a2 over [3, 11), a3 over [5, 9): 6 bytes at once over [5, 9)."""
    g = chain(4, sizes=[2, 2, 2, 2])
    p = Problem.from_graph(g, CostModel.unit(g), budget_bytes=6, hardware=hw)
    return simulate(p, Plan({t.id: Decision.SWAP for t in g.planning_tensors()}))


def test_host_peak_by_hand():
    r = _swap_all_worked_example(None)
    assert r.feasible and r.step_time_s == 16 and r.host_peak_bytes == 6
    assert r.summary()["host_peak_bytes"] == 6
    # the intervals alone: a copy ending when another starts is not counted twice
    nbytes = np.array([0, 5, 7])
    assert peak_bytes(nbytes, np.array([1, 2]), np.array([0.0, 2.0]), np.array([1, 2]),
                      np.array([2.0, 4.0]), 4.0) == 7
    assert peak_bytes(nbytes, np.array([1, 2]), np.array([0.0, 1.0]), np.array([2]), np.array([3.0]), 9.0) == 12
    assert peak_bytes(nbytes, np.array([], int), np.array([]), np.array([], int), np.array([]), 1.0) == 0


def test_host_bytes_over_pinned_capacity_do_not_fit():
    node = dict(gpus_per_node=2, gpus_per_switch=2, switch_bandwidth=1, host_memory_bandwidth=1, copying_gpus=2,
                pinned_capacity=100)
    hw = hardware.load("a100-80gb").with_node(node)
    fits = _swap_all_worked_example(hw.with_node(pinned_capacity=12))     # 2 GPUs x 6 bytes = 12
    assert fits.feasible and fits.fits and fits.host_peak_bytes == 6 and fits.step_time_s == 16
    over = _swap_all_worked_example(hw.with_node(pinned_capacity=11))
    assert not over.feasible and not over.fits and over.throughput_ratio == 0.0
    assert math.isinf(over.step_time_s) and over.host_peak_bytes == 6 and over.peak_bytes == 6
    assert over.reason == ("node.pinned_capacity: 2 GPU(s) x 6 bytes held on the host at once = 12 bytes (12 B) "
                           "> 11 bytes (11 B)")   # as in docs/timeline.md, "Host memory"
    alone = _swap_all_worked_example(hw.with_node(pinned_capacity=11, copying_gpus=1))   # 1 x 6 <= 11
    assert alone.feasible


def test_plan_summary_names_the_share_and_the_host_bytes():
    hw = hardware.load("a100-80gb").with_node(pinned_capacity=100)
    g = chain(4, sizes=[2, 2, 2, 2])
    p = Problem.from_graph(g, CostModel.unit(g), budget_bytes=6, hardware=hw)
    plan = Plan({t.id: Decision.SWAP for t in g.planning_tensors()})
    lines = plan_summary(p, plan, simulate(p, plan))
    assert lines[-1].startswith("  host: 1 GPU(s) of the node copy at once, 1 per switch: 25 GB/s")
    assert "6 B held on the host at once per GPU" in lines[-1]


# ---------------------------------------------------------------- bad input: one line naming the field
NODE = """
[node]
gpus_per_node = 8
gpus_per_switch = 2
switch_bandwidth = "25GB/s"
host_memory_bandwidth = "400GB/s"
pinned_capacity = "512GB"
"""


def _hw_file(tmp_path, node_text):
    base = (hardware.hardware_dir() / "a100-80gb.toml").read_text()
    head = base.split("\n[node]")[0]
    tail = "[sources]\n" + base.split("\n[sources]\n")[1]
    tail = "\n".join(line for line in tail.splitlines() if not line.startswith('"node.'))
    p = tmp_path / "box.toml"
    p.write_text(head + "\n" + node_text + "\n" + tail + "\n")
    return str(p)


def test_a_node_table_loads(tmp_path):
    hw = hardware.load(_hw_file(tmp_path, NODE + 'copying_gpus = 4\n'))
    assert hw.node == _node(copying_gpus=4)
    assert hardware.load(_hw_file(tmp_path, "")).node is None


@pytest.mark.parametrize(("line", "field", "text"), [
    ("gpus_per_switch = 3", "node.gpus_per_switch", "must divide gpus_per_node (8); got 3"),
    ("gpus_per_node = 0", "node.gpus_per_node", "must be >= 1; got 0"),
    ('gpus_per_node = "8"', "node.gpus_per_node", "expected an integer; got '8'"),
    ("gpus_per_node = 8.5", "node.gpus_per_node", "expected an integer; got 8.5"),
    ("switch_bandwidth = nan", "node.switch_bandwidth", "got nan"),
    ('switch_bandwidth = "-5GB/s"', "node.switch_bandwidth", "got '-5GB/s'"),
    ("host_memory_bandwidth = 0", "node.host_memory_bandwidth", "must be > 0; got 0"),
    ("pinned_capacity = -1", "node.pinned_capacity", "got -1"),
    ("pinned_capacity = true", "node.pinned_capacity", "got True"),
    ("copying_gpus = 9", "node.copying_gpus", "must be in 1 .. gpus_per_node (8); got 9"),
    ("copying_gpus = 0", "node.copying_gpus", "must be >= 1; got 0"),
    ("uplinks = 4", "node.uplinks", "unknown key; allowed: copying_gpus, gpus_per_node"),
])
def test_malformed_node_fields_name_the_field(tmp_path, line, field, text):
    key = line.split(" = ")[0]
    lines = [x for x in NODE.splitlines() if not x.startswith(key + " =")] + [line]
    with pytest.raises(ConfigError) as e:
        hardware.load(_hw_file(tmp_path, "\n".join(lines)))
    msg = str(e.value)
    assert msg.startswith(f"box.toml: {field}: ") and text in msg and "\n" not in msg


def test_a_node_table_missing_a_key(tmp_path):
    lines = [x for x in NODE.splitlines() if not x.startswith("pinned_capacity")]
    with pytest.raises(ConfigError, match=r"^box.toml: node.pinned_capacity: missing required key$"):
        hardware.load(_hw_file(tmp_path, "\n".join(lines)))


@pytest.mark.parametrize(("changes", "text"), [
    (dict(gpus_per_switch=3), "with_node: gpus_per_switch: must divide gpus_per_node (8); got 3"),
    (dict(switch_bandwidth=float("nan")), "with_node: switch_bandwidth: "),
    (dict(pinned_capacity="lots"), "with_node: pinned_capacity: "),
    (dict(gpus_per_switch=True), "with_node: gpus_per_switch: expected an integer"),
    (dict(gpus=8), "with_node: gpus: unknown key; allowed: copying_gpus, gpus_per_node"),
])
def test_with_node_bad_values(changes, text):
    with pytest.raises(ConfigError) as e:
        hardware.load("a100-80gb").with_node(**changes)
    assert str(e.value).startswith(text) and "\n" not in str(e.value)


def test_node_and_gpus_checked_in_python():
    with pytest.raises(ConfigError, match=r"^node.gpus_per_switch: must divide gpus_per_node \(8\); got 3$"):
        _node(gpus_per_switch=3)
    with pytest.raises(ConfigError, match=r"^node.switch_bandwidth: must be a finite number > 0; got nan$"):
        _node(switch_bytes_per_s=float("nan"))
    with pytest.raises(ConfigError, match=r"^node.gpus_per_node: must be a whole number >= 1; got True$"):
        _node(gpus_per_node=True)
    with pytest.raises(ConfigError, match=r"^gpus: must be a whole number >= 1 \(the GPUs of the job\); got 0$"):
        hardware.load("a100-80gb").copy_link(0)
    with pytest.raises(ConfigError, match=r"^gpus: must be a whole number >= 1 \(the GPUs of the job\); got 2.0$"):
        costs.analytical(chain(2), hardware.load("gh200"), gpus=2.0)
    with pytest.raises(ConfigError, match=r"^with_node: gpus_per_node: missing required key$"):
        hardware.load("gh200").with_node(gpus_per_switch=2)
    with pytest.raises(ConfigError, match=r"^with_node: node=None removes the node"):
        hardware.load("a100-80gb").with_node(None, gpus_per_switch=2)


def test_cli_node_option(capsys):
    assert cli.main(["plan", "--model", "tiny", "--node", "gpus_per_switch=3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["slackswap: error: --node: gpus_per_switch: must divide gpus_per_node (8); got 3"]
    assert cli.main(["plan", "--model", "tiny", "--node", "switch_bandwidth=nan"]) == 2
    assert "--node: switch_bandwidth: cannot read 'nan'" in capsys.readouterr().err
    assert cli.main(["compare", "--model", "tiny", "--node", "none"]) == 2
    assert "--node: not taken by compare" in capsys.readouterr().err
    shared = hardware.with_node_text(hardware.load("a100-80gb"), "gpus_per_switch=4,switch_bandwidth=40GB/s")
    assert (shared.node.gpus_per_switch, shared.node.switch_bytes_per_s) == (4, 40 * GB)
    assert dataclasses.replace(shared.node, gpus_per_switch=2, switch_bytes_per_s=25 * GB) == \
        hardware.load("a100-80gb").node
    assert hardware.with_node_text(shared, "none").node is None
