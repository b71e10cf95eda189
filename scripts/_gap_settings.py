"""The full-size settings whose proven gap stays above 0.1% (benchmarks/README.md, "Proven gaps at
every budget"), and the ``--only MODEL@BUDGET`` parsing shared by the scripts that study them."""

from __future__ import annotations

from slackswap import Problem
from slackswap.core.errors import SlackSwapError

SETTINGS = ("bert-large@0.3", "bert-large@0.4", "bert-large@0.6", "gpt2-xl@0.2", "gpt2-xl@0.3",
            "gpt2-xl@0.4", "gpt2-xl@0.5", "llama-7b@0.2", "llama-7b@0.3")


def problem(ap, setting: str) -> Problem:
    """The problem of ``setting`` (``MODEL@BUDGET``, on a100-80gb), or ``ap.error`` naming it."""
    model, _, budget = setting.partition("@")
    try:
        return Problem.build(model, "a100-80gb", float(budget))
    except (ValueError, SlackSwapError) as e:
        ap.error(f"--only {setting!r}: expected MODEL@BUDGET, e.g. bert-large@0.3 ({e})")
