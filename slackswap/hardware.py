"""GPU, host link and machine descriptions: ``Gpu``, ``Link``, ``Hardware`` (DESIGN.md 2, 3.4, 4).

Presets live in ``data/hardware/<name>.toml`` (a GPU plus the name of a link preset) and
``data/hardware/links/<name>.toml`` (host <-> device links), in human units with a source for every
number (docs/hardware.md). Inside, everything is SI: FLOP/s, bytes, bytes/s, seconds.

>>> hw = load("a100-80gb")
>>> hw.gpu.peak("bf16") / 1e12, hw.link.d2h_bytes_per_s / 1e9
(312.0, 25.0)
>>> load("a100-80gb", link="pcie3").link.name
'pcie3-x16'
>>> hw.with_link(bandwidth="50GB/s").link.h2d_bytes_per_s
50000000000.0
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._paths import data_dir, user_path
from .errors import ConfigError, SlackSwapError, UnknownNameError
from .units import parse_bytes, parse_flops, parse_rate, parse_seconds

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DTYPES = ("bf16", "fp16", "fp32", "tf32")


@dataclass(frozen=True)
class Efficiency:
    """Fraction of peak reached by one kernel, as a function of its size (FLOPs or bytes).

    ``points`` are ``(size, efficiency)`` pairs with increasing sizes; between points the value is
    interpolated linearly in ``log10(size)``, outside them it is held at the end value. A single
    point is a constant. ``per`` says what the size counts: ``"flops"`` or ``"bytes"``.

    >>> e = Efficiency(((1e9, 0.4), (1e11, 0.8)), "flops")
    >>> round(float(e(1e10)), 6), float(e(1.0)), float(e(1e15))
    (0.6, 0.4, 0.8)
    """

    points: tuple[tuple[float, float], ...]
    per: str = "flops"

    def __post_init__(self):
        pts = tuple((float(s), float(v)) for s, v in self.points)
        object.__setattr__(self, "points", pts)
        if not pts:
            raise ConfigError(f"efficiency ({self.per}): needs at least one point")
        sizes = [s for s, _ in pts]
        if any(s <= 0 or not math.isfinite(s) for s in sizes) or sizes != sorted(set(sizes)):
            raise ConfigError(f"efficiency ({self.per}): sizes must be > 0 and strictly increasing, got {sizes}")
        if any(not 0 < v <= 1 for _, v in pts):
            raise ConfigError(f"efficiency ({self.per}): values must be in (0, 1], got {[v for _, v in pts]}")

    def __call__(self, size):
        """Efficiency at ``size`` (a number or a numpy array; sizes below 1 count as 1)."""
        x = np.log10(np.maximum(np.asarray(size, dtype=float), 1.0))
        xs = np.log10([s for s, _ in self.points])
        return np.interp(x, xs, [v for _, v in self.points])

    @classmethod
    def constant(cls, value: float, per: str = "flops") -> Efficiency:
        return cls(((1.0, float(value)),), per)


@dataclass(frozen=True)
class Gpu:
    """One GPU: dense peak FLOP/s per dtype, HBM bandwidth and size, kernel efficiencies.

    Time of a kernel (costs.analytical): ``flops / (peak[dtype] * matmul_efficiency(flops))`` for
    matmuls (``attention_efficiency`` for attention), ``bytes / (hbm * memory_efficiency(bytes))``
    for memory traffic; the larger of the two.
    """

    name: str
    peak_flops: dict = field(hash=False)
    hbm_bytes_per_s: float
    memory_bytes: int
    matmul_efficiency: Efficiency
    attention_efficiency: Efficiency
    memory_efficiency: Efficiency
    sources: dict = field(default_factory=dict, hash=False, compare=False)

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype`` (one of ``DTYPES``)."""
        if dtype not in self.peak_flops:
            raise ConfigError(f"dtype: {dtype!r} has no peak on {self.name}; known: {', '.join(self.peak_flops)}")
        return self.peak_flops[dtype]


