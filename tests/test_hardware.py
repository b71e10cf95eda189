"""Hardware presets, link presets, TOML validation (slackswap.core.hardware)."""

import doctest

import pytest

from slackswap.core import hardware
from slackswap.core.errors import ConfigError, UnknownNameError
from slackswap.core.hardware import Efficiency, Link

PRESETS = ["a100-40gb", "a100-80gb", "gh200", "h100-sxm", "h200"]
LINKS = ["nvlink-c2c", "pcie3-x16", "pcie4-x16", "pcie5-x16"]
GPU_NUMBERS = ["peak.bf16", "peak.fp16", "peak.fp32", "peak.tf32", "hbm_bandwidth", "memory",
               "efficiency.matmul", "efficiency.attention", "efficiency.memory"]
LINK_NUMBERS = ["d2h_bandwidth", "h2d_bandwidth", "theoretical_bandwidth", "latency", "duplex_factor"]


def test_available():
    assert hardware.available() == PRESETS
    assert hardware.available_links() == LINKS


@pytest.mark.parametrize("name", PRESETS)
def test_preset_loads_in_range_with_sources(name):
    hw = hardware.load(name)
    g, lk = hw.gpu, hw.link
    assert hw.name == name and hw.description
    assert 1e14 <= g.peak("bf16") <= 2e15 and g.peak("fp16") == g.peak("bf16")
    assert g.peak("fp32") < g.peak("tf32") < g.peak("bf16")
    assert 1e12 <= g.hbm_bytes_per_s <= 1e13
    assert 32 * 2**30 <= g.memory_bytes <= 200e9
    for eff in (g.matmul_efficiency, g.attention_efficiency, g.memory_efficiency):
        vals = [v for _, v in eff.points]
        assert vals == sorted(vals) and 0 < vals[0] and vals[-1] <= 0.9
    assert 0 < lk.d2h_bytes_per_s <= lk.theoretical_bytes_per_s
    assert 0 < lk.h2d_bytes_per_s <= lk.theoretical_bytes_per_s
    assert 0 < lk.latency_s <= 1e-4 and 0 < lk.duplex_factor <= 1
    assert sorted(g.sources) == sorted(GPU_NUMBERS + (["p2p_bandwidth"] if g.p2p_bytes_per_s else []))
    assert sorted(lk.sources) == sorted(LINK_NUMBERS)
    assert all(isinstance(s, str) and len(s) > 10 for s in [*g.sources.values(), *lk.sources.values()])


def test_published_figures():
    a80, a40 = hardware.load("a100-80gb"), hardware.load("a100-40gb")
    assert a80.gpu.peak("bf16") == 312e12 and a80.gpu.hbm_bytes_per_s == 2.0e12
    assert a80.gpu.memory_bytes == 80 * 2**30 and a40.gpu.hbm_bytes_per_s == 1.555e12
    assert a80.link.name == "pcie4-x16" and a80.link.d2h_bytes_per_s == 25e9 == a80.link.h2d_bytes_per_s
    assert a80.link.theoretical_bytes_per_s == 31.5e9
    assert a80.link.latency_s == pytest.approx(10e-6) and 0.8 <= a80.link.duplex_factor <= 0.9
    for n in ("h100-sxm", "h200"):
        lk = hardware.load(n).link
        assert (lk.name, lk.d2h_bytes_per_s, lk.theoretical_bytes_per_s) == ("pcie5-x16", 50e9, 63e9)
    c2c = hardware.load("gh200").link
    assert c2c.name == "nvlink-c2c" and 2 * c2c.theoretical_bytes_per_s == 900e9
    assert c2c.d2h_bytes_per_s == 450e9


def test_unknown_names_list_known():
    with pytest.raises(UnknownNameError, match="a100-80gb.*h200") as ei:
        hardware.load("tpu-v9")
    assert ei.value.known == PRESETS
    with pytest.raises(UnknownNameError, match="pcie4-x16"):
        hardware.load_link("carrier-pigeon")
    with pytest.raises(UnknownNameError, match="pcie4-x16"):
        hardware.load("a100-80gb", link="pcie9")


def test_link_swap_and_overrides():
    base = hardware.load("a100-80gb")
    assert hardware.load("a100-80gb", link="pcie3").link.name == "pcie3-x16"
    assert base.with_link("nvlink-c2c").link == hardware.load_link("nvlink-c2c")
    assert base.with_link("pcie5-x16").gpu == base.gpu
    fast = base.with_link(bandwidth="50GB/s", latency="1us", duplex_factor=1.0)
    assert (fast.link.d2h_bytes_per_s, fast.link.h2d_bytes_per_s) == (50e9, 50e9)
    assert fast.link.latency_s == pytest.approx(1e-6) and fast.link.duplex_factor == 1.0
    assert "d2h_bandwidth" not in fast.link.sources and "theoretical_bandwidth" in fast.link.sources
    assert hardware.load("a100-80gb", h2d_bandwidth=12e9).link.h2d_bytes_per_s == 12e9
    assert base.link.d2h_bytes_per_s == 25e9  # frozen: the original is unchanged
    with pytest.raises(ConfigError, match="warp_speed"):
        base.with_link(warp_speed=2)
    with pytest.raises(ConfigError, match="duplex_factor"):
        base.with_link(duplex_factor=1.5)
    assert base.replace(name="x").name == "x"


def test_transfer_time_is_latency_plus_bytes_over_bandwidth():
    lk = Link("l", 10e9, 5e9, 1e-5, 0.9, 16e9)
    assert lk.transfer_s(2e6, "d2h") == pytest.approx(1e-5 + 2e6 / 10e9, rel=1e-15)
    assert lk.transfer_s(2e6, "h2d") == pytest.approx(1e-5 + 2e6 / 5e9, rel=1e-15)
    assert lk.transfer_s(0, "d2h") == 0.0


