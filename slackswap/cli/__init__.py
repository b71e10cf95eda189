"""The command line ``slackswap`` (docs/experiments.md): ``commands`` (every subcommand but
three), ``calibration_commands`` (``calibrate``, ``sensitivity``, ``robustness``), ``common``
(errors, output checks and tables every command shares)."""

from .commands import command, main

__all__ = ["command", "main"]
