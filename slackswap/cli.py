"""Command line: ``slackswap models | hardware | graph ...`` (DESIGN.md section 6).

Each subcommand is one ``@command`` function taking the parsed arguments and a rich ``Console``,
returning an exit code; its options are declared by the ``configure`` function passed to the
decorator. New subcommands (plan, simulate, compare, sweep, reproduce) register the same way.

User errors (a ``ValueError`` from slackswap, bad arguments, missing files) print one line
``slackswap: error: ...`` on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

from .units import format_bytes, format_rate, format_seconds

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


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block; main() prints it
        raise _UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Plan activation memory (keep / swap / recompute) "
                                            "for one transformer training step.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for c in _COMMANDS.values():
        c.configure(sub.add_parser(c.name, help=c.help, description=c.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 user error)."""
    from rich.console import Console

    try:
        args = build_parser().parse_args(argv)
        console = Console()
        if not console.is_terminal:
            console = Console(width=140)
        return int(_COMMANDS[args.command].run(args, console) or 0)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else 0
    except (_UsageError, ValueError, OSError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2


# ---------------------------------------------------------------- formatting helpers
def format_flops(f: float) -> str:
    """``3.2e12 -> '3.20 TFLOP'`` (decimal prefixes)."""
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if abs(f) >= scale:
            return f"{f / scale:.2f} {unit}"
    return f"{f:.0f} FLOP"


def _count(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(n)


def _table(title: str, columns: list[str], right: set[str] = frozenset()):
    from rich.table import Table

    t = Table(title=title)
    for c in columns:
        t.add_column(c, justify="right" if c in right else "left", no_wrap=c != "GPU")
    return t


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


# ---------------------------------------------------------------- subcommands
@command("models", "list the model presets")
def _models(args, console) -> int:
    from . import models

    t = _table("Model presets (data/models)", ["name", "layers", "hidden", "heads", "params", "seq", "batch"],
               {"layers", "hidden", "heads", "params", "seq", "batch"})
    for name in models.available():
        s = models.load(name)
        t.add_row(name, str(s.layers), str(s.hidden), str(s.heads), _count(s.param_count()), str(s.seq),
                  str(s.batch))
    console.print(t)
    return 0


@command("hardware", "list the hardware presets")
def _hardware(args, console) -> int:
    from . import hardware

    cols = ["name", "GPU", "peak bf16", "HBM", "memory", "link", "d2h", "h2d", "latency"]
    t = _table("Hardware presets (data/hardware)", cols, set(cols) - {"name", "GPU", "link"})
    for name in hardware.available():
        hw = hardware.load(name)
        g, lk = hw.gpu, hw.link
        t.add_row(name, g.name, f"{g.peak('bf16') / 1e12:.0f} TFLOP/s", f"{g.hbm_bytes_per_s / 1e12:.2f} TB/s",
                  format_bytes(g.memory_bytes), lk.name, format_rate(lk.d2h_bytes_per_s),
                  format_rate(lk.h2d_bytes_per_s), format_seconds(lk.latency_s))
    console.print(t)
    console.print(f"link presets: {', '.join(hardware.available_links())}")
    return 0


def _graph_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="a model preset (see `slackswap models`) or an HF config.json path")
    p.add_argument("--seq", type=_positive_int, help="sequence length (default: the preset's)")
    p.add_argument("--batch", type=_positive_int, help="micro-batch size (default: the preset's)")
    p.add_argument("--attention", choices=("flash", "eager"), help="attention implementation")
    p.add_argument("--hardware", metavar="NAME", help="add analytical times on this hardware preset")


@command("graph", "per-layer summary of a model's graph", _graph_args)
def _graph(args, console) -> int:
    from . import costs, hardware, models

    overrides = {k: getattr(args, k) for k in ("seq", "batch", "attention") if getattr(args, k) is not None}
    g = models.build(args.model, **overrides)
    cm = costs.analytical(g, hardware.load(args.hardware)) if args.hardware else None
    saved = {t.id for t in g.planning_tensors()}
    rows: dict[str, list] = {}
    seen_layer = False
    for op in g.ops:
        if op.layer is not None:
            seen_layer = True
        key = str(op.layer) if op.layer is not None else ("head" if seen_layer else "embedding")
        r = rows.setdefault(key, [0, 0.0, 0.0, 0, 0.0])
        r[0] += 1
        r[1] += op.fwd_flops
        r[2] += op.bwd_flops
        r[3] += sum(g.tensors[t].bytes for t in op.outputs if t in saved)
        if cm is not None:
            r[4] += cm.fwd_s[op.id] + cm.bwd_s[op.id]
    cols = ["layer", "ops", "fwd FLOPs", "bwd FLOPs", "saved"] + (["fwd+bwd time"] if cm else [])
    t = _table(f"{g.name}: seq {g.spec.seq}, batch {g.spec.batch}, {g.spec.attention} attention"
               if g.spec is not None else g.name, cols, set(cols) - {"layer"})
    tot = [0, 0.0, 0.0, 0, 0.0]
    for key, r in rows.items():
        tot = [a + b for a, b in zip(tot, r, strict=True)]
        t.add_row(key, *_graph_cells(r, cm))
    t.add_section()
    t.add_row("total", *_graph_cells(tot, cm), style="bold")
    console.print(t)
    console.print(f"static (weights + grads + optimizer): {format_bytes(g.static_bytes)}; "
                  f"saved activations (keep-all): {format_bytes(g.saved_bytes())}; "
                  f"{len(g.ops)} ops, {len(g.tensors)} tensors")
    if cm is not None:
        console.print(f"ideal step on {args.hardware}: {format_seconds(cm.ideal_step_s)} "
                      f"(optimizer {format_seconds(cm.optimizer_s)})")
    return 0


def _graph_cells(r, cm) -> list[str]:
    cells = [str(r[0]), format_flops(r[1]), format_flops(r[2]), format_bytes(r[3])]
    return cells + ([format_seconds(r[4])] if cm is not None else [])


if __name__ == "__main__":
    raise SystemExit(main())
