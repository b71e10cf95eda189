"""Explore plans interactively: pick a model, a hardware, a budget and a planner; the step is
re-planned, simulated (``detail=True``) and its timeline and activation-memory curve are redrawn
in place, in one figure that is kept for the life of the explorer.

``Explorer`` holds the state and works without a notebook or ipywidgets::

    from slackswap.report.explore import Explorer

    ex = Explorer("gpt2-xl", "a100-80gb", budget=0.5, planner="slack")
    ex.update(budget=0.3)              # re-plans; the gpt2-xl problem is not built again
    ex.update(planner="dp-checkpoint")
    print(ex.result.throughput_ratio)  # the plan and result of ``planners.get(...).plan`` + ``simulate``
    ex.figure.savefig("explore.png")   # the same Figure object after every update

In a notebook (``pip install 'slackswap[notebooks]'`` brings ipywidgets), ``controls()`` gives
one widget per argument of ``update``, set to the current state, and ``show`` is the callback
that updates and displays the figure::

    import ipywidgets as widgets

    controls = ex.controls()
    widgets.VBox([widgets.HBox(list(controls.values())), widgets.interactive_output(ex.show, controls)])

What a change costs: one ``Problem`` is built per (model, hardware) pair and kept, so a budget
or planner change only re-plans and simulates (``builds`` counts the problems built); plans are
kept per setting too for deterministic planners (``plans`` counts the planner calls), so going
back to a setting seen before only redraws. The redraw changes the data of artists made once (one
collection of bars per event kind, one memory line, one budget line) in a layout computed once:
no figure, axes or legend is made again. ``png()`` renders it once for the notebook.
benchmarks/bench_explore.py measures each change (benchmarks/README.md).
"""

from __future__ import annotations

import io
import time
import warnings
from collections import OrderedDict

import numpy as np

from .. import models as model_mod
from .. import planners, report
from ..core import hardware as hw_mod
from ..core.errors import BudgetError, CapacityWarning, ParameterError
from ..core.schema import check_type
from ..core.units import format_bytes, format_seconds
from ..timeline import simulate
from ..timeline.problem import Problem

BUDGET_RANGE = (0.1, 1.0)  # budgets the explorer takes: fractions of the keep-all activation peak
BUDGET_STEP = 0.01  # the budget slider's step
_KEPT_PLANS = 64  # plans kept for settings seen before (least recently used dropped first)
_INSTALL_HINT = ("the explorer's controls need ipywidgets: pip install 'slackswap[notebooks]' "
                 "(or pip install ipywidgets)")


def default_planners() -> tuple[str, ...]:
    """Every registered planner that is not exact (``brute`` and ``milp`` take from seconds to
    minutes on the full-size models, too long for a control that redraws on each change)."""

    return tuple(n for n in planners.available() if not planners.get(n).tags.exact)


def _one_of(field: str, value, allowed) -> None:
    """``ParameterError`` unless ``value`` is one of the names ``allowed``:
    ``<field>: must be one of 'a', 'b' or 'c'; got <value>``."""
    if not isinstance(value, str) or value not in allowed:
        names = [repr(a) for a in allowed]
        listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        raise ParameterError(f"{field}: must be one of {listed}; got {value!r}")


def check_budget(budget, where: str = "Explorer.update") -> float:
    """``budget`` as a float if it is a number in ``BUDGET_RANGE``; else ``BudgetError`` naming
    the field (``<where>(budget)``) and the allowed range (NaN, infinities, booleans and strings
    are refused)."""
    lo, hi = BUDGET_RANGE
    expected = f"a fraction of the keep-all activation peak in [{lo:g}, {hi:g}]"
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not lo <= budget <= hi:
        raise BudgetError(f"{where}(budget): must be {expected}; got {budget!r}")
    return float(budget)


