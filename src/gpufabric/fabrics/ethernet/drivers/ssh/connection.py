"""One reusable SSH connection to one switch (paramiko), prompt-less.

Why paramiko and not netmiko: netmiko drives an interactive PTY and finds the end of
each command by matching prompts and waiting for the channel to go quiet (its
``read_channel_timing`` has a 2 s floor per ``send_config_set``, measured in
shared/notes/ngs-standalone.md). Here a batch is written at once and its end is the
end of the channel: ``exec`` runs one script (exit status + stderr say what failed);
``shell`` writes every command to the stdin of a shell channel opened WITHOUT a PTY and
closes stdin, so the switch CLI runs them non-interactively and closes the channel. No
prompt regexes, no sleeps, one round trip per batch.

Connecting, host-key checking, keeping and reopening the connection, and the bounded
retry are the shared runner's (:mod:`gpufabric.transport.sshrun`); this module adds the two batch
transports and their drain with a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import paramiko

from gpufabric.domain.errors import FabricError
from gpufabric.transport.secrets import Secret
from gpufabric.transport.sshrun import SshHost, SshPeer, SshSession


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
        t = target
        host = SshHost(t.host, t.port, t.username, t.key_filename, t.known_hosts, t.insecure, t.passphrase,
                       t.connect_timeout, t.retries, t.backoff, t.backoff_max)  # fmt: skip
        self.session = SshSession(host, SshPeer(f"switch {device}:", "ethernet", device), sleep=sleep)
        self._channel = self.session.channel

    def close(self) -> None:
        self.session.close()

    @property
    def connects(self) -> int:
        """Connections this object opened (client-side count)."""
        return self.session.connects

    @property
    def attempts(self) -> int:
        """Connection attempts, including failed ones."""
        return self.session.attempts

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
