"""What every CLI command shares: one-line errors, Ctrl-C, output checks and whole tables.

* ``error_line(exc)``: the one line ``slackswap: error: ...`` prints for an exception, whitespace
  folded, without internal call names (``Foo.__init__()``); exceptions that are not slackswap's
  own input errors carry their type and a hint at ``--debug`` (which prints the traceback).
* ``check_output(path, option)`` (from ``core.paths``): the output ``path`` of ``option`` can be
  written (checked before any work starts, so a long command never computes a result it cannot save).
* ``print_table(console, table)``: a rich table printed at its full width, never with ``...``
  cells, on a terminal of any width, a pipe or a file.
"""

from __future__ import annotations

import argparse
import json
import re

from ..core.errors import SlackSwapError
from ..core.paths import check_output, prepare_output, user_path  # noqa: F401 - the commands' output checks

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130     # 128 + SIGINT, the shell's convention

_CALL = re.compile(r"\b[A-Za-z_][\w.]*\(\)\s*")   # "SlackPlanner.__init__() got ..." -> "got ..."


def error_line(exc: BaseException) -> str:
    """The one-line message for ``exc`` (without the ``slackswap: error:`` prefix)."""
    if isinstance(exc, OSError) and exc.filename is not None:
        msg = f"{exc.filename}: {exc.strerror or exc}"
    else:
        msg = str(exc)
    msg = _CALL.sub("", " ".join(msg.split())).strip()
    if isinstance(exc, (SlackSwapError, OSError)):
        return msg or type(exc).__name__
    return f"{type(exc).__name__}: {msg} (run with --debug for the traceback)" if msg else \
        f"{type(exc).__name__} (run with --debug for the traceback)"


def check_figure(path, option: str = "--figure") -> None:
    """``check_output`` plus a file type matplotlib can write (by the suffix): the check of every
    figure the report API writes (``report.check_figure``)."""
    from ..report import check_figure as _check  # lazy: start-up cost of the command line

    _check(path, option)


def print_table(console, table) -> None:
    """Print ``table`` at its natural width even where the console is narrower (a narrow
    terminal, ``COLUMNS``, no terminal at all): cells are never cut to ``...``; a terminal
    narrower than the table wraps its lines instead."""
    from rich.measure import Measurement  # lazy: start-up cost (rich)

    if table.title is not None:   # a title line of any length, never wrapped or cut to the table's width
        console.print(table.title, soft_wrap=True, highlight=False, markup=False, style="italic")
        table.title = None
    need = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    if need <= console.width:
        console.print(table)
        return
    old = console.width
    console.width = need
    try:
        console.print(table, crop=False)
    finally:
        console.width = old


# ---------------------------------------------------------------- arguments and tables several commands share
REPRODUCE_PLANNERS = ("slack", "capuchin", "dp-checkpoint", "chen-greedy", "chen-sqrt", "checkpoint-layers",
                      "swap-all")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


# ---------------------------------------------------------------- subcommands
def _max_ops_arg(p) -> None:
    from ..models.transformer import MAX_OPS  # lazy: start-up cost of the command line

    p.add_argument("--max-ops", type=_positive_int, default=MAX_OPS,
                   help=f"refuse a model whose graph has more ops than this, before building it (default {MAX_OPS:,})")


def _table(title: str, columns: list[str], right: set[str] = frozenset()):
    from rich.table import Table  # lazy: start-up cost (rich)

    t = Table(title=title)
    for c in columns:
        t.add_column(c, justify="right" if c in right else "left", no_wrap=c != "GPU")
    return t


def _budget_value(text: str):
    """``--budget``, read by ``slackswap.core.limits.parse_budget`` as ``Problem.build`` reads it:
    ``"0.5"``/``"1"`` -> fraction; ``"1e9"``/``"24GiB"`` -> bytes; ``"inf"`` -> no limit."""

    from ..core.limits import parse_budget  # lazy: start-up cost of the command line

    try:
        kind, amount = parse_budget(text, "--budget")
    except SlackSwapError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--budget: ")) from None
    if kind != "bytes":
        return amount
    try:
        return int(float(text))
    except ValueError:
        return text.strip()  # a unit string, shown as written


