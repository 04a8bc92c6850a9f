"""Small process helpers for the lab: run a command, check a recorded PID, stop by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from gpufabric.domain.errors import LabError


def run(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None, timeout: float = 60
) -> str:
    """Run a command; return stdout; raise LabError with stderr on failure."""
    try:
        p = subprocess.run(
            list(args),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as e:
        raise LabError(f"command not found: {args[0]} (run scripts/setup.sh)", command=args[0]) from e
    except subprocess.TimeoutExpired as e:
        raise LabError(f"command timed out after {timeout}s: {' '.join(args)}", command=args[0]) from e
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        raise LabError(
            f"{' '.join(args[:3])} failed (exit {p.returncode}): {msg[-1] if msg else ''}",
            command=args[0],
            returncode=p.returncode,
        )
    return p.stdout


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child counts as dead
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def stop_pid(pid: int | None, timeout: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; a no-op for a dead PID."""
    if not pid_alive(pid):
        return
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            _reap(pid)
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def wait_for(predicate: object, timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll ``predicate()`` until true, else raise LabError naming ``what``."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise LabError(f"timed out after {timeout}s waiting for {what}", waiting_for=what)
