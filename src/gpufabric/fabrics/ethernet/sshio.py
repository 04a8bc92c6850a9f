"""One reusable SSH connection to one switch (paramiko), prompt-less.

Why paramiko and not netmiko: netmiko drives an interactive PTY and finds the end of
each command by matching prompts and waiting for the channel to go quiet (its
``read_channel_timing`` has a 2 s floor per ``send_config_set``, measured in
shared/notes/ngs-standalone.md). Here a batch is written at once and its end is the
end of the channel: ``exec`` runs one script (exit status + stderr say what failed);
``shell`` writes every command to the stdin of a shell channel opened WITHOUT a PTY and
closes stdin, so the switch CLI runs them non-interactively and closes the channel. No
prompt regexes, no sleeps, one round trip per batch.

The connection is opened lazily, kept open across batches (keepalive), reopened when
the server dropped it, and opening retries timeouts/refusals with bounded exponential
backoff. Authentication failures are not retried.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError
from gpufabric.domain.secrets import Secret

_RETRYABLE = (TimeoutError, socket.timeout, ConnectionError, EOFError, paramiko.ssh_exception.NoValidConnectionsError)


@dataclass(frozen=True)
class CommandResult:
    command: str
    stdout: str
    stderr: str
    status: int  # -1 when the server sent no exit status

    @property
    def output(self) -> str:
        return self.stdout + ("\n" + self.stderr if self.stderr else "")


@dataclass(frozen=True)
class SshTarget:
    host: str
    port: int
    username: str
    key_filename: str
    known_hosts: str | None = None  # strict checking against this file (RejectPolicy)
    insecure: bool = False  # only with no known_hosts: accept any host key (explicit, reported by the audit)
    passphrase: Secret | None = field(default=None, repr=False)  # of the private key
    connect_timeout: float = 10.0
    command_timeout: float = 120.0
    retries: int = 4  # connection attempts in total
    backoff: float = 0.25  # first wait; doubled after each failed attempt
    backoff_max: float = 4.0


class SshConnection:
    """A lazily opened, reused SSH connection; thread-safe (channels are independent)."""

    def __init__(self, target: SshTarget, device: str, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.target = target
        self.device = device
        self._sleep = sleep
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()
        self.connects = 0  # connections this object opened (client-side count)
        self.attempts = 0  # connection attempts, including failed ones

    # ------------------------------------------------------------------ connection
    def _open(self) -> paramiko.SSHClient:
        t = self.target
        delay = t.backoff
        last: BaseException | None = None
        for attempt in range(1, max(1, t.retries) + 1):
            self.attempts += 1
            client = paramiko.SSHClient()
            if t.known_hosts:
                client.load_host_keys(t.known_hosts)
                client.set_missing_host_key_policy(paramiko.RejectPolicy())
            elif t.insecure:
                client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
            else:
                raise ConfigError("known_hosts", None, "a known_hosts file (or insecure: true, reported by the audit)")
            sock: socket.socket | None = None
            try:
                # our own socket: TCP_NODELAY saves a delayed-ACK stall (~40 ms) per round trip
                sock = socket.create_connection((t.host, t.port), timeout=t.connect_timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                client.connect(
                    t.host,
                    port=t.port,
                    username=t.username,
                    key_filename=str(Path(t.key_filename)),
                    passphrase=t.passphrase.reveal() if t.passphrase else None,
                    look_for_keys=False,
                    allow_agent=False,
                    timeout=t.connect_timeout,
                    banner_timeout=t.connect_timeout,
                    auth_timeout=t.connect_timeout,
                    sock=sock,
                )
            except paramiko.AuthenticationException as e:
                client.close()
                raise ApplyError(
                    f"SSH authentication to {t.username}@{t.host}:{t.port} failed: {e}",
                    fabric="ethernet",
                    device=self.device,
                ) from e
            except paramiko.BadHostKeyException as e:
                client.close()
                raise ApplyError(
                    f"SSH host key of {t.host}:{t.port} does not match", fabric="ethernet", device=self.device
                ) from e
            except (*_RETRYABLE, paramiko.SSHException, OSError) as e:
                client.close()
                if sock is not None:
                    sock.close()
                if isinstance(e, paramiko.SSHException) and "not found in known_hosts" in str(e):
                    raise ApplyError(
                        f"SSH host key of {t.host}:{t.port} is unknown", fabric="ethernet", device=self.device
                    ) from e
                last = e
                if attempt < t.retries:
                    self._sleep(delay)
                    delay = min(delay * 2, t.backoff_max)
                continue
            transport = client.get_transport()
            assert transport is not None
            transport.set_keepalive(30)
            self.connects += 1
            return client
        raise ApplyError(
            f"cannot connect to {t.host}:{t.port} after {t.retries} attempts: {last!r}",
            fabric="ethernet",
            device=self.device,
            attempts=t.retries,
        )

    def _transport(self, fresh: bool = False) -> paramiko.Transport:
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
            return tr

    def _channel(self) -> paramiko.Channel:
        """A new session channel; reconnects once if the kept connection went stale."""
        try:
            return self._transport().open_session(timeout=self.target.connect_timeout)
        except (paramiko.SSHException, EOFError, OSError):
            return self._transport(fresh=True).open_session(timeout=self.target.connect_timeout)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # ------------------------------------------------------------------ commands
    def run_exec(self, script: str) -> CommandResult:
        """Run ``script`` with one exec request (the login shell interprets it)."""
        chan = self._channel()
        try:
            chan.exec_command(script)
            chan.shutdown_write()
            return self._drain(chan, script)
        finally:
            chan.close()

    def run_shell(self, lines: list[str] | tuple[str, ...]) -> CommandResult:
        """Write ``lines`` to the stdin of a PTY-less shell channel, then close stdin."""
        chan = self._channel()
        script = "".join(line + "\n" for line in lines)
        try:
            chan.invoke_shell()
            chan.sendall(script.encode())
            chan.shutdown_write()
            return self._drain(chan, script)
        finally:
            chan.close()

    def _drain(self, chan: paramiko.Channel, command: str) -> CommandResult:
        out: list[bytes] = []
        err: list[bytes] = []
        deadline = time.monotonic() + self.target.command_timeout
        idle = 0.0005
        while True:
            got = False
            if chan.recv_ready():
                out.append(chan.recv(1 << 16))
                got = True
            if chan.recv_stderr_ready():
                err.append(chan.recv_stderr(1 << 16))
                got = True
            if got:
                idle = 0.0005
                continue
            if chan.eof_received or chan.closed:
                break
            if time.monotonic() > deadline:
                raise FabricError(
                    f"command did not finish within {self.target.command_timeout}s",
                    fabric="ethernet",
                    device=self.device,
                    command=command[:2000],
                    output=b"".join(out).decode(errors="replace")[-2000:],
                )
            if chan.status_event.is_set():
                time.sleep(idle)
            else:
                chan.status_event.wait(idle)
            idle = min(idle * 2, 0.02)
        while chan.recv_ready():  # data that arrived just before EOF
            out.append(chan.recv(1 << 16))
        while chan.recv_stderr_ready():
            err.append(chan.recv_stderr(1 << 16))
        status = chan.recv_exit_status() if chan.status_event.wait(self.target.command_timeout) else -1
        return CommandResult(
            command, b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace"), status
        )
