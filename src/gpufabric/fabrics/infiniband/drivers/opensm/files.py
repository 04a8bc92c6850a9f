"""Files the OpenSM driver reads and writes (partitions.conf, its last-good copy, the log).

Small helpers: read a file that may not exist, its size, its bytes from an offset (the
log since a reload), and an atomic write (temp file + fsync + rename + fsync of the
directory) so OpenSM never reads a half-written partitions.conf.
"""

from __future__ import annotations

import os
from pathlib import Path


def read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def atomic_write(path: Path, text: str) -> None:
    """temp file in the same directory + fsync + rename + fsync of the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
