"""A real OVN for the lab: an OVN central (NB and SB ``ovsdb-server``, ``ovn-northd``) and, per
selected node, a DPU — its own userspace OVS (``ovsdb-server`` + ``ovs-vswitchd`` in its own
network namespace) with ``br-int`` and ``ovn-controller`` — plus veth "pods" bound to logical
ports by ``external_ids:iface-id``.

DPUs reach each other over Geneve with OVS's userspace tunnelling: each DPU namespace has a
``br-phy`` bridge holding its underlay IP (172.31.x.y/16) and a veth into a shared underlay
namespace (a Linux bridge). Everything lives under the caller's directory: processes are started
detached with pidfiles there, ``up`` is idempotent (a DPU whose processes all run is kept; one
with a dead process is rebuilt) and ``down`` stops exactly the recorded PIDs and namespaces.
Needs root. Facts: Debian ovn 23.03 (``ovn-controller`` rejects ``--unixctl``; ``OVS_RUNDIR`` is the
same for ``ovs-vswitchd`` and ``ovn-controller``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import LabError
from gpufabric.lab.procs import pid_alive, read_pid, run, stop_pid, wait_for

NB_SCHEMA = "/usr/share/ovn/ovn-nb.ovsschema"
SB_SCHEMA = "/usr/share/ovn/ovn-sb.ovsschema"
VS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
CENTRAL = ("ovnnb", "ovnsb", "ovn-northd")
DPU_PROCS = ("ovsdb-server", "ovs-vswitchd", "ovn-controller")


class OvnLab:
    """``OvnLab(root).up(["gpu-a01", "gpu-a02"])`` -> status; ``.add_pod(...)``; ``.down()``."""

    def __init__(self, root: Path, prefix: str = "gfd") -> None:
        self.root, self.prefix = Path(root), prefix
        self.central = self.root / "central"
        self.state_file = self.root / "ovn-lab.json"

    # ------------------------------------------------------------------ records
    def _state(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.state_file.read_text())
            return data
        except (OSError, ValueError):
            return {"dpus": {}, "pods": {}}

    def _save(self, st: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(st, indent=1, sort_keys=True))
        os.replace(tmp, self.state_file)

    @property
    def nb(self) -> str:
        return f"unix:{self.central / 'ovnnb.sock'}"

    @property
    def sb(self) -> str:
        return f"unix:{self.central / 'ovnsb.sock'}"

    def dpu_dir(self, node: str) -> Path:
        return self.root / "dpu" / node

    def ovsdb(self, node: str) -> str:
        return f"unix:{self.dpu_dir(node) / 'db.sock'}"

    def appctl_target(self, node: str) -> str:
        return str(self.dpu_dir(node) / "ovs-vswitchd.ctl")

    def netns(self, node: str) -> str:
        return f"{self.prefix}-d{self._state()['dpus'][node]['index']}"

    def _alive(self, d: Path, names: tuple[str, ...]) -> bool:
        return all(pid_alive(read_pid(d / f"{n}.pid")) for n in names)

    # ------------------------------------------------------------------ up
    def up(self, dpus: list[str]) -> dict[str, Any]:
        for tool in ("ovsdb-server", "ovn-northd", "ovn-controller", "ovs-vswitchd"):
            if shutil.which(tool) is None:
                raise LabError(f"{tool} not found (run scripts/setup.sh: ovn-central ovn-host)", command=tool)
        self._up_central()
        st = self._state()
        ul = f"{self.prefix}-ul"
        if ul not in _netns_list():
            run(["ip", "netns", "add", ul])
            run(["ip", "-n", ul, "link", "add", "br0", "type", "bridge"])
            run(["ip", "-n", ul, "link", "set", "br0", "up"])
        used = {d["index"] for d in st["dpus"].values()}
        for node in dpus:
            rec = st["dpus"].get(node)
            if rec is None:
                idx = next(i for i in range(1, 60000) if i not in used)
                used.add(idx)
                rec = st["dpus"][node] = {
                    "index": idx,
                    "encap_ip": f"172.31.{idx // 250}.{idx % 250 + 1}",
                    "netns": f"{self.prefix}-d{idx}",
                }
                self._save(st)
            if not self._alive(self.dpu_dir(node), DPU_PROCS):
                for key in [k for k in st["pods"] if k.startswith(f"{node}/")]:  # their veths die with the DPU
                    pod = st["pods"].pop(key)
                    if pod in _netns_list():
                        run(["ip", "netns", "del", pod])
                self._save(st)
                self._down_dpu(node, rec)
                self._up_dpu(node, rec)
        self._save(st)
        wait_for(lambda: set(dpus) <= self._chassis(), 20, "every DPU's chassis in the OVN southbound DB")
        return self.status()

    def _up_central(self) -> None:
        c = self.central
        if self._alive(c, CENTRAL):
            return
        self._stop_dir(c, CENTRAL)
        c.mkdir(parents=True, exist_ok=True)
        for db, schema in (("ovnnb", NB_SCHEMA), ("ovnsb", SB_SCHEMA)):
            if not (c / f"{db}.db").exists():
                run(["ovsdb-tool", "create", str(c / f"{db}.db"), schema])
            run(
                [
                    "ovsdb-server",
                    str(c / f"{db}.db"),
                    f"--remote=punix:{c / db}.sock",
                    f"--pidfile={c / db}.pid",
                    f"--log-file={c / db}.log",
                    f"--unixctl={c / db}.ctl",
                    "--detach",
                ]
            )
        run(
            [
                "ovn-northd",
                f"--ovnnb-db={self.nb}",
                f"--ovnsb-db={self.sb}",
                f"--pidfile={c}/ovn-northd.pid",
                f"--log-file={c}/ovn-northd.log",
                f"--unixctl={c}/ovn-northd.ctl",
                "--detach",
            ]
        )
        run(["ovn-nbctl", f"--db={self.nb}", "--timeout=10", "--wait=sb", "sync"])

    def _up_dpu(self, node: str, rec: dict[str, Any]) -> None:
        d, ns, idx = self.dpu_dir(node), f"{self.prefix}-d{rec['index']}", rec["index"]
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        env = {**os.environ, "OVS_RUNDIR": str(d), "OVN_RUNDIR": str(d), "OVS_LOGDIR": str(d), "OVN_LOGDIR": str(d)}
        run(["ovsdb-tool", "create", str(d / "conf.db"), VS_SCHEMA])
        run(
            [
                "ovsdb-server",
                str(d / "conf.db"),
                f"--remote=punix:{d}/db.sock",
                f"--pidfile={d}/ovsdb-server.pid",
                f"--log-file={d}/ovsdb-server.log",
                f"--unixctl={d}/ovsdb-server.ctl",
                "--detach",
            ]
        )
        vs = ["ovs-vsctl", f"--db={self.ovsdb(node)}", "--timeout=10"]
        run([*vs, "--no-wait", "init"])
        run(["ip", "netns", "add", ns])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(
            [
                "ip",
                "netns",
                "exec",
                ns,
                "ovs-vswitchd",
                f"unix:{d}/db.sock",
                f"--pidfile={d}/ovs-vswitchd.pid",
                f"--log-file={d}/ovs-vswitchd.log",
                f"--unixctl={d}/ovs-vswitchd.ctl",
                "--detach",
            ],
            env=env,
        )
        # underlay: br-phy holds the encap IP, a veth into the shared underlay bridge
        ul, peer = f"{self.prefix}-ul", f"{self.prefix}u{idx}"
        run([*vs, "--", "add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev"])
        run(["ip", "-n", ul, "link", "add", peer, "type", "veth", "peer", "name", "ul0", "netns", ns])
        run(["ip", "-n", ul, "link", "set", peer, "master", "br0", "up"])
        run(["ip", "-n", ns, "link", "set", "ul0", "up"])
        run([*vs, "add-port", "br-phy", "ul0"])
        run(["ip", "-n", ns, "addr", "add", f"{rec['encap_ip']}/16", "dev", "br-phy"])
        run(["ip", "-n", ns, "link", "set", "br-phy", "up"])
        run(
            [
                *vs,
                "--",
                "--may-exist",
                "add-br",
                "br-int",
                "--",
                "set",
                "bridge",
                "br-int",
                "datapath_type=netdev",
                "fail-mode=secure",
                "other-config:disable-in-band=true",
            ]
        )
        run(
            [
                *vs,
                "set",
                "open_vswitch",
                ".",
                f"external_ids:system-id={node}",
                f"external_ids:ovn-remote={self.sb}",
                "external_ids:ovn-encap-type=geneve",
                f"external_ids:ovn-encap-ip={rec['encap_ip']}",
                "external_ids:ovn-bridge-datapath-type=netdev",
            ]
        )
        run(
            [
                "ovn-controller",
                f"unix:{d}/db.sock",
                f"--pidfile={d}/ovn-controller.pid",
                f"--log-file={d}/ovn-controller.log",
                "--detach",
            ],
            env=env,
        )

    def _chassis(self) -> set[str]:
        out = run(["ovn-sbctl", f"--db={self.sb}", "--timeout=5", "--bare", "--columns=name", "list", "Chassis"])
        return {x.strip() for x in out.split() if x.strip()}

    # ------------------------------------------------------------------ pods
    def add_pod(self, node: str, representor: str, iface_id: str, mac: str, ip_cidr: str) -> str:
        """A veth pod on ``node``'s DPU: ``representor`` on ``br-int`` (bound to ``iface_id``),
        ``eth0`` with ``mac``/``ip_cidr`` in a new namespace (returned)."""
        st = self._state()
        if node not in st["dpus"]:
            raise LabError(f"no DPU for {node} in this OVN lab", node=node)
        ns, pod = self.netns(node), f"{self.prefix}-p{st['dpus'][node]['index']}-{representor}"
        self.remove_pod(node, representor)
        run(["ip", "netns", "add", pod])
        run(["ip", "-n", ns, "link", "add", representor, "type", "veth", "peer", "name", "eth0", "netns", pod])
        run(["ip", "-n", ns, "link", "set", representor, "up"])
        for args in (["lo", "up"], ["eth0", "address", mac], ["eth0", "up"]):
            run(["ip", "-n", pod, "link", "set", *args])
        run(["ip", "-n", pod, "addr", "add", ip_cidr, "dev", "eth0"])
        run(
            [
                "ovs-vsctl",
                f"--db={self.ovsdb(node)}",
                "--timeout=10",
                "--",
                "--may-exist",
                "add-port",
                "br-int",
                representor,
                "--",
                "set",
                "interface",
                representor,
                f"external_ids:iface-id={iface_id}",
            ]
        )
        st["pods"][f"{node}/{representor}"] = pod
        self._save(st)
        return pod

    def remove_pod(self, node: str, representor: str) -> None:
        st = self._state()
        pod = st["pods"].pop(f"{node}/{representor}", None)
        if node in st["dpus"] and self._alive(self.dpu_dir(node), ("ovsdb-server",)):
            run(
                [
                    "ovs-vsctl",
                    f"--db={self.ovsdb(node)}",
                    "--timeout=10",
                    "--if-exists",
                    "del-port",
                    "br-int",
                    representor,
                ]
            )
        if pod and pod in _netns_list():
            run(["ip", "netns", "del", pod])
        self._save(st)

    # ------------------------------------------------------------------ down / status
    def _stop_dir(self, d: Path, names: tuple[str, ...]) -> None:
        for n in reversed(names):
            stop_pid(read_pid(d / f"{n}.pid"))

    def _down_dpu(self, node: str, rec: dict[str, Any]) -> None:
        self._stop_dir(self.dpu_dir(node), DPU_PROCS)
        ns, peer, ul = f"{self.prefix}-d{rec['index']}", f"{self.prefix}u{rec['index']}", f"{self.prefix}-ul"
        have = _netns_list()
        if ul in have and _has_link(ul, peer):  # before the DPU namespace: deleting it destroys the pair
            run(["ip", "-n", ul, "link", "del", peer])
        if ns in have:
            run(["ip", "netns", "del", ns])

    def down(self) -> None:
        st = self._state()
        for key in list(st["pods"]):
            node, rep = key.split("/", 1)
            self.remove_pod(node, rep)
        for node, rec in st["dpus"].items():
            self._down_dpu(node, rec)
        self._stop_dir(self.central, CENTRAL)
        if f"{self.prefix}-ul" in _netns_list():
            run(["ip", "netns", "del", f"{self.prefix}-ul"])
        shutil.rmtree(self.root / "dpu", ignore_errors=True)
        shutil.rmtree(self.central, ignore_errors=True)
        self.state_file.unlink(missing_ok=True)

    def fabrics_section(self, kubernetes: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``dpu:`` section of fabrics.yaml for this lab (``kubernetes``: e.g. ``{"host": url}``)."""
        section: dict[str, Any] = {
            "ovn_nb": self.nb,
            "ovsdb": {node: self.ovsdb(node) for node in sorted(self._state()["dpus"])},
        }
        section["offload"] = {
            node: {"appctl": self.appctl_target(node), "netns": self.netns(node)}
            for node in sorted(self._state()["dpus"])
        }
        if kubernetes is not None:
            section["kubernetes"] = kubernetes
        return section

    def status(self) -> dict[str, Any]:
        st = self._state()
        return {
            "central": {"nb": self.nb, "sb": self.sb, "running": self._alive(self.central, CENTRAL)},
            "dpus": {
                node: {
                    "ovsdb": self.ovsdb(node),
                    "appctl": self.appctl_target(node),
                    "netns": rec.get("netns", f"{self.prefix}-d{rec['index']}"),
                    "encap_ip": rec["encap_ip"],
                    "running": self._alive(self.dpu_dir(node), DPU_PROCS),
                }
                for node, rec in sorted(st["dpus"].items())
            },
            "pods": dict(sorted(st["pods"].items())),
        }


def _netns_list() -> set[str]:
    return {line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line.strip()}


def _has_link(ns: str, name: str) -> bool:
    try:
        run(["ip", "-n", ns, "link", "show", name])
    except LabError:
        return False
    return True


def status(root: Path) -> dict[str, Any]:
    """The status of the OVN lab under ``root`` (what a kind's view reads through its CLI host)."""
    return OvnLab(root).status()