def test_efficiency_log_interpolation():
    e = Efficiency(((1e9, 0.4), (1e11, 0.8)))
    assert float(e(1e10)) == pytest.approx(0.6)
    assert float(e(1e8)) == 0.4 and float(e(1e13)) == 0.8 and float(e(0)) == 0.4
    a100 = hardware.load("a100-80gb").gpu.matmul_efficiency
    assert float(a100(10**9.5)) == pytest.approx((0.35 + 0.6) / 2)
    with pytest.raises(ConfigError):
        Efficiency(((1e9, 0.4), (1e8, 0.8)))
    with pytest.raises(ConfigError):
        Efficiency(((1e9, 1.4),))


GOOD = """
name = "mygpu"
description = "test"
link = "pcie4-x16"
[gpu]
name = "G"
hbm_bandwidth = "1TB/s"
memory = "16GiB"
[gpu.peak]
bf16 = "100TFLOP/s"
fp16 = "100TFLOP/s"
fp32 = "10TFLOP/s"
[gpu.efficiency]
matmul = 0.5
attention = { flops = ["1GFLOP", 1e11], value = [0.2, 0.6] }
memory = { bytes = ["1MB", "1GB"], value = [0.3, 0.9] }
"""


def _write(tmp_path, text):
    p = tmp_path / "mygpu.toml"
    p.write_text(text)
    return str(p)


def test_load_from_path(tmp_path):
    hw = hardware.load(_write(tmp_path, GOOD))
    assert hw.name == "mygpu" and hw.gpu.memory_bytes == 16 * 2**30
    assert float(hw.gpu.matmul_efficiency(1e3)) == 0.5
    assert float(hw.gpu.attention_efficiency(1e9)) == pytest.approx(0.2)
    with pytest.raises(ConfigError, match="tf32"):
        hw.gpu.peak("tf32")


def test_inline_link_table_with_preset(tmp_path):
    text = GOOD.replace('link = "pcie4-x16"\n', "") + '[link]\npreset = "pcie4-x16"\nh2d_bandwidth = "20GB/s"\n'
    lk = hardware.load(_write(tmp_path, text)).link
    assert (lk.d2h_bytes_per_s, lk.h2d_bytes_per_s, lk.duplex_factor) == (25e9, 20e9, 0.85)


@pytest.mark.parametrize("edit, field", [
    (lambda t: t.replace('memory = "16GiB"', 'memory = "16GiB"\ncolour = "green"'), "colour"),
    (lambda t: t.replace('memory = "16GiB"\n', ""), "memory"),
    (lambda t: t.replace('link = "pcie4-x16"\n', ""), "link"),
    (lambda t: t.replace("[gpu.peak]", "[gpu.peak]\nint4 = 1"), "int4"),
    (lambda t: t.replace('fp32 = "10TFLOP/s"\n', ""), "fp32"),
    (lambda t: t.replace('hbm_bandwidth = "1TB/s"', 'hbm_bandwidth = "1TB"'), "hbm_bandwidth"),
    (lambda t: t.replace("matmul = 0.5", "matmul = 1.5"), "matmul"),
    (lambda t: t.replace("matmul = 0.5", "matmul = { flops = [1], value = [0.5, 0.6] }"), "matmul"),
    (lambda t: t.replace("matmul = 0.5", "matmul = { bytes = [1], value = [0.5] }"), "bytes"),
    (lambda t: t.replace("[gpu.efficiency]", "[gpu.efficiency]\nconv = 0.5"), "conv"),
    (lambda t: t.replace('link = "pcie4-x16"', "link = [1, 2]"), "link"),
    (lambda t: t + "nonsense = = 1", "TOML"),
])
def test_bad_keys_name_the_field(tmp_path, edit, field):
    path = _write(tmp_path, edit(GOOD))
    with pytest.raises(ConfigError, match=field):
        hardware.load(path)


def test_sources_table_is_optional_and_changes_no_number(tmp_path):
    base = hardware.load(_write(tmp_path, GOOD))
    empty = hardware.load(_write(tmp_path, GOOD + "[sources]\n"))
    assert empty == base and empty.gpu.sources == base.gpu.sources == {}
    cited = hardware.load(_write(tmp_path, GOOD + '[sources]\n"gpu.memory" = "datasheet"\n'))
    assert cited == base and cited.gpu.sources == {"memory": "datasheet"}


def test_bad_link_file(tmp_path):
    p = tmp_path / "l.toml"
    p.write_text('d2h_bandwidth = "25GB/s"\nh2d_bandwidth = "25GB/s"\nspeed = 3\n')
    with pytest.raises(ConfigError, match="speed"):
        hardware.load_link(str(p))
    full = ('d2h_bandwidth = "25GB/s"\nh2d_bandwidth = "25GB/s"\ntheoretical_bandwidth = "30GB/s"\n'
            'latency = "10us"\nduplex_factor = 0.9\n')
    assert hardware.load_link(_write(tmp_path, full)).name == "mygpu"
    p.write_text(full.replace('h2d_bandwidth = "25GB/s"\n', ""))
    with pytest.raises(ConfigError, match="h2d_bandwidth"):
        hardware.load_link(str(p))
    p.write_text(full.replace("0.9", "0"))
    with pytest.raises(ConfigError, match="duplex_factor"):
        hardware.load_link(str(p))
    with pytest.raises(ConfigError, match="no such file"):
        hardware.load(str(tmp_path / "missing.toml"))


def test_doctests():
    """slackswap.core.hardware's examples run (at least its 6) and pass."""
    r = doctest.testmod(hardware)
    assert r.failed == 0 and r.attempted >= 6, r
