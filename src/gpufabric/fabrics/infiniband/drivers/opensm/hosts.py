"""The SM hosts the OpenSM driver writes: where each SM's files are and how it is reached.

``sm_hosts`` (driver option): one entry per OpenSM of the subnet (master and standbys)::

    sm_hosts:
      - {name: sm-01, host: sm-01.example, port: 22, user: root, key_file: /etc/gpufabric/sm_id,
         known_hosts: /etc/gpufabric/sm_known_hosts, port_guid: "0x...",
         partitions_conf: /etc/opensm/partitions.conf, pid_file: /run/opensm.pid,
         log_file: /var/log/opensm.log, sa_dump: /var/log/opensm-sa.dump}
      - {name: sm-02, ..., reload: systemctl, unit: opensm}

Without ``sm_hosts`` the driver has one :class:`LocalSmHost` built from ``partitions_conf`` /
``log_path`` / ``pid_file`` | ``systemd_unit`` | ``reload_command`` (the co-located SM, the
lab's default). Each host is reached over SSH (:class:`SshSmHost`, host key checked against
``known_hosts``). ``sa_dump`` (optional) is that SM's ``opensm-sa.dump`` (``sa_db_dump TRUE``):
after an apply the IPoIB broadcast groups are read back from the master's copy over SSH
(:func:`read_script`), so after a failover they are checked on the new master. ``port_guid`` (the SM's HCA port) lets the driver tell master from standby
by SMInfo; without it the first host listed is taken for the master. Restart (rogue-SM
containment re-asserting the trusted master) goes the same way as reload: by pid file
(:func:`restart_script`: the SM's own argv and environment started again) or ``systemctl restart``.

Every host offers the same small file API (read, atomic write returning the sha256 read back
from the host, sha256, size, bytes from an offset of the log) and ``reload()``. Parsing is pure;
the I/O is in the two host classes.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpufabric.domain.errors import ApplyError, ConfigError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.opensm import files as smfiles
from gpufabric.fabrics.infiniband.drivers.opensm.ssh import SshExec, SshTarget

FABRIC = "infiniband"
HOST_KEYS = frozenset(
    {"name", "host", "port", "user", "key_file", "known_hosts", "port_guid", "partitions_conf",
     "pid_file", "reload", "unit", "log_file", "connect_timeout", "sa_dump"}
)  # fmt: skip


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class SmHostConfig:
    """One SM host of ``sm_hosts`` (validated)."""

    name: str
    host: str
    port: int
    user: str
    key_file: Path
    known_hosts: Path
    partitions_conf: Path
    log_file: Path
    pid_file: Path | None = None
    unit: str | None = None  # reload: systemctl -> ``systemctl reload UNIT``
    port_guid: Guid | None = None
    connect_timeout: float = 10.0
    sa_dump: Path | None = None  # OpenSM's opensm-sa.dump on the host (IPoIB groups read back)

    @property
    def last_good(self) -> Path:
        return self.partitions_conf.with_name(self.partitions_conf.name + ".last-good")


def parse_sm_hosts(value: Any) -> tuple[SmHostConfig, ...]:
    """``sm_hosts`` as configured; ConfigError naming the entry and the field."""
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        raise ConfigError("infiniband.options.sm_hosts", value, "a non-empty list of SM hosts")
    out = [_parse_host(i, h) for i, h in enumerate(value)]
    names = [h.name for h in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError("infiniband.options.sm_hosts[].name", dup[0], "a name unique among the SM hosts")
    return tuple(out)


def _parse_host(i: int, h: Any) -> SmHostConfig:
    where = f"infiniband.options.sm_hosts[{i}]"
    if not isinstance(h, Mapping):
        raise ConfigError(where, h, "a mapping {host, user, key_file, known_hosts, partitions_conf, log_file, ...}")
    unknown = sorted(set(h) - HOST_KEYS)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", h[unknown[0]], f"one of {', '.join(sorted(HOST_KEYS))}")
    for k in ("host", "user", "key_file", "known_hosts", "partitions_conf", "log_file"):
        if not isinstance(h.get(k), str) or not h[k]:
            raise ConfigError(f"{where}.{k}", h.get(k), "a non-empty string (required)")
    for k in ("partitions_conf", "log_file", "pid_file", "sa_dump"):
        if h.get(k) and not str(h[k]).startswith("/"):
            raise ConfigError(f"{where}.{k}", h[k], "an absolute path on the SM host")
    port = h.get("port", 22)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise ConfigError(f"{where}.port", port, "an integer 1..65535")
    reload = h.get("reload", "pid_file")
    if reload not in ("pid_file", "systemctl"):
        raise ConfigError(f"{where}.reload", reload, "pid_file (SIGHUP by pid file) or systemctl")
    if reload == "pid_file" and not h.get("pid_file"):
        raise ConfigError(f"{where}.pid_file", None, "the SM's pid file (or reload: systemctl)")
    guid = Guid.parse(h["port_guid"], f"{where}.port_guid") if h.get("port_guid") else None
    return SmHostConfig(
        name=str(h.get("name") or f"{h['host']}:{port}"),
        host=h["host"],
        port=port,
        user=h["user"],
        key_file=Path(h["key_file"]),
        known_hosts=Path(h["known_hosts"]),
        partitions_conf=Path(h["partitions_conf"]),
        log_file=Path(h["log_file"]),
        pid_file=Path(h["pid_file"]) if reload == "pid_file" else None,
        unit=str(h.get("unit") or "opensm") if reload == "systemctl" else None,
        port_guid=guid,
        connect_timeout=float(h.get("connect_timeout", 10.0)),
        sa_dump=Path(h["sa_dump"]) if h.get("sa_dump") else None,
    )


class SmHost(Protocol):
    """What the driver needs of one SM host."""

    name: str
    port_guid: Guid | None
    partitions_conf: Path
    last_good: Path
    log_file: Path
    sa_dump: Path | None

    def read(self, path: Path) -> str | None: ...
    def mode(self, path: Path) -> int | None: ...  # st_mode; None: no such file
    def write(self, path: Path, text: str) -> str: ...  # atomic; returns the sha256 read back
    def checksum(self, path: Path) -> str | None: ...
    def size(self, path: Path) -> int: ...
    def read_from(self, path: Path, offset: int) -> str: ...
    def reload(self) -> None: ...
    def close(self) -> None: ...


class LocalSmHost:
    """The co-located OpenSM: its files on this host, reloaded by pid file, systemd or a command."""

    def __init__(
        self,
        partitions_conf: Path,
        log_file: Path,
        *,
        pid_file: Path | None = None,
        systemd_unit: str | None = None,
        reload_command: tuple[str, ...] = (),
        port_guid: Guid | None = None,
        sa_dump: Path | None = None,
    ) -> None:
        self.name = "local"
        self.sa_dump = sa_dump
        self.partitions_conf = partitions_conf
        self.last_good = partitions_conf.with_name(partitions_conf.name + ".last-good")
        self.log_file = log_file
        self.pid_file = pid_file
        self.systemd_unit = systemd_unit
        self.reload_command = reload_command
        self.port_guid = port_guid

    def read(self, path: Path) -> str | None:
        return smfiles.read_text(path)

    def mode(self, path: Path) -> int | None:
        try:
            return path.stat().st_mode
        except FileNotFoundError:
            return None

    def write(self, path: Path, text: str) -> str:
        smfiles.atomic_write(path, text)
        return hashlib.sha256(path.read_bytes()).hexdigest()

    def checksum(self, path: Path) -> str | None:
        try:
            return hashlib.sha256(path.read_bytes()).hexdigest()
        except FileNotFoundError:
            return None

    def size(self, path: Path) -> int:
        return smfiles.size(path)

    def read_from(self, path: Path, offset: int) -> str:
        return smfiles.read_from(path, offset)

    def reload(self) -> None:
        """Make OpenSM re-read partitions.conf and sweep (SIGHUP)."""
        if self.pid_file is not None:
            try:
                os.kill(int(self.pid_file.read_text().strip()), signal.SIGHUP)
            except (OSError, ValueError) as e:
                raise ApplyError(f"cannot HUP OpenSM via {self.pid_file}: {e}", fabric=FABRIC) from None
        elif self.systemd_unit:
            run_cmd(["systemctl", "kill", "-s", "HUP", self.systemd_unit])
        elif self.reload_command:
            run_cmd(list(self.reload_command))
        else:
            raise ConfigError("infiniband.options", "reload", "one of pid_file, systemd_unit, reload_command")

    def close(self) -> None:
        return None


class SshSmHost:
    """An OpenSM on a host of its own, reached over SSH (see module docstring)."""

    def __init__(self, cfg: SmHostConfig, ssh: SshExec | None = None) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.port_guid = cfg.port_guid
        self.partitions_conf = cfg.partitions_conf
        self.last_good = cfg.last_good
        self.log_file = cfg.log_file
        self.sa_dump = cfg.sa_dump
        target = SshTarget(cfg.host, cfg.port, cfg.user, cfg.key_file, cfg.known_hosts, cfg.connect_timeout)
        if ssh is None:
            ssh = SshExec(target, cfg.name)
            ssh.check_known_host(f"infiniband.options.sm_hosts[{cfg.name}].known_hosts")
        self.ssh = ssh

    def _run(self, script: str, stdin: bytes = b"", ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
        status, out, err = self.ssh.run(script, stdin)
        if status not in ok:
            raise ApplyError(
                f"SM host {self.name}: `{script.splitlines()[0][:80]}` failed (exit {status}): {err.strip()[-200:]}",
                fabric=FABRIC, device=self.name, sm_host=self.name,
            )  # fmt: skip
        return status, out

    def read(self, path: Path) -> str | None:
        status, out = self._run(read_script(path), ok=(0, 3))
        return None if status == 3 else out

    def mode(self, path: Path) -> int | None:
        q = shlex.quote(str(path))
        status, out = self._run(f"if [ -e {q} ]; then stat -L -c %f {q}; else exit 3; fi", ok=(0, 3))
        try:
            return None if status == 3 else int(out.strip(), 16)
        except ValueError:
            return None

    def write(self, path: Path, text: str) -> str:
        """temp file next to ``path`` (created exclusively, 0644) + rename + sync of the file and
        its directory; the sha256 of ``path`` as the host reads it after the rename. Few
        processes on purpose: each costs the host a fork (and one SSH exec for the lot)."""
        q = shlex.quote(str(path))
        script = (
            f'set -e; umask 022; p={q}; d="${{p%/*}}"; [ -d "$d" ] || mkdir -p "$d"\n'
            't="$d/.gpufabric-partitions.$$"; trap \'rm -f "$t"\' EXIT; set -C; cat > "$t"; set +C\n'
            'mv -f "$t" "$p"; sync "$p" "$d" 2>/dev/null || true; sha256sum "$p"\n'
        )
        _, out = self._run(script, text.encode())
        return out.split()[0] if out.split() else ""

    def checksum(self, path: Path) -> str | None:
        q = shlex.quote(str(path))
        status, out = self._run(f"if [ -e {q} ]; then sha256sum {q}; else exit 3; fi", ok=(0, 3))
        return None if status == 3 or not out.split() else out.split()[0]

    def size(self, path: Path) -> int:
        q = shlex.quote(str(path))
        _, out = self._run(f"stat -c %s {q} 2>/dev/null || echo 0")
        return int(out.strip() or 0)

    def read_from(self, path: Path, offset: int) -> str:
        _, out = self._run(f"tail -c +{offset + 1} {shlex.quote(str(path))} 2>/dev/null || true")
        return out

    def reload(self) -> None:
        c = self.cfg
        if c.pid_file is not None:
            self._run(f'kill -HUP "$(cat {shlex.quote(str(c.pid_file))})"')
        else:
            self._run(f"systemctl reload {shlex.quote(c.unit or 'opensm')}")

    def restart(self) -> int | None:
        """Restart this SM (rogue-SM containment): by its pid file, or ``systemctl restart``
        (:func:`restart_script`). Returns the new PID (None with systemctl)."""
        _, out = self._run(restart_script(self.cfg))
        return int(out.split()[-1]) if self.cfg.pid_file is not None and out.split() else None

    def close(self) -> None:
        self.ssh.close()


def read_script(path: Path) -> str:
    """The shell script :meth:`SshSmHost.read` runs: ``path``'s text, exit 3 when it does not exist."""
    q = shlex.quote(str(path))
    return f"if [ -e {q} ]; then cat {q}; else exit 3; fi"


