"""The command line ``slackswap`` (docs/experiments.md): ``app`` (the subcommand registry, the
parser and ``main``), ``commands`` (every subcommand but four), ``calibration_commands``
(``calibrate``, ``assumptions``, ``sensitivity``, ``robustness``), ``common`` (errors, output checks, arguments
and tables the commands share)."""

from . import calibration_commands, commands  # noqa: F401 - importing them registers the subcommands
from .app import command, main

__all__ = ["command", "main"]