def _time_limit_value(text: str) -> float:
    """``--time-limit``, read by ``slackswap.core.limits.parse_time_limit``: seconds > 0, finite."""

    from ..core.limits import parse_time_limit  # lazy: start-up cost of the command line

    try:
        return parse_time_limit(text, "--time-limit")
    except SlackSwapError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--time-limit: ")) from None


def _param(text: str) -> tuple[str, object]:
    k, sep, v = text.partition("=")
    if not sep or not k:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return k, json.loads(v)
    except json.JSONDecodeError:
        return k, v


def _problem_args(p: argparse.ArgumentParser, model_required: bool = True) -> None:
    p.add_argument("--model", required=model_required, help="model preset or HF config.json path")
    p.add_argument("--hardware", default="a100-80gb", help="hardware preset (default a100-80gb)")
    p.add_argument("--budget", type=_budget_value, default=0.5,
                   help="activation budget: fraction of the keep-all peak (0.5) or bytes ('24GiB')")
    p.add_argument("--link", help="link preset replacing the hardware's (see `slackswap hardware`)")
    p.add_argument("--node", metavar="KEYS",
                   help="change the hardware's node, the host its GPUs share: KEY=VALUE pairs joined by "
                        "commas (gpus_per_node, gpus_per_switch, switch_bandwidth, host_memory_bandwidth, "
                        "pinned_capacity, copying_gpus), e.g. gpus_per_switch=2; or 'none': the GPU alone "
                        "on its link (docs/hardware.md)")
    p.add_argument("--seq", type=_positive_int, help="sequence length override")
    p.add_argument("--batch", type=_positive_int, help="micro-batch size override")
    p.add_argument("--attention", choices=("flash", "eager"), help="attention implementation override")
    p.add_argument("--implementation", choices=("fused", "hf"),
                   help="saved-tensor accounting override: fused kernels or HuggingFace transformers")
    _parallel_arg(p)
    _max_ops_arg(p)


def _parallel_arg(p) -> None:
    p.add_argument("--parallel", metavar="SETTING",
                   help="how the step is spread over GPUs: a data/parallel preset, a .toml file or "
                        "KEY=VALUE pairs (dp, zero, tp, sp, pp, microbatches, schedule, stage, "
                        "optimizer_bytes), e.g. dp=8,zero=3 (docs/parallel.md)")


def _parallel(args):
    """The ``--parallel`` setting of ``args`` (None when not given), checked now."""
    if getattr(args, "parallel", None) is None:
        return None
    from ..models.parallel import parse_text  # lazy: start-up cost of the command line

    return parse_text(args.parallel)


def _problem(args):
    from ..core import hardware  # lazy: start-up cost of the command line
    from ..timeline.problem import Problem  # lazy: start-up cost of the command line

    overrides = {k: getattr(args, k) for k in ("seq", "batch", "attention", "implementation") if getattr(args, k) is not None}
    hw = hardware.load(args.hardware, link=args.link)
    if getattr(args, "node", None) is not None:
        hw = hardware.with_node_text(hw, args.node)
    return Problem.build(args.model, hw, args.budget, max_ops=args.max_ops, parallel=_parallel(args), **overrides)


def _df_table(title: str, df, floatfmt: str = ".4f"):
    from ..report import _cell  # lazy: start-up cost of the command line

    t = _table(title, [str(c) for c in df.columns], {str(c) for c in df.columns if df[c].dtype.kind in "iuf"})
    for row in df.itertuples(index=False, name=None):
        t.add_row(*(_cell(v.item() if hasattr(v, "item") else v, floatfmt) for v in row))
    return t


def _check_outputs(args, out_dir: bool = False) -> None:
    """Every output option of ``args`` can be written: checked before any work starts."""
    for opt in ("out", "trace", "cache", "csv", "profile_out"):
        if getattr(args, opt, None):
            check_output(getattr(args, opt), "--" + opt.replace("_", "-"),
                         directory=opt == "cache" or (opt == "out" and out_dir))
    if getattr(args, "figure", None):
        check_figure(args.figure)
