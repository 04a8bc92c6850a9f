"""The common part of the vendor-CLI doubles: a switch state that runs the driver's session
(an ``exec`` script or the lines of a PTY-less shell) and answers its read commands.

:class:`CliDouble` subclasses keep the switch's configuration in the vendor's own model
(IOS-like interface blocks, Junos set statements, SONiC CONFIG_DB, NVUE's JSON tree, OVSDB
rows), apply each config command to it and print the show commands in the vendor's output
shape. These are doubles of vendor CLIs written from their documentation and the recorded
samples in tests/fixtures/ssh/ — NOT the vendors' software.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Reply:
    out: str = ""
    err: str = ""
    status: int = 0


class CliDouble:
    """One switch. ``exec`` runs a script like a login shell (``set -e``/``-x`` honoured);
    ``shell`` feeds lines to the vendor CLI one by one (errors do not stop it)."""

    name = "cli"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sessions = 0

    # ---- what subclasses implement
    def command(self, line: str) -> Reply:
        """Run one command line (config or show) against the state."""
        raise NotImplementedError

    def begin_session(self) -> None:
        """A new session starts (e.g. leave config mode)."""

    def end_session(self) -> Reply:
        """The session's stdin closed (shell) or the script ended (exec)."""
        return Reply()

    # ---- transports
    def exec(self, script: str) -> Reply:
        with self.lock:
            self.sessions += 1
            self.begin_session()
            errexit = xtrace = False
            out: list[str] = []
            err: list[str] = []
            status = 0
            for line in script.splitlines():
                if not line.strip():
                    continue
                if line.strip().startswith("set -"):
                    flags = line.strip()[5:]
                    errexit, xtrace = errexit or "e" in flags, xtrace or "x" in flags
                    continue
                if xtrace:
                    err.append(f"+ {line}\n")
                r = self.command(line)
                out.append(r.out)
                err.append(r.err)
                status = r.status
                if status != 0 and errexit:
                    break
            end = self.end_session()
            return Reply("".join(out) + end.out, "".join(err) + end.err, status or end.status)

    def shell(self, lines: list[str] | tuple[str, ...]) -> Reply:
        with self.lock:
            self.sessions += 1
            self.begin_session()
            out = [self.command(line).out for line in lines]
            end = self.end_session()
            return Reply("".join(out) + end.out, end.err, 0)
