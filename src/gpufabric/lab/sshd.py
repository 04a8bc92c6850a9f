"""A private OpenSSH server on 127.0.0.1 for the lab, tests and benchmarks.

Everything lives in one run directory: its own host key, one client key pair whose
public half is the only authorized key, a known_hosts file for strict host-key checking,
the config, and the log. It listens on a free loopback port, runs in the foreground
(``sshd -D``) as a child whose PID we keep, and :meth:`SshServer.accepted` counts the
``Accepted publickey`` lines of its log: the server-side count of SSH connections.

``clean_env`` (default) adds ``SetEnv SHLVL=1``: Debian's bash sources ~/.bashrc for a
non-interactive command when SSH_CLIENT is set and SHLVL < 2, and a developer's .bashrc
(here root's runs ``pyenv init``, ~0.5 s) would then be timed with every SSH command.
Interactive login shells (what netmiko opens) read ~/.profile whatever SHLVL says.
``plain_shell`` goes further for tools that open an interactive PTY shell (netmiko):
a ForceCommand wrapper runs the client's command, or an interactive shell, with
``bash --noprofile --norc``, so no tool pays for the developer's dotfiles.
``env`` adds more session variables (e.g. ``OVS_RUNDIR`` so a plain ``ovs-vsctl`` run
over SSH talks to a private OVS).
"""

from __future__ import annotations

import getpass
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path

from gpufabric.domain.errors import LabError
from gpufabric.lab.procs import pid_alive, run, stop_pid, wait_for

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SshServer:
    def __init__(
        self,
        run_dir: Path,
        *,
        port: int | None = None,
        clean_env: bool = True,
        env: Mapping[str, str] | None = None,
        plain_shell: bool = False,
    ) -> None:
        if plain_shell and not clean_env:
            raise LabError("plain_shell needs clean_env (the ForceCommand runs under the login shell)")
        self.run_dir = Path(run_dir)
        self.clean_env = clean_env
        self.plain_shell = plain_shell
        self.env = dict(env or {})  # set in every session (e.g. OVS_RUNDIR for a private OVS)
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.username = getpass.getuser()
        self.client_key = self.run_dir / "id_client"
        self.host_key = self.run_dir / "hostkey"
        self.known_hosts = self.run_dir / "known_hosts"
        self.config = self.run_dir / "sshd_config"
        self.log = self.run_dir / "sshd.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _write_files(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege-separation dir
        for key in (self.client_key, self.host_key):
            if not key.exists():
                run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
        (self.run_dir / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
        pub = self.host_key.with_suffix(".pub").read_text().split()
        self.known_hosts.write_text(f"[{self.host}]:{self.port} {pub[0]} {pub[1]}\n")
        self.config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    f"ListenAddress {self.host}",
                    f"HostKey {self.host_key}",
                    f"PidFile {self.run_dir / 'sshd.pid'}",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PubkeyAuthentication yes",
                    f"AuthorizedKeysFile {self.run_dir / 'authorized_keys'}",
                    "StrictModes no",
                    "UsePAM no",
                    "MaxSessions 100",
                    "MaxStartups 100:30:200",
                    "LogLevel INFO",
                    *([f"SetEnv {setenv}"] if (setenv := self._setenv()) else []),
                    *([f"ForceCommand {self._plain_shell_script()}"] if self.plain_shell else []),
                    "",
                ]
            )
        )

    def _plain_shell_script(self) -> Path:
        script = self.run_dir / "plain-shell"
        script.write_text(
            "#!/bin/sh\n"
            "# gpufabric lab sshd: the client's command, or an interactive shell, without dotfiles\n"
            'if [ -n "$SSH_ORIGINAL_COMMAND" ]; then exec /bin/bash --noprofile --norc -c "$SSH_ORIGINAL_COMMAND"; fi\n'
            "exec /bin/bash --noprofile --norc -i\n"
        )
        script.chmod(0o755)
        return script

    def _setenv(self) -> str:
        env = {**({"SHLVL": "1"} if self.clean_env else {}), **self.env}
        for k, v in env.items():
            if not k.isidentifier() or any(c in v for c in ' "\n'):
                raise LabError(f"sshd SetEnv {k}={v!r}: no spaces, quotes or newlines allowed", command=SSHD)
        return " ".join(f"{k}={v}" for k, v in env.items())

    def start(self) -> None:
        if self._proc is not None and pid_alive(self._proc.pid):
            return
        self._write_files()
        run([SSHD, "-t", "-f", str(self.config)])
        self.log.unlink(missing_ok=True)
        self._proc = subprocess.Popen(
            [SSHD, "-D", "-f", str(self.config), "-E", str(self.log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def listening() -> bool:
            if self._proc is not None and self._proc.poll() is not None:
                tail = self.log.read_text()[-500:] if self.log.exists() else ""
                raise LabError(f"sshd exited with {self._proc.returncode}: {tail}", command=SSHD)
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return True
            except OSError:
                return False

        wait_for(listening, 10, f"sshd on {self.host}:{self.port}")

    def connection_pids(self) -> list[int]:
        """PIDs of the per-connection sshd processes (children of our listener)."""
        if self._proc is None:
            return []
        kids: list[int] = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == self._proc.pid and fields[0] != "Z":
                kids.append(int(stat.parent.name))
        return kids

    def drop_connections(self) -> int:
        """End every open SSH connection (server side); returns how many."""
        kids = self.connection_pids()
        for pid in kids:
            stop_pid(pid)
        return len(kids)

    def stop(self) -> None:
        if self._proc is not None:
            self.drop_connections()
            stop_pid(self._proc.pid)
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self._proc = None

    def accepted(self) -> int:
        """Connections the server authenticated so far (``Accepted publickey`` log lines)."""
        if not self.log.exists():
            return 0
        return sum(1 for line in self.log.read_text().splitlines() if "Accepted publickey" in line)

    def __enter__(self) -> SshServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
