"""A private Open vSwitch instance (ovsdb-server + ovs-vswitchd, userspace datapath).

Everything lives under one run directory: database, sockets, pid files and logs, so
several instances (the developer's lab, parallel tests) run side by side. Bridges made
through :meth:`OvsServer.add_bridge` use ``datapath_type=netdev`` (there is no OVS
kernel module here). ``stop`` ends only the processes whose PIDs it recorded.

The userspace datapath opens one tap device named ``ovs-netdev`` in its network
namespace, so only ONE ovs-vswitchd with netdev bridges can run per namespace (a second
one logs "creating tap device failed: Device or resource busy" and creates no bridge).
Pass ``netns=`` to run ovs-vswitchd in its own network namespace: it is created by
``start`` when missing and deleted by ``stop`` (with every tap and veth end inside it)
when ``start`` created it. Ports of such an instance (e.g. the switch ends of veths)
must then live in that namespace.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gpufabric.lab.procs import pid_alive, read_pid, run, stop_pid, wait_for

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")


class OvsServer:
    def __init__(self, run_dir: Path, netns: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.netns = netns
        self._netns_marker = self.run_dir / "netns.created"
        self.db = self.run_dir / "conf.db"
        self.db_socket = self.run_dir / "db.sock"
        self._db_pid = self.run_dir / "ovsdb-server.pid"
        self._vs_pid = self.run_dir / "ovs-vswitchd.pid"

    @property
    def remote(self) -> str:
        """The OVSDB connection string for ovsdbapp / ovs-vsctl ``--db``."""
        return f"unix:{self.db_socket}"

    def pids(self) -> dict[str, int | None]:
        return {"ovsdb-server": read_pid(self._db_pid), "ovs-vswitchd": read_pid(self._vs_pid)}

    def running(self) -> bool:
        return all(pid_alive(p) for p in self.pids().values())

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["OVS_RUNDIR"] = str(self.run_dir)
        env["OVS_DBDIR"] = str(self.run_dir)
        env["OVS_LOGDIR"] = str(self.run_dir)
        return env

    def start(self) -> None:
        """Start both daemons; a no-op when they already run (idempotent)."""
        if self.running():
            return
        self.stop()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        env = self._env()
        if not self.db.exists():
            run(["ovsdb-tool", "create", str(self.db), str(SCHEMA)], env=env)
        run(
            [
                "ovsdb-server",
                str(self.db),
                f"--remote=punix:{self.db_socket}",
                f"--pidfile={self._db_pid}",
                f"--log-file={self.run_dir / 'ovsdb-server.log'}",
                f"--unixctl={self.run_dir / 'ovsdb-server.ctl'}",
                "--detach",
            ],
            env=env,
        )
        wait_for(self.db_socket.exists, 10, "ovsdb-server socket")
        self.vsctl("--no-wait", "init")
        in_netns: list[str] = []
        if self.netns:
            if self.netns not in run(["ip", "netns", "list"]).split():
                run(["ip", "netns", "add", self.netns])
                self._netns_marker.write_text(self.netns)
            in_netns = ["ip", "netns", "exec", self.netns]
        run(
            [
                *in_netns,
                "ovs-vswitchd",
                self.remote,
                f"--pidfile={self._vs_pid}",
                f"--log-file={self.run_dir / 'ovs-vswitchd.log'}",
                f"--unixctl={self.run_dir / 'ovs-vswitchd.ctl'}",
                "--detach",
            ],
            env=env,
        )
        wait_for(lambda: pid_alive(read_pid(self._vs_pid)), 10, "ovs-vswitchd")

    def stop(self) -> None:
        stop_pid(read_pid(self._vs_pid))
        stop_pid(read_pid(self._db_pid))
        for f in (self._vs_pid, self._db_pid):
            f.unlink(missing_ok=True)
        if self.netns and self._netns_marker.exists():
            if self.netns in run(["ip", "netns", "list"]).split():
                run(["ip", "netns", "del", self.netns])
            self._netns_marker.unlink()

    def vsctl(self, *args: str, timeout: float = 30) -> str:
        return run(["ovs-vsctl", f"--db={self.remote}", "--timeout=20", *args], env=self._env(), timeout=timeout)

    def add_bridge(self, name: str, internal_ports: Sequence[str] = ()) -> None:
        """A netdev bridge, with ``internal_ports`` added in the same ovs-vsctl call."""
        args = ["--may-exist", "add-br", name, "--", "set", "bridge", name, "datapath_type=netdev"]
        for p in internal_ports:
            args += ["--", "--may-exist", "add-port", name, p, "--", "set", "interface", p, "type=internal"]
        self.vsctl(*args, timeout=60)
