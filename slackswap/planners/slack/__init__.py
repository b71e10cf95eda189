"""The SlackSwap greedy planner ``slack`` (docs/planners.md): ``slack_planner`` (the algorithm),
``judge`` (D2H FIFO, judge, local search, ``recompute_fit``), ``keep`` (the keep pass) and
``search`` (the search passes)."""

from .slack_planner import CHEAP_KINDS, MODES, ORDERS, PREFETCH, SlackPlanner

__all__ = ["CHEAP_KINDS", "MODES", "ORDERS", "PREFETCH", "SlackPlanner"]
