"""GPU, host link and machine descriptions: ``Gpu``, ``Link``, ``Hardware`` (docs/hardware.md).

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
>>> hw.node.gpus_per_switch, hw.copy_link(gpus=8).d2h_bytes_per_s / 1e9   # two GPUs on a switch
(2, 12.5)
>>> hw.with_node(None).copy_link(gpus=8) is hw.link                       # alone on its link
True
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator
from pydantic import Field as PField

from .errors import ConfigError, UnknownNameError
from .paths import data_dir, user_path
from .schema import Bytes, Flops, Rate, Schema, Seconds, parse, unit
from .units import parse_flops

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
    #: GPU-to-GPU bandwidth per direction (NVLink), bytes/s; None when the GPU has none given
    #: (then a tensor-parallel graph is refused: docs/parallel.md)
    p2p_bytes_per_s: float | None = None

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype`` (one of ``DTYPES``)."""
        if dtype not in self.peak_flops:
            raise ConfigError(f"dtype: {dtype!r} has no peak on {self.name}; known: {', '.join(self.peak_flops)}")
        return self.peak_flops[dtype]


@dataclass(frozen=True)
class Link:
    """Host <-> device link. Bandwidths are per direction, as measured (pinned memory, async copies).

    A copy of b > 0 bytes takes ``latency_s + b / bandwidth``. ``duplex_factor`` (0 < f <= 1)
    scales the H2D bandwidth while the D2H engine is busy (1.0 = full duplex; docs/hardware.md).
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
class Node:
    """The host that several GPUs share (docs/hardware.md, "The node: GPUs sharing a host").

    ``gpus_per_node`` GPUs sit in one host; ``gpus_per_switch`` of them share one PCIe switch,
    whose uplink to the host carries ``switch_bytes_per_s`` per direction; the host's memory
    moves ``host_memory_bytes_per_s`` (reads and writes together) and can hold
    ``pinned_capacity_bytes`` of pinned buffers for swapped tensors, for all its GPUs together.
    ``copying_gpus``: how many GPUs of the node copy at once (None: the GPUs of the job in the
    node, ``min(gpus_per_node, job GPUs)``, as they run the same step in lockstep).

    >>> n = Node(8, 2, 25e9, 409.6e9, 512 * 10**9)
    >>> n.copying(8), n.per_switch(8), n.share(25e9, 8) / 1e9
    (8, 2, 12.5)
    >>> n.share(25e9, 1) / 1e9, n.replace(copying_gpus=1).share(25e9, 8) / 1e9
    (25.0, 25.0)
    """

    gpus_per_node: int
    gpus_per_switch: int
    switch_bytes_per_s: float
    host_memory_bytes_per_s: float
    pinned_capacity_bytes: int
    copying_gpus: int | None = None
    sources: dict = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self):
        for f in ("gpus_per_node", "gpus_per_switch"):
            _check_count(f, getattr(self, f))
        if self.gpus_per_node % self.gpus_per_switch:
            raise ConfigError(f"node.gpus_per_switch: must divide gpus_per_node ({self.gpus_per_node}); "
                              f"got {self.gpus_per_switch}")
        for f, key in (("switch_bytes_per_s", "switch_bandwidth"),
                       ("host_memory_bytes_per_s", "host_memory_bandwidth"),
                       ("pinned_capacity_bytes", "pinned_capacity")):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise ConfigError(f"node.{key}: must be a finite number > 0; got {v!r}")
        if self.copying_gpus is not None:
            _check_count("copying_gpus", self.copying_gpus)
            if self.copying_gpus > self.gpus_per_node:
                raise ConfigError(f"node.copying_gpus: must be in 1 .. gpus_per_node ({self.gpus_per_node}); "
                                  f"got {self.copying_gpus}")

    def replace(self, **changes) -> Node:
        return dataclasses.replace(self, **changes)

    def copying(self, gpus: int = 1) -> int:
        """GPUs of the node copying at once when this one does, for a job of ``gpus`` GPUs:
        ``copying_gpus`` if given, else ``min(gpus_per_node, gpus)``."""
        _check_count("gpus", gpus, "the GPUs of the job")
        return self.copying_gpus if self.copying_gpus is not None else min(self.gpus_per_node, gpus)

    def per_switch(self, gpus: int = 1) -> int:
        """Of those, the GPUs copying through this GPU's switch: ``min(gpus_per_switch, copying)``
        (the job's GPUs fill a switch before the next)."""
        return min(self.gpus_per_switch, self.copying(gpus))

    def share(self, bandwidth: float, gpus: int = 1) -> float:
        """One GPU's bandwidth per direction when its neighbours copy too: ``min(bandwidth,
        switch / per_switch, host_memory / copying)`` (``bandwidth``: its own link's), each
        term only where it is shared (``per_switch > 1``, ``copying > 1``): a GPU's own path
        to host memory is what its link's bandwidth describes, so one alone gets its link."""
        n, k = self.copying(gpus), self.per_switch(gpus)
        out = bandwidth
        if k > 1:
            out = min(out, self.switch_bytes_per_s / k)
        if n > 1:
            out = min(out, self.host_memory_bytes_per_s / n)
        return out


def _check_count(name: str, value, what: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{'' if what else 'node.'}{name}: must be a whole number >= 1"
                          f"{' (' + what + ')' if what else ''}; got {value!r}")


@dataclass(frozen=True)
class Hardware:
    """A machine for one step: a GPU, its host link and, optionally, the node it shares with
    other GPUs (None: the GPU is alone on its link and host)."""

    name: str
    gpu: Gpu
    link: Link
    description: str = ""
    node: Node | None = None

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
            t = parse(LinkTable, {**_link_as_table(new), **changes}, "with_link")
            new = _link(t, t.name or new.name, kept)
        return dataclasses.replace(self, link=new)

    def with_node(self, node: Node | dict | None | object = ..., **changes) -> Hardware:
        """Replace or change the node, for ablations (docs/hardware.md, "The node").

        ``node``: a ``Node``, a dict of node keys (the ``[node]`` table of a hardware file), or
        None (no node: the GPU alone on its link). ``changes``: node keys in human units or SI
        numbers (``gpus_per_switch=2``, ``switch_bandwidth="20GB/s"``, ``copying_gpus=1``)
        applied to that node (to the current one when ``node`` is not given).
        """
        if node is None:
            if changes:
                raise ConfigError(f"with_node: node=None removes the node; got changes {sorted(changes)}")
            return dataclasses.replace(self, node=None)
        if node is ...:
            node = self.node
        if isinstance(node, dict):
            node = _node(parse(NodeTable, node, "with_node"), {})
        elif node is not None and not isinstance(node, Node):
            raise ConfigError(f"with_node: node: expected a Node, a dict of node keys or None; got {node!r}")
        if changes:
            base = _node_as_table(node) if node is not None else {}
            kept = {k: v for k, v in node.sources.items() if k not in changes} if node is not None else {}
            node = _node(parse(NodeTable, {**base, **changes}, "with_node"), kept)
        return dataclasses.replace(self, node=node)

    def copy_link(self, gpus: int = 1) -> Link:
        """The link as one GPU of a job of ``gpus`` GPUs sees it: both bandwidths cut to the
        node's share (``Node.share``); ``self.link`` itself without a node or when no share binds."""
        if self.node is None:
            return self.link
        d2h = self.node.share(self.link.d2h_bytes_per_s, gpus)
        h2d = self.node.share(self.link.h2d_bytes_per_s, gpus)
        if d2h == self.link.d2h_bytes_per_s and h2d == self.link.h2d_bytes_per_s:
            return self.link
        return dataclasses.replace(self.link, d2h_bytes_per_s=d2h, h2d_bytes_per_s=h2d)


# ---------------------------------------------------------------- file schemas
def parse_flops_count(value, field: str = "flops") -> float:
    """A FLOP count from a number or ``"2GFLOP"`` (not a rate)."""
    if isinstance(value, str) and value.strip().upper().endswith("FLOP"):
        return parse_flops(value.strip() + "/s", field)
    return parse_flops(value, field)


EffValue = Annotated[float, Field(gt=0, le=1)]
FlopCount = Annotated[float, BeforeValidator(unit(parse_flops_count))]
Positive = Annotated[Bytes, Field(gt=0)]


class _Curve(Schema):
    value: Annotated[list[EffValue], Field(min_length=1)]

    @model_validator(mode="after")
    def _same_length(self):
        sizes = self.sizes()
        if len(sizes) != len(self.value):
            raise ValueError(f"{self.per} and value: must be lists of equal length; got {len(sizes)} "
                             f"and {len(self.value)}")
        if any(s <= 0 for s in sizes) or list(sizes) != sorted(set(sizes)):
            raise ValueError(f"{self.per}: sizes must be > 0 and strictly increasing; got {list(sizes)}")
        return self

    def sizes(self):
        return getattr(self, self.per)

    def efficiency(self) -> Efficiency:
        return Efficiency(tuple(zip(self.sizes(), self.value, strict=True)), self.per)


class FlopsCurve(_Curve):
    """``{ flops = [1e9, "10GFLOP"], value = [0.4, 0.7] }``: efficiency per kernel FLOP count."""

    per: ClassVar[str] = "flops"
    flops: list[FlopCount]


class BytesCurve(_Curve):
    """``{ bytes = ["1MB", "1GB"], value = [0.3, 0.9] }``: efficiency per kernel byte count."""

    per: ClassVar[str] = "bytes"
    bytes: list[Bytes]


class Efficiencies(Schema):
    matmul: EffValue | FlopsCurve
    attention: EffValue | FlopsCurve
    memory: EffValue | BytesCurve


class Peak(Schema):
    bf16: Flops
    fp16: Flops
    fp32: Flops
    tf32: Flops | None = None


class GpuTable(Schema):
    name: str
    peak: Peak
    hbm_bandwidth: Rate
    memory: Positive
    efficiency: Efficiencies
    p2p_bandwidth: Rate | None = None


class LinkTable(Schema):
    """A link file (``data/hardware/links/*.toml``) or table."""

    name: str | None = None
    description: str = ""
    d2h_bandwidth: Rate
    h2d_bandwidth: Rate
    latency: Annotated[Seconds, Field(lt=1)] = 0.0
    duplex_factor: Annotated[float, Field(gt=0, le=1)] = 1.0
    theoretical_bandwidth: Rate | None = None
    sources: dict[str, str] = PField(default_factory=dict)


class LinkChanges(Schema):
    """A link table inside a hardware file or a profile: a ``preset`` plus changed keys."""

    preset: str | None = None
    name: str | None = None
    description: str | None = None
    d2h_bandwidth: Rate | None = None
    h2d_bandwidth: Rate | None = None
    latency: Annotated[Seconds, Field(lt=1)] | None = None
    duplex_factor: Annotated[float, Field(gt=0, le=1)] | None = None
    theoretical_bandwidth: Rate | None = None
    sources: dict[str, str] | None = None


class NodeTable(Schema):
    """The ``[node]`` table of a hardware file: the host several GPUs share."""

    gpus_per_node: Annotated[int, Field(ge=1)]
    gpus_per_switch: Annotated[int, Field(ge=1)]
    switch_bandwidth: Rate
    host_memory_bandwidth: Rate
    pinned_capacity: Positive
    copying_gpus: Annotated[int, Field(ge=1)] | None = None

    @field_validator("gpus_per_switch")
    @classmethod
    def _divides(cls, value, info: ValidationInfo):
        per_node = info.data.get("gpus_per_node")
        if per_node is not None and per_node % value:
            raise ValueError(f"must divide gpus_per_node ({per_node}); got {value}")
        return value

    @field_validator("copying_gpus")
    @classmethod
    def _within_node(cls, value, info: ValidationInfo):
        per_node = info.data.get("gpus_per_node")
        if value is not None and per_node is not None and value > per_node:
            raise ValueError(f"must be in 1 .. gpus_per_node ({per_node}); got {value}")
        return value


class HardwareFile(Schema):
    """A hardware file (``data/hardware/*.toml``): a GPU, a link preset name or table, and
    optionally the node the GPU shares with others."""

    name: str | None = None
    description: str = ""
    gpu: GpuTable
    link: Annotated[str, Field(min_length=1)] | LinkChanges
    node: NodeTable | None = None
    sources: dict[str, str] = PField(default_factory=dict)


# ---------------------------------------------------------------- loading
def hardware_dir() -> Path:
    return data_dir() / "hardware"


def available() -> list[str]:
    """Names of the hardware presets in ``data/hardware/``."""
    return sorted(p.stem for p in hardware_dir().glob("*.toml"))


def available_links() -> list[str]:
    """Names of the link presets in ``data/hardware/links/``."""
    return sorted(p.stem for p in (hardware_dir() / "links").glob("*.toml"))


def load(name: str, link: str | Link | None = None, **link_changes) -> Hardware:
    """Load a preset by name (or a ``.toml`` path); optionally swap its link (see ``with_link``).
    The file is parsed by ``HardwareFile``: a bad key raises ``ConfigError`` naming the file and
    the key (``h100.toml: gpu.efficiency.matmul: ...``)."""
    path = _find(name, hardware_dir(), available, "hardware")
    hw = hardware_from_dict(_read_toml(path), path.name, path.stem)
    return hw.with_link(link, **link_changes) if (link is not None or link_changes) else hw


def hardware_from_dict(table, where: str = "hardware", default_name: str = "custom") -> Hardware:
    """A ``Hardware`` from a document in the hardware-file format (``HardwareFile``)."""
    doc = parse(HardwareFile, table, where)
    sources = doc.sources
    g = doc.gpu
    eff = {k: (Efficiency.constant(v, c.per) if isinstance(v, float) else v.efficiency())
           for k, c in (("matmul", FlopsCurve), ("attention", FlopsCurve), ("memory", BytesCurve))
           for v in [getattr(g.efficiency, k)]}
    peak = {k: v for k, v in g.peak.model_dump().items() if v is not None}
    gpu = Gpu(g.name, peak, g.hbm_bandwidth, g.memory, eff["matmul"], eff["attention"], eff["memory"],
              {k[4:]: v for k, v in sources.items() if k.startswith("gpu.")}, g.p2p_bandwidth)
    if isinstance(doc.link, str):
        try:
            the_link = load_link(doc.link)
        except UnknownNameError as exc:   # name the file that names the link
            raise UnknownNameError(exc.what, exc.name, exc.known, where=f"{where}: link") from None
    else:
        link_sources = {k[5:]: v for k, v in sources.items() if k.startswith("link.")}
        the_link = _changed_link(doc.link, doc.name or default_name, f"{where}: link", link_sources)
    node = None
    if doc.node is not None:
        node = _node(doc.node, {k[5:]: v for k, v in sources.items() if k.startswith("node.")})
    return Hardware(doc.name or default_name, gpu, the_link, doc.description, node)


def load_link(name: str) -> Link:
    """Load a link preset by name (``"pcie4-x16"``; ``"pcie4"`` also works) or ``.toml`` path."""
    folder = hardware_dir() / "links"
    if isinstance(name, str) and not name.endswith(".toml") and not (folder / f"{name}.toml").exists() \
            and (folder / f"{name}-x16.toml").exists():
        name = f"{name}-x16"
    path = _find(name, folder, available_links, "link")
    return link_from_file_dict(_read_toml(path), path.name, path.stem)


def link_from_file_dict(table, where: str = "link", default_name: str = "custom") -> Link:
    """A ``Link`` from a document in the link-file format (``LinkTable``)."""
    t = parse(LinkTable, table, where)
    return _link(t, t.name or default_name, t.sources)


def link_from_dict(table: dict, name: str = "custom", where: str = "link") -> Link:
    """A ``Link`` from a dict with the link-file keys (used by profile files); ``preset`` allowed."""
    return _changed_link(parse(LinkChanges, table, where), name, where, {})


NODE_KEYS = ("gpus_per_node", "gpus_per_switch", "switch_bandwidth", "host_memory_bandwidth", "pinned_capacity",
             "copying_gpus")


def with_node_text(hw: Hardware, text: str, where: str = "--node") -> Hardware:
    """The CLI's ``--node``: ``"none"`` (no node) or ``KEY=VALUE`` pairs joined by commas
    changing ``hw``'s node (``Hardware.with_node``); whole numbers are read as integers.

    >>> with_node_text(load("a100-80gb"), "gpus_per_switch=4,switch_bandwidth=40GB/s").node.gpus_per_switch
    4
    """
    if text.strip().lower() == "none":
        return hw.with_node(None)
    changes: dict = {}
    for part in text.split(","):
        key, sep, value = (x.strip() for x in part.partition("="))
        if not sep or not key or not value:
            raise ConfigError(f"{where}: expected 'none' or KEY=VALUE pairs joined by commas "
                              f"({', '.join(NODE_KEYS)}); got {part.strip()!r}")
        if key in changes:
            raise ConfigError(f"{where}: {key}: given twice")
        changes[key] = int(value) if value.lstrip("-").isdigit() else value
    try:
        return hw.with_node(**changes)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {str(exc).removeprefix('with_node: ')}") from None


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
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path.name}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path.name}: cannot read {path}: {exc}") from None