class Explorer:
    """The state of one interactive view: model, hardware, budget (a fraction of the keep-all
    peak in ``BUDGET_RANGE``) and planner, the plan and simulated step they give, and the figure
    that shows it (``figure``: the Gantt chart of compute / D2H / H2D above the activation-memory
    curve and the budget line, as ``report.timeline_figure`` draws them).

    After ``update``: ``problem`` (the problem at the budget), ``plan`` and ``result``
    (``simulate(problem, plan, detail=True)``); all three None when the budget is below the
    problem's smallest feasible budget, which ``message`` then says (empty otherwise).
    ``warnings`` holds the problem's memory warnings (``Problem.memory_warnings``), shown by
    ``show`` instead of being raised again on each change. ``builds`` and ``plans`` count the
    problems built and the planner calls; ``times`` holds the seconds of the last update's stages
    (build, plan, simulate, draw).
    """

    def __init__(self, model: str = "gpt2-xl", hardware: str = "a100-80gb", budget: float = 0.5,
                 planner: str = "slack", planners=None):

        self.models = tuple(model_mod.available())
        self.hardwares = tuple(hw_mod.available())
        if planners is None:
            self.planners = default_planners()
        else:
            check_type(planners, (list, tuple), "Explorer(planners)", "a list of planner names", ParameterError)
            for name in planners:
                _one_of("Explorer(planners)", name, _registered())
            self.planners = tuple(planners)
        self.builds = 0  # problems built: one per (model, hardware) pair seen
        self.plans = 0  # planner calls: one per setting not seen before
        self.times: dict[str, float] = {}  # seconds of the last update: build, plan, simulate, draw
        self._problems: dict[tuple[str, str], object] = {}
        self._kept: OrderedDict[tuple, tuple] = OrderedDict()
        self._planner_objs: dict[str, object] = {}
        self.model = self.hardware = self.planner = None
        self.budget = None
        self.problem = self.plan = self.result = None
        self.message, self.warnings = "", ()
        self._drawing = _Drawing()
        self.figure = self._drawing.figure
        self._update(model, hardware, budget, planner, "Explorer")

    # ---------------------------------------------------------------- state
    def _problem(self, model: str, hardware: str):
        """The problem of (model, hardware) without a budget, built once."""
        key = (model, hardware)
        if key not in self._problems:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CapacityWarning)  # kept in ``warnings`` per budget
                self._problems[key] = Problem.build(model, hardware, budget=None)
            self.builds += 1
        return self._problems[key]

    def update(self, model: str | None = None, hardware: str | None = None, budget: float | None = None,
               planner: str | None = None) -> Explorer:
        """Set what is given (None keeps the current value), re-plan, simulate and redraw
        ``figure`` in place. Every argument is checked before any work: a name outside
        ``models`` / ``hardwares`` / ``planners`` is a ``ParameterError``, a budget outside
        ``BUDGET_RANGE`` (or NaN) a ``BudgetError``, each one line naming the field and the
        allowed values. Returns the explorer."""
        return self._update(model, hardware, budget, planner, "Explorer.update")

    def _update(self, model, hardware, budget, planner, where: str) -> Explorer:
        """``update``, its errors naming the fields as ``<where>(field)`` (``Explorer(...)`` from
        the constructor)."""
        model = self.model if model is None else model
        hardware = self.hardware if hardware is None else hardware
        planner = self.planner if planner is None else planner
        _one_of(f"{where}(model)", model, self.models)
        _one_of(f"{where}(hardware)", hardware, self.hardwares)
        budget = check_budget(self.budget if budget is None else budget, where)
        _one_of(f"{where}(planner)", planner, self.planners)
        self.times = dict.fromkeys(("build", "plan", "simulate", "draw"), 0.0)
        t = time.perf_counter()
        base = self._problem(model, hardware)
        self.times["build"] = time.perf_counter() - t
        self.model, self.hardware, self.budget, self.planner = model, hardware, budget, planner
        self._solve(base)
        t = time.perf_counter()
        self._drawing.draw(self)
        self.times["draw"] = time.perf_counter() - t
        return self

    def _solve(self, base) -> None:
        self.problem = self.plan = self.result = None
        self.message = ""
        if budget_bytes(base, self.budget) < base.min_feasible_bytes:
            self.warnings = ()
            self.message = (f"budget {self.budget:.2f} is below the smallest feasible budget of "
                            f"{self.model}, {base.min_feasible_bytes / base.keep_all_peak:.3f} of the "
                            f"keep-all peak: no plan fits")
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CapacityWarning)
            problem = base.with_budget(self.budget)
        self.warnings = problem.memory_warnings
        key = (self.model, self.hardware, self.budget, self.planner)
        if key in self._kept:
            self._kept.move_to_end(key)
            self.problem, self.plan, self.result = self._kept[key]
            return
        if self.planner not in self._planner_objs:
            self._planner_objs[self.planner] = planners.get(self.planner)
        t = time.perf_counter()
        plan = self._planner_objs[self.planner].plan(problem)
        self.plans += 1
        t1 = time.perf_counter()
        result = simulate(problem, plan, detail=True)
        self.times["plan"], self.times["simulate"] = t1 - t, time.perf_counter() - t1
        self.problem, self.plan, self.result = problem, plan, result
        if self._planner_objs[self.planner].tags.deterministic:  # the same plan each time: keep it
            self._kept[key] = (problem, plan, result)
        while len(self._kept) > _KEPT_PLANS:
            self._kept.popitem(last=False)

    # ---------------------------------------------------------------- text
    def title(self) -> str:
        """Two lines: the setting, then the simulated step (or why there is none)."""
        base = self._problems[(self.model, self.hardware)]

        head = (f"{self.model} on {self.hardware}, budget {self.budget:.2f} of the keep-all peak "
                f"({format_bytes(budget_bytes(base, self.budget))}), planner {self.planner}")
        r = self.result
        if r is None:
            return f"{head}\n{self.message}"
        if not r.feasible:
            return f"{head}\nINFEASIBLE: {r.reason}"
        fits = "fits" if r.fits else "DOES NOT FIT"
        return (f"{head}\nstep {format_seconds(r.step_time_s)}, throughput ratio {r.throughput_ratio:.3f}, "
                f"peak {format_bytes(r.peak_bytes)} ({fits})")

    # ---------------------------------------------------------------- notebook
    def show(self, model: str | None = None, hardware: str | None = None, budget: float | None = None,
             planner: str | None = None) -> None:
        """``update``, then display the memory warnings and the figure: the callback for
        ``ipywidgets.interactive_output(ex.show, ex.controls())`` (needs IPython)."""
        self._update(model, hardware, budget, planner, "Explorer")
        from IPython.display import Image, display  # optional dependency (IPython)

        for text in self.warnings:
            print(f"WARNING: {text}")
        display(Image(self.png()))

    def png(self, dpi: int = 100) -> bytes:
        """The figure as PNG bytes: one render, no bounding-box pass, compression level 3 (about a
        quarter less CPU than the default level 6, for 4% more bytes)."""

        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": 3})
        return buf.getvalue()

    def controls(self) -> dict:
        """One ipywidget per argument of ``update``, set to the current state: Dropdowns for
        ``model``, ``hardware`` and ``planner``, a FloatSlider over ``BUDGET_RANGE`` for ``budget``
        (it reports on release, not while dragging: each value is a new plan). Needs ipywidgets
        (``pip install 'slackswap[notebooks]'``)."""
        widgets = ipywidgets()
        lo, hi = BUDGET_RANGE
        return {
            "model": widgets.Dropdown(options=self.models, value=self.model, description="model"),
            "hardware": widgets.Dropdown(options=self.hardwares, value=self.hardware, description="hardware"),
            "budget": widgets.FloatSlider(value=self.budget, min=lo, max=hi, step=BUDGET_STEP, description="budget",
                                          readout_format=".2f", continuous_update=False),
            "planner": widgets.Dropdown(options=self.planners, value=self.planner, description="planner"),
        }


