"""The lab's Ethernet: one network namespace per node, veth "cables" into a leaf/spine of OVS bridges.

Per node ``<prefix>-<node>`` is a netns holding the node's NICs ``eth0``, ``eth1``, ... (the
node ends of veth pairs) with a MAC and an IP in ``10.77.0.0/16`` (only inside the
namespaces). The switch end of each veth (``<prefix>n<NNN>p<k>``, <= 15 chars) lives in the namespace
of the lab's ovs-vswitchd (``OvsServer(netns=...)``: one userspace-datapath vswitchd per
namespace, see lab/ovs.py) and is an OVS port on the node's leaf bridge ``<prefix>-leaf<LL>``, in access mode on
the quarantine VLAN (``EthPlan.quarantine_vlan``: the configured ``ethernet.quarantine_vlan``, handed in by
``gpufabric lab up``; never VLAN 1). Each leaf is joined to the one spine bridge ``<prefix>-spine`` by an OVS patch
port pair (``<prefix>-l<LL>-up`` / ``<prefix>-s-l<LL>``) trunking exactly the tenant VLAN pool
(never the quarantine VLAN: a quarantined port, parked alone in that VLAN and ``protected``, must
not reach one on another leaf), so tenant VLAN traffic crosses switches. New node ports start
quarantined (access on the quarantine VLAN, protected). Bridges use ``datapath_type=netdev`` (OvsServer).
A bonded node's ``eth0``/``eth1`` switch ends are the two members of one LACP OVS bond Port
``<prefix>n<NNN>b`` on its leaf (the VLAN is set on the bond, born quarantined like any port);
the node's side is its own OVS bridge (lab/bondhost.py).

:func:`plan_ethernet` is pure; :func:`ensure_ethernet` makes what is missing (idempotent) and
:func:`remove_ethernet` deletes exactly the names it is given.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import LabError, ValidationError
from gpufabric.domain.segments import IdRange, SegmentConfig
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.segments import DEFAULT_QUARANTINE_VLAN, DEFAULT_VLAN_RANGE, EthernetSegments
from gpufabric.lab.bondhost import LACP_OPTIONS
from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.procs import run

SUBNET_PREFIX = "10.77"
IFNAMSIZ = 15


@dataclass(frozen=True)
class EthPortPlan:
    node: str
    nic: str  # inside the netns: eth0, eth1, ...
    netns: str
    bridge: str  # the leaf bridge
    ovs_port: str  # the switch end of the veth (root netns), an OVS port on ``bridge``
    mac: str
    ip: str  # CIDR, e.g. 10.77.0.1/16 ("" on a bond's second member: the bond has one address)
    bond: str = ""  # the leaf's OVS bond Port this port is a member of ("" = a plain access port)
    bond_mode: str = ""  # "lacp" with bond


_POOL = IdRange.parse("vlan_range", DEFAULT_VLAN_RANGE)
DEFAULT_UPLINK_VLANS: Final = (_POOL.start, _POOL.end)  # the Ethernet kind's default tenant VLAN pool


def lab_vlans(segments: SegmentConfig) -> tuple[tuple[int, int], int]:
    """The tenant VLAN pool the lab's uplinks trunk and the quarantine VLAN its new ports start
    on: config.yaml's (``segments``, the Ethernet kind's section)."""
    mine = segments.of(EthernetSegments)
    return (mine.vlans.start, mine.vlans.end), mine.quarantine.value


@dataclass(frozen=True)
class EthPlan:
    prefix: str
    spine: str
    leaves: tuple[str, ...]
    ports: tuple[EthPortPlan, ...]
    uplink_vlans: tuple[int, int] = DEFAULT_UPLINK_VLANS  # inclusive: the tenant VLAN pool the uplinks carry
    quarantine_vlan: int = DEFAULT_QUARANTINE_VLAN  # new node ports start here; no uplink carries it

    @property
    def netns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.netns for p in self.ports))

    def patch_ports(self, leaf: str) -> tuple[str, str]:
        """(port on the leaf, port on the spine) of the leaf's uplink patch pair."""
        n = leaf.rsplit("leaf", 1)[1]
        return f"{self.prefix}-l{n}-up", f"{self.prefix}-s-l{n}"


