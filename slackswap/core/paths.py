"""Paths: where the shipped data files live (``data/`` next to the package), the user's paths, and
the check that an output can be written before any work starts (``check_output``)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from .errors import SlackSwapError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def data_dir() -> Path:
    """The repository's ``data/`` folder: model, hardware, profile and reference files."""
    return Path(__file__).resolve().parents[2] / "data"


def user_path(path) -> Path:
    """A path given by the user, with ``~`` and ``~user`` expanded (``Path`` does not do it)."""
    return Path(path).expanduser()


def read_document(path, fmt: str, what: str, exc):
    """``(path, parsed document)`` of a user's JSON or TOML file (``fmt``: "json" | "toml"); a
    missing, unreadable or malformed file raises ``exc`` with one line naming the file:
    ``"<what>: <path> does not exist"``, ``"<name>: cannot read <path>: ..."``,
    ``"<name>: not valid JSON (...)"``. A JSON object that gives a key twice is refused naming the
    key and where it is (``"<name>: decisions[1]: expected each key once; got '1' twice"``):
    ``json`` would silently keep the last one."""
    p = user_path(path)
    if not p.is_file():
        raise exc(f"{what}: {p} does not exist")
    try:
        text = p.read_text()
        if fmt == "json":
            doc = json.loads(text, object_pairs_hook=_pairs)
            _refuse_repeated_keys(doc, p.name, exc)
            return p, doc
        return p, tomllib.loads(text)
    except json.JSONDecodeError as e:
        raise exc(f"{p.name}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except tomllib.TOMLDecodeError as e:
        raise exc(f"{p.name}: not valid TOML ({e})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise exc(f"{p.name}: cannot read {p}: {e}") from None


class _RepeatedKeys(dict):
    """A JSON object that gave ``repeated`` (its first key given twice): refused once parsed."""

    repeated: str = ""


def _pairs(pairs):
    seen = set()
    for key, _ in pairs:
        if key in seen:
            out = _RepeatedKeys(pairs)
            out.repeated = key
            return out
        seen.add(key)
    return dict(pairs)


def _repeated_key(doc, path=()):
    """``(path, key)`` of the first object of ``doc`` that gave a key twice, else None."""
    if isinstance(doc, _RepeatedKeys):
        return path, doc.repeated
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        found = _repeated_key(v, path + (k,))
        if found is not None:
            return found
    return None


def _refuse_repeated_keys(doc, name: str, exc) -> None:
    found = _repeated_key(doc)
    if found is not None:
        from .schema import _path  # lazy: schema imports pydantic

        path, key = found
        head = _path(path + (key,))
        raise exc(f"{name}: {head}: expected each key once; got {key!r} twice")


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


def prepare_output(path):
    """The ``Path`` of a checked output, its missing parent directories created."""
    p = user_path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p
