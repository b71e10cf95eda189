"""Parse and format human units. Everything inside the package is SI: bytes, seconds, FLOP/s.

>>> parse_bytes("24GiB")
25769803776
>>> parse_rate("25GB/s")
25000000000.0
>>> parse_flops("312TFLOP/s")
312000000000000.0
>>> format_bytes(3 * 2**30)
'3.00 GiB'
"""

from __future__ import annotations

import math
import re

from .errors import SlackSwapError

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_NUM = r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*"


def _scale(prefix: str, field: str, text: str) -> float:
    if prefix in _BIN:
        return float(_BIN[prefix])
    if prefix in _PREFIX:
        return _PREFIX[prefix]
    raise SlackSwapError(f"{field}: unknown unit prefix {prefix!r} in {text!r}")


def _parse(value, field: str, unit_re: str, what: str, examples: str) -> float:
    if isinstance(value, bool):
        raise SlackSwapError(f"{field}: expected {what} such as {examples}, got {value!r}")
    if isinstance(value, (int, float)):
        out = float(value)
    elif isinstance(value, str):
        m = re.fullmatch(_NUM + r"(Ki|Mi|Gi|Ti|Pi|[kKMGTP]?)" + unit_re + r"\s*", value)
        if not m:
            raise SlackSwapError(f"{field}: cannot read {value!r} as {what} (examples: {examples})")
        out = float(m.group(1)) * _scale(m.group(2), field, value)
    else:
        raise SlackSwapError(f"{field}: expected {what} such as {examples}, got {value!r}")
    if not math.isfinite(out) or out < 0:
        raise SlackSwapError(f"{field}: {what} must be finite and >= 0, got {value!r}")
    return out


def parse_bytes(value, field: str = "bytes") -> int:
    """Bytes from an int or a string like ``"24GiB"``, ``"80GB"``, ``"512 MiB"``, ``"1024B"``."""
    return int(round(_parse(value, field, r"B?", "a byte count", '"24GiB", "80GB", 1024')))


def parse_rate(value, field: str = "bandwidth") -> float:
    """Bytes per second from a number or a string like ``"25GB/s"`` or ``"2.0TB/s"``."""
    return _parse(value, field, r"B/s", "a bandwidth", '"25GB/s", "2TB/s", 2.5e10')


def parse_flops(value, field: str = "peak") -> float:
    """FLOP per second from a number or a string like ``"312TFLOP/s"`` or ``"989 TFLOPS"``."""
    return _parse(value, field, r"(?:FLOP/s|FLOPS|flop/s)", "a compute rate", '"312TFLOP/s", 3.12e14')


def parse_seconds(value, field: str = "time") -> float:
    """Seconds from a number or a string like ``"10us"``, ``"2.5ms"``, ``"1s"``."""
    if isinstance(value, str):
        m = re.fullmatch(_NUM + r"(ns|us|µs|ms|s|min)\s*", value)
        if not m:
            raise SlackSwapError(f"{field}: cannot read {value!r} as a time (examples: \"10us\", \"2ms\")")
        scale = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}[m.group(2)]
        out = float(m.group(1)) * scale
        if out < 0:
            raise SlackSwapError(f"{field}: a time must be >= 0, got {value!r}")
        return out
    return _parse(value, field, r"s", "a time", '"10us", 2e-3')


def format_bytes(n: float) -> str:
    """``3221225472 -> '3.00 GiB'`` (binary prefixes, as GPU memory is reported)."""
    n = float(n)
    if math.isinf(n):
        return "unlimited"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def format_seconds(s: float) -> str:
    """``0.0123 -> '12.30 ms'``."""
    s = float(s)
    if math.isinf(s):
        return "inf"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:.2f} {unit}"
    return f"{s * 1e9:.0f} ns"


def format_rate(bps: float) -> str:
    """``2.5e10 -> '25.0 GB/s'`` (decimal prefixes, as link bandwidth is reported)."""
    return f"{bps / 1e9:.1f} GB/s"