def budget_bytes(problem, fraction: float) -> float:
    """The budget in bytes that ``problem.with_budget(fraction)`` sets."""
    return fraction * problem.keep_all_peak


def ipywidgets():
    """The ipywidgets module, or an ``ImportError`` that says how to install it."""
    try:
        import ipywidgets as widgets  # optional dependency (the notebooks extra)
    except ImportError:
        raise ImportError(_INSTALL_HINT) from None
    return widgets


def _registered() -> tuple[str, ...]:
    return tuple(planners.available())


class _Drawing:
    """The explorer's figure: its artists are made once; ``draw`` replaces their data."""

    def __init__(self):
        from matplotlib.collections import PolyCollection  # lazy: start-up cost (matplotlib)
        from matplotlib.lines import Line2D  # lazy: start-up cost (matplotlib)
        from matplotlib.patches import Patch  # lazy: start-up cost (matplotlib)


        fig, axes = report._figure(2, 1, height=2.6, width=9.0, sharex=True)
        self.figure = fig
        self.gantt, self.mem = axes[0][0], axes[1][0]
        self.bars = {}
        for kind, (name, _color) in report._KINDS.items():
            coll = PolyCollection([], linewidths=0, label=name)
            self.gantt.add_collection(coll)
            self.bars[kind] = coll
        self.gantt.set_yticks(range(len(report._STREAMS)), ["compute", "D2H", "H2D"])
        self.gantt.set_ylim(len(report._STREAMS) - 0.5, -0.5)  # every lane, top down, even an idle one
        (self.curve,) = self.mem.plot([], [], drawstyle="steps-post", label="activation memory")
        self.budget = self.mem.axhline(0, color=report._BUDGET_COLOR, ls="--", label="budget")
        self.mem.grid(alpha=0.3)
        handles = [Patch(color=c, label=n) for n, c in report._KINDS.values()]
        handles += [Line2D([], [], color=report._MEMORY_COLOR), Line2D([], [], color=report._BUDGET_COLOR, ls="--")]
        labels = [n for n, _ in report._KINDS.values()] + ["activation memory", "budget"]
        self.legend = report._legend_below(fig, handles, labels, ncols=4)
        self.title = fig.suptitle("\n", fontsize=10)  # two lines: the setting, then the step
        # Laid out once (constrained layout), then fixed: a change redraws no layout. The layout is
        # made for the widest tick labels the figure shows, four digits (a byte or time unit keeps
        # the values below 1024) with one at the right end of the time axis, so no later label
        # is clipped.
        self.mem.set_ylim(0, 1000)
        self.mem.set_xlim(0, 1000)
        self.mem.set_ylabel("activations (GiB)")
        self.mem.set_xlabel("time (ms)")
        fig.draw_without_rendering()
        fig.set_layout_engine("none")

    def draw(self, ex: Explorer) -> None:
        r, base = ex.result, ex._problems[(ex.model, ex.hardware)]
        events = r.events if r is not None else ()
        end = max((e.end for e in events), default=0.0)
        times = r.memory_times if r is not None else np.zeros(0)
        end = max(end, float(max(times, default=0.0)), base.ideal_step_s)  # the ideal step when nothing ran
        tu, ts = report._time_unit(end)
        lane = {s: i for i, s in enumerate(report._STREAMS)}
        for kind, (_name, color) in report._KINDS.items():
            ev = sorted((e for e in events if e.kind == kind), key=lambda e: e.start)
            x0 = np.array([e.start for e in ev], dtype=float) / ts
            x1 = np.array([e.end for e in ev], dtype=float) / ts
            y = np.array([lane[e.stream] for e in ev], dtype=float)
            verts = np.stack([np.stack([x0, y - 0.3], -1), np.stack([x0, y + 0.3], -1),
                              np.stack([x1, y + 0.3], -1), np.stack([x1, y - 0.3], -1)], axis=1)
            self.bars[kind].set_verts(verts)
            if kind in report._COPY_KINDS:  # back-to-back copies alternate two shades, as in timeline_figure
                self.bars[kind].set_facecolors([color if i % 2 == 0 else report._lighter(color) for i in range(len(ev))])
            else:
                self.bars[kind].set_facecolors([color])
        budget = budget_bytes(base, ex.budget)
        # an infeasible result's peak (where it stopped) does not move the scale
        peak = float(r.peak_bytes) if r is not None and r.feasible else 0.0
        top = max(float(base.keep_all_peak), peak, budget)  # one scale per problem: the budget line moves
        bu, bs = report._byte_unit(top)
        membytes = r.memory_bytes if r is not None else np.zeros(0)
        self.curve.set_data(times / ts, membytes / bs)
        self.curve.set_color(report.planner_style(ex.planner)[0])
        self.budget.set_ydata([budget / bs, budget / bs])
        self.mem.set_ylim(-0.03 * top / bs, 1.08 * top / bs)
        self.mem.set_ylabel(f"activations ({bu})")
        self.mem.set_xlabel(f"time ({tu})")
        self.gantt.set_xlim(0, end / ts)
        self.legend.get_lines()[-2].set_color(report.planner_style(ex.planner)[0])
        self.legend.get_texts()[-1].set_text(f"budget {format_bytes(budget)}")
        self.title.set_text(ex.title())
