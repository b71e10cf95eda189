"""Problem: the ONE input of every planner.

A problem is a graph, its cost model, the hardware it came from and an activation-memory budget,
with two values derived from the graph and its costs: the keep-all activation peak (the
simulator's, ``simulate.keep_all_peak_of``) and the smallest feasible budget
(``schedule.memory_floor``). ``Problem`` is plain data: its constructor is given both and checks
types and the budget; the functions that build one compute them (``Problem.build`` from a model
and a hardware, ``Problem.from_graph`` from a graph and its costs).
``Problem.build("gpt2-xl", "a100-80gb", budget=0.5)`` sets the budget to 50% of the keep-all
activation peak; ``budget="24GiB"`` or an int sets bytes; ``budget=None`` means no limit.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from .. import models
from ..core import costs as costs_mod
from ..core import hardware as hw_mod
from ..core.costs import CostModel
from ..core.errors import BudgetError, CapacityWarning, ParameterError, SlackSwapError
from ..core.graph import Graph
from ..core.limits import resolve_budget
from ..core.plan import Decision, problem_key
from ..core.schema import check_type
from ..core.units import format_bytes, format_seconds
from ..models import TransformerSpec
from .pipeline import keep_all_run, make_pipeline, pipeline_of
from .schedule import memory_floor
from .simulate import keep_all_peak_of, memory_bound

#: Bytes per parameter of the parameter gradients that ``budget_param_grads`` adds to a budget's
#: base: the 16-bit gradients of ``core.graph.BYTES_PER_PARAM``'s mixed-precision accounting.
GRAD_BYTES_PER_PARAM = 2


@dataclass(frozen=True, eq=False)
class Problem:
    """Graph + costs + budget, with the keep-all peak and the smallest feasible budget (both given:
    ``from_graph`` computes them). Derived views: ideal step, budget fraction, ..."""

    graph: Graph
    costs: CostModel
    budget_bytes: float = math.inf
    hardware: Any = None
    keep_all_peak: int = field(kw_only=True, repr=False)
    min_feasible_bytes: int = field(kw_only=True, repr=False)
    #: what a fractional budget is a fraction of (``budget_base_of``); None: the keep-all peak
    budget_base: int | None = field(default=None, kw_only=True, repr=False)
    #: the parallel setting the graph was built under (``models.Parallel``; None: one GPU, also
    #: for the default setting, which builds the one-GPU problem)
    parallel: Any = field(default=None, kw_only=True, repr=False)
    #: checkpointed regions the step runs under (op id -> region label; None: no checkpointing):
    #: ``simulate`` judges every plan of this problem as selective activation checkpointing of
    #: these regions runs it, and the planners plan for that (``with_regions``; docs/planners.md,
    #: "Planning for checkpointed regions")
    regions: Any = field(default=None, kw_only=True, repr=False)
    #: what a SWAP inside a region becomes under ``regions``: "save" (kept) or "recompute"
    region_swap: str = field(default="save", kw_only=True, repr=False)

    def __post_init__(self):
        self.costs.check(self.graph)
        if self.regions is not None or self.region_swap != "save":
            from .regions import check_regions  # the checkpointed-regions option only

            if self.regions is None:
                raise ParameterError("region_swap: only with regions (a SWAP inside a checkpointed region); "
                                     f"got {self.region_swap!r} without regions")
            check_regions(self.graph, self.regions, self.region_swap)
        for name in ("keep_all_peak", "min_feasible_bytes", "budget_base"):
            v = getattr(self, name)
            if v is None and name == "budget_base":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ParameterError(f"Problem({name}): must be a whole number of bytes >= 0, got {v!r} "
                                     f"(Problem.from_graph computes it from the graph and its costs)")
        if self.parallel is not None and not isinstance(self.parallel, models.Parallel):
            raise ParameterError(f"Problem(parallel): expected a models.Parallel or None; got "
                                 f"{self.parallel!r} (Problem.from_graph also takes a dict of its keys)")
        b = self.budget_bytes
        if isinstance(b, bool) or not isinstance(b, (int, float)) or math.isnan(b) or b <= 0:
            raise BudgetError(f"budget_bytes: must be a positive number of bytes or inf, got {b!r}")
        if b < self.min_feasible_bytes:
            where = memory_floor(self.graph)[1]
            raise BudgetError(
                f"budget: {format_bytes(b)} is below the smallest feasible budget "
                f"{format_bytes(self.min_feasible_bytes)} ({self.min_feasible_bytes / self.keep_all_peak:.3f} "
                f"of the keep-all peak; the {where} alone holds that much)")

    # ---- construction ----
    @classmethod
    def build(cls, model, hardware="a100-80gb", budget=0.5, cost_mode: str = "analytical",
              profile=None, parallel=None, **spec_overrides) -> Problem:
        """Build from a model (preset name, ``TransformerSpec``, HF config path or ``Graph``) and a
        hardware (preset name or ``Hardware``). ``budget``: a fraction in (0, 1] of the keep-all
        activation peak, bytes (int or ``"24GiB"``), or None for no limit. ``parallel``: how the
        step is spread over GPUs (a ``Parallel``, a dict of its keys, a ``data/parallel`` preset
        name or a ``.toml`` path; docs/parallel.md): the problem is then one micro-batch on one
        GPU of the planned pipeline stage, with its sharded static memory, copying over its share
        of the host link when the hardware has a node (``Hardware.copy_link(parallel.gpus)``;
        docs/hardware.md, "The node"). Warns
        (``CapacityWarning``, ``memory_warnings``) when static memory plus the budget exceed the
        GPU's memory."""

        check_type(model, (str, Path, TransformerSpec, Graph), "Problem.build(model)",
                   "a model preset name, a TransformerSpec, a config.json path or a Graph", ParameterError)
        check_type(hardware, (str, Path, hw_mod.Hardware), "Problem.build(hardware)",
                   "a hardware preset name, a .toml path or a Hardware", ParameterError)
        check_type(cost_mode, str, "Problem.build(cost_mode)", "'analytical' or 'measured'", ParameterError)
        hw = hw_mod.load(hardware) if isinstance(hardware, (str, Path)) else hardware
        parallel = models.as_parallel(parallel)
        if isinstance(model, Graph) and parallel is not None:
            raise ParameterError("Problem.build(parallel): a Graph is already one GPU's graph; give the "
                                 "model as a preset name, a TransformerSpec or a config.json to plan it in parallel")
        for key in ("tp", "pp"):
            if parallel is not None and getattr(parallel, key) > 1 and not getattr(hw.gpu, "p2p_bytes_per_s", None):
                raise ParameterError(f"parallel: {key} = {getattr(parallel, key)} needs a GPU-to-GPU bandwidth; "
                                     f"hardware {hw.name} gives none (gpu.p2p_bandwidth, docs/hardware.md)")
        graph = model if isinstance(model, Graph) else models.build(model, parallel=parallel, **spec_overrides)
        cm = costs_mod.build(graph, hw, mode=cost_mode, profile=profile,
                             gpus=1 if parallel is None else parallel.gpus)
        # measured here and passed in: Problem holds data (a pipeline stage: its 1F1B timeline's)
        pipe = make_pipeline(graph, parallel, hw)
        peak = keep_all_peak_of(graph, cm, pipe)
        base = budget_base_of(graph, cm, peak, pipe)
        p = cls(graph, cm, resolve_budget(budget, base), hw, keep_all_peak=peak,
                min_feasible_bytes=memory_floor(graph)[0], budget_base=None if base == peak else base,
                parallel=None if parallel is None or parallel.is_default else parallel)
        for text in p.memory_warnings:
            warnings.warn(text, CapacityWarning, stacklevel=2)
        return p

    @classmethod
    def from_graph(cls, graph: Graph, costs: CostModel, budget_bytes: float = math.inf,
                   hardware=None, *, min_feasible_bytes: int | None = None,
                   parallel=None) -> Problem:
        """A problem from a graph and its cost model, ``budget_bytes`` in bytes (``with_budget``
        takes fractions and unit strings). Computes the keep-all peak (one simulation) and the
        smallest feasible budget (``min_feasible_bytes`` overrides it: 0 lets any budget
        through, for experiments below the floor). ``parallel`` (a ``Parallel`` or a dict of its
        keys): ``graph`` is one micro-batch of a pipeline stage (``pp``, ``stage``,
        ``microbatches``), simulated under 1F1B (docs/pipeline.md, "Pipeline stages (1F1B)");
        with pp > 1, ``hardware`` must give ``gpu.p2p_bandwidth`` (the send time of the stage's
        step inputs, the received activation, at that rate)."""
        costs.check(graph)
        parallel = models.as_parallel(parallel)
        parallel = None if parallel is None or parallel.is_default else parallel
        floor = memory_floor(graph)[0] if min_feasible_bytes is None else min_feasible_bytes
        pipe = make_pipeline(graph, parallel, hardware)
        peak = keep_all_peak_of(graph, costs, pipe)
        base = budget_base_of(graph, costs, peak, pipe)
        return cls(graph, costs, budget_bytes, hardware, keep_all_peak=peak,
                   min_feasible_bytes=floor, budget_base=None if base == peak else base,
                   parallel=parallel)

    def with_budget(self, budget) -> Problem:
        """The same problem under another budget (fraction, bytes, unit string or None). Warns
        (``CapacityWarning``) when static memory plus a finite budget exceed the GPU's memory
        (not for None: planners probe the unlimited problem; ``Problem.build`` warned already)."""
        p = replace(self, budget_bytes=resolve_budget(budget, self.budget_base_bytes))
        for key in ("_pipeline", "_pipeline_ideal_s"):   # the budget changes neither
            if key in self.__dict__:
                p.__dict__[key] = self.__dict__[key]
        if math.isfinite(p.budget_bytes):
            for text in p.memory_warnings:
                warnings.warn(text, CapacityWarning, stacklevel=2)
        return p

    def _parallel_text(self) -> str:
        pipe = pipeline_of(self)
        if pipe is None:
            return f"one micro-batch on one GPU of stage {self.parallel.stage}"
        return (f"stage {pipe.stage} of {pipe.stages} under 1F1B: {pipe.microbatches} micro-batches, "
                f"up to {pipe.in_flight} in flight")

    def with_regions(self, regions, swap: str = "save") -> Problem:
        """The same problem run under selective activation checkpointing of ``regions``:
        ``"layers"`` (one region per layer, ``timeline.regions.layer_regions``), a dict of op id ->
        region label, or None (no checkpointing: the default rules). ``swap``: what a SWAP inside a
        region becomes, ``"save"`` or ``"recompute"``. Every ``simulate`` of the new problem, and
        so every planner, judges plans as that checkpointing runs them."""
        from .regions import SWAP_AS, layer_regions  # the checkpointed-regions option only

        if regions is None:
            if swap != "save" and swap not in SWAP_AS:
                raise ParameterError(f"swap: must be one of {', '.join(SWAP_AS)}; got {swap!r}")
            return replace(self, regions=None, region_swap="save")
        if isinstance(regions, str):
            if regions != "layers":
                raise ParameterError(f"regions: must be 'layers', a dict of op id -> region label or None; "
                                     f"got {regions!r}")
            regions = layer_regions(self.graph)
            if not regions:
                raise ParameterError(f"regions: 'layers': graph {self.graph.name!r} has no op with a layer "
                                     "(Op.layer); give a dict of op id -> region label")
        elif isinstance(regions, dict):
            regions = dict(regions)
        else:
            raise ParameterError(f"regions: must be 'layers', a dict of op id -> region label or None; "
                                 f"got {type(regions).__name__}")
        if not isinstance(swap, str) or swap not in SWAP_AS:
            raise ParameterError(f"swap: must be one of {', '.join(SWAP_AS)}; got {swap!r}")
        return replace(self, regions=regions, region_swap=swap)

    def without_regions(self) -> Problem:
        """The same problem under the default rules (no checkpointed regions)."""
        return self if self.regions is None else replace(self, regions=None, region_swap="save")

    @property
    def regions_text(self) -> str:
        """``"N checkpointed regions, swap=save"``, or ``""`` without regions."""
        if self.regions is None:
            return ""
        n = len(set(self.regions.values()))
        return f"{n} checkpointed region{'s' if n != 1 else ''}, swap={self.region_swap}"

    # ---- derived views ----
    @cached_property
    def key(self) -> str:
        return problem_key(self.graph)

    @cached_property
    def planning_ids(self) -> tuple[int, ...]:
        return tuple(t.id for t in self.graph.planning_tensors())

    @property
    def ideal_step_s(self) -> float:
        """Keep-all with no memory limit: every forward, every backward and the optimizer; on a
        pipeline stage (``pipeline``) the end of its keep-all 1F1B timeline, bubble included."""
        pipe = pipeline_of(self)
        if pipe is None:
            return self.costs.ideal_step_s
        d = self.__dict__
        v = d.get("_pipeline_ideal_s")
        if v is None:
            v = d["_pipeline_ideal_s"] = float(keep_all_run(self.graph, self.costs, pipe).E[-1])
        return v

    @property
    def pipeline(self):
        """The 1F1B pipeline the step runs in (``timeline.pipeline.Pipeline``), or None (one
        micro-batch on one GPU)."""
        return pipeline_of(self)

    @property
    def static_bytes(self) -> int:
        return self.graph.static_bytes

    @property
    def memory_warnings(self) -> tuple[str, ...]:
        """Why this step would not fit the GPU as modelled: empty, or one sentence when static
        memory plus the activation budget (the keep-all peak when unlimited) exceed the memory
        of ``hardware.gpu`` (docs/models.md, "Static memory")."""
        activations = self.budget_bytes if math.isfinite(self.budget_bytes) else self.keep_all_peak
        return capacity_warnings(self.static_bytes, activations, self.hardware,
                                 "activation budget" if math.isfinite(self.budget_bytes) else "keep-all activations")

    @property
    def budget_base_bytes(self) -> int:
        """What a fractional budget is a fraction of: the keep-all peak, unless the model's spec
        gives the budget another meaning (``budget_base_of``; docs/models.md, "Workload")."""
        return self.keep_all_peak if self.budget_base is None else self.budget_base

    @property
    def budget_fraction(self) -> float:
        return self.budget_bytes / self.keep_all_peak if self.keep_all_peak else math.inf

    def first_backward_use(self, tid: int) -> int:
        """Op id of the first backward op (in backward order) that needs the tensor."""
        return self.graph.saved_by[tid][-1]

    def last_backward_use(self, tid: int) -> int:
        """Op id of the last backward op (in backward order) that needs the tensor."""
        return self.graph.saved_by[tid][0]

    def summary(self) -> dict:
        return {"model": self.graph.name, "hardware": getattr(self.hardware, "name", None),
                "cost_mode": self.costs.mode, "ops": len(self.graph.ops),
                "planning_tensors": len(self.planning_ids), "saved_bytes": self.graph.saved_bytes(),
                "keep_all_peak_bytes": self.keep_all_peak, "min_feasible_bytes": self.min_feasible_bytes,
                "budget_bytes": self.budget_bytes, "budget_fraction": self.budget_fraction,
                "ideal_step_s": self.ideal_step_s, "static_bytes": self.static_bytes,
                **({"parallel": self.parallel.describe()} if self.parallel is not None else {}),
                **({"regions": self.regions_text} if self.regions is not None else {})}

    def __str__(self) -> str:
        s = self.summary()
        return (f"Problem {s['model']} on {s['hardware']} ({s['cost_mode']} costs): {s['ops']} ops, "
                f"{s['planning_tensors']} planning tensors\n"
                f"  keep-all activation peak {format_bytes(s['keep_all_peak_bytes'])}, smallest feasible "
                f"{format_bytes(s['min_feasible_bytes'])}, budget {format_bytes(s['budget_bytes'])} "
                f"({s['budget_fraction']:.0%})\n"
                f"  ideal step {format_seconds(s['ideal_step_s'])}, static memory {format_bytes(s['static_bytes'])}"
                + (f"\n  parallel: {s['parallel']} ({self._parallel_text()})" if "parallel" in s else "")
                + (f"\n  regions: {s['regions']} (plans judged as selective checkpointing runs them)"
                   if "regions" in s else "")
                + "".join(f"\n  WARNING: {w}" for w in self.memory_warnings))


