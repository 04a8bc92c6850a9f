"""One SSH connection to one SM host (paramiko), host key checked against known_hosts.

The InfiniBand package may import only :mod:`gpufabric.domain`, so this is a small IB-local
twin of the Ethernet driver's ``sshio``: strict host-key checking (``RejectPolicy`` over the
configured known_hosts file; there is no insecure mode for an SM host - whoever answers
there decides every tenant's isolation), key authentication only, no agent. The connection
is opened on first use, kept, and reopened once when the server dropped it. An unknown or
mismatching host key, or failed authentication, is an :class:`ApplyError` naming the host,
raised before any command runs (so nothing is written to a host that is not the one
configured); :meth:`SshExec.check_known_host` refuses, when the configuration loads, a host
the known_hosts file has no key for.

:meth:`SshExec.run` runs one shell script with one exec request, optional bytes on its
stdin, and returns (exit status, stdout, stderr).
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from pathlib import Path

import paramiko

from gpufabric.domain.errors import ApplyError, ConfigError

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
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()

    def check_known_host(self, field: str) -> None:
        """ConfigError naming ``field`` unless known_hosts holds a key for the host (when the
        configuration loads: an SM host whose key is unknown is refused before any write)."""
        t = self.target
        entry = t.host if t.port == 22 else f"[{t.host}]:{t.port}"
        try:
            keys = paramiko.HostKeys(str(t.known_hosts))
        except (OSError, paramiko.SSHException) as e:
            raise ConfigError(field, str(t.known_hosts), f"a readable known_hosts file ({e})") from None
        if keys.lookup(entry) is None:
            raise ConfigError(field, str(t.known_hosts), f"a known_hosts file holding the host key of {entry}")

    def _error(self, message: str, **fields: object) -> ApplyError:
        return ApplyError(message, fabric=FABRIC, device=self.name, sm_host=self.name, **fields)

    def _open(self) -> paramiko.SSHClient:
        t = self.target
        client = paramiko.SSHClient()
        try:
            client.load_host_keys(str(t.known_hosts))
        except OSError as e:
            raise self._error(f"SM host {self.name}: cannot read known_hosts {t.known_hosts}: {e.strerror}") from None
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        where = f"{t.user}@{t.host}:{t.port}"
        sock: socket.socket | None = None
        try:
            # our own socket: TCP_NODELAY saves a delayed-ACK stall (~40 ms) per command
            sock = socket.create_connection((t.host, t.port), timeout=t.connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.connect(
                t.host,
                port=t.port,
                username=t.user,
                key_filename=str(t.key_file),
                look_for_keys=False,
                allow_agent=False,
                timeout=t.connect_timeout,
                banner_timeout=t.connect_timeout,
                auth_timeout=t.connect_timeout,
                sock=sock,
            )
        except paramiko.BadHostKeyException:
            client.close()
            raise self._error(f"SM host {self.name}: SSH host key of {where} does not match {t.known_hosts}") from None
        except paramiko.AuthenticationException as e:
            client.close()
            raise self._error(f"SM host {self.name}: SSH authentication to {where} failed: {e}") from None
        except (TimeoutError, paramiko.SSHException, OSError, EOFError) as e:
            client.close()
            if sock is not None:
                sock.close()
            if "not found in known_hosts" in str(e):
                raise self._error(
                    f"SM host {self.name}: SSH host key of {where} is unknown ({t.known_hosts})"
                ) from None
            raise self._error(f"SM host {self.name}: cannot connect to {where}: {e}") from None
        return client

    def _session(self, fresh: bool = False) -> paramiko.Channel:
        with self._lock:
            if fresh and self._client is not None:
                self._client.close()
                self._client = None
            tr = self._client.get_transport() if self._client is not None else None
            if tr is None or not tr.is_active():
                if self._client is not None:
                    self._client.close()
                self._client = self._open()
                tr = self._client.get_transport()
            assert tr is not None
            return tr.open_session(timeout=self.target.connect_timeout)

    def run(self, script: str, stdin: bytes = b"") -> tuple[int, str, str]:
        """Run ``script`` on the host (its login shell); returns (status, stdout, stderr)."""
        try:
            chan = self._session()
        except (paramiko.SSHException, EOFError, OSError):
            chan = self._session(fresh=True)  # the kept connection went stale
        try:
            chan.settimeout(self.target.command_timeout)
            chan.exec_command(script)
            if stdin:
                chan.sendall(stdin)
            chan.shutdown_write()
            out = chan.makefile("rb").read()
            err = chan.makefile_stderr("rb").read()
            status = chan.recv_exit_status()
        except (TimeoutError, paramiko.SSHException, OSError) as e:
            raise self._error(f"SM host {self.name}: command failed over SSH: {e}", command=script[:200]) from None
        finally:
            chan.close()
        return status, out.decode(errors="replace"), err.decode(errors="replace")

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
