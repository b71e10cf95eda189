"""What every CLI command shares: one-line errors, Ctrl-C, output checks and whole tables.

* ``error_line(exc)``: the one line ``slackswap: error: ...`` prints for an exception, whitespace
  folded, without internal call names (``Foo.__init__()``); exceptions that are not slackswap's
  own input errors carry their type and a hint at ``--debug`` (which prints the traceback).
* ``check_output(path, option)``: the output ``path`` of ``option`` can be written (checked before
  any work starts, so a long command never computes a result it cannot save).
* ``print_table(console, table)``: a rich table printed at its full width, never with ``...``
  cells, on a terminal of any width, a pipe or a file.
"""

from __future__ import annotations

import re
import tempfile

from ..core.errors import SlackSwapError
from ..core.paths import user_path

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


def check_output(path, option: str, directory: bool = False) -> None:
    """Raise ``SlackSwapError`` naming ``option`` unless ``path`` (a file, or a ``directory``) can
    be written: an existing one must be of that kind and writable, a new one must lie under a
    writable directory (missing parents are created when the output is written). Nothing is
    created or changed (a probe file is created and removed in the nearest existing directory)."""
    p = user_path(path)
    try:
        if p.exists():
            if directory and not p.is_dir():
                raise SlackSwapError(f"{option}: {p} exists and is not a directory")
            if not directory and p.is_dir():
                raise SlackSwapError(f"{option}: {p} is a directory; expected a file path")
            if directory:
                _probe(p)
            else:
                with open(p, "a"):   # append mode: opened for writing, nothing truncated
                    pass
            return
        anc = p.parent
        while not anc.exists() and anc != anc.parent:
            anc = anc.parent
        if not anc.is_dir():
            raise SlackSwapError(f"{option}: cannot create {p}: {anc} is not a directory")
        _probe(anc)
    except OSError as e:
        raise SlackSwapError(f"{option}: cannot write {p}: {e.strerror or e}") from None


def _probe(directory) -> None:
    with tempfile.TemporaryFile(dir=directory):
        pass


def check_figure(path, option: str = "--figure") -> None:
    """``check_output`` plus a file type matplotlib can write (by the suffix)."""
    check_output(path, option)
    from matplotlib.figure import Figure

    kinds = Figure().canvas.get_supported_filetypes()
    suffix = user_path(path).suffix.lstrip(".").lower()
    if suffix not in kinds:
        raise SlackSwapError(f"{option}: cannot write a figure as {suffix or 'a file without a suffix'!r} "
                             f"({path}); allowed suffixes: {', '.join(sorted(kinds))}")


def prepare_output(path):
    """The ``Path`` of a checked output, its missing parent directories created."""
    p = user_path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def print_table(console, table) -> None:
    """Print ``table`` at its natural width even where the console is narrower (a narrow
    terminal, ``COLUMNS``, no terminal at all): cells are never cut to ``...``; a terminal
    narrower than the table wraps its lines instead."""
    from rich.measure import Measurement

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
