"""Measured-mode profiles: per-op times (and optionally a whole graph) from a file (docs/profile.md).

A profile is JSON (the full schema) or CSV (``name,fwd_ms,bwd_ms`` rows: op times only). Times are
milliseconds in the file and seconds inside. Two uses:

* ``costs.measured(graph, path)`` / ``read(path).costs(graph)``: times for an existing graph,
  matched by op name;
* ``load(path) -> (Graph, CostModel)``: the profile describes the graph too (ops with inputs,
  outputs, saves by tensor name; tensors with bytes), so a user can plan for their own model.

>>> from slackswap.core.paths import data_dir
>>> g, c = load(data_dir() / "profiles" / "example.json")
>>> len(g.ops), c.mode
(19, 'measured')
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from . import hardware as _hw
from .costmodel import CostModel, copy_link, optimizer_seconds, transfer_seconds
from .errors import ConfigError
from .graph import MAX_OPS, Graph, Op, Tensor, check_limit
from .paths import read_document, user_path
from .schema import Bytes, Schema, parse

FORMAT = "slackswap-profile/1"
Name = Annotated[str, Field(min_length=1)]
Ms = Annotated[float, Field(ge=0)]


class OpEntry(Schema):
    name: Name
    fwd_ms: Ms
    bwd_ms: Ms
    kind: str | None = None
    layer: int | None = None
    inputs: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    saves: list[str] = Field(default_factory=list)
    workspace_bytes: Bytes = 0
    fwd_flops: Annotated[float, Field(ge=0)] = 0.0
    fwd_bytes: Annotated[float, Field(ge=0)] = 0.0
    bwd_flops: Annotated[float, Field(ge=0)] = 0.0
    bwd_bytes: Annotated[float, Field(ge=0)] = 0.0


class TensorEntry(Schema):
    name: Name
    bytes: Bytes | None = None
    kind: str | None = None
    recomputable: bool = True
    swappable: bool = True
    d2h_ms: Ms | None = None
    h2d_ms: Ms | None = None


class OverheadEntry(Schema):
    """``per_op_overhead_ms``: the fixed cost of one op beyond its kernel time (docs/profile.md)."""

    fwd: Ms
    bwd: Ms
    hooks_fwd: Ms | None = None
    hooks_bwd: Ms | None = None
    method: str = ""

    @model_validator(mode="after")
    def _hooks_within(self):
        for part in ("fwd", "bwd"):
            hooks = getattr(self, f"hooks_{part}")
            if hooks is not None and hooks > getattr(self, part):
                raise ValueError(f"hooks_{part}: the hooks' part of the overhead must be <= {part} "
                                 f"({getattr(self, part)}); got {hooks}")
        return self


class ProfileFile(Schema):
    """A profile document (docs/profile.md): op times, optionally the tensors and the graph."""

    format: Literal[FORMAT] | None = None
    name: Name | None = None
    description: str = ""
    device: str | None = None
    dtype: str | None = None
    static_bytes: Bytes = 0
    optimizer_ms: Ms | None = None
    duplex_factor: Annotated[float, Field(gt=0, le=1)] | None = None
    link: Name | dict[str, Any] | None = None
    per_op_overhead_ms: OverheadEntry | None = None
    ops: Annotated[list[OpEntry], Field(min_length=1)]
    tensors: list[TensorEntry] | None = None

    @model_validator(mode="after")
    def _unique_names(self):
        for key, entries in (("ops", self.ops), ("tensors", self.tensors or [])):
            seen = set()
            for i, e in enumerate(entries):
                if e.name in seen:
                    raise ValueError(f"{key}[{i}].name: duplicate name {e.name!r}")
                seen.add(e.name)
        return self




@dataclass(frozen=True)
class Profile:
    """A parsed profile file. Times in seconds; ``doc`` is the validated JSON document."""

    name: str
    op_times: dict = field(hash=False)          # op name -> (fwd_s, bwd_s)
    tensors: dict = field(hash=False)           # tensor name -> {"bytes", "d2h_s", "h2d_s"} (None if absent)
    optimizer_s: float | None = None
    duplex_factor: float | None = None
    link: object = None                          # hardware.Link or None
    doc: ProfileFile | None = field(default=None, hash=False, compare=False)
    source: str = ""
    op_overhead_s: tuple = (0.0, 0.0)            # (fwd, bwd) seconds charged on every op

    @property
    def has_graph(self) -> bool:
        """True when the profile describes a whole graph (``load`` can build it)."""
        return (self.doc is not None and self.doc.tensors is not None
                and all(o.kind is not None for o in self.doc.ops))

    def costs(self, graph: Graph, hardware=None, gpus: int = 1) -> CostModel:
        """The measured ``CostModel`` of ``graph`` (precedence rules: ``costs.measured``)."""
        where = self.source or self.name
        names = [op.name for op in graph.ops]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ConfigError(f"{where}: graph {graph.name!r} has two ops named {dup!r}; names must be unique")
        missing = [n for n in names if n not in self.op_times]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ConfigError(f"{where}: ops: no time for op {missing[0]!r}{more} of graph {graph.name!r}")
        extra = sorted(set(self.op_times) - set(names))
        if extra:
            raise ConfigError(f"{where}: ops: {extra[0]!r} is not an op of graph {graph.name!r}")
        tnames = {t.name: t for t in graph.tensors}
        for tname, info in self.tensors.items():
            if tname not in tnames:
                raise ConfigError(f"{where}: tensors: {tname!r} is not a tensor of graph {graph.name!r}")
            if info["bytes"] is not None and info["bytes"] != tnames[tname].bytes:
                raise ConfigError(f"{where}: tensors[{tname!r}].bytes: profile says {info['bytes']}, "
                                  f"graph has {tnames[tname].bytes}")
        link = copy_link(hardware, gpus) if hardware is not None else self.link
        n = len(graph.tensors)
        d2h, h2d = transfer_seconds(graph, link) if link is not None else (np.full(n, np.nan), np.full(n, np.nan))
        for t in graph.tensors:
            info = self.tensors.get(t.name, {})
            for key, arr in (("d2h_s", d2h), ("h2d_s", h2d)):
                if info.get(key) is not None:
                    arr[t.id] = info[key]
                elif t.bytes == 0:
                    arr[t.id] = 0.0
                elif math.isnan(arr[t.id]):
                    raise ConfigError(f"{where}: tensors[{t.name!r}].{key[:3]}_ms: no measured time and no link "
                                      "(add the time, a 'link' section, or pass hardware=)")
        if self.optimizer_s is not None:
            opt = self.optimizer_s
        else:
            opt = optimizer_seconds(graph.static_bytes, hardware) if hardware is not None else 0.0
        duplex = self.duplex_factor
        if duplex is None:
            duplex = link.duplex_factor if link is not None else 1.0
        fwd = tuple(self.op_times[n][0] for n in names)
        bwd = tuple(self.op_times[n][1] for n in names)
        cm = CostModel("measured", fwd, bwd, tuple(d2h.tolist()), tuple(h2d.tolist()), opt, duplex)
        return cm.with_op_overhead(*self.op_overhead_s)

    def graph(self, max_ops: int | None = MAX_OPS) -> Graph:
        """The graph the profile describes (needs ``has_graph``). A profile of more than
        ``max_ops`` ops (``core.graph.MAX_OPS``; None: no limit) is refused before the graph is
        built, as ``models.build`` refuses one (``ConfigError``)."""
        where = self.source or self.name
        if not self.has_graph:
            raise ConfigError(f"{where}: describes op times only (no 'tensors', or ops without 'kind'); "
                              "use costs.measured(graph, profile) with a graph")
        check_limit(max_ops, "max_ops", ConfigError)
        n = len(self.doc.ops)
        if max_ops is not None and n > max_ops:
            raise ConfigError(f"{where}: ops: {n:,} ops, more than max_ops={max_ops:,}; give a larger "
                              "max_ops (Profile.graph, profile.load) to build it anyway")
        tdocs = self.doc.tensors
        tid = {t.name: i for i, t in enumerate(tdocs)}
        producer: dict[int, int] = {}
        ops = []
        for i, o in enumerate(self.doc.ops):
            ids = {}
            for key in ("inputs", "outputs", "saves"):
                for v in getattr(o, key):
                    if v not in tid:
                        raise ConfigError(f"{where}: ops[{i}].{key}: unknown tensor {v!r}")
                ids[key] = tuple(tid[v] for v in getattr(o, key))
            for t in ids["outputs"]:
                producer.setdefault(t, i)
            ops.append(Op(i, o.name, o.layer, o.kind, inputs=ids["inputs"], outputs=ids["outputs"],
                          saves=ids["saves"], workspace_bytes=o.workspace_bytes, fwd_flops=o.fwd_flops,
                          fwd_bytes=o.fwd_bytes, bwd_flops=o.bwd_flops, bwd_bytes=o.bwd_bytes))
        tensors = []
        for i, t in enumerate(tdocs):
            if t.bytes is None:
                raise ConfigError(f"{where}: tensors[{i}].bytes: missing required key (tensor {t.name!r})")
            p = producer.get(i)
            kind = t.kind or ("activation" if p is not None else "input")
            tensors.append(Tensor(i, t.name, t.bytes, p, kind, recomputable=t.recomputable,
                                  swappable=t.swappable))
        return Graph(self.name, tuple(ops), tuple(tensors), self.doc.static_bytes)


def read(path) -> Profile:
    """Parse and validate a JSON or CSV profile; ``ConfigError`` names the bad field."""
    path = user_path(path)
    if not path.is_file():
        raise ConfigError(f"profile: no such file {str(path)!r}")
    if path.suffix.lower() == ".csv":
        return _from_csv(path)
    path, doc = read_document(path, "json", "profile", ConfigError)
    return from_dict(doc, source=path.name)


def load(path, hardware=None, max_ops: int | None = MAX_OPS) -> tuple[Graph, CostModel]:
    """Graph and measured costs from a whole-graph profile (``hardware`` as in ``costs.measured``;
    ``max_ops`` as in ``Profile.graph``)."""
    prof = read(path)
    g = prof.graph(max_ops)
    return g, prof.costs(g, hardware)


def from_dict(doc: dict, source: str = "profile") -> Profile:
    """A ``Profile`` from an already-parsed JSON document."""

    f = parse(ProfileFile, doc, source)
    times = {o.name: (o.fwd_ms * 1e-3, o.bwd_ms * 1e-3) for o in f.ops}
    tensors = {t.name: {"bytes": t.bytes, "d2h_s": None if t.d2h_ms is None else t.d2h_ms * 1e-3,
                        "h2d_s": None if t.h2d_ms is None else t.h2d_ms * 1e-3} for t in f.tensors or []}
    link = f.link
    if isinstance(link, str):
        link = _hw.load_link(link)
    elif isinstance(link, dict):
        link = _hw.link_from_dict(link, where=f"{source}: link")
    opt = None if f.optimizer_ms is None else f.optimizer_ms * 1e-3
    name = f.name or Path(source).stem
    ov = f.per_op_overhead_ms
    overhead = (0.0, 0.0) if ov is None else (ov.fwd * 1e-3, ov.bwd * 1e-3)
    return Profile(name, times, tensors, opt, f.duplex_factor, link, f, source, overhead)


def to_dict(graph: Graph, costs: CostModel, link=None, **meta) -> dict:
    """A whole-graph profile document for ``graph`` and ``costs`` (times in ms); ``save`` writes it.

    A cost model with a per-op overhead (``CostModel.with_op_overhead``) is written as its op times
    less the overhead plus ``per_op_overhead_ms``; a ``per_op_overhead_ms`` dict in ``meta`` adds its
    other keys (``hooks_fwd``, ``hooks_bwd``, ``method``) to that entry."""
    costs.check(graph)
    extra = meta.pop("per_op_overhead_ms", None) or {}
    doc: dict = {"format": FORMAT, "name": graph.name, **meta, "static_bytes": graph.static_bytes,
                 "optimizer_ms": costs.optimizer_s * 1e3, "duplex_factor": costs.duplex_factor}
    if link is not None:
        doc["link"] = link if isinstance(link, str) else link.name
    ov_f, ov_b = costs.fwd_overhead_s, costs.bwd_overhead_s
    if ov_f or ov_b:
        doc["per_op_overhead_ms"] = {**{k: v for k, v in extra.items() if k not in ("fwd", "bwd")},
                                     "fwd": ov_f * 1e3, "bwd": ov_b * 1e3}
    doc["tensors"] = [{"name": t.name, "bytes": t.bytes, "kind": t.kind, "recomputable": t.recomputable,
                       "swappable": t.swappable, "d2h_ms": costs.d2h_s[t.id] * 1e3,
                       "h2d_ms": costs.h2d_s[t.id] * 1e3} for t in graph.tensors]
    names = [t.name for t in graph.tensors]
    doc["ops"] = [{"name": op.name, "kind": op.kind, "layer": op.layer,
                   "fwd_ms": (costs.fwd_s[op.id] - ov_f) * 1e3,
                   "bwd_ms": (costs.bwd_s[op.id] - ov_b) * 1e3, "inputs": [names[i] for i in op.inputs],
                   "outputs": [names[i] for i in op.outputs], "saves": [names[i] for i in op.saves],
                   "workspace_bytes": op.workspace_bytes, "fwd_flops": op.fwd_flops, "fwd_bytes": op.fwd_bytes,
                   "bwd_flops": op.bwd_flops, "bwd_bytes": op.bwd_bytes} for op in graph.ops]
    return doc


def save(path, graph: Graph, costs: CostModel, link=None, **meta) -> Path:
    """Write ``to_dict(graph, costs, ...)`` as JSON to ``path``; ``load(path)`` gives them back."""
    path = user_path(path)
    path.write_text(json.dumps(to_dict(graph, costs, link, **meta), indent=1) + "\n")
    return path


# ---------------------------------------------------------------- helpers
class CsvRow(Schema):
    """One row of a CSV profile (``name,fwd_ms,bwd_ms``; the text cells are read as numbers)."""

    model_config = ConfigDict(Schema.model_config, strict=False)
    name: Name
    fwd_ms: Ms
    bwd_ms: Ms


def _from_csv(path: Path) -> Profile:
    try:
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{path.name}: cannot read as CSV: {exc}") from None
    ops = [parse(CsvRow, r, f"{path.name}: row {i + 2}").model_dump() for i, r in enumerate(rows)]
    return from_dict({"name": path.stem, "ops": ops}, source=path.name)
