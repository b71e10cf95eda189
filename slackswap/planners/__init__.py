"""Planners: ``get(name, **params)``, ``available()``, ``register(name)`` (docs/planners.md)."""

from .base import (
    FunctionPlanner,
    Parameterised,
    Planner,
    Tags,
    available,
    get,
    make_plan,
    param_names,
    params_text,
    register,
    unregister,
)

__all__ = ["FunctionPlanner", "Parameterised", "Planner", "Tags", "available", "get", "make_plan", "param_names",
           "params_text", "register", "unregister"]
