"""Commands on a DPU's Arm side over SSH (paramiko), for the offload report (I/O).

Section (``dpu.offload.<host>.ssh`` in fabrics.yaml)::

    ssh: {host: 192.0.2.21, port: 22, user: root, key_file: /etc/gpufabric/dpu_ed25519,
          known_hosts: /etc/gpufabric/dpu_known_hosts}

Host keys are checked strictly against ``known_hosts`` (paramiko ``RejectPolicy``): an unknown
or mismatched key ends the connection during key exchange, before authentication, so no
command runs. ``insecure: true`` (and no ``known_hosts``) accepts any key; it is explicit and
reported (:meth:`SshRunner.transport_notes` -> audit ``TRANSPORT-INSECURE``). ``key_file`` is a
secret: mode 0600 or stricter. One connection per DPU, opened on first use and reused (reopened
when the server dropped it); each command is one ``exec`` channel (no shell, no PTY), its
arguments quoted with :func:`shlex.join`.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import paramiko

from gpufabric.domain.errors import ConfigError, FabricError
from gpufabric.domain.secrets import TransportNote, secret_file

SSH_KEYS = frozenset({"host", "port", "user", "key_file", "known_hosts", "insecure"})


class SshRunner:
    """Runs argument vectors on one DPU over one reused SSH connection."""

    def __init__(self, node: str, host: str, port: int, user: str, key_file: str,
                 known_hosts: str | None, insecure: bool = False, timeout: float = 10.0) -> None:  # fmt: skip
        self.node, self.host, self.port, self.user = node, host, port, user
        self.key_file, self.known_hosts, self.insecure, self.timeout = key_file, known_hosts, insecure, timeout
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()
        self.commands = 0  # commands run (client-side count)

    @classmethod
    def from_section(cls, node: str, raw: Any, timeout: float = 10.0) -> SshRunner:
        f = f"dpu.offload.{node}.ssh"
        if not isinstance(raw, Mapping):
            raise ConfigError(f, raw, "a mapping with keys host, port, user, key_file, known_hosts (or insecure)")
        for k in raw:
            if k not in SSH_KEYS:
                raise ConfigError(f"{f}.{k}", raw[k], f"known keys only: {', '.join(sorted(SSH_KEYS))}")
        for k in ("host", "user", "key_file"):
            if not isinstance(raw.get(k), str) or not raw[k]:
                raise ConfigError(f"{f}.{k}", raw.get(k), "a non-empty string")
        port = raw.get("port", 22)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError(f"{f}.port", port, "a TCP port in 1..65535")
        insecure = raw.get("insecure", False)
        if not isinstance(insecure, bool):
            raise ConfigError(f"{f}.insecure", insecure, "true or false (true: reported by the audit)")
        known = raw.get("known_hosts")
        if known:
            if insecure:
                raise ConfigError(f"{f}.insecure", True, "false when known_hosts is given (strict host-key checking)")
            if not Path(str(known)).is_file():
                raise ConfigError(f"{f}.known_hosts", known, "an existing known_hosts file (OpenSSH format)")
        elif not insecure:
            raise ConfigError(f"{f}.known_hosts", None, "a known_hosts file (or insecure: true, reported by the audit)")
        secret_file(f"{f}.key", raw["key_file"])  # a private key: mode 0600 or stricter
        return cls(node, raw["host"], port, raw["user"], raw["key_file"], str(known) if known else None, insecure, timeout)

    def transport_notes(self) -> tuple[TransportNote, ...]:
        if not self.insecure:
            return ()
        return (TransportNote(self.node, "ssh.insecure", f"SSH to the DPU of {self.node} at {self.host}:{self.port}: "
                              "host key not checked (insecure: true)"),)  # fmt: skip

    def _connect(self) -> paramiko.SSHClient:
        where = f"{self.host}:{self.port}"
        client = paramiko.SSHClient()
        if self.known_hosts:
            client.load_host_keys(self.known_hosts)
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        else:
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            client.connect(self.host, port=self.port, username=self.user, key_filename=self.key_file,
                           look_for_keys=False, allow_agent=False, timeout=self.timeout,
                           banner_timeout=self.timeout, auth_timeout=self.timeout)  # fmt: skip
        except paramiko.BadHostKeyException:
            client.close()
            raise FabricError(f"SSH to the DPU of {self.node}: host key of {where} does not match known_hosts "
                              f"({self.known_hosts}); nothing run", fabric="dpu", device=self.node) from None  # fmt: skip
        except paramiko.AuthenticationException as e:
            client.close()
            raise FabricError(f"SSH to the DPU of {self.node}: authentication as {self.user}@{where} failed: {e}",
                              fabric="dpu", device=self.node) from None  # fmt: skip
        except (paramiko.SSHException, OSError) as e:
            client.close()
            if "not found in known_hosts" in str(e):
                raise FabricError(f"SSH to the DPU of {self.node}: host key of {where} is unknown (not in "
                                  f"{self.known_hosts}); nothing run", fabric="dpu", device=self.node) from None  # fmt: skip
            raise FabricError(f"SSH to the DPU of {self.node} at {where}: {e}", fabric="dpu", device=self.node) from None
        return client

    def _session(self) -> paramiko.SSHClient:
        with self._lock:
            tr = self._client.get_transport() if self._client is not None else None
            if self._client is None or tr is None or not tr.is_active():
                self._client = self._connect()
            return self._client

    def run(self, args: Sequence[str]) -> str:
        """``args`` run on the DPU; its stdout (a non-zero exit status is a FabricError)."""
        cmd = shlex.join(args)
        try:
            _, out, err = self._session().exec_command(cmd, timeout=self.timeout)
            stdout = out.read().decode(errors="replace")
            status = out.channel.recv_exit_status()
            stderr = err.read().decode(errors="replace")
        except (paramiko.SSHException, OSError, EOFError) as e:
            self.close()
            raise FabricError(f"SSH to the DPU of {self.node}: {' '.join(args[:3])}: {e}", fabric="dpu",
                              device=self.node) from None  # fmt: skip
        self.commands += 1
        if status != 0:
            raise FabricError(f"{' '.join(args[:3])} on the DPU of {self.node} failed ({status}): {stderr.strip()[:300]}",
                              fabric="dpu", device=self.node)  # fmt: skip
        return stdout

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
