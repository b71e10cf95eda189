"""Exception types. Bad user input raises a ``ValueError`` subclass naming the field."""

from __future__ import annotations


class SlackSwapError(ValueError):
    """Base class for every input error raised by slackswap (a ``ValueError``)."""


class ConfigError(SlackSwapError):
    """A model, hardware, profile or sweep file (or its overrides) is malformed."""


class UnknownNameError(SlackSwapError):
    """An unknown model, hardware or planner name; the message lists the known ones."""

    def __init__(self, what: str, name: str, known: list[str] | tuple[str, ...], where: str = ""):
        self.what, self.name, self.known, self.where = what, name, sorted(known), where
        head = f"{where}: " if where else ""
        super().__init__(f"{head}unknown {what} {name!r}; known: {', '.join(self.known)}")

    def __reduce__(self):
        # Rebuild from the constructor's own arguments so the error survives pickling
        # (e.g. when raised in a worker process) with the same type and message.
        return (type(self), (self.what, self.name, self.known, self.where))


class GraphError(SlackSwapError):
    """A graph violates its invariants (ids, sizes, order, saved tensors)."""


class PlanError(SlackSwapError):
    """A plan does not match its problem (missing tensor, bad decision, bad file)."""


class ParameterError(SlackSwapError):
    """A planner parameter or a Python API argument has the wrong type or is out of range."""


class BudgetError(SlackSwapError):
    """A memory budget outside the allowed range."""


class SlackSwapWarning(UserWarning):
    """Base class for slackswap's warnings: the input is valid but the result needs a caveat."""


class CapacityWarning(SlackSwapWarning):
    """A problem's static memory plus its activation budget exceed the GPU's memory: the plan and
    its simulated step are computed anyway, for a step that could not run on that GPU as modelled."""


def require(cond: bool, field: str, message: str, exc: type[SlackSwapError] = SlackSwapError):
    """Raise ``exc`` naming ``field`` unless ``cond`` holds (never ``assert``: stripped by -O)."""
    if not cond:
        raise exc(f"{field}: {message}")


class ExecutionError(SlackSwapError):
    """A real training step does not match the traced graph its plan was made for."""