@dataclass(frozen=True)
class Link:
    """Host <-> device link. Bandwidths are per direction, as measured (pinned memory, async copies).

    A copy of b > 0 bytes takes ``latency_s + b / bandwidth``. ``duplex_factor`` (0 < f <= 1)
    scales the H2D bandwidth while the D2H engine is busy (1.0 = full duplex; DESIGN.md 3.4).
    ``theoretical_bytes_per_s`` is the per-direction signalling limit, for reference only.
    """

    name: str
    d2h_bytes_per_s: float
    h2d_bytes_per_s: float
    latency_s: float
    duplex_factor: float
    theoretical_bytes_per_s: float
    description: str = ""
    sources: dict = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self):
        for f in ("d2h_bytes_per_s", "h2d_bytes_per_s", "theoretical_bytes_per_s"):
            if not getattr(self, f) > 0:
                raise ConfigError(f"link {self.name}.{f}: must be > 0, got {getattr(self, f)}")
        if not 0 <= self.latency_s < 1:
            raise ConfigError(f"link {self.name}.latency_s: must be in [0, 1) s, got {self.latency_s}")
        if not 0 < self.duplex_factor <= 1:
            raise ConfigError(f"link {self.name}.duplex_factor: must be in (0, 1], got {self.duplex_factor}")

    def transfer_s(self, nbytes, direction: str = "d2h"):
        """Seconds to copy ``nbytes`` (number or array): latency + bytes / bandwidth; 0 for 0 bytes."""
        bw = {"d2h": self.d2h_bytes_per_s, "h2d": self.h2d_bytes_per_s}[direction]
        b = np.asarray(nbytes, dtype=float)
        return np.where(b > 0, self.latency_s + b / bw, 0.0)


@dataclass(frozen=True)
class Hardware:
    """A machine for one step: a GPU and its host link."""

    name: str
    gpu: Gpu
    link: Link
    description: str = ""

    def replace(self, **changes) -> Hardware:
        return dataclasses.replace(self, **changes)

    def with_link(self, link: str | Link | None = None, **changes) -> Hardware:
        """Swap the link preset and/or override link fields, for ablations.

        ``link``: a preset name (``available_links()``) or a ``Link``. ``changes``: any of
        ``bandwidth`` (both directions), ``d2h_bandwidth``, ``h2d_bandwidth``, ``latency``,
        ``duplex_factor``, in human units or SI numbers.
        """
        new = self.link if link is None else (link if isinstance(link, Link) else load_link(link))
        if changes:
            changes = _expand(changes)
            kept = {k: v for k, v in new.sources.items() if k not in changes}
            new = _link_from_table({**_link_as_table(new), **changes}, str(changes.get("name", new.name)),
                                   "with_link", kept)
        return dataclasses.replace(self, link=new)


# ---------------------------------------------------------------- loading
_GPU_KEYS = {"name", "peak", "hbm_bandwidth", "memory", "efficiency"}
_EFF_KEYS = {"matmul": "flops", "attention": "flops", "memory": "bytes"}
_LINK_KEYS = {"name", "description", "d2h_bandwidth", "h2d_bandwidth", "latency", "duplex_factor",
              "theoretical_bandwidth", "sources"}
_HW_KEYS = {"name", "description", "gpu", "link", "sources"}


def hardware_dir() -> Path:
    return data_dir() / "hardware"


def available() -> list[str]:
    """Names of the hardware presets in ``data/hardware/``."""
    return sorted(p.stem for p in hardware_dir().glob("*.toml"))


def available_links() -> list[str]:
    """Names of the link presets in ``data/hardware/links/``."""
    return sorted(p.stem for p in (hardware_dir() / "links").glob("*.toml"))


