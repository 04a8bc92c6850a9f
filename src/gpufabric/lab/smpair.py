"""A trusted OpenSM master/standby pair on one ibsim fabric, each SM host reached over SSH.

The master is the lab's trusted OpenSM (:class:`~gpufabric.lab.ib.IbFabric`, ``sm-01 mlx5_0``,
priority 15, its files in the fabric's run directory). :func:`with_standby_node` adds a second
SM node ``sm-02 mlx5_0`` to a generated net file (leaf-01 port 17); :class:`SmPair` starts the
standby OpenSM there (priority 10, the master's opensm.conf with its own partitions file, log,
pid file, OSM_CACHE_DIR/OSM_TMP_DIR, and ``sminfo_polling_timeout 1000`` /
``polling_retry_number 2`` as measured in round3-facts.md, ``sa_db_dump TRUE`` into its own
``osm-tmp/opensm-sa.dump``) and one private sshd per SM host
(:class:`~gpufabric.lab.sshd.SshServer`, its own host key and known_hosts), and gives the
OpenSM driver's ``sm_hosts`` for both, each with its ``sa_dump`` (the IPoIB group check reads
the master's, whichever SM that is now), and the whole ``infiniband.options`` section
(:meth:`SmPair.driver_options`). ``stop`` ends only the PIDs started here.

:class:`PairNames` names a pair's two SM hosts: :data:`COMPUTE_PAIR` (sm-01 / sm-02, the
lab's one subnet or its compute subnet) and :data:`STORAGE_PAIR` (sm-03 / sm-04 ``mlx5_8``,
the storage subnet of ``lab up --ib-subnets 2``, GUIDs moved up as the storage net file's).

The pair outlives the process that started it (``gpufabric lab up --sm-pair``, lab/labib.py):
each sshd's port is kept in ``sshd-<host>/port`` and its PID in ``sshd-<host>/sshd.pid`` (its
``PidFile``), so a later process finds, checks and stops the same servers; ``start`` starts
only what is not running.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import LabError
from gpufabric.domain.values import Guid
from gpufabric.lab.ib import SAFE_PARTITIONS, IbFabric
from gpufabric.lab.netfile import SM_HOST, SM_NODE, STORAGE_DEVICE, STORAGE_SM_HOST, STORAGE_SM_NODE, storage_guid
from gpufabric.lab.procs import pid_alive, read_pid, stop_pid, wait_for
from gpufabric.lab.sshd import SshServer

STANDBY_NODE = "sm-02 mlx5_0"
STANDBY_NODE_GUID = Guid(0x0002C90340000000)
STANDBY_PORT_GUID = Guid(STANDBY_NODE_GUID.value + 1)
STANDBY_LEAF_PORT = 17
REPLACED = ("partition_config_file", "log_file", "dump_files_dir", "per_module_logging_file", "sm_priority",
            "sminfo_polling_timeout", "polling_retry_number", "sa_db_dump")  # fmt: skip
LOCAL_OPTIONS = ("partitions_conf", "log_path", "pid_file", "sa_dump")  # the lab's local SM: sm_hosts instead


@dataclass(frozen=True)
class PairNames:
    """The two SM hosts of one subnet's pair: names (``sm_hosts[].name``, sshd dirs), the
    master's HCA description, the standby's HCA description and GUIDs."""

    master: str
    standby: str
    master_node: str
    standby_node: str
    standby_node_guid: Guid

    @property
    def standby_port_guid(self) -> Guid:
        return Guid(self.standby_node_guid.value + 1)


COMPUTE_PAIR = PairNames(SM_HOST, "sm-02", SM_NODE, STANDBY_NODE, STANDBY_NODE_GUID)
STORAGE_PAIR = PairNames(STORAGE_SM_HOST, "sm-04", STORAGE_SM_NODE, f"sm-04 {STORAGE_DEVICE}",
                         storage_guid(STANDBY_NODE_GUID))  # fmt: skip


def with_standby_node(netfile: str, names: PairNames = COMPUTE_PAIR) -> str:
    """``netfile`` (from :func:`~gpufabric.lab.netfile.generate_netfile` or ``storage_netfile``)
    plus the standby's SM node (sm-02, or ``names``' standby) on leaf-01 port 17."""
    leaf = '\nSwitch 36 "leaf-01"\n'
    node = names.standby_node
    if leaf not in netfile or f"[{STANDBY_LEAF_PORT}] " in netfile.split(leaf, 1)[1].split("\n\n", 1)[0]:
        raise LabError(f"no free leaf-01 port {STANDBY_LEAF_PORT} for {node}", what="netfile")
    head, rest = netfile.split(leaf, 1)
    link = f'[{STANDBY_LEAF_PORT}] "{node}"[1]\n'
    master = re.escape(f'[18] "{names.master_node}"[1]')
    rest = re.sub(rf"^({master}\n)", lambda m: link + m.group(1), rest, count=1, flags=re.M)
    if link not in rest:
        raise LabError(f"leaf-01 has no {names.master} link on port 18", what="netfile")
    hca = f'\ncaguid={names.standby_node_guid}\nHca 1 "{node}"\n[1] "leaf-01"[{STANDBY_LEAF_PORT}]\n'
    return head + leaf + rest.rstrip("\n") + "\n" + hca


class SmPair:
    """The standby OpenSM next to ``fab``'s master, and one sshd per SM host (see module doc)."""

    def __init__(self, fab: IbFabric, run_dir: Path, names: PairNames = COMPUTE_PAIR) -> None:
        self.fab = fab
        self.names = names
        self.run_dir = Path(run_dir)
        self.dir = self.run_dir / names.standby
        self.partitions_conf = self.dir / "partitions.conf"
        self.opensm_conf = self.dir / "opensm.conf"
        self.log = self.dir / "opensm.log"
        self.pid_file = self.dir / "opensm.pid"
        self.sa_dump = self.dir / "osm-tmp" / "opensm-sa.dump"  # dump_files_dir/opensm-sa.dump
        self.sshd = {name: _server(self.run_dir / f"sshd-{name}") for name in (names.master, names.standby)}

    @property
    def master_pid_file(self) -> Path:
        return self.fab.run_dir / "opensm.pid"

    @property
    def standby_pid(self) -> int | None:
        return read_pid(self.pid_file)

    def sshd_running(self, name: str) -> bool:
        """The SM host's sshd runs (by its pid file: also one started by another process)."""
        return pid_alive(read_pid(self.sshd[name].run_dir / "sshd.pid"))

    def start(self) -> None:
        for name, s in self.sshd.items():
            if not self.sshd_running(name):
                s.start()
                (s.run_dir / "port").write_text(f"{s.port}\n")
        self.start_standby()

    def start_standby(self, timeout: float = 30, attempts: int = 5) -> int:
        """Start the standby and wait until the master has swept with it (SUBNET UP after its
        trap). On ibsim the master's sweep wedges in ~3 of 8 starts (one SMP to the joining SM
        is lost and umad2sim never times it out: OpenSM logs ``ERR 5401: evicting entry`` at
        exit, and ignores every later HUP); then both are restarted, up to ``attempts`` times,
        each attempt waiting 4 s longer than the one before (a sweep on a loaded machine is slower
        than 4 s without being wedged). A standby that runs already is kept as it is."""
        if pid_alive(self.standby_pid):
            pid = self.standby_pid
            assert pid is not None
            return pid
        for attempt in range(attempts):
            offset = self.fab.log_offset()
            pid = self._start_standby(timeout)
            try:
                wait_for(lambda o=offset: "SUBNET UP" in self.fab.log_since(o), 4 * (attempt + 1),
                         "master sweep with the standby")  # fmt: skip
                return pid
            except LabError:
                self.stop_standby()
                self.fab.restart_opensm()
        raise LabError(f"the master OpenSM wedged in {attempts} starts of the standby", what="opensm")

    def _start_standby(self, timeout: float) -> int:
        if pid_alive(self.standby_pid):
            pid = self.standby_pid
            assert pid is not None
            return pid
        for d in (self.dir / "osm-tmp", self.dir / "osm-cache", self.dir / "scratch"):
            d.mkdir(parents=True, exist_ok=True)
        if not self.partitions_conf.exists():
            self.partitions_conf.write_text(SAFE_PARTITIONS)
        kept = [ln for ln in self.fab.opensm_conf.read_text().splitlines() if ln.split(" ", 1)[0] not in REPLACED]
        self.opensm_conf.touch(mode=0o600)
        self.opensm_conf.write_text(
            "\n".join(kept) + "\n"
            f"sm_priority 10\npartition_config_file {self.partitions_conf}\nlog_file {self.log}\n"
            f"dump_files_dir {self.dir / 'osm-tmp'}\n"
            f"per_module_logging_file {self.dir / 'osm-tmp' / 'per-module-logging.conf'}\n"
            "sminfo_polling_timeout 1000\npolling_retry_number 2\nsa_db_dump TRUE\n"
        )
        env = self.fab.tool_env(self.names.standby_node)
        env["OSM_TMP_DIR"] = str(self.dir / "osm-tmp")
        env["OSM_CACHE_DIR"] = str(self.dir / "osm-cache")
        offset = self.log.stat().st_size if self.log.exists() else 0
        args = ["opensm", "-F", str(self.opensm_conf), "-P", str(self.partitions_conf), "-f", str(self.log),
                "-s", "0", "-p", "10"]  # fmt: skip
        with (self.dir / "opensm.out").open("ab") as out:
            p = subprocess.Popen(
                args, env=env, cwd=self.dir / "scratch", stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.pid_file.write_text(f"{p.pid}\n")
        wait_for(lambda: self.log_has(offset, "Entering STANDBY state") or not pid_alive(p.pid), timeout, "standby SM")
        if not pid_alive(p.pid):
            raise LabError(f"standby OpenSM exited (see {self.log})", what="opensm")
        return p.pid

    def log_has(self, offset: int, needle: str) -> bool:
        try:
            with self.log.open("rb") as f:
                f.seek(offset)
                return needle.encode() in f.read()
        except FileNotFoundError:
            return False

    def log_offset(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def kill_master(self) -> None:
        """``kill -9`` the master OpenSM (its PID as the lab recorded it)."""
        pid = read_pid(self.master_pid_file)
        if not pid_alive(pid):
            raise LabError("the master OpenSM is not running", what="opensm")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not pid_alive(pid), 10, "the master OpenSM to die")

    def sm_host(
        self, name: str, partitions_conf: Path, log: Path, pid_file: Path, guid: Guid, sa_dump: Path
    ) -> dict[str, Any]:  # fmt: skip
        s = self.sshd[name]
        return {
            "name": name, "host": s.host, "port": s.port, "user": s.username, "key_file": str(s.client_key),
            "known_hosts": str(s.known_hosts), "port_guid": str(guid), "partitions_conf": str(partitions_conf),
            "pid_file": str(pid_file), "log_file": str(log), "sa_dump": str(sa_dump),
        }  # fmt: skip

    def sm_hosts(self, master_guid: Guid) -> list[dict[str, Any]]:
        """The OpenSM driver's ``sm_hosts``: the master's files, then the standby's, each over its
        sshd, each with its own ``sa_dump``."""
        f, n = self.fab, self.names
        return [
            self.sm_host(n.master, f.partitions_conf, f.opensm_log, self.master_pid_file, master_guid, f.sa_dump),
            self.sm_host(n.standby, self.partitions_conf, self.log, self.pid_file, n.standby_port_guid, self.sa_dump),
        ]

    def driver_options(
        self, sm_node: str, master_guid: Guid, trusted_sm_guids: Sequence[object] = ()
    ) -> dict[str, Any]:
        """The ``infiniband.options`` section of ``fabrics.yaml`` for the pair: the lab fabric's
        options (read by SMP as ``sm_node``) with ``sm_hosts`` in place of the local SM's files."""
        opts = self.fab.driver_options(sm_node, trusted_sm_guids or [master_guid, self.names.standby_port_guid])
        for k in LOCAL_OPTIONS:
            opts.pop(k, None)
        opts["sm_hosts"] = self.sm_hosts(master_guid)
        return opts

    def stop_standby(self) -> None:
        """Stop the standby OpenSM (by its recorded PID), whatever state it is in now."""
        stop_pid(self.standby_pid)
        self.pid_file.unlink(missing_ok=True)

    def stop(self) -> None:
        self.stop_standby()
        for s in self.sshd.values():
            s.stop()
            stop_pid(read_pid(s.run_dir / "sshd.pid"))  # one another process started
            (s.run_dir / "sshd.pid").unlink(missing_ok=True)


def _server(run_dir: Path) -> SshServer:
    """The SM host's sshd on the port it was started on before (``port``), else a free one."""
    try:
        port: int | None = int((run_dir / "port").read_text())
    except (OSError, ValueError):
        port = None
    return SshServer(run_dir, port=port)
