"""The hypervisor side of a lab node that hosts GPU VMs (issue 33, ``up(vm_hosts=...)``).

Each named node runs its own userspace Open vSwitch (ovsdb-server + ovs-vswitchd, run dir
``<lab>/vmhosts/<node>``, its vswitchd in the node's namespace ``<prefix>-<node>``, where only it
has a netdev datapath) with one bridge, ``hv-<node>`` (:func:`hv_bridge`): a switch of the lab's
fabrics.yaml like a leaf (ovsdb driver, the instance's own socket). Its uplink is the node's
leaf-facing NIC ``eth0`` (a trunk of the tenant VLAN pool on this side: the leaf's port decides
which VLANs reach the host), and each GPU ``m`` has a VM: the namespace ``<prefix>-<node>-vm<m>``
(:func:`vm_netns`) whose ``eth0`` is a veth peered with port ``vm<m>`` of the bridge, born
quarantined (access on the quarantine VLAN, protected) like every lab port, with the address
``10.78.<host>.<m>/16`` (:func:`vm_ip`, ``host`` the node's place in ``vm_hosts`` from 1), so
every VM of every VM host is on one IP subnet and only the VLANs decide who reaches whom.

:func:`ensure_vm_host` is idempotent (a re-run does not undo a VLAN a driver set);
:func:`vm_hosts_down` stops every instance under ``vmhosts/`` (the lab's ``down`` deletes the VM
namespaces, recorded in state.json before they are made)."""

from __future__ import annotations

from pathlib import Path

from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.procs import run

UPLINK = "eth0"
"""The node's leaf-facing NIC: the hypervisor bridge's uplink."""
VM_SUBNET = "10.78"


def hv_bridge(node: str) -> str:
    """The hypervisor bridge of ``node`` (its switch name in fabrics.yaml)."""
    return f"hv-{node}"


def vm_port(module: int) -> str:
    """The bridge port (and the inventory NIC name) of the VM of GPU ``module``."""
    return f"vm{module}"


def vm_netns(prefix: str, node: str, module: int) -> str:
    return f"{prefix}-{node}-vm{module}"


def vm_ip(host_index: int, module: int) -> str:
    """The VM's address (CIDR); ``host_index`` from 1."""
    return f"{VM_SUBNET}.{host_index}.{module}/16"


def vm_mac(host_index: int, module: int) -> str:
    return f"52:54:00:78:{host_index:02x}:{module:02x}"


def hv_ovs(lab_dir: Path, node: str, netns: str) -> OvsServer:
    """The node's hypervisor OVS instance (its vswitchd runs in the node's namespace)."""
    return OvsServer(Path(lab_dir) / "vmhosts" / node, netns=netns)


def ensure_vm_host(
    ovs: OvsServer, prefix: str, node: str, host_index: int, gpus: int, pool: tuple[int, int], quarantine_vlan: int
) -> None:
    """Start the node's OVS, make its bridge with the uplink and one VM namespace + port per GPU."""
    ns = ovs.netns or ""
    ovs.start()
    br = hv_bridge(node)
    lo, hi = pool
    trunks = ",".join(str(v) for v in range(lo, hi + 1) if v != quarantine_vlan)
    existing = set(ovs.vsctl("--if-exists", "list-ports", br).split()) if br in ovs.vsctl("list-br").split() else set()
    cmds = ["--may-exist", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
            "--", "--may-exist", "add-port", br, UPLINK, "--", "set", "port", UPLINK, "vlan_mode=trunk", f"trunks={trunks}"]  # fmt: skip
    # the uplink only carries the VMs' frames: the node's own stack must not answer on it
    run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"net.ipv4.conf.{UPLINK}.arp_ignore=8",
         f"net.ipv6.conf.{UPLINK}.disable_ipv6=1"])  # fmt: skip
    for m in range(1, gpus + 1):
        port, vns = vm_port(m), vm_netns(prefix, node, m)
        if vns not in run(["ip", "netns", "list"]).split():
            run(["ip", "netns", "add", vns])
        run(["ip", "-n", vns, "link", "set", "lo", "up"])
        if not _has_link(ns, port):
            if _has_link(vns, "eth0"):
                run(["ip", "-n", vns, "link", "del", "eth0"])
            run(["ip", "-n", ns, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", vns])
        run(["ip", "-n", vns, "link", "set", "eth0", "address", vm_mac(host_index, m)])
        ip = vm_ip(host_index, m)
        if f" {ip} " not in run(["ip", "-n", vns, "-o", "addr", "show", "dev", "eth0"]):
            run(["ip", "-n", vns, "addr", "add", ip, "dev", "eth0"])
        run(["ip", "-n", vns, "link", "set", "eth0", "up"])
        run(["ip", "-n", ns, "link", "set", port, "up"])
        cmds += ["--", "--may-exist", "add-port", br, port]
        if port not in existing:  # born quarantined; a re-run keeps what a driver set
            cmds += ["--", "set", "port", port, f"tag={quarantine_vlan}", "vlan_mode=access", "protected=true"]
    ovs.vsctl(*cmds, timeout=60)


def _has_link(ns: str, name: str) -> bool:
    try:
        run(["ip", "-n", ns, "link", "show", "dev", name])
    except Exception:
        return False
    return True


def vm_hosts_down(lab_dir: Path) -> None:
    """Stop every hypervisor OVS instance of the lab (every run dir, even of an interrupted up)."""
    hosts = Path(lab_dir) / "vmhosts"
    for run_dir in sorted(hosts.iterdir()) if hosts.is_dir() else ():
        OvsServer(run_dir).stop()
