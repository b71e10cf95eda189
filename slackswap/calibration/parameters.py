"""The hardware parameters ``calibrate`` can fit (``PARAMETERS``): how each is read from and
written to a ``Hardware`` (``apply``) and its physically plausible range (``bounds_for``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..core.errors import SlackSwapError
from ..core.hardware import Efficiency


@dataclass(frozen=True)
class Parameter:
    """One fittable parameter: ``get(hw)`` its value on a hardware, ``set(hw, v)`` a hardware with
    it changed; ``log``: searched on a log scale; ``unit``: how values print."""

    name: str
    description: str
    get: object = field(repr=False)
    set: object = field(repr=False)
    log: bool = False
    unit: str = ""


def _scaled(eff: Efficiency, s: float) -> Efficiency:
    return Efficiency(tuple((x, min(1.0, max(1e-6, v * s))) for x, v in eff.points), eff.per)


def _scale_param(name, curves, what):
    def set_(hw, s):
        g = hw.gpu
        return hw.replace(gpu=replace(g, **{c: _scaled(getattr(g, c), s) for c in curves}))
    return Parameter(name, f"multiplies the {what} efficiency curve{'s' if len(curves) > 1 else ''} "
                     "(values capped at 1)", lambda hw: 1.0, set_, False, "x")


def _link_param(name, field_, get, description, log=False, unit=""):
    return Parameter(name, description, get, lambda hw, v: hw.with_link(**{field_: v}), log, unit)


PARAMETERS: dict[str, Parameter] = {p.name: p for p in (
    _scale_param("compute_scale", ("matmul_efficiency", "attention_efficiency"), "matmul and attention"),
    _scale_param("matmul_scale", ("matmul_efficiency",), "matmul"),
    _scale_param("attention_scale", ("attention_efficiency",), "attention"),
    _scale_param("memory_scale", ("memory_efficiency",), "HBM memory"),
    _link_param("bandwidth", "bandwidth", lambda hw: hw.link.d2h_bytes_per_s,
                "host link bandwidth, both directions", True, "B/s"),
    _link_param("d2h_bandwidth", "d2h_bandwidth", lambda hw: hw.link.d2h_bytes_per_s, "D2H bandwidth", True, "B/s"),
    _link_param("h2d_bandwidth", "h2d_bandwidth", lambda hw: hw.link.h2d_bytes_per_s, "H2D bandwidth", True, "B/s"),
    _link_param("latency", "latency", lambda hw: hw.link.latency_s, "per-copy latency", True, "s"),
    _link_param("duplex_factor", "duplex_factor", lambda hw: hw.link.duplex_factor,
                "H2D bandwidth factor while D2H copies run"),
)}


def bounds_for(name: str, hw) -> tuple[float, float]:
    """The plausible range of parameter ``name`` on hardware ``hw`` (sources: docs/calibration.md).

    Efficiency scales: the curve's largest value between 50% and 100% of peak (matmul), 30% and
    100% (attention; both for ``compute_scale``) or 60% and 100% (memory). Bandwidths: from 80% of the preset's measured value to the link's
    theoretical signalling rate. Latency: a tenth to 5x the preset's. Duplex factor: 0.5 (half
    duplex) to 1 (full duplex)."""
    g, lk = hw.gpu, hw.link
    top = lambda eff: max(v for _, v in eff.points)  # noqa: E731
    if name == "compute_scale":
        return max(0.5 / top(g.matmul_efficiency), 0.3 / top(g.attention_efficiency)), 1.0 / top(g.matmul_efficiency)
    if name == "matmul_scale":
        return 0.5 / top(g.matmul_efficiency), 1.0 / top(g.matmul_efficiency)
    if name == "attention_scale":
        return 0.3 / top(g.attention_efficiency), 1.0 / top(g.attention_efficiency)
    if name == "memory_scale":
        return 0.6 / top(g.memory_efficiency), 1.0 / top(g.memory_efficiency)
    if name in ("bandwidth", "d2h_bandwidth", "h2d_bandwidth"):
        v = PARAMETERS[name].get(hw)
        return 0.8 * v, max(lk.theoretical_bytes_per_s, v)
    if name == "latency":
        return lk.latency_s / 10 if lk.latency_s > 0 else 1e-7, max(5 * lk.latency_s, 1e-6)
    if name == "duplex_factor":
        return 0.5, 1.0
    raise SlackSwapError(f"calibrate.params: unknown parameter {name!r}; known: {', '.join(PARAMETERS)}")


def apply(hw, values: dict):
    """``hw`` with every named parameter set to its value (the preset is not changed)."""
    for name, v in values.items():
        if name not in PARAMETERS:
            raise SlackSwapError(f"calibrate.params: unknown parameter {name!r}; known: {', '.join(PARAMETERS)}")
        hw = PARAMETERS[name].set(hw, float(v))
    return hw


# ---------------------------------------------------------------- targets
