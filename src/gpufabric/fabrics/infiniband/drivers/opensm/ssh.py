"""One SSH connection to one SM host, host key checked against known_hosts.

A thin IB binding of the shared runner (:mod:`gpufabric.transport.sshrun`): strict host-key
checking (``RejectPolicy`` over the configured known_hosts file; there is no insecure mode for an
SM host - whoever answers there decides every tenant's isolation), key authentication only, no
agent, the connection kept and reopened once when the server dropped it. An unknown or
mismatching host key, or failed authentication, is an :class:`ApplyError` naming the host
(``sm_host``), raised before any command runs; :meth:`SshExec.check_known_host` refuses, when the
configuration loads, a host the known_hosts file has no key for.

:meth:`SshExec.run` runs one shell script with one exec request, optional bytes on its stdin, and
returns (exit status, stdout, stderr).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpufabric.transport.sshrun import SshHost, SshPeer, SshSession, check_known_host

FABRIC = "infiniband"


@dataclass(frozen=True)
class SshTarget:
    host: str
    port: int
    user: str
    key_file: Path
    known_hosts: Path
    connect_timeout: float = 10.0
    command_timeout: float = 60.0


class SshExec:
    """A kept SSH connection to ``target``, named ``name`` in errors; thread-safe."""

    def __init__(self, target: SshTarget, name: str) -> None:
        self.target = target
        self.name = name
        t = target
        self._host = SshHost(t.host, t.port, t.user, str(t.key_file), str(t.known_hosts), connect_timeout=t.connect_timeout)
        peer = SshPeer(f"SM host {name}:", FABRIC, name, fields={"sm_host": name})
        self._session = SshSession(self._host, peer)

    def check_known_host(self, field: str) -> None:
        """ConfigError naming ``field`` unless known_hosts holds a key for the host (when the
        configuration loads: an SM host whose key is unknown is refused before any write)."""
        check_known_host(self._host, field)

    def run(self, script: str, stdin: bytes = b"") -> tuple[int, str, str]:
        """Run ``script`` on the host (its login shell); returns (status, stdout, stderr)."""
        return self._session.run(script, stdin, self.target.command_timeout)

    def close(self) -> None:
        self._session.close()