def load(name: str, link: str | Link | None = None, **link_changes) -> Hardware:
    """Load a preset by name (or a ``.toml`` path); optionally swap its link (see ``with_link``)."""
    path = _find(name, hardware_dir(), available, "hardware")
    doc = _read_toml(path)
    where = path.name
    _check_keys(doc, _HW_KEYS, {"gpu", "link"}, where)
    sources = _table(doc.get("sources", {}), f"{where}: sources")
    gpu = _gpu_from_table(_table(doc["gpu"], f"{where}: gpu"), where, sources)
    lk = doc["link"]
    if isinstance(lk, str):
        the_link = load_link(lk)
    else:
        lk = dict(_table(lk, f"{where}: link"))
        base = lk.pop("preset", None)
        base_tab = _link_as_table(load_link(base)) if base else {}
        the_link = _link_from_table({**base_tab, **lk}, lk.get("name", base or doc.get("name", path.stem)),
                                    f"{where}: link", {k[5:]: v for k, v in sources.items() if k.startswith("link.")})
    hw = Hardware(str(doc.get("name", path.stem)), gpu, the_link, str(doc.get("description", "")))
    return hw.with_link(link, **link_changes) if (link is not None or link_changes) else hw


def load_link(name: str) -> Link:
    """Load a link preset by name (``"pcie4-x16"``; ``"pcie4"`` also works) or ``.toml`` path."""
    folder = hardware_dir() / "links"
    if not str(name).endswith(".toml") and not (folder / f"{name}.toml").exists() \
            and (folder / f"{name}-x16.toml").exists():
        name = f"{name}-x16"
    path = _find(name, folder, available_links, "link")
    doc = _read_toml(path)
    _check_keys(doc, _LINK_KEYS, set(_LINK_KEYS) - {"name", "description", "sources"}, path.name)
    sources = _table(doc.get("sources", {}), f"{path.name}: sources")
    return _link_from_table(doc, str(doc.get("name", path.stem)), path.name, sources)


def link_from_dict(table: dict, name: str = "custom", where: str = "link") -> Link:
    """A ``Link`` from a dict with the link-file keys (used by profile files); ``preset`` allowed."""
    table = dict(table)
    base = table.pop("preset", None)
    merged = {**(_link_as_table(load_link(base)) if base else {}), **table}
    _check_keys(merged, _LINK_KEYS, {"d2h_bandwidth", "h2d_bandwidth"}, where)
    return _link_from_table(merged, str(merged.get("name", base or name)), where, {})


# ---------------------------------------------------------------- helpers
def _find(name, folder: Path, lister, what: str) -> Path:
    if not isinstance(name, (str, Path)):
        raise ConfigError(f"{what}: expected a name or a .toml path, got {name!r}")
    if str(name).endswith(".toml"):
        path = user_path(name)
        if not path.is_file():
            raise ConfigError(f"{what}: no such file {str(name)!r}")
        return path
    path = folder / f"{name}.toml"
    if not path.is_file():
        raise UnknownNameError(what, str(name), lister())
    return path


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path.name}: not valid TOML: {exc}") from None


def _check_keys(doc: dict, allowed: set, required: set, where: str) -> None:
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    missing = sorted(set(required) - set(doc))
    if missing:
        raise ConfigError(f"{where}: missing key {missing[0]!r}")


def _table(v, where: str) -> dict:
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: expected a table, got {v!r}")
    return v


def _parse(fn, value, field: str):
    try:
        return fn(value, field)
    except SlackSwapError as exc:
        raise ConfigError(str(exc)) from None


