"""Declared schemas for every input boundary, and one way to report what is wrong (docs/errors.md).

Every file format and every planner's parameters are parsed by a pydantic model derived from
``Schema`` (strict: a string is never a boolean, a boolean is never a number; an int is accepted
where a float is expected; NaN and infinities are refused; unknown keys are refused). ``parse``
turns the first problem pydantic finds into the project's error type with one line::

    <where>: <field.path>: <what was expected>; got <value>

>>> class Step(Schema):
...     step: Annotated[float, Field(gt=0)]
>>> parse(Step, {"step": 0}, "sweep.toml", prefix=("budgets",))
Traceback (most recent call last):
...
slackswap.core.errors.ConfigError: sweep.toml: budgets.step: must be > 0; got 0
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .errors import ConfigError, SlackSwapError
from .units import parse_bytes, parse_flops, parse_rate, parse_seconds

__all__ = ["Bytes", "Distinct", "Fraction", "NonEmpty", "NonNegFloat", "NonNegInt", "PosFloat", "PosInt", "Rate",
           "Flops",
           "Schema", "Seconds", "check_type", "format_error", "parse", "unit"]

M = TypeVar("M", bound=BaseModel)


class Schema(BaseModel):
    """Base of every schema: strict types, finite numbers, no unknown keys (the error lists the
    allowed ones)."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, frozen=True, populate_by_name=True)
    #: True for formats that carry keys the toolkit does not read (HF config.json): ignore them
    open_keys: ClassVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_keys(cls, data):
        if isinstance(data, dict) and not cls.open_keys:
            allowed = {f.alias or n for n, f in cls.model_fields.items()} | set(cls.model_fields)
            extra = [k for k in data if k not in allowed]
            if extra:
                shown = sorted(f.alias or n for n, f in cls.model_fields.items())
                raise PydanticCustomError("unknown_key", "unknown key; allowed: {allowed}",
                                          {"key": extra[0], "allowed": ", ".join(shown)})
        return data


def unit(fn: Callable) -> Callable:
    """A before-validator reading human units with ``fn`` (``units.parse_bytes`` etc.)."""
    def check(value):
        if value is None:
            return value
        try:
            return fn(value, "value")
        except SlackSwapError as exc:
            text = re.sub(r",? got .*$", "", str(exc)).removeprefix("value: ")
            raise PydanticCustomError("unit", text) from None

    return check


def _positive(value):
    if value is not None and not value > 0:
        raise PydanticCustomError("greater_than", "must be > 0")
    return value


#: byte count: an int or a string such as "24GiB" (>= 0)
Bytes = Annotated[int, BeforeValidator(unit(parse_bytes))]
#: bytes per second: a number or a string such as "25GB/s" (> 0)
Rate = Annotated[float, BeforeValidator(_positive), BeforeValidator(unit(parse_rate))]
#: FLOP per second: a number or a string such as "312TFLOP/s" (> 0)
Flops = Annotated[float, BeforeValidator(_positive), BeforeValidator(unit(parse_flops))]
#: seconds: a number or a string such as "10us" (>= 0)
Seconds = Annotated[float, BeforeValidator(unit(parse_seconds))]
PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
PosFloat = Annotated[float, Field(gt=0)]
NonNegFloat = Annotated[float, Field(ge=0)]
#: a fraction in (0, 1]
Fraction = Annotated[float, Field(gt=0, le=1)]


def _distinct(values):
    seen = []
    for v in values:
        if v in seen:
            raise PydanticCustomError("distinct", "expected distinct values ({value} twice)", {"value": repr(v)})
        seen.append(v)
    return values


#: a list with no value twice: ``Annotated[list[float], Distinct]``
Distinct = AfterValidator(_distinct)
#: a list with at least one item: ``Annotated[list[str], NonEmpty]``
NonEmpty = Field(min_length=1)

