"""The SlackSwap greedy planner ``slack`` (docs/planners.md): ``planner`` (the algorithm),
``improve`` (D2H FIFO, judge, local search, ``recompute_fit``) and ``keep`` (the keep pass)."""

from .planner import CHEAP_KINDS, MODES, ORDERS, PREFETCH, SlackPlanner

__all__ = ["CHEAP_KINDS", "MODES", "ORDERS", "PREFETCH", "SlackPlanner"]
