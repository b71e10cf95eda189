"""One reading of a memory budget and of a time limit, shared by the command line, the Python
API, sweep files and calibration targets.

A budget is read the same way wherever it is written:

* a number ``<= 1`` (``0.5``, ``1``, ``"1"``) is a fraction of the keep-all peak, in (0, 1];
* a number ``> 1`` (``1000000``, ``1e9``, ``"1e9"``) is a whole number of bytes;
* a unit string (``"24GiB"``, ``"80GB"``) is bytes;
* ``None``, ``"inf"``, ``"none"``, ``"unlimited"`` or ``float("inf")`` is no limit.

>>> parse_budget("1e9") == parse_budget(1e9) == parse_budget(1000000000) == ("bytes", 1e9)
True
>>> parse_budget(1) == parse_budget("1") == parse_budget(1.0) == ("fraction", 1.0)
True
>>> resolve_budget("24GiB", 10**12)
25769803776.0
>>> resolve_budget(0.5, 1000)
500.0
>>> parse_time_limit("2.5")
2.5
"""

from __future__ import annotations

import math

from .errors import BudgetError, ParameterError, SlackSwapError
from .units import parse_bytes

__all__ = ["NO_LIMIT_WORDS", "parse_budget", "parse_time_limit", "resolve_budget"]

NO_LIMIT_WORDS = ("inf", "+inf", "infinity", "none", "unlimited")
_EXPECTED = "a fraction in (0, 1] of the keep-all peak, bytes (> 1, e.g. 1e9 or '24GiB') or 'inf'"


def _number(f: float, field: str, value) -> tuple[str, float]:
    if math.isnan(f) or f == -math.inf:
        raise BudgetError(f"{field}: expected a finite number, a unit string or 'inf' (no limit); got {value!r}")
    if f == math.inf:
        return ("none", math.inf)
    if f <= 0:
        raise BudgetError(f"{field}: bytes must be > 0 (or a fraction in (0, 1] of the keep-all peak, "
                          f"or 'inf'); got {value!r}")
    if f <= 1:
        return ("fraction", f)
    if f != int(f):
        raise BudgetError(f"{field}: a number > 1 is bytes and must be whole; got {value!r}")
    return ("bytes", f)


def parse_budget(value, field: str = "budget") -> tuple[str, float]:
    """``(kind, amount)``: ``("fraction", f)`` with f in (0, 1], ``("bytes", n)`` or
    ``("none", inf)``. Anything else raises ``BudgetError`` naming ``field``."""
    if value is None:
        return ("none", math.inf)
    if isinstance(value, bool):
        raise BudgetError(f"{field}: expected {_EXPECTED}; got {value!r}")
    if isinstance(value, (int, float)):
        return _number(float(value), field, value)
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in NO_LIMIT_WORDS:
            return ("none", math.inf)
        try:
            f = float(text)
        except ValueError:
            pass
        else:
            return _number(f if math.isfinite(f) else math.nan, field, value)  # '1e400' is not 'inf'
        try:
            n = parse_bytes(text, field)
        except SlackSwapError as e:
            raise BudgetError(f"{e}; or a fraction in (0, 1] of the keep-all peak") from None
        if n <= 0:
            raise BudgetError(f"{field}: bytes must be > 0; got {value!r}")
        return ("bytes", float(n))
    raise BudgetError(f"{field}: expected {_EXPECTED}; got {value!r}")


def resolve_budget(budget, keep_all_peak: int, field: str = "budget") -> float:
    """A budget in bytes (``inf`` for no limit), read by :func:`parse_budget`."""
    kind, amount = parse_budget(budget, field)
    return amount * keep_all_peak if kind == "fraction" else amount


def parse_time_limit(value, field: str = "time_limit_s", allow_none: bool = False,
                     minimum: float | None = None) -> float | None:
    """Seconds > 0 and finite, from a number or a numeric string, and at least ``minimum`` where
    one is given (the milp planner's ``MIN_TIME_LIMIT_S``). ``None`` (no limit) only where
    ``allow_none``. Anything else raises ``ParameterError`` naming ``field``."""
    if value is None and allow_none:
        return None
    least = "> 0" if minimum is None else f">= {minimum:g}"
    bad = ParameterError(f"{field}: expected a finite number of seconds {least}; got {value!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise bad
    try:
        f = float(value)
    except ValueError:
        raise bad from None
    if not math.isfinite(f) or f <= 0 or (minimum is not None and f < minimum):
        raise bad
    return f
