"""Planners: ``get(name, **params)``, ``available()``, ``register(name)`` (docs/planners.md)."""

from .base import FunctionPlanner, Planner, Tags, available, get, make_plan, register, unregister

__all__ = ["FunctionPlanner", "Planner", "Tags", "available", "get", "make_plan", "register", "unregister"]