def budget_base_of(graph: Graph, costs: CostModel, keep_all_peak: int | None = None,
                   pipeline=None) -> int:
    """What a fractional budget of ``graph``'s problem is a fraction of (docs/models.md, "Workload"),
    from its spec's ``budget_scope``, ``budget_logits`` and ``budget_param_grads`` (a graph without
    a spec: the keep-all peak):

    * ``budget_scope = "step"``: the keep-all activation peak of the whole step (the simulator's,
      gradients and workspaces included); ``"forward"``: the largest accounted memory of a forward
      step under keep-all (the backward's gradients and workspaces left out);
    * ``budget_logits = False``: that peak with every tensor of kind ``logits``, its gradient and
      the ``loss`` op's workspace counted as 0 bytes;
    * ``budget_param_grads = True``: plus ``GRAD_BYTES_PER_PARAM`` bytes per parameter on the GPU.

    The defaults (``"step"``, True, False) give ``keep_all_peak`` itself, with no extra work.
    ``pipeline`` (a pipeline stage, ``timeline.pipeline``): the step-scope peaks are those of its
    1F1B timeline; the forward scope stays one micro-batch's forward.
    """
    spec = graph.spec
    scope = getattr(spec, "budget_scope", "step")
    logits = getattr(spec, "budget_logits", True)
    grads = getattr(spec, "budget_param_grads", False)
    if keep_all_peak is None:
        keep_all_peak = keep_all_peak_of(graph, costs, pipeline)
    if scope == "step" and logits and not grads:
        return int(keep_all_peak)
    g = graph if logits else _without_logits(graph)
    if scope == "step":
        base = keep_all_peak if g is graph else keep_all_peak_of(g, costs, pipeline)
    else:
        keep = {t.id: Decision.KEEP for t in g.planning_tensors()}
        steps = memory_bound(_GraphOnly(g), keep)
        base = int(steps[:len(g.ops)].max()) if len(g.ops) else 0   # the first n steps: the forward
    if grads:
        base += GRAD_BYTES_PER_PARAM * spec.params_per_gpu()
    return int(base)


