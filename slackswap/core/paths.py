"""Where the shipped data files live (``data/`` next to the package)."""

from __future__ import annotations

from pathlib import Path


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
    ``"<name>: not valid JSON (...)"``."""
    import json
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    p = user_path(path)
    if not p.is_file():
        raise exc(f"{what}: {p} does not exist")
    try:
        text = p.read_text()
        if fmt == "json":
            return p, json.loads(text)
        return p, tomllib.loads(text)
    except json.JSONDecodeError as e:
        raise exc(f"{p.name}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except tomllib.TOMLDecodeError as e:
        raise exc(f"{p.name}: not valid TOML ({e})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise exc(f"{p.name}: cannot read {p}: {e}") from None