def leaf_bridge(prefix: str, leaf_index: int) -> str:
    return f"{prefix}-leaf{leaf_index:02d}"


def plan_ethernet(
    prefix: str,
    nodes: Sequence[str],
    ports_per_node: int = 1,
    nodes_per_leaf: int = 4,
    bonded: Collection[str] = (),
    quarantine_vlan: int = DEFAULT_QUARANTINE_VLAN,
) -> EthPlan:
    """Names, MACs and IPs of every node port; nodes fill leaves in order, ``nodes_per_leaf`` each;
    every port starts on ``quarantine_vlan`` (the configured one: ``gpufabric lab up`` hands it in).

    A node in ``bonded`` has at least two NICs; ``eth0`` and ``eth1`` are the members of the LACP
    bond ``<prefix>n<NNN>b`` on its leaf, and the bond's address (``eth0``'s) lives on the node's
    own OVS bridge (lab/bondhost.py)."""
    q = VlanId.parse(quarantine_vlan, field="quarantine_vlan").value
    if q == 1:
        raise ValidationError("quarantine_vlan", q, "2-4094 (never VLAN 1, the default VLAN)")
    if not 1 <= ports_per_node <= 8:
        raise ValidationError("eth_ports_per_node", ports_per_node, "1-8")
    if not 1 <= len(nodes) <= 4000:
        raise ValidationError("nodes", len(nodes), "1-4000")
    if nodes_per_leaf < 1:
        raise ValidationError("nodes_per_leaf", nodes_per_leaf, ">= 1")
    unknown = sorted(set(bonded) - set(nodes))
    if unknown:
        raise ValidationError("bonded", ",".join(unknown), f"nodes of the lab ({nodes[0]}..{nodes[-1]})")
    salt = hashlib.sha1(prefix.encode()).digest()
    ports: list[EthPortPlan] = []
    leaves: list[str] = []
    for i, node in enumerate(nodes, start=1):
        leaf = leaf_bridge(prefix, (i - 1) // nodes_per_leaf + 1)
        if leaf not in leaves:
            leaves.append(leaf)
        bond = f"{prefix}n{i:03d}b" if node in bonded else ""
        for k in range(max(ports_per_node, 2) if bond else ports_per_node):
            host = k * 4096 + i
            member = bond if k < 2 else ""
            ports.append(
                EthPortPlan(
                    node=node,
                    nic=f"eth{k}",
                    netns=f"{prefix}-{node}",
                    bridge=leaf,
                    ovs_port=f"{prefix}n{i:03d}p{k}",
                    mac=f"02:{salt[0]:02x}:{salt[1]:02x}:{i >> 8:02x}:{i & 0xFF:02x}:{k:02x}",
                    ip="" if member and k == 1 else f"{SUBNET_PREFIX}.{host >> 8}.{host & 0xFF}/16",
                    bond=member,
                    bond_mode="lacp" if member else "",
                )
            )
    plan = EthPlan(prefix, f"{prefix}-spine", tuple(leaves), tuple(ports), quarantine_vlan=q)
    for name in (*plan.leaves, plan.spine, *(p.ovs_port for p in plan.ports), *(p.bond for p in plan.ports)):
        if len(name) > IFNAMSIZ:
            raise ValidationError("interface name", name, f"at most {IFNAMSIZ} characters (shorter lab prefix)")
    return plan


# --- real work -------------------------------------------------------------------------
def _ip(*args: str) -> str:
    return run(["ip", *args])


def list_netns() -> set[str]:
    out = _ip("netns", "list")
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def link_exists(name: str, netns: str | None = None) -> bool:
    args = ["ip", *(["-n", netns] if netns else []), "link", "show", "dev", name]
    return subprocess.run(args, capture_output=True, check=False).returncode == 0


def ensure_ethernet(ovs: OvsServer, plan: EthPlan) -> None:
    """Create the missing namespaces, veths, bridges and OVS ports of ``plan`` (idempotent)."""
    existing = list_netns()
    for ns in plan.netns:
        if ns not in existing:
            _ip("netns", "add", ns)
        _ip("-n", ns, "link", "set", "lo", "up")
    sw = ["-n", ovs.netns] if ovs.netns else []
    for p in plan.ports:
        if not link_exists(p.ovs_port, ovs.netns):
            if link_exists(p.nic, p.netns):  # a half-made pair from an interrupted run
                _ip("-n", p.netns, "link", "del", p.nic)
            _ip(*sw, "link", "add", p.ovs_port, "type", "veth", "peer", "name", p.nic, "netns", p.netns)
        _ip("-n", p.netns, "link", "set", p.nic, "address", p.mac)
        addrs = _ip("-n", p.netns, "-o", "addr", "show", "dev", p.nic)
        if not p.bond and f" {p.ip} " not in addrs:  # a bond's address lives on the node's own bridge
            _ip("-n", p.netns, "addr", "add", p.ip, "dev", p.nic)
        _ip("-n", p.netns, "link", "set", p.nic, "up")
        _ip(*sw, "link", "set", p.ovs_port, "up")
    cmds: list[str] = []
    lo, hi = plan.uplink_vlans
    trunks = "trunks=" + ",".join(str(v) for v in range(lo, hi + 1) if v != plan.quarantine_vlan)
    for br in (plan.spine, *plan.leaves):
        cmds += ["--", "--may-exist", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev"]
    for leaf in plan.leaves:
        up, down = plan.patch_ports(leaf)
        cmds += ["--", "--may-exist", "add-port", leaf, up, "--", "set", "interface", up, "type=patch",
                 f"options:peer={down}", "--", "set", "port", up, "vlan_mode=trunk", trunks]  # fmt: skip
        cmds += ["--", "--may-exist", "add-port", plan.spine, down, "--", "set", "interface", down, "type=patch",
                 f"options:peer={up}", "--", "set", "port", down, "vlan_mode=trunk", trunks]  # fmt: skip
    existing_ports = set(ovs.vsctl("--bare", "--columns=name", "list", "Port").split())
    bonds: dict[str, list[EthPortPlan]] = {}
    for p in plan.ports:
        if p.bond:
            bonds.setdefault(p.bond, []).append(p)
            continue
        cmds += ["--", "--may-exist", "add-port", p.bridge, p.ovs_port]
        if p.ovs_port not in existing_ports:  # a re-run must not undo a tenant VLAN set by a driver
            cmds += [
                "--",
                "set",
                "port",
                p.ovs_port,
                f"tag={plan.quarantine_vlan}",
                "vlan_mode=access",
                "protected=true",
            ]
    for bond, members in bonds.items():  # one OVS Port of both members; VLANs live on it only
        cmds += [
            "--",
            "--may-exist",
            "add-bond",
            members[0].bridge,
            bond,
            *(m.ovs_port for m in members),
            *LACP_OPTIONS,
        ]
        if bond not in existing_ports:
            cmds += ["--", "set", "port", bond, f"tag={plan.quarantine_vlan}", "vlan_mode=access", "protected=true"]
    ovs.vsctl(*cmds[1:], timeout=60)


def ovs_port_bridge(ovs: OvsServer, port: str) -> str | None:
    """The bridge an OVS port is on, or None."""
    try:
        return ovs.vsctl("port-to-br", port).strip() or None
    except LabError:
        return None


def remove_ethernet(ovs: OvsServer | None, bridges: Sequence[str], veths: Sequence[str], netns: Sequence[str]) -> None:
    """Delete exactly these bridges (if OVS runs), veths and namespaces; missing ones are fine."""
    if ovs is not None and ovs.running() and bridges:
        cmds: list[str] = []
        for br in bridges:
            cmds += ["--", "--if-exists", "del-br", br]
        ovs.vsctl(*cmds[1:], timeout=60)
    sw = ["-n", ovs.netns] if ovs is not None and ovs.netns else []
    sw_ns = sw[1] if sw else None
    if not sw_ns or sw_ns in list_netns():
        for v in veths:
            if link_exists(v, sw_ns):
                _ip(*sw, "link", "del", v)
    existing = list_netns()
    for ns in netns:
        if ns in existing:
            _ip("netns", "del", ns)
