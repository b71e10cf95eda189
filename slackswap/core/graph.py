"""The forward DAG of one training step: ``Tensor``, ``Op`` and ``Graph``.

Ids are small ints equal to the position in ``Graph.tensors`` / ``Graph.ops``; ops are listed in
forward execution order, which must be a topological order. Sizes are bytes, work is FLOPs.

>>> t = [Tensor(0, "x", 8, None, kind="input"), Tensor(1, "y", 8, 0)]
>>> g = Graph("tiny", ops=(Op(0, "f", None, "elementwise", inputs=(0,), outputs=(1,), saves=(1,)),),
...           tensors=tuple(t))
>>> [x.name for x in g.planning_tensors()]
['y']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .errors import GraphError

#: Static memory (``Graph.static_bytes``): bytes per parameter of mixed-precision Adam training: 16-bit weights (2) + 16-bit gradients (2)
#: + fp32 master weights, momentum and variance (12); Rajbhandari et al. 2020 (ZeRO), Sec. 3.1.
#: Pure fp32 training also totals 16 (4 weights + 4 gradients + 8 Adam moments).
BYTES_PER_PARAM = 16

#: The most bytes a graph may hold, its tensors and static memory together: 2**53 (8 PiB), the
#: largest count below which every integer is exact as a float, so that sums of tensor bytes,
#: budgets (floats) and the simulator's memory curve (int64) stay exact. A graph above it is
#: refused when it is made (``GraphError``); no machine has that much memory.
MAX_BYTES = 2**53

#: The most ops a graph built from a model spec or a profile may have unless its ``max_ops``
#: says otherwise (``models.build``, ``Profile.graph``; CLI ``--max-ops``).
MAX_OPS = 100_000



def check_limit(value, name: str, exc=GraphError) -> None:
    """Refuse a count limit (``max_ops``, ``max_runs``) that is not a positive integer or None."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise exc(f"{name}: expected a positive integer or None (no limit); got {value!r}")


#: Tensor kinds that carry a gradient in the backward pass (masks and statistics do not).
GRAD_KINDS = frozenset({"activation", "logits"})


@dataclass(frozen=True)
class Tensor:
    """One tensor of the forward pass. ``producer`` is an op id, or None for a step input."""

    id: int
    name: str
    bytes: int
    producer: int | None
    kind: str = "activation"
    recomputable: bool = True
    swappable: bool = True

    @property
    def requires_grad(self) -> bool:
        return self.producer is not None and self.kind in GRAD_KINDS


@dataclass(frozen=True)
class Op:
    """One forward operator. ``saves`` are the tensor ids its backward needs resident."""

    id: int
    name: str
    layer: int | None
    kind: str
    fwd_flops: float = 0.0
    fwd_bytes: float = 0.0
    bwd_flops: float = 0.0
    bwd_bytes: float = 0.0
    inputs: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()
    saves: tuple[int, ...] = ()
    workspace_bytes: int = 0