@dataclass(frozen=True)
class _GraphOnly:
    """What ``memory_bound`` reads of a problem: its graph."""

    graph: Graph


def _without_logits(graph: Graph) -> Graph:
    """``graph`` with its ``logits`` tensors and its ``loss`` ops' workspace at 0 bytes."""
    tensors = tuple(replace(t, bytes=0) if t.kind == "logits" else t for t in graph.tensors)
    ops = tuple(replace(o, workspace_bytes=0) if o.kind == "loss" else o for o in graph.ops)
    return replace(graph, ops=ops, tensors=tensors)


def with_transfer_margin(problem, margin: float):
    """The same problem with every copy (D2H and H2D) ``1 + margin`` times slower (a pessimistic
    cost model to plan against); the original is not changed."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin <= 10:
        raise SlackSwapError(f"margin: must be a number in [0, 10] (0.2 = copies 20% slower), got {margin!r}")
    if margin == 0:
        return problem
    c = problem.costs
    k = 1.0 + float(margin)
    return replace(problem, costs=replace(c, d2h_s=tuple(x * k for x in c.d2h_s),
                                          h2d_s=tuple(x * k for x in c.h2d_s)))


def capacity_warnings(static_bytes: float, activation_bytes: float, hardware, what: str = "activations") -> tuple[str, ...]:
    """One sentence when ``static_bytes + activation_bytes`` exceed ``hardware.gpu.memory_bytes``
    (empty when they fit or the hardware is unknown). The text does not depend on the activations
    when static memory alone is too much, so a sweep over budgets repeats one warning."""
    gpu = getattr(hardware, "gpu", None)
    cap = getattr(gpu, "memory_bytes", None)
    if not cap or static_bytes + activation_bytes <= cap:
        return ()
    where = f"{format_bytes(cap)} of {getattr(hardware, 'name', None) or gpu.name}"
    if static_bytes > cap:
        return (f"static memory (weights, gradients, optimizer state) {format_bytes(static_bytes)} alone exceeds "
                f"the {where}: this step does not fit one GPU unless that state is sharded "
                f"(a parallel setting with ZeRO, e.g. dp=8,zero=3: docs/parallel.md) or offloaded",)
    return (f"static memory {format_bytes(static_bytes)} + {what} {format_bytes(activation_bytes)} = "
            f"{format_bytes(static_bytes + activation_bytes)} exceeds the {where}",)

