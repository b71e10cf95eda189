"""Analytical (roofline) and measured (profile) cost models (slackswap.core.costs, slackswap.core.profile)."""

import doctest
import json
from types import SimpleNamespace

import pytest

from slackswap.core import costs, hardware, profile
from slackswap.core.errors import ConfigError, SlackSwapError, UnknownNameError
from slackswap.core.graph import Graph, Op, Tensor
from slackswap.core.hardware import Efficiency, Gpu, Hardware, Link
from slackswap.core.paths import data_dir

EXAMPLE = data_dir() / "profiles" / "example.json"


def tiny_graph(spec=None) -> Graph:
    """x -> matmul -> a -> elementwise -> b (0 bytes) , a -> attention -> c."""
    t = (Tensor(0, "x", 1000, None, kind="input"), Tensor(1, "a", 2_000_000, 0),
         Tensor(2, "b", 0, 1), Tensor(3, "c", 4_000_000, 2))
    ops = (Op(0, "mm", 0, "matmul", 2e9, 1e6, 4e9, 2e6, inputs=(0,), outputs=(1,), saves=(0,)),
           Op(1, "ew", 0, "elementwise", 1e6, 1e8, 2e6, 2e8, inputs=(1,), outputs=(2,), saves=(1,)),
           Op(2, "attn", 1, "attention", 1e10, 1e7, 2.5e10, 2e7, inputs=(1, 2), outputs=(3,), saves=(1, 3)))
    return Graph("tiny", ops, t, static_bytes=10**9, spec=spec)


def tiny_hw() -> Hardware:
    c = Efficiency.constant
    gpu = Gpu("G", {"bf16": 100e12, "fp16": 100e12, "fp32": 10e12}, 1e12, 2**34,
              c(0.5), c(0.4), c(0.8, "bytes"))
    return Hardware("test", gpu, Link("l", 10e9, 5e9, 1e-5, 0.9, 16e9))


def test_analytical_matches_hand_roofline():
    cm = costs.analytical(tiny_graph(), tiny_hw())
    assert cm.mode == "analytical"
    # mm: max(2e9/(1e14*0.5), 1e6/(1e12*0.8)); ew: max(1e6/1e13, 1e8/8e11); attn: 1e10/(1e14*0.4)
    assert cm.fwd_s == pytest.approx((4e-5, 1.25e-4, 2.5e-4), rel=1e-12)
    assert cm.bwd_s == pytest.approx((8e-5, 2.5e-4, 6.25e-4), rel=1e-12)
    assert cm.d2h_s == pytest.approx((1e-5 + 1000 / 10e9, 1e-5 + 2e6 / 10e9, 0.0, 1e-5 + 4e6 / 10e9), rel=1e-12)
    assert cm.h2d_s == pytest.approx((1e-5 + 1000 / 5e9, 1e-5 + 2e6 / 5e9, 0.0, 1e-5 + 4e6 / 5e9), rel=1e-12)
    assert cm.d2h_s[2] == 0.0  # a 0-byte tensor costs nothing, not even latency
    assert cm.optimizer_s == pytest.approx(2 * 1e9 / (1e12 * 0.8), rel=1e-12)  # Adam: 2 x static bytes
    assert cm.duplex_factor == 0.9
    cm.check(tiny_graph())


def test_analytical_dtype_and_compute_vs_memory_bound():
    hw = tiny_hw()
    fp32 = costs.analytical(tiny_graph(SimpleNamespace(dtype="fp32")), hw)
    assert fp32.fwd_s[0] == pytest.approx(2e9 / (10e12 * 0.5))  # spec.dtype picks the peak
    assert costs.analytical(tiny_graph(), hw, dtype="fp32").fwd_s == fp32.fwd_s
    with pytest.raises(ConfigError, match="tf32"):
        costs.analytical(tiny_graph(), hw, dtype="tf32")
    # a matmul with huge traffic is memory bound: max(compute, memory)
    g = Graph("m", (Op(0, "mm", 0, "matmul", 1e6, 8e9, 0, 0, outputs=(0,)),), (Tensor(0, "y", 8, 0),))
    assert costs.analytical(g, hw).fwd_s[0] == pytest.approx(8e9 / 8e11)


def test_analytical_size_dependent_efficiency():
    hw = hardware.load("a100-80gb")
    f = 10**9.5
    g = Graph("m", (Op(0, "mm", 0, "matmul", f, 0, 0, 0, outputs=(0,)),), (Tensor(0, "y", 8, 0),))
    assert costs.analytical(g, hw).fwd_s[0] == pytest.approx(f / (312e12 * 0.475))


