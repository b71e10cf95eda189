"""Where the shipped data files live (``data/`` next to the package)."""

from __future__ import annotations

from pathlib import Path


def data_dir() -> Path:
    """The repository's ``data/`` folder: model, hardware, profile and reference files."""
    return Path(__file__).resolve().parents[1] / "data"


def user_path(path) -> Path:
    """A path given by the user, with ``~`` and ``~user`` expanded (``Path`` does not do it)."""
    return Path(path).expanduser()
