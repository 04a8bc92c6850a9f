"""Benchmark: gpufabric's SSH driver (Linux+OVS dialect) vs networking-generic-switch 10.2.0.

Both drive the SAME private OVS (own network namespace, userspace datapath, one bridge
of 200 internal ports) through the SAME local sshd on 127.0.0.1 (own host key, one
authorized key; ``OVS_RUNDIR`` set in every session so a plain ``ovs-vsctl`` reaches the
private OVS). The main sshd presents a shell without the developer's dotfiles
(``plain_shell``: root's ~/.bashrc here runs ``pyenv init``, ~0.5 s of CPU per login); a
second sshd without that ("dotfiles sourced") shows what it costs each tool.

Binding N ports to a new access VLAN:

* gpufabric ``SshSwitchDriver`` (dialect ``ovs``): ONE ``apply`` = one SSH session, one
  ``ovs-vsctl`` invocation. "cold" includes opening the SSH connection; "warm" reuses it.
* NGS ``netmiko_ovs_linux`` standalone (bench/ngs_worker.py, in NGS's own venv
  bench/.work/ngs-venv, installed here with pip): ``plug_port_to_network`` per port,
  serial (one after the other) and concurrent (a thread pool, no coordination; etcd-based
  ``ngs_coordination`` is not used: no etcd on this machine). NGS serial is measured up
  to ``ngs_serial_max`` ports; larger sizes are EXTRAPOLATED from the measured per-port
  time and marked ``"measured": false``.

Every row is verified by reading the tags back from OVSDB locally; failures are recorded.
SSH sessions are counted server-side (sshd log ``Accepted publickey`` lines).

Run: ``.venv/bin/python -m bench.bench_ngs`` (writes bench/results/ethernet_ssh_vs_ngs.json).
"""

from __future__ import annotations

import json
import platform
import secrets
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
from gpufabric.fabrics.ethernet.drivers.ssh.driver import SshSwitchDriver
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode
from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.sshd import SshServer

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
NGS_VENV = WORK / "ngs-venv"
NGS_VERSION = "10.2.0"
RESULTS = HERE / "results" / "ethernet_ssh_vs_ngs.json"
SIZES = (10, 50, 200)
QUARANTINE = VlanId(4000)


def ensure_ngs_venv() -> Path:
    """bench/.work/ngs-venv with networking-generic-switch==10.2.0 (pip); returns its python."""
    py = NGS_VENV / "bin" / "python"
    probe = [str(py), "-c", "import importlib.metadata as m; print(m.version('networking-generic-switch'))"]
    if py.exists() and subprocess.run(probe, capture_output=True, text=True).stdout.strip() == NGS_VERSION:
        return py
    WORK.mkdir(parents=True, exist_ok=True)
    subprocess.run(["python3", "-m", "venv", str(NGS_VENV)], check=True)
    subprocess.run(
        [str(NGS_VENV / "bin" / "pip"), "install", "-q", f"networking-generic-switch=={NGS_VERSION}"], check=True
    )
    return py


def _tags(ovs: OvsServer) -> dict[str, Any]:
    doc = json.loads(ovs.vsctl("--format=json", "--columns=name,tag", "list", "port"))
    return {name: tag for name, tag in doc["data"]}


def _verify(ovs: OvsServer, ports: list[str], vlan: int) -> tuple[int, list[str]]:
    tags = _tags(ovs)
    wrong = [p for p in ports if tags.get(p) != vlan]
    return len(ports) - len(wrong), wrong