@dataclass(frozen=True)
class Graph:
    """A validated forward graph. ``static_bytes`` = weights + gradients + optimizer state."""

    name: str
    ops: tuple[Op, ...]
    tensors: tuple[Tensor, ...]
    static_bytes: int = 0
    spec: Any = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "tensors", tuple(self.tensors))
        _validate(self)

    # ---- derived views (computed once; the dataclass is frozen) ----
    @cached_property
    def consumers(self) -> tuple[tuple[int, ...], ...]:
        """Per tensor: ids of the ops that read it in the forward pass, ascending."""
        out: list[list[int]] = [[] for _ in self.tensors]
        for op in self.ops:
            for t in dict.fromkeys(op.inputs):
                out[t].append(op.id)
        return tuple(tuple(c) for c in out)

    @cached_property
    def saved_by(self) -> tuple[tuple[int, ...], ...]:
        """Per tensor: ids of the ops whose backward needs it, ascending."""
        out: list[list[int]] = [[] for _ in self.tensors]
        for op in self.ops:
            for t in dict.fromkeys(op.saves):
                out[t].append(op.id)
        return tuple(tuple(s) for s in out)

    @cached_property
    def produced_inputs(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """Per op: ``(tensor id, producer op id)`` of each input produced in the step, in input order."""
        return tuple(tuple((t, self.tensors[t].producer) for t in op.inputs if self.tensors[t].producer is not None)
                     for op in self.ops)

    def planning_tensors(self) -> list[Tensor]:
        """Tensors a plan decides: produced in the step and saved for some backward op."""
        return [t for t in self.tensors if t.producer is not None and self.saved_by[t.id]]

    def last_forward_use(self, tid: int) -> int:
        """The op id after which a tensor is no longer needed in the forward pass."""
        t = self.tensors[tid]
        c = self.consumers[tid]
        return c[-1] if c else (t.producer if t.producer is not None else -1)

    @property
    def layers(self) -> list[int]:
        return sorted({op.layer for op in self.ops if op.layer is not None})

    def to_networkx(self):
        """A ``networkx.DiGraph`` with op nodes (``op:<id>``) and tensor nodes (``t:<id>``)."""
        import networkx as nx  # lazy: start-up cost (networkx)

        g = nx.DiGraph(name=self.name)
        for t in self.tensors:
            g.add_node(f"t:{t.id}", type="tensor", **{k: getattr(t, k) for k in ("name", "bytes", "kind")})
        for op in self.ops:
            g.add_node(f"op:{op.id}", type="op", name=op.name, kind=op.kind, layer=op.layer)
            for t in op.inputs:
                g.add_edge(f"t:{t}", f"op:{op.id}")
            for t in op.outputs:
                g.add_edge(f"op:{op.id}", f"t:{t}")
        return g

    def layer_summary(self):
        """Per layer (``"outside"`` = embeddings and head): op count, FLOPs, saved bytes (DataFrame)."""
        import pandas as pd  # lazy: start-up cost (pandas)

        saved = {t.id for t in self.planning_tensors()}
        rows: dict[Any, dict[str, float]] = {}
        for op in self.ops:
            r = rows.setdefault(op.layer, {"ops": 0, "fwd_flops": 0.0, "bwd_flops": 0.0, "saved_bytes": 0})
            r["ops"] += 1
            r["fwd_flops"] += op.fwd_flops
            r["bwd_flops"] += op.bwd_flops
            r["saved_bytes"] += sum(self.tensors[t].bytes for t in op.outputs if t in saved)
        df = pd.DataFrame([{"layer": "outside" if k is None else k, **v} for k, v in rows.items()])
        return df.set_index("layer")

    def saved_bytes(self) -> int:
        """Bytes of all planning tensors (what keep-all holds at the end of the forward pass)."""
        return sum(t.bytes for t in self.planning_tensors())


def _validate(g: Graph) -> None:
    if not isinstance(g.name, str) or not g.name:
        raise GraphError("Graph.name: must be a non-empty string")
    if g.static_bytes < 0:
        raise GraphError(f"Graph.static_bytes: must be >= 0, got {g.static_bytes}")
    _check_bytes(g, "static_bytes", g.static_bytes)
    nt, no = len(g.tensors), len(g.ops)
    for i, t in enumerate(g.tensors):
        if t.id != i:
            raise GraphError(f"tensors[{i}].id: must equal its position {i}, got {t.id}")
        if not isinstance(t.bytes, int) or t.bytes < 0:
            raise GraphError(f"tensors[{i}] ({t.name}).bytes: must be an int >= 0, got {t.bytes!r}")
        _check_bytes(g, f"tensors[{i}] ({t.name}).bytes", t.bytes)
        if t.producer is not None and not 0 <= t.producer < no:
            raise GraphError(f"tensors[{i}] ({t.name}).producer: op id out of range 0..{no - 1}")
    produced_by: dict[int, int] = {}
    for i, op in enumerate(g.ops):
        where = f"ops[{i}] ({op.name})"
        if op.id != i:
            raise GraphError(f"ops[{i}].id: must equal its position {i}, got {op.id}")
        for fname in ("fwd_flops", "fwd_bytes", "bwd_flops", "bwd_bytes", "workspace_bytes"):
            if getattr(op, fname) < 0:
                raise GraphError(f"{where}.{fname}: must be >= 0, got {getattr(op, fname)}")
        _check_bytes(g, f"{where}.workspace_bytes", op.workspace_bytes)
        for fname in ("inputs", "outputs", "saves"):
            for t in getattr(op, fname):
                if not 0 <= t < nt:
                    raise GraphError(f"{where}.{fname}: tensor id {t} out of range 0..{nt - 1}")
        for t in op.outputs:
            if g.tensors[t].producer != i:
                raise GraphError(f"{where}.outputs: tensor {t} names producer {g.tensors[t].producer}")
            if t in produced_by:
                raise GraphError(f"{where}.outputs: tensor {t} already produced by op {produced_by[t]}")
            produced_by[t] = i
        for t in op.inputs:
            p = g.tensors[t].producer
            if p is not None and p >= i:
                raise GraphError(f"{where}.inputs: tensor {t} is produced by op {p}, not before op {i} "
                                 "(ops must be in a topological order; cycles are not allowed)")
        for t in op.saves:
            if t not in op.inputs and t not in op.outputs:
                raise GraphError(f"{where}.saves: tensor {t} is neither an input nor an output of the op")
    for t in g.tensors:
        if t.producer is not None and t.id not in produced_by:
            raise GraphError(f"tensors[{t.id}] ({t.name}).producer: op {t.producer} does not list it")
    _check_bytes(g, "tensors", g.static_bytes + sum(t.bytes for t in g.tensors),
                 "the bytes of all tensors and static_bytes together")


def _check_bytes(g: Graph, field: str, n, what: str = "") -> None:
    """Refuse a byte count above ``MAX_BYTES`` (where counts stop being exact) naming the graph."""
    if n > MAX_BYTES:
        raise GraphError(f"{g.name}: {field}: {what + ' ' if what else ''}must be at most MAX_BYTES = 2**53 "
                         f"({MAX_BYTES:,}, where byte counts stop being exact); got {n:,}")
