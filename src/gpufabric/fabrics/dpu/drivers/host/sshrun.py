"""Commands on a DPU's Arm side over SSH (paramiko), for the offload report (I/O).

Section (``dpu.offload.<host>.ssh`` in fabrics.yaml)::

    ssh: {host: 192.0.2.21, port: 22, user: root, key_file: /etc/gpufabric/dpu_ed25519,
          known_hosts: /etc/gpufabric/dpu_known_hosts}

Connecting is the shared runner's (:mod:`gpufabric.transport.sshrun`): host keys are checked
strictly against ``known_hosts`` (paramiko ``RejectPolicy``), an unknown or mismatched key ends
the connection during key exchange, before authentication, so no command runs. ``insecure:
true`` (and no ``known_hosts``) accepts any key; it is explicit and reported
(:meth:`SshRunner.transport_notes` -> audit ``TRANSPORT-INSECURE``). ``key_file`` is a secret:
mode 0600 or stricter. One connection per DPU, opened on first use and reused (reopened when the
server dropped it); each command is one ``exec`` channel (no shell, no PTY), its
arguments quoted with :func:`shlex.join`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import ConfigError, FabricError
from gpufabric.transport.secrets import TransportNote, secret_file
from gpufabric.transport.sshrun import SshHost, SshPeer, SshSession

SSH_KEYS = frozenset({"host", "port", "user", "key_file", "known_hosts", "insecure"})


class SshRunner:
    """Runs argument vectors on one DPU over one reused SSH connection."""

    def __init__(self, node: str, host: str, port: int, user: str, key_file: str,
                 known_hosts: str | None, insecure: bool = False, timeout: float = 10.0) -> None:  # fmt: skip
        self.node, self.host, self.port, self.user = node, host, port, user
        self.key_file, self.known_hosts, self.insecure, self.timeout = key_file, known_hosts, insecure, timeout
        target = SshHost(host, port, user, key_file, known_hosts, insecure, connect_timeout=timeout)
        self._session = SshSession(target, SshPeer(f"SSH to the DPU of {node}:", "dpu", node, FabricError))
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
        return self._session.host.insecure_notes(self.node, "ssh.insecure", f"SSH to the DPU of {self.node}")

    def run(self, args: Sequence[str]) -> str:
        """``args`` run on the DPU; its stdout (a non-zero exit status is a FabricError)."""
        cmd = shlex.join(args)
        try:
            status, stdout, stderr = self._session.run(cmd, timeout=self.timeout)
        except FabricError:
            self.close()
            raise
        self.commands += 1
        if status != 0:
            raise FabricError(f"{' '.join(args[:3])} on the DPU of {self.node} failed ({status}): {stderr.strip()[:300]}",
                              fabric="dpu", device=self.node)  # fmt: skip
        return stdout

    def close(self) -> None:
        self._session.close()