class _Bench:
    def __init__(self, tmp: Path, n_ports: int) -> None:
        prefix = "gv" + secrets.token_hex(2)
        self.bridge = f"{prefix}br"
        self.ports = [f"{prefix}p{i:03d}" for i in range(n_ports)]
        self.ovs = OvsServer(tmp / "ovs", netns=f"{prefix}-ovs")
        env = {"OVS_RUNDIR": str(self.ovs.run_dir)}
        self.sshd = SshServer(tmp / "ssh", env=env, plain_shell=True)
        self.sshd_dotfiles = SshServer(tmp / "ssh-dotfiles", env=env, clean_env=False)
        self.vlan = 100

    def start(self) -> None:
        self.ovs.start()
        self.ovs.add_bridge(self.bridge, self.ports)
        self.sshd.start()
        self.sshd_dotfiles.start()

    def stop(self) -> None:
        self.sshd.stop()
        self.sshd_dotfiles.stop()
        if self.ovs.running():
            self.ovs.vsctl("--if-exists", "del-br", self.bridge)
        self.ovs.stop()

    def next_vlan(self) -> int:
        self.vlan += 1
        return self.vlan

    def ssh_rows(self, n: int, server: SshServer, label: str) -> list[dict[str, Any]]:
        ports = self.ports[:n]
        drv = SshSwitchDriver(
            host=server.host,
            port=server.port,
            username=server.username,
            key_filename=str(server.client_key),
            known_hosts=str(server.known_hosts),
            dialect="ovs",
            switch=self.bridge,
            quarantine_vlan=QUARANTINE,
            bridge=self.bridge,
        )
        rows = []
        before = server.accepted()
        with drv:
            for mode in ("cold", "warm"):
                vlan = self.next_vlan()
                batch = [EthernetPortConfig(self.bridge, p, PortMode.ACCESS, VlanId(vlan)) for p in ports]
                t0 = time.monotonic()
                drv.apply(batch)
                seconds = time.monotonic() - t0
                ok, wrong = _verify(self.ovs, ports, vlan)
                rows.append(
                    {
                        "tool": "gpufabric-ssh",
                        "mode": f"one batch, {mode}{label}",
                        "ports": n,
                        "seconds": round(seconds, 4),
                        "per_port_seconds": round(seconds / n, 5),
                        "bound_ok": ok,
                        "failed": {p: "tag not set" for p in wrong},
                        "measured": True,
                    }
                )
        sessions = server.accepted() - before
        for r in rows:
            r["ssh_sessions_both_batches"] = sessions
        return rows

    def ovsdb_row(self, n: int) -> dict[str, Any]:
        """The OVSDB driver on the same OVS and ports: one transaction for the batch."""
        ports = self.ports[:n]
        vlan = self.next_vlan()
        with OvsdbSwitchDriver(self.bridge, self.ovs.remote, QUARANTINE) as drv:
            drv.observe()  # connect first: the connection is set up once per process, like the SSH warm row
            t0 = time.monotonic()
            drv.apply([EthernetPortConfig(self.bridge, p, PortMode.ACCESS, VlanId(vlan)) for p in ports])
            seconds = time.monotonic() - t0
            txns = drv.transactions
        ok, wrong = _verify(self.ovs, ports, vlan)
        return {
            "tool": "gpufabric-ovsdb",
            "mode": "one batch (one OVSDB transaction)",
            "ports": n,
            "seconds": round(seconds, 4),
            "per_port_seconds": round(seconds / n, 5),
            "bound_ok": ok,
            "failed": {p: "tag not set" for p in wrong},
            "transactions": txns,
            "measured": True,
        }

    def ngs_row(
        self, py: Path, n: int, threads: int, server: SshServer | None = None, label: str = ""
    ) -> dict[str, Any]:
        server = server or self.sshd
        ports = self.ports[:n]
        vlan = self.next_vlan()
        spec = {
            "host": server.host,
            "port": server.port,
            "username": server.username,
            "key_file": str(server.client_key),
            "ports": ports,
            "vlan": vlan,
            "threads": threads,
        }
        before = server.accepted()
        out = subprocess.run(
            [str(py), str(HERE / "ngs_worker.py"), json.dumps(spec)], capture_output=True, text=True, timeout=1800
        )
        found = [ln for ln in out.stdout.splitlines() if ln.startswith("NGS-RESULT ")]
        if out.returncode != 0 or not found:
            raise RuntimeError(f"NGS worker failed ({out.returncode}): {(out.stdout + out.stderr)[-2000:]}")
        res = json.loads(found[-1].removeprefix("NGS-RESULT "))
        ok, wrong = _verify(self.ovs, ports, vlan)
        failed = dict(res["failed"])
        failed.update({p: "tag not set (read back)" for p in wrong if p not in failed})
        return {
            "tool": f"ngs-{NGS_VERSION}",
            "mode": ("serial" if threads == 0 else f"{threads} threads, no coordination") + label,
            "ports": n,
            "seconds": round(res["seconds"], 3),
            "per_port_seconds": round(res["seconds"] / n, 4),
            "bound_ok": ok,
            "failed": failed,
            "ssh_sessions": server.accepted() - before,
            "measured": True,
        }