def restart_script(cfg: SmHostConfig) -> str:
    """The shell script :meth:`SshSmHost.restart` runs. ``reload: systemctl``: ``systemctl
    restart UNIT``. By pid file (an SM started from a script, as the lab's pair): the running
    SM's argv, environment and working directory are read from /proc, it gets SIGTERM (SIGKILL
    after 5 s), and the same argv starts again in that directory with that environment, in a
    session of its own, its output appended where the old one's went; it writes its PID to the
    pid file, which the script prints once the new process runs. Exit 3: no SM runs at the pid
    file's PID; 4: it would not stop; 5: the new one did not start."""
    if cfg.pid_file is None:
        return f"systemctl restart {shlex.quote(cfg.unit or 'opensm')}"
    return (
        f"set -e; pf={shlex.quote(str(cfg.pid_file))}; pid=$(cat \"$pf\" 2>/dev/null || true)\n"
        'case "$pid" in ""|*[!0-9]*) exit 3;; esac; [ -r "/proc/$pid/cmdline" ] || exit 3\n'
        't=$(mktemp -d); trap \'rm -rf "$t"\' EXIT\n'
        'cat "/proc/$pid/environ" "/proc/$pid/cmdline" > "$t/args"; cwd=$(readlink "/proc/$pid/cwd")\n'
        'out=$(readlink "/proc/$pid/fd/1" || true); [ -f "$out" ] || out=/dev/null\n'
        'kill -TERM "$pid"; i=0\n'
        'while [ -e "/proc/$pid" ] && [ "$(sed -n \'s/.*) \\(.\\).*/\\1/p\' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do\n'
        '  i=$((i+1)); [ $i -ne 100 ] || kill -KILL "$pid" 2>/dev/null || true; [ $i -lt 200 ] || exit 4; sleep 0.05\n'
        'done\n'
        'cd "$cwd"; setsid xargs -0 -a "$t/args" sh -c \'echo $$ > "$0"; exec env -i "$@"\' "$pf" '
        '< /dev/null >> "$out" 2>&1 &\n'
        'i=0; while n=$(cat "$pf" 2>/dev/null || true); [ -z "$n" ] || [ "$n" = "$pid" ] || [ ! -e "/proc/$n" ]; do\n'
        '  i=$((i+1)); [ $i -lt 200 ] || exit 5; sleep 0.05\n'
        'done; echo "$n"\n'
    )


def run_cmd(argv: list[str]) -> None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ApplyError(f"{' '.join(argv)} failed: {e}", fabric=FABRIC) from None
    if p.returncode != 0:
        raise ApplyError(f"{' '.join(argv)} failed (exit {p.returncode}): {p.stderr.strip()[-200:]}", fabric=FABRIC)