_EXPECTED = {
    "bool_type": "expected true or false", "int_type": "expected an integer",
    "float_type": "expected a number", "string_type": "expected a string",
    "list_type": "expected a list", "tuple_type": "expected a list", "dict_type": "expected a table (key = value)",
    "model_type": "expected a table (key = value)", "model_attributes_type": "expected a table (key = value)",
    "missing": "missing required key", "finite_number": "expected a finite number",
    "int_from_float": "expected an integer", "enum": "must be one of {expected}",
    "literal_error": "must be one of {expected}", "greater_than": "must be > {gt}",
    "greater_than_equal": "must be >= {ge}", "less_than": "must be < {lt}",
    "less_than_equal": "must be <= {le}", "too_short": "must have at least {min_length} item(s)",
    "string_too_short": "must not be empty", "too_long": "must have at most {max_length} item(s)",
    "is_instance_of": "expected a {class}", "none_required": "expected nothing (null)",
}


def _path(loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int) or (isinstance(part, str) and part.isdigit()):
            out += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier():
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_UNION_TAGS = {"str", "int", "float", "bool", "none", "dict", "list", "tuple", "is-instance", "path"}


def _schemas(cls=BaseModel) -> set[str]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub.__name__} | _schemas(sub)
    return out


def _is_tag(part) -> bool:
    """A union member's tag in an error location (``write_lp.str``, ``budgets.BudgetRange``),
    not a field name or a key."""
    return isinstance(part, str) and (part in _UNION_TAGS or "[" in part or part in _schemas()
                                      or part.startswith(("function-", "constrained-", "is-instance")))


def _what(e: dict) -> str:
    kind = e["type"]
    ctx = {k: f"{v:g}" if isinstance(v, float) else v for k, v in (e.get("ctx") or {}).items()}
    if kind == "value_error":
        text = str(ctx.get("error", e["msg"]))
    else:
        try:
            text = _EXPECTED[kind].format(**ctx) if kind in _EXPECTED else e["msg"]
        except (KeyError, IndexError):
            text = e["msg"]
    return text


def _is_type_error(e: dict) -> bool:
    return e["type"].endswith("_type") or e["type"] in ("is_instance_of", "none_required")


def format_error(err: ValidationError, where: str = "", prefix: tuple = ()) -> str:
    """One line for the first error of ``err``: ``<where>: <field.path>: <expected>; got <value>``
    (the alternatives of a union are joined with "or")."""
    errors = err.errors(include_url=False)
    strip = lambda e: tuple(p for p in e["loc"] if not _is_tag(p))  # noqa: E731
    depth = max(len(strip(e)) for e in errors)      # the most specific (a union's deepest member)
    deepest = [e for e in errors if len(strip(e)) == depth]
    same = [e for e in deepest if strip(e) == strip(deepest[0])]
    if not all(_is_type_error(e) for e in same):    # a member of the right type says what is wrong
        same = [e for e in same if not _is_type_error(e)]
    e = same[0]
    loc = strip(e) + ((e["ctx"]["key"],) if e["type"] == "unknown_key" else ())  # the key ends the path
    whats = []
    for other in same:
        if _what(other) not in whats:
            whats.append(_what(other))
    what = " or ".join([whats[0]] + [w.removeprefix("expected ") for w in whats[1:]])
    head = ": ".join(x for x in (where, _path(tuple(prefix) + loc)) if x)
    whole = isinstance(e["input"], dict) and e["type"] == "value_error"   # a cross-field check
    got = "" if whole or e["type"] in ("missing", "unknown_key") else f"; got {_short(e['input'])}"
    if got:
        what = re.sub(r"[;,] got [^;]*$", "", what)    # the value is given once, at the end
    return f"{head}: {what}{got}" if head else f"{what}{got}"


def parse(schema: type[M], data: Any, where: str = "", *, exc: type[SlackSwapError] = ConfigError,
          prefix: tuple = ()) -> M:
    """``schema`` validated from ``data`` (a dict from a file or keyword arguments); a bad value
    raises ``exc`` with ``format_error``'s line (``where`` is the file or the planner)."""
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        raise exc(format_error(err, where, prefix)) from None
    except SlackSwapError as err:  # a semantic check that already names its field
        raise exc(f"{where}: {err}" if where else str(err)) from None


def check_type(value, types, field: str, expected: str, exc: type[SlackSwapError] = SlackSwapError):
    """Refuse an API argument of the wrong type: ``<field>: expected <expected>; got <value>``
    (booleans are never accepted where a number is expected)."""
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        raise exc(f"{field}: expected {expected}; got {_short(value)} ({type(value).__name__})")
    return value


def _as_tuple(types) -> tuple:
    return types if isinstance(types, tuple) else (types,)