def test_build_modes():
    g = tiny_graph()
    assert costs.build(g, tiny_hw()).mode == "analytical"
    assert costs.build(g, mode="unit").fwd_s == (1.0, 1.0, 1.0)
    with pytest.raises(SlackSwapError, match="profile"):
        costs.build(g, mode="measured")
    with pytest.raises(SlackSwapError, match="hardware"):
        costs.build(g, mode="analytical")


def test_analytical_on_700_ops_is_per_op():
    """The vectorised roofline on a 700-op graph gives each op the time it gets alone (its speed is
    measured by ``benchmarks/bench_core.py``, not asserted here)."""
    n = 700
    kinds = ("matmul", "attention", "norm", "elementwise")

    def op(i, j, k):
        return Op(i, f"op{k}", k // 20, kinds[k % 4], 1e9 * (k % 5), 1e7, 2e9, 2e7, inputs=(j,), outputs=(j + 1,),
                  saves=(j,))

    ts = [Tensor(0, "in", 1024, None, kind="input")] + [Tensor(i + 1, f"t{i}", 2**20 * (i % 7), i) for i in range(n)]
    g = Graph("big", tuple(op(i, i, i) for i in range(n)), tuple(ts), static_bytes=10**10)
    hw = hardware.load("a100-80gb")
    cm = costs.analytical(g, hw)
    assert len(cm.fwd_s) == len(cm.bwd_s) == n and len(cm.d2h_s) == len(cm.h2d_s) == n + 1  # per op; per tensor
    for k in range(0, n, 37):
        alone = Graph("one", (op(0, 0, k),), (ts[0], Tensor(1, f"t{k}", ts[k + 1].bytes, 0)), static_bytes=10**10)
        c1 = costs.analytical(alone, hw)
        assert (cm.fwd_s[k], cm.bwd_s[k], cm.d2h_s[k + 1], cm.h2d_s[k + 1]) == pytest.approx(
            (c1.fwd_s[0], c1.bwd_s[0], c1.d2h_s[1], c1.h2d_s[1]), rel=1e-12), k


# ---------------------------------------------------------------- measured mode
def test_example_profile_loads_consistently():
    g, cm = profile.load(EXAMPLE)
    assert g.name == "example-2layer" and len(g.ops) == 19 and cm.mode == "measured"
    assert g.layers == [0, 1] and g.static_bytes > 0 and g.saved_bytes() > 0
    cm.check(g)
    doc = json.loads(EXAMPLE.read_text())
    assert cm.fwd_s[1] == pytest.approx(doc["ops"][1]["fwd_ms"] * 1e-3)
    assert cm.optimizer_s == pytest.approx(doc["optimizer_ms"] * 1e-3)
    pcie4 = hardware.load_link("pcie4-x16")
    t = g.tensors[3]
    assert cm.d2h_s[3] == pytest.approx(pcie4.latency_s + t.bytes / 25e9)
    assert cm.duplex_factor == pcie4.duplex_factor
    # the times are the analytical a100-80gb model rounded to 0.1 us
    ana = costs.analytical(g, hardware.load("a100-80gb"))
    assert cm.fwd_s == pytest.approx(ana.fwd_s, abs=1e-7)
    assert costs.measured(g, EXAMPLE) == cm
    assert costs.build(g, mode="measured", profile=EXAMPLE) == cm


def test_measured_hardware_link_overrides_profile_link():
    g, _ = profile.load(EXAMPLE)
    hw = hardware.load("a100-80gb", link="pcie3")
    cm = costs.measured(g, EXAMPLE, hw)
    assert cm.h2d_s[3] == pytest.approx(hw.link.latency_s + g.tensors[3].bytes / 12e9)
    assert cm.duplex_factor == hw.link.duplex_factor
    assert profile.load(EXAMPLE, hw)[1] == cm


def test_save_load_round_trip(tmp_path):
    g, hw = tiny_graph(), tiny_hw()
    cm = costs.analytical(g, hw)
    path = profile.save(tmp_path / "p.json", g, cm, device="test")
    g2, cm2 = profile.load(path)
    assert g2 == g
    for f in ("fwd_s", "bwd_s", "d2h_s", "h2d_s"):
        assert getattr(cm2, f) == pytest.approx(getattr(cm, f), rel=1e-12)
    assert cm2.optimizer_s == pytest.approx(cm.optimizer_s) and cm2.duplex_factor == cm.duplex_factor


def _times_doc(**extra):
    doc = {"name": "t", "link": {"d2h_bandwidth": "10GB/s", "h2d_bandwidth": "5GB/s", "latency": "10us"},
           "ops": [{"name": "mm", "fwd_ms": 1.0, "bwd_ms": 2.0}, {"name": "ew", "fwd_ms": 0.5, "bwd_ms": 0.5},
                   {"name": "attn", "fwd_ms": 3, "bwd_ms": 7.5}],
           "tensors": [{"name": "a", "bytes": "2MB", "d2h_ms": 0.3}]}
    doc.update(extra)
    return doc