def _ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """NGS time over the SSH driver's cold one-batch time, same size and same sshd."""
    out = []
    for n in sorted({r["ports"] for r in rows}):
        for r in rows:
            if r["ports"] == n and r["tool"].startswith("ngs"):
                suffix = " (dotfiles sourced)" if r["mode"].endswith("(dotfiles sourced)") else ""
                ssh = next(x for x in rows if x["ports"] == n and x["mode"] == f"one batch, cold{suffix}")
                out.append(
                    {
                        "ports": n,
                        "ngs_mode": r["mode"],
                        "ngs_measured": r["measured"],
                        "ssh_mode": ssh["mode"],
                        "ngs_over_ssh_cold": round(r["seconds"] / ssh["seconds"], 1),
                    }
                )
    return out


def _targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ratios against NGS's best mode (fastest measured run that bound every port), same run."""
    out = []
    for n in sorted({r["ports"] for r in rows}):
        ngs = [r for r in rows if r["ports"] == n and r["tool"].startswith("ngs") and r.get("measured")
               and r.get("bound_ok") == n and "dotfiles" not in r["mode"]]  # fmt: skip
        ovsdb = next((r for r in rows if r["ports"] == n and r["tool"] == "gpufabric-ovsdb"), None)
        ssh = next((r for r in rows if r["ports"] == n and r["mode"] == "one batch, cold"), None)
        if not ngs or ovsdb is None or ssh is None:
            continue
        best = min(ngs, key=lambda r: r["seconds"])
        out.append({
            "ports": n, "ngs_best_mode": best["mode"], "ngs_best_seconds": best["seconds"],
            "ovsdb_seconds": ovsdb["seconds"], "ssh_cold_seconds": ssh["seconds"],
            "ovsdb_speedup": round(best["seconds"] / ovsdb["seconds"], 1), "ovsdb_target": 50,
            "ssh_speedup": round(best["seconds"] / ssh["seconds"], 1), "ssh_target": 10,
        })  # fmt: skip
    return out


def run_ngs_comparison(
    sizes: tuple[int, ...] = SIZES, *, ngs_serial_max: int = 50, ngs_threads: int = 50, write: bool = True
) -> list[dict[str, Any]]:
    """One row per (tool, mode, size); NGS serial beyond ``ngs_serial_max`` is extrapolated."""
    py = ensure_ngs_venv()
    rows: list[dict[str, Any]] = []
    t_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpf-bench-ngs-") as tmp:
        b = _Bench(Path(tmp), max(sizes))
        try:
            b.start()
            serial_per_port: float | None = None
            for n in sizes:
                rows.append(b.ovsdb_row(n))
                rows += b.ssh_rows(n, b.sshd, "")
                rows += b.ssh_rows(n, b.sshd_dotfiles, " (dotfiles sourced)")
                if n <= ngs_serial_max:
                    r = b.ngs_row(py, n, 0)
                    serial_per_port = r["per_port_seconds"]
                    rows.append(r)
                elif serial_per_port is not None:
                    rows.append(
                        {
                            "tool": f"ngs-{NGS_VERSION}",
                            "mode": "serial",
                            "ports": n,
                            "seconds": round(serial_per_port * n, 1),
                            "per_port_seconds": serial_per_port,
                            "measured": False,
                            "note": f"EXTRAPOLATED: measured serial per-port time at {ngs_serial_max} ports x {n}",
                        }
                    )
                rows.append(b.ngs_row(py, n, min(n, ngs_threads)))
                print(json.dumps(rows[-1]), file=sys.stderr)
                if n == ngs_serial_max:  # the same concurrent run with dotfiles sourced at login
                    rows.append(b.ngs_row(py, n, min(n, ngs_threads), b.sshd_dotfiles, " (dotfiles sourced)"))
        finally:
            b.stop()
    if write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(
            json.dumps(
                {
                    "benchmark": "bind N ports to an access VLAN on a local OVS over SSH",
                    "generated": datetime.now(UTC).isoformat(timespec="seconds"),
                    "machine": f"{platform.node()} {platform.machine()}, Python {platform.python_version()}",
                    "total_seconds": round(time.monotonic() - t_all, 1),
                    "rows": rows,
                    "ratios": _ratios(rows),
                    "targets_vs_ngs_best": _targets(rows),
                },
                indent=2,
            )
            + "\n"
        )
    return rows


if __name__ == "__main__":
    for row in run_ngs_comparison():
        print(json.dumps(row))
