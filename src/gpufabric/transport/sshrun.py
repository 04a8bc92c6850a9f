"""The one SSH runner of gpufabric (paramiko): a kept connection to one host, host key checked.

Every driver that reaches a host over SSH (an Ethernet switch, an InfiniBand SM host, a DPU's Arm
side) connects through :class:`SshSession`; the fabric packages may import only the domain, so
this lives here. Host keys are checked strictly against ``known_hosts`` (paramiko
``RejectPolicy``): an unknown or mismatched key ends the connection during key exchange, before
authentication, so no command runs. ``insecure=True`` (only without ``known_hosts``) accepts any
key: explicit, and the caller reports it (a ``TransportNote`` for the audit). Neither is a
:class:`ConfigError`. Key authentication only (no agent, no ``~/.ssh`` keys).

The connection is opened on first use (its own socket, ``TCP_NODELAY``), kept (keepalive),
reopened once when the server dropped it; opening retries network failures ``retries`` times
with bounded exponential backoff, never a refused host key or failed authentication.
:meth:`SshSession.run` runs one command with one exec request, optional bytes on its stdin, and
returns (exit status, stdout, stderr); :meth:`SshSession.channel` gives a session channel to
callers that drive it themselves.

Errors are ``peer.error`` (``ApplyError`` unless the caller names another ``FabricError``), the
message begins with ``peer.prefix``; the fields name ``host``, ``port`` and ``reason``: one of
:data:`REASONS`.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import paramiko

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError
from gpufabric.transport.secrets import Secret, TransportNote

REASONS = ("host-key-unknown", "host-key-mismatch", "known-hosts", "auth", "unreachable", "command")


@dataclass(frozen=True)
class SshHost:
    """Where to connect and how; ``known_hosts`` is checked strictly, ``insecure`` only without it."""

    host: str
    port: int
    user: str
    key_file: str
    known_hosts: str | None = None
    insecure: bool = False
    passphrase: Secret | None = field(default=None, repr=False)  # of the private key
    connect_timeout: float = 10.0
    retries: int = 1  # connection attempts in total
    backoff: float = 0.25  # first wait; doubled after each failed attempt
    backoff_max: float = 4.0

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    def insecure_notes(self, device: str, setting: str, who: str) -> tuple[TransportNote, ...]:
        """What the audit reports (``TRANSPORT-INSECURE``) when host keys are not checked; else nothing."""
        if not self.insecure:
            return ()
        return (TransportNote(device, setting, f"{who} at {self.where}: host key not checked (insecure: true)"),)


@dataclass(frozen=True)
class SshPeer:
    """How errors name the host: ``prefix`` begins every message (``"SM host sm-02:"``); the
    messages say "SSH" unless the prefix does (``"SSH to the DPU of gpu-a01:"``)."""

    prefix: str
    fabric: str
    device: str
    error: type[FabricError] = ApplyError
    fields: Mapping[str, Any] = field(default_factory=dict)  # added to every error's fields

    def fail(self, h: SshHost, reason: str, text: str, ssh: bool = True, **more: Any) -> FabricError:
        """The error for ``reason``; ``ssh``: the message says "SSH " before ``text`` (unless the prefix does)."""
        say = "SSH " if ssh and "SSH" not in self.prefix else ""
        return self.error(f"{self.prefix} {say}{text}", fabric=self.fabric, device=self.device, host=h.host,
                          port=h.port, reason=reason, **self.fields, **more)  # fmt: skip


def check_known_host(h: SshHost, field_name: str) -> None:
    """ConfigError naming ``field_name`` unless ``h.known_hosts`` holds a key for the host (for a
    configuration that must refuse an unknown host when it loads, before any connection)."""
    entry = h.host if h.port == 22 else f"[{h.host}]:{h.port}"
    try:
        keys = paramiko.HostKeys(str(h.known_hosts))
    except (OSError, paramiko.SSHException) as e:
        raise ConfigError(field_name, str(h.known_hosts), f"a readable known_hosts file ({e})") from None
    if keys.lookup(entry) is None:
        raise ConfigError(field_name, str(h.known_hosts), f"a known_hosts file holding the host key of {entry}")


class SshSession:
    """A lazily opened, kept SSH connection to ``host``; thread-safe (channels are independent)."""

    def __init__(self, host: SshHost, peer: SshPeer, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.host, self.peer, self._sleep = host, peer, sleep
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()
        self.connects = 0  # connections opened (client-side count)
        self.attempts = 0  # connection attempts, including failed ones

    def _client_for(self, h: SshHost) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        if h.known_hosts:
            try:
                client.load_host_keys(h.known_hosts)
            except OSError as e:
                msg = f"cannot read known_hosts {h.known_hosts}: {e.strerror}"
                raise self.peer.fail(h, "known-hosts", msg) from None
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        elif h.insecure:
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        else:
            raise ConfigError("known_hosts", None, "a known_hosts file (or insecure: true, reported by the audit)")
        return client

    def _open(self) -> paramiko.SSHClient:
        h, delay, last = self.host, self.host.backoff, ""
        tries = max(1, h.retries)
        for attempt in range(1, tries + 1):
            self.attempts += 1
            client = self._client_for(h)
            sock: socket.socket | None = None
            try:
                # our own socket: TCP_NODELAY saves a delayed-ACK stall (~40 ms) per round trip
                sock = socket.create_connection((h.host, h.port), timeout=h.connect_timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                client.connect(h.host, port=h.port, username=h.user, key_filename=h.key_file,
                               passphrase=h.passphrase.reveal() if h.passphrase else None, look_for_keys=False,
                               allow_agent=False, timeout=h.connect_timeout, banner_timeout=h.connect_timeout,
                               auth_timeout=h.connect_timeout, sock=sock)  # fmt: skip
            except paramiko.BadHostKeyException:
                client.close()
                raise self.peer.fail(h, "host-key-mismatch", f"host key of {h.where} does not match known_hosts "
                                     f"({h.known_hosts}); nothing run") from None  # fmt: skip
            except paramiko.AuthenticationException as e:
                client.close()
                raise self.peer.fail(h, "auth", f"authentication as {h.user}@{h.where} failed: {e}") from None
            except (TimeoutError, paramiko.SSHException, OSError, EOFError) as e:
                client.close()
                if sock is not None:
                    sock.close()
                if "not found in known_hosts" in str(e):
                    raise self.peer.fail(h, "host-key-unknown", f"host key of {h.where} is unknown (not in "
                                         f"{h.known_hosts}); nothing run") from None  # fmt: skip
                last = repr(e) if tries > 1 else str(e)
                if attempt < tries:
                    self._sleep(delay)
                    delay = min(delay * 2, h.backoff_max)
                continue
            transport = client.get_transport()
            assert transport is not None
            transport.set_keepalive(30)
            self.connects += 1
            return client
        after = f" after {tries} attempts" if tries > 1 else ""
        raise self.peer.fail(h, "unreachable", f"cannot connect to {h.where} over SSH{after}: {last}", False,
                             attempts=tries)  # fmt: skip

    def _transport(self, fresh: bool = False) -> paramiko.Transport:
        with self._lock:
            if fresh:
                self._drop()
            tr = self._client.get_transport() if self._client is not None else None
            if tr is None or not tr.is_active():
                self._drop()
                self._client = self._open()
                tr = self._client.get_transport()
            assert tr is not None
            return tr

    def channel(self) -> paramiko.Channel:
        """A new session channel; reconnects once if the kept connection went stale."""
        try:
            return self._transport().open_session(timeout=self.host.connect_timeout)
        except (paramiko.SSHException, EOFError, OSError):
            return self._transport(fresh=True).open_session(timeout=self.host.connect_timeout)

    def run(self, command: str, stdin: bytes = b"", timeout: float = 60.0) -> tuple[int, str, str]:
        """Run ``command`` (the login shell interprets it); (exit status, stdout, stderr)."""
        chan = self.channel()
        try:
            chan.settimeout(timeout)
            chan.exec_command(command)
            if stdin:
                chan.sendall(stdin)
            chan.shutdown_write()
            out = chan.makefile("rb").read()
            err = chan.makefile_stderr("rb").read()
            status = chan.recv_exit_status()
        except (TimeoutError, paramiko.SSHException, OSError, EOFError) as e:
            raise self.peer.fail(self.host, "command", f"command failed over SSH: {e}", False,
                                 command=command[:200]) from None  # fmt: skip
        finally:
            chan.close()
        return status, out.decode(errors="replace"), err.decode(errors="replace")

    def _drop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def close(self) -> None:
        with self._lock:
            self._drop()