def _link(t: LinkTable, name: str, sources: dict) -> Link:
    theo = t.theoretical_bandwidth or max(t.d2h_bandwidth, t.h2d_bandwidth)
    return Link(name, t.d2h_bandwidth, t.h2d_bandwidth, t.latency, t.duplex_factor, theo, t.description,
                dict(sources))


def _changed_link(c: LinkChanges, name: str, where: str, sources: dict) -> Link:
    """A preset (``c.preset``) with the keys of ``c`` changed; without a preset, both bandwidths."""
    base = _link_as_table(load_link(c.preset)) if c.preset else {}
    changed = {k: v for k, v in c.model_dump(exclude={"preset"}).items() if v is not None}
    t = parse(LinkTable, {**base, **changed}, where)
    return _link(t, c.name or c.preset or name, c.sources if c.sources is not None else sources)


def _link_as_table(link: Link) -> dict:
    return {"name": link.name, "description": link.description, "d2h_bandwidth": link.d2h_bytes_per_s,
            "h2d_bandwidth": link.h2d_bytes_per_s, "latency": link.latency_s,
            "duplex_factor": link.duplex_factor, "theoretical_bandwidth": link.theoretical_bytes_per_s}


def _node(t: NodeTable, sources: dict) -> Node:
    return Node(t.gpus_per_node, t.gpus_per_switch, t.switch_bandwidth, t.host_memory_bandwidth,
                t.pinned_capacity, t.copying_gpus, dict(sources))


def _node_as_table(node: Node) -> dict:
    return {"gpus_per_node": node.gpus_per_node, "gpus_per_switch": node.gpus_per_switch,
            "switch_bandwidth": node.switch_bytes_per_s, "host_memory_bandwidth": node.host_memory_bytes_per_s,
            "pinned_capacity": node.pinned_capacity_bytes, "copying_gpus": node.copying_gpus}


def _expand(changes: dict) -> dict:
    out = dict(changes)
    if "bandwidth" in out:
        bw = out.pop("bandwidth")
        out.setdefault("d2h_bandwidth", bw)
        out.setdefault("h2d_bandwidth", bw)
    unknown = sorted(set(out) - (set(LinkTable.model_fields) - {"sources"}))
    if unknown:
        raise ConfigError(f"with_link: unknown field {unknown[0]!r}; allowed: bandwidth, d2h_bandwidth, "
                          "h2d_bandwidth, latency, duplex_factor, theoretical_bandwidth, name, description")
    return out