def _gpu_from_table(t: dict, where: str, sources: dict) -> Gpu:
    w = f"{where}: gpu"
    _check_keys(t, _GPU_KEYS, _GPU_KEYS, w)
    peak_t = _table(t["peak"], f"{w}.peak")
    _check_keys(peak_t, set(DTYPES), {"bf16", "fp16", "fp32"}, f"{w}.peak")
    peak = {k: _parse(parse_flops, v, f"{w}.peak.{k}") for k, v in peak_t.items()}
    if any(v <= 0 for v in peak.values()):
        raise ConfigError(f"{w}.peak: every peak must be > 0")
    eff_t = _table(t["efficiency"], f"{w}.efficiency")
    _check_keys(eff_t, set(_EFF_KEYS), set(_EFF_KEYS), f"{w}.efficiency")
    eff = {k: _efficiency(eff_t[k], per, f"{w}.efficiency.{k}") for k, per in _EFF_KEYS.items()}
    hbm = _parse(parse_rate, t["hbm_bandwidth"], f"{w}.hbm_bandwidth")
    mem = _parse(parse_bytes, t["memory"], f"{w}.memory")
    if hbm <= 0 or mem <= 0:
        raise ConfigError(f"{w}: hbm_bandwidth and memory must be > 0")
    gpu_sources = {k[4:]: v for k, v in sources.items() if k.startswith("gpu.")}
    return Gpu(str(t["name"]), peak, hbm, mem, eff["matmul"], eff["attention"], eff["memory"], gpu_sources)


def _efficiency(v, per: str, where: str) -> Efficiency:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if not 0 < v <= 1:
            raise ConfigError(f"{where}: must be in (0, 1], got {v}")
        return Efficiency.constant(v, per)
    t = _table(v, where)
    _check_keys(t, {per, "value"}, {per, "value"}, where)
    sizes, values = t[per], t["value"]
    if not isinstance(sizes, list) or not isinstance(values, list) or len(sizes) != len(values):
        raise ConfigError(f"{where}: {per!r} and 'value' must be lists of equal length")
    parse = parse_bytes if per == "bytes" else parse_flops_count
    sizes = [_parse(parse, s, f"{where}.{per}") for s in sizes]
    try:
        return Efficiency(tuple(zip(sizes, values, strict=True)), per)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def parse_flops_count(value, field: str = "flops") -> float:
    """A FLOP count from a number or ``"2GFLOP"`` (not a rate)."""
    if isinstance(value, str) and value.strip().upper().endswith("FLOP"):
        return parse_flops(value.strip() + "/s", field)
    return parse_flops(value, field)


def _link_from_table(t: dict, name: str, where: str, sources: dict) -> Link:
    _check_keys(t, _LINK_KEYS, {"d2h_bandwidth", "h2d_bandwidth"}, where)
    d2h = _parse(parse_rate, t["d2h_bandwidth"], f"{where}.d2h_bandwidth")
    h2d = _parse(parse_rate, t["h2d_bandwidth"], f"{where}.h2d_bandwidth")
    theo = _parse(parse_rate, t.get("theoretical_bandwidth", max(d2h, h2d)), f"{where}.theoretical_bandwidth")
    lat = _parse(parse_seconds, t.get("latency", 0.0), f"{where}.latency")
    duplex = t.get("duplex_factor", 1.0)
    if isinstance(duplex, bool) or not isinstance(duplex, (int, float)):
        raise ConfigError(f"{where}.duplex_factor: expected a number in (0, 1], got {duplex!r}")
    try:
        return Link(name, d2h, h2d, lat, float(duplex), theo, str(t.get("description", "")),
                    dict(t.get("sources", sources)))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _link_as_table(link: Link) -> dict:
    return {"name": link.name, "description": link.description, "d2h_bandwidth": link.d2h_bytes_per_s,
            "h2d_bandwidth": link.h2d_bytes_per_s, "latency": link.latency_s,
            "duplex_factor": link.duplex_factor, "theoretical_bandwidth": link.theoretical_bytes_per_s}


def _expand(changes: dict) -> dict:
    out = dict(changes)
    if "bandwidth" in out:
        bw = out.pop("bandwidth")
        out.setdefault("d2h_bandwidth", bw)
        out.setdefault("h2d_bandwidth", bw)
    unknown = sorted(set(out) - (_LINK_KEYS - {"sources"}))
    if unknown:
        raise ConfigError(f"with_link: unknown field {unknown[0]!r}; allowed: bandwidth, d2h_bandwidth, "
                          "h2d_bandwidth, latency, duplex_factor, theoretical_bandwidth, name, description")
    return out
