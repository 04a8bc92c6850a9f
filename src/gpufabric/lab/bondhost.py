"""The host side of a bonded lab node: an OVS bridge of its own in the node's namespace.

The kernel here has no bonding module, so (as in ../shared/notes/recipes/ovs-lacp-bond.sh) a
bonded node runs its own userspace Open vSwitch (ovsdb-server + ovs-vswitchd, run dir
``<lab>/hosts/<node>``) inside its namespace ``<prefix>-<node>``, where only it has a netdev
datapath. Its bridge ``br0`` holds the LACP bond ``bond0`` of the node's NICs ``eth0`` and
``eth1`` (``lacp=active``, ``balance-tcp``, fast LACP timers), and the node's address sits on
``br0``'s local port, with the MAC of ``eth0`` -- as an OVS-bonded server carries it; the
node's IP stack ignores the NICs themselves (no ARP answers, no packets taken off them). The switch
side (netns.py) bonds the two leaf ports the NICs are cabled to into one OVS bond Port.

:func:`ensure_host_bond` is idempotent; :func:`host_ovs` names a node's instance so ``down``
can stop exactly it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.procs import run

HOST_BRIDGE = "br0"
HOST_BOND = "bond0"
LACP_OPTIONS = ("lacp=active", "bond_mode=balance-tcp", "other_config:lacp-time=fast")
"""The bond's settings, the same on the host and on the leaf (an LACP pair must agree)."""


def host_ovs(lab_dir: Path, node: str, netns: str) -> OvsServer:
    """The node's own OVS instance (its vswitchd runs in the node's namespace)."""
    return OvsServer(Path(lab_dir) / "hosts" / node, netns=netns)


def ensure_host_bond(ovs: OvsServer, nics: Sequence[str], mac: str, ip: str) -> None:
    """Start the node's OVS and make ``br0`` + ``bond0(nics)`` with ``ip`` on ``br0`` (idempotent)."""
    ns = ovs.netns or ""
    ovs.start()
    ovs.vsctl(
        "--may-exist", "add-br", HOST_BRIDGE,
        "--", "set", "bridge", HOST_BRIDGE, "datapath_type=netdev", f"other_config:hwaddr={mac}",
        "--", "--may-exist", "add-bond", HOST_BRIDGE, HOST_BOND, *nics, *LACP_OPTIONS,
        timeout=60,
    )  # fmt: skip
    # The NICs only carry the bond. The netdev datapath reads them through packet sockets, so
    # unlike a kernel bond (which takes the frames) the node's IP stack sees every frame on them
    # too: it must neither answer ARP there (with the NIC's MAC) nor take IP packets off them.
    knobs = [f"net.ipv4.conf.{nic}.{k}" for nic in nics for k in ("arp_ignore=8", "rp_filter=1")]
    run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", *knobs, *(f"net.ipv6.conf.{n}.disable_ipv6=1" for n in nics)])
    if f" {ip} " not in run(["ip", "-n", ns, "-o", "addr", "show", "dev", HOST_BRIDGE]):
        run(["ip", "-n", ns, "addr", "add", ip, "dev", HOST_BRIDGE])
    run(["ip", "-n", ns, "link", "set", HOST_BRIDGE, "up"])
