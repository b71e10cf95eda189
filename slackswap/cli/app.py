"""The command line's frame: the subcommand registry (``command``), the parser and ``main``
(one-line errors, Ctrl-C). The subcommands register from ``commands`` and
``calibration_commands``; ``slackswap.cli`` imports both before ``main`` runs."""

from __future__ import annotations

import argparse
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from ..core.errors import SlackSwapError

PROG = "slackswap"


@dataclass(frozen=True)
class _Command:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable


_COMMANDS: dict[str, _Command] = {}


def command(name: str, help: str, configure: Callable[[argparse.ArgumentParser], None] | None = None):
    """Register ``fn(args, console) -> int`` as subcommand ``name`` (duplicates raise)."""

    def deco(fn):
        if name in _COMMANDS:
            raise ValueError(f"cli: subcommand {name!r} registered twice")
        _COMMANDS[name] = _Command(name, help, configure or (lambda p: None), fn)
        return fn

    return deco


class _UsageError(SlackSwapError):
    """A malformed command line (argparse's message)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block; main() prints it
        raise _UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Plan activation memory (keep / swap / recompute) "
                                            "for one transformer training step.")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for c in _COMMANDS.values():
        c.configure(sub.add_parser(c.name, help=c.help, description=c.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code: 0 ok, 2 an error (one line on stderr), 130 Ctrl-C
    (one line saying what was saved and how to resume)."""

    from rich.console import Console  # lazy: start-up cost (rich)

    from ..core.errors import CapacityWarning  # lazy: start-up cost of the command line
    from .common import (  # lazy: start-up cost of the command line
        EXIT_ERROR,
        EXIT_INTERRUPTED,
        error_line,
    )

    args = None
    try:
        args = build_parser().parse_args(argv)
        console = Console()
        if not console.is_terminal:   # text lines wrap at 140 in files; tables never narrow (print_table)
            console = Console(width=140)
        with warnings.catch_warnings():   # every command prints them itself, in its output
            warnings.simplefilter("ignore", CapacityWarning)
            return int(_COMMANDS[args.command].run(args, console) or 0)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        note = getattr(args, "on_interrupt", None)
        print(f"{PROG}: interrupted: {note() if note else 'nothing was saved'}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback (unless --debug)
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(f"{PROG}: error: {error_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