def _write(tmp_path, doc, name="p.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_times_only_profile(tmp_path):
    g = tiny_graph()
    cm = costs.measured(g, _write(tmp_path, _times_doc()))
    assert cm.fwd_s == (1e-3, 0.5e-3, 3e-3) and cm.bwd_s == (2e-3, 0.5e-3, 7.5e-3)
    assert cm.d2h_s[1] == pytest.approx(0.3e-3)  # measured transfer wins
    assert cm.h2d_s[1] == pytest.approx(1e-5 + 2e6 / 5e9)  # else latency + bytes / bandwidth
    assert cm.d2h_s[2] == 0.0 and cm.optimizer_s == 0.0 and cm.duplex_factor == 1.0
    assert costs.measured(g, _write(tmp_path, _times_doc()), tiny_hw()).optimizer_s == pytest.approx(2.5e-3)
    with pytest.raises(ConfigError, match="times only"):
        profile.load(_write(tmp_path, _times_doc()))


def test_csv_profile(tmp_path):
    p = tmp_path / "p.csv"
    p.write_text("name,fwd_ms,bwd_ms\nmm,1,2\new,0.5,0.5\nattn,3,7.5\n")
    cm = costs.measured(tiny_graph(), p, tiny_hw())
    assert cm.bwd_s == (2e-3, 0.5e-3, 7.5e-3)
    assert cm.d2h_s[3] == pytest.approx(1e-5 + 4e6 / 10e9)
    p.write_text("name,fwd_ms,bwd_ms,colour\nmm,1,2,red\n")
    with pytest.raises(ConfigError, match="colour"):
        profile.read(p)
    p.write_text("name,fwd_ms,bwd_ms\nmm,fast,2\n")
    with pytest.raises(ConfigError, match="fwd_ms"):
        profile.read(p)


def _drop_op(doc, name):
    doc["ops"] = [o for o in doc["ops"] if o["name"] != name]
    return doc


@pytest.mark.parametrize("doc, field", [
    (_drop_op(_times_doc(), "ew"), "'ew'"),
    (_times_doc(colour="red"), "colour"),
    (_times_doc(ops=[{"name": "mm", "fwd_ms": -1, "bwd_ms": 2}]), r"ops\[0\].fwd_ms"),
    (_times_doc(ops=[{"name": "mm", "fwd_ms": 1, "bwd_ms": "2"}]), r"ops\[0\].bwd_ms"),
    (_times_doc(ops=[{"name": "mm", "fwd_ms": 1}]), "bwd_ms"),
    (_times_doc(ops=[{"name": "mm", "fwd_ms": 1, "bwd_ms": 1, "speed": 3}]), "speed"),
    (_times_doc(ops=_times_doc()["ops"] + [{"name": "extra", "fwd_ms": 1, "bwd_ms": 1}]), "extra"),
    (_times_doc(ops=_times_doc()["ops"] * 2), "duplicate"),
    (_times_doc(tensors=[{"name": "a", "bytes": 5}]), r"bytes"),
    (_times_doc(tensors=[{"name": "zz", "bytes": 5}]), "zz"),
    (_times_doc(tensors=[{"name": "a", "h2d_ms": -0.1}]), "h2d_ms"),
    (_times_doc(tensors=[{"name": "a", "size": 1}]), "size"),
    (_times_doc(link=None), "no link"),
    (_times_doc(link={"d2h_bandwidth": "10GB/s"}), "h2d_bandwidth"),
    (_times_doc(link="pcie99"), "pcie4-x16"),
    (_times_doc(optimizer_ms=-1), "optimizer_ms"),
    (_times_doc(duplex_factor=2), "duplex_factor"),
    (_times_doc(format="other/9"), "format"),
    (_times_doc(ops=[]), "ops"),
])
def test_bad_profiles_name_the_field(tmp_path, doc, field):
    with pytest.raises((ConfigError, UnknownNameError), match=field):
        costs.measured(tiny_graph(), _write(tmp_path, doc))


def test_bad_whole_graph_profile(tmp_path):
    doc = json.loads(EXAMPLE.read_text())
    doc["ops"][2]["inputs"] = ["nope"]
    with pytest.raises(ConfigError, match=r"ops\[2\].inputs.*nope"):
        profile.load(_write(tmp_path, doc))
    doc = json.loads(EXAMPLE.read_text())
    del doc["tensors"][3]["bytes"]
    with pytest.raises(ConfigError, match="bytes"):
        profile.load(_write(tmp_path, doc))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="JSON"):
        profile.read(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="no such file"):
        profile.read(tmp_path / "missing.json")


def test_doctests():
    """slackswap.core.profile's examples run (at least its 3) and pass."""
    r = doctest.testmod(profile)
    assert r.failed == 0 and r.attempted >= 3, r
