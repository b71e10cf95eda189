"""Measured-mode profiles: per-op times (and optionally a whole graph) from a file (docs/profile.md).

A profile is JSON (the full schema) or CSV (``name,fwd_ms,bwd_ms`` rows: op times only). Times are
milliseconds in the file and seconds inside. Two uses:

* ``costs.measured(graph, path)`` / ``read(path).costs(graph)``: times for an existing graph,
  matched by op name;
* ``load(path) -> (Graph, CostModel)``: the profile describes the graph too (ops with inputs,
  outputs, saves by tensor name; tensors with bytes), so a user can plan for their own model.

>>> from slackswap._paths import data_dir
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

import numpy as np

from ._paths import user_path
from .costs import CostModel, optimizer_seconds, transfer_seconds
from .errors import ConfigError, SlackSwapError
from .graph import Graph, Op, Tensor
from .units import parse_bytes

_TOP_KEYS = {"format", "name", "description", "device", "dtype", "static_bytes", "optimizer_ms",
             "duplex_factor", "link", "ops", "tensors"}
_OP_KEYS = {"name", "fwd_ms", "bwd_ms", "kind", "layer", "inputs", "outputs", "saves",
            "workspace_bytes", "fwd_flops", "fwd_bytes", "bwd_flops", "bwd_bytes"}
_TENSOR_KEYS = {"name", "bytes", "kind", "recomputable", "swappable", "d2h_ms", "h2d_ms"}
FORMAT = "slackswap-profile/1"


@dataclass(frozen=True)
class Profile:
    """A parsed profile file. Times in seconds; ``doc`` is the validated JSON document."""

    name: str
    op_times: dict = field(hash=False)          # op name -> (fwd_s, bwd_s)
    tensors: dict = field(hash=False)           # tensor name -> {"bytes", "d2h_s", "h2d_s"} (None if absent)
    optimizer_s: float | None = None
    duplex_factor: float | None = None
    link: object = None                          # hardware.Link or None
    doc: dict = field(default_factory=dict, hash=False, compare=False)
    source: str = ""

    @property
    def has_graph(self) -> bool:
        """True when the profile describes a whole graph (``load`` can build it)."""
        ops = self.doc.get("ops", [])
        return "tensors" in self.doc and all("kind" in o for o in ops)

    def costs(self, graph: Graph, hardware=None) -> CostModel:
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
        link = hardware.link if hardware is not None else self.link
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
        return CostModel("measured", fwd, bwd, tuple(d2h.tolist()), tuple(h2d.tolist()), opt, duplex)

    def graph(self) -> Graph:
        """The graph the profile describes (needs ``has_graph``)."""
        where = self.source or self.name
        if not self.has_graph:
            raise ConfigError(f"{where}: describes op times only (no 'tensors', or ops without 'kind'); "
                              "use costs.measured(graph, profile) with a graph")
        tdocs = self.doc["tensors"]
        tid = {t["name"]: i for i, t in enumerate(tdocs)}
        producer: dict[int, int] = {}
        ops = []
        for i, o in enumerate(self.doc["ops"]):
            ids = {}
            for key in ("inputs", "outputs", "saves"):
                vals = o.get(key, [])
                if not isinstance(vals, list):
                    raise ConfigError(f"{where}: ops[{i}].{key}: expected a list of tensor names")
                for v in vals:
                    if v not in tid:
                        raise ConfigError(f"{where}: ops[{i}].{key}: unknown tensor {v!r}")
                ids[key] = tuple(tid[v] for v in vals)
            for t in ids["outputs"]:
                producer.setdefault(t, i)
            layer = o.get("layer")
            if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int)):
                raise ConfigError(f"{where}: ops[{i}].layer: expected an int or null, got {layer!r}")
            nums = {k: _nonneg(o.get(k, 0), f"{where}: ops[{i}].{k}")
                    for k in ("fwd_flops", "fwd_bytes", "bwd_flops", "bwd_bytes")}
            ws = _bytes(o.get("workspace_bytes", 0), f"{where}: ops[{i}].workspace_bytes")
            ops.append(Op(i, o["name"], layer, str(o["kind"]), inputs=ids["inputs"], outputs=ids["outputs"],
                          saves=ids["saves"], workspace_bytes=ws, **nums))
        tensors = []
        for i, t in enumerate(tdocs):
            if "bytes" not in t:
                raise ConfigError(f"{where}: tensors[{i}] ({t['name']}): missing key 'bytes'")
            p = producer.get(i)
            kind = str(t.get("kind", "activation" if p is not None else "input"))
            flags = {k: t.get(k, True) for k in ("recomputable", "swappable")}
            for k, v in flags.items():
                if not isinstance(v, bool):
                    raise ConfigError(f"{where}: tensors[{i}].{k}: expected true or false, got {v!r}")
            tensors.append(Tensor(i, t["name"], self.tensors[t["name"]]["bytes"], p, kind, **flags))
        static = _bytes(self.doc.get("static_bytes", 0), f"{where}: static_bytes")
        return Graph(self.name, tuple(ops), tuple(tensors), static)


def read(path) -> Profile:
    """Parse and validate a JSON or CSV profile; ``ConfigError`` names the bad field."""
    path = user_path(path)
    if not path.is_file():
        raise ConfigError(f"profile: no such file {str(path)!r}")
    if path.suffix.lower() == ".csv":
        return _from_csv(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path.name}: not valid JSON: {exc}") from None
    return from_dict(doc, source=path.name)


def load(path, hardware=None) -> tuple[Graph, CostModel]:
    """Graph and measured costs from a whole-graph profile (``hardware`` as in ``costs.measured``)."""
    prof = read(path)
    g = prof.graph()
    return g, prof.costs(g, hardware)


def from_dict(doc: dict, source: str = "profile") -> Profile:
    """A ``Profile`` from an already-parsed JSON document."""
    from . import hardware as _hw

    w = source
    if not isinstance(doc, dict):
        raise ConfigError(f"{w}: expected a JSON object at the top level")
    _keys(doc, _TOP_KEYS, {"ops"}, w)
    if "format" in doc and doc["format"] != FORMAT:
        raise ConfigError(f"{w}: format: expected {FORMAT!r}, got {doc['format']!r}")
    ops = doc["ops"]
    if not isinstance(ops, list) or not ops:
        raise ConfigError(f"{w}: ops: expected a non-empty list")
    times: dict[str, tuple[float, float]] = {}
    for i, o in enumerate(ops):
        if not isinstance(o, dict):
            raise ConfigError(f"{w}: ops[{i}]: expected an object")
        _keys(o, _OP_KEYS, {"name", "fwd_ms", "bwd_ms"}, f"{w}: ops[{i}]")
        name = _name(o["name"], f"{w}: ops[{i}].name")
        if name in times:
            raise ConfigError(f"{w}: ops[{i}].name: duplicate op name {name!r}")
        times[name] = (_nonneg(o["fwd_ms"], f"{w}: ops[{i}].fwd_ms") * 1e-3,
                       _nonneg(o["bwd_ms"], f"{w}: ops[{i}].bwd_ms") * 1e-3)
    tensors: dict[str, dict] = {}
    tl = doc.get("tensors", [])
    if not isinstance(tl, list):
        raise ConfigError(f"{w}: tensors: expected a list")
    for i, t in enumerate(tl):
        if not isinstance(t, dict):
            raise ConfigError(f"{w}: tensors[{i}]: expected an object")
        _keys(t, _TENSOR_KEYS, {"name"}, f"{w}: tensors[{i}]")
        name = _name(t["name"], f"{w}: tensors[{i}].name")
        if name in tensors:
            raise ConfigError(f"{w}: tensors[{i}].name: duplicate tensor name {name!r}")
        tensors[name] = {
            "bytes": _bytes(t["bytes"], f"{w}: tensors[{i}].bytes") if "bytes" in t else None,
            "d2h_s": _nonneg(t["d2h_ms"], f"{w}: tensors[{i}].d2h_ms") * 1e-3 if "d2h_ms" in t else None,
            "h2d_s": _nonneg(t["h2d_ms"], f"{w}: tensors[{i}].h2d_ms") * 1e-3 if "h2d_ms" in t else None,
        }
    opt = _nonneg(doc["optimizer_ms"], f"{w}: optimizer_ms") * 1e-3 if "optimizer_ms" in doc else None
    duplex = doc.get("duplex_factor")
    if duplex is not None and (isinstance(duplex, bool) or not isinstance(duplex, (int, float))
                               or not 0 < duplex <= 1):
        raise ConfigError(f"{w}: duplex_factor: must be a number in (0, 1], got {duplex!r}")
    link = doc.get("link")
    if isinstance(link, str):
        link = _hw.load_link(link)
    elif isinstance(link, dict):
        link = _hw.link_from_dict(link, where=f"{w}: link")
    elif link is not None:
        raise ConfigError(f"{w}: link: expected a link preset name or an object, got {link!r}")
    if "static_bytes" in doc:
        _bytes(doc["static_bytes"], f"{w}: static_bytes")
    name = _name(doc.get("name", Path(source).stem), f"{w}: name")
    return Profile(name, times, tensors, opt, None if duplex is None else float(duplex), link, doc, source)


def to_dict(graph: Graph, costs: CostModel, link=None, **meta) -> dict:
    """A whole-graph profile document for ``graph`` and ``costs`` (times in ms); ``save`` writes it."""
    costs.check(graph)
    doc: dict = {"format": FORMAT, "name": graph.name, **meta, "static_bytes": graph.static_bytes,
                 "optimizer_ms": costs.optimizer_s * 1e3, "duplex_factor": costs.duplex_factor}
    if link is not None:
        doc["link"] = link if isinstance(link, str) else link.name
    doc["tensors"] = [{"name": t.name, "bytes": t.bytes, "kind": t.kind, "recomputable": t.recomputable,
                       "swappable": t.swappable, "d2h_ms": costs.d2h_s[t.id] * 1e3,
                       "h2d_ms": costs.h2d_s[t.id] * 1e3} for t in graph.tensors]
    names = [t.name for t in graph.tensors]
    doc["ops"] = [{"name": op.name, "kind": op.kind, "layer": op.layer, "fwd_ms": costs.fwd_s[op.id] * 1e3,
                   "bwd_ms": costs.bwd_s[op.id] * 1e3, "inputs": [names[i] for i in op.inputs],
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
def _from_csv(path: Path) -> Profile:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    doc = {"name": path.stem, "ops": []}
    for i, r in enumerate(rows):
        unknown = sorted(set(r) - {"name", "fwd_ms", "bwd_ms"})
        if unknown:
            raise ConfigError(f"{path.name}: unknown column {unknown[0]!r}; allowed: name, fwd_ms, bwd_ms")
        try:
            doc["ops"].append({"name": r["name"], "fwd_ms": float(r["fwd_ms"]), "bwd_ms": float(r["bwd_ms"])})
        except (TypeError, ValueError, KeyError):
            raise ConfigError(f"{path.name}: row {i + 2}: needs name, fwd_ms and bwd_ms (numbers)") from None
    return from_dict(doc, source=path.name)


def _keys(d: dict, allowed: set, required: set, where: str) -> None:
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    missing = sorted(required - set(d))
    if missing:
        raise ConfigError(f"{where}: missing key {missing[0]!r}")


def _name(v, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{where}: expected a non-empty string, got {v!r}")
    return v


def _nonneg(v, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ConfigError(f"{where}: must be a finite number >= 0, got {v!r}")
    return float(v)


def _bytes(v, where: str) -> int:
    try:
        return parse_bytes(v, where)
    except SlackSwapError as exc:
        raise ConfigError(str(exc)) from None
