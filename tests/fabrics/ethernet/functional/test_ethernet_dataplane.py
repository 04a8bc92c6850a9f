"""Tenant isolation on a real data plane, configured only through the OVSDB driver.

Topology (a private OVS in its own netns, userspace datapath; everything named with a
unique prefix and removed afterwards)::

    leaf1 --patch(trunk 101,102)-- spine --patch(trunk 101,102)-- leaf2
    h1 h2 h5 h6                                                   h3 h4

Each host is a network namespace with ``eth0`` (one end of a veth; the other end is an
OVS port on its leaf) and an address in 198.18.0.0/24 (RFC 2544 test range, only inside
the namespaces). Pings are ``ping -c 2 -i 0.2 -W 1`` per host pair, run in parallel, after one
uncounted ping per pair.

Finding (userspace datapath + veth): ping works as is; TCP does not unless TX checksum
offload is turned off on the host end (``ethtool -K eth0 tx off`` inside the netns) -
the netdev datapath reads frames with AF_PACKET and forwards the partial checksum.
"""

from __future__ import annotations

import itertools
import re
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode
from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.procs import run

pytestmark = pytest.mark.root

Q = VlanId(4000)
A, B = 101, 102
SUBNET = "198.18.0"
HOST_LEAF = {1: 1, 2: 1, 3: 2, 4: 2, 5: 1, 6: 1}


@dataclass
class Fabric:
    prefix: str
    ovs: OvsServer
    drivers: dict[str, OvsdbSwitchDriver] = field(default_factory=dict)  # by bridge
    host_ns: dict[int, str] = field(default_factory=dict)

    def leaf(self, n: int) -> str:
        return f"{self.prefix}l{n}"

    @property
    def spine(self) -> str:
        return f"{self.prefix}sp"

    def host_port(self, h: int) -> tuple[str, str]:
        """(bridge, OVS port) of host ``h``."""
        return self.leaf(HOST_LEAF[h]), f"{self.prefix}h{h}"

    def uplinks(self) -> list[tuple[str, str]]:
        p = self.prefix
        return [(self.leaf(1), f"{p}u1"), (self.leaf(2), f"{p}u2"), (self.spine, f"{p}d1"), (self.spine, f"{p}d2")]

    def bind(self, tenants: dict[int, int | None]) -> list[EthernetPortConfig]:
        """Put each host on its tenant VLAN (None = shut), one driver.apply per switch."""
        by_switch: dict[str, list[EthernetPortConfig]] = {}
        for h, vlan in tenants.items():
            br, port = self.host_port(h)
            cfg = (
                EthernetPortConfig(br, port, PortMode.SHUTDOWN)
                if vlan is None
                else EthernetPortConfig(br, port, PortMode.ACCESS, VlanId(vlan))
            )
            by_switch.setdefault(br, []).append(cfg)
        for br, changes in by_switch.items():
            self.drivers[br].apply(changes)
        self.settle()
        return [c for cs in by_switch.values() for c in cs]

    def settle(self) -> None:
        """Wait until ovs-vswitchd has revalidated its datapath flow cache.

        ``apply`` returns when vswitchd has taken the new configuration (``cur_cfg``), but
        megaflows already in the userspace datapath are revalidated asynchronously; a
        packet in that window can still follow a flow computed for the old VLANs.
        """
        run(["ovs-appctl", "-t", str(self.ovs.run_dir / "ovs-vswitchd.ctl"), "revalidator/wait"])

    def observed(self, cfg: EthernetPortConfig) -> EthernetPortConfig | None:
        return self.drivers[cfg.switch].observe().port(cfg.port)


def _sh(*args: str) -> None:
    run(list(args))


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fabric]:
    prefix = "gp" + secrets.token_hex(2)
    ovs_ns = f"{prefix}-ovs"
    fab = Fabric(prefix, OvsServer(tmp_path_factory.mktemp("dataplane") / "ovs", netns=ovs_ns))
    try:
        fab.ovs.start()
        for br in (fab.leaf(1), fab.leaf(2), fab.spine):
            fab.ovs.add_bridge(br)
        p = prefix
        patch: list[str] = []
        for (br, port), peer in zip(fab.uplinks(), (f"{p}d1", f"{p}d2", f"{p}u1", f"{p}u2"), strict=True):
            patch += ["--", "add-port", br, port, "--", "set", "interface", port, "type=patch", f"options:peer={peer}"]
            patch += ["--", "set", "port", port, "vlan_mode=trunk", f"trunks={Q.value - 1}"]  # never untagged
        fab.ovs.vsctl(*patch)
        for h in HOST_LEAF:
            ns = fab.host_ns[h] = f"{prefix}-h{h}"
            br, port = fab.host_port(h)
            _sh("ip", "netns", "add", ns)
            _sh("ip", "-n", ovs_ns, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _sh("ip", "-n", ns, "addr", "add", f"{SUBNET}.{h}/24", "dev", "eth0")
            _sh("ip", "-n", ns, "link", "set", "eth0", "up")
            _sh("ip", "-n", ovs_ns, "link", "set", port, "up")
            # born shut: quarantine VLAN + protected, never an untagged port
            fab.ovs.vsctl("add-port", br, port, "--", "set", "port", port, "vlan_mode=access", f"tag={Q.value}",
                          "protected=true")  # fmt: skip
        for br in (fab.leaf(1), fab.leaf(2), fab.spine):
            fab.drivers[br] = OvsdbSwitchDriver(br, fab.ovs.remote, Q, 10, include_patch_ports=True)
        for br, port in fab.uplinks():
            trunk = EthernetPortConfig(br, port, PortMode.TRUNK, None, (VlanId(A), VlanId(B)))
            fab.drivers[br].apply([trunk])
            assert fab.observed(trunk) == trunk
        fab.settle()
        yield fab
    finally:
        for d in fab.drivers.values():
            d.close()
        try:
            for ns in fab.host_ns.values():
                subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        finally:
            fab.ovs.stop()  # also deletes the OVS netns with every tap and veth end in it
        left = run(["ip", "netns", "list"])
        assert prefix not in left, f"namespaces left behind: {left}"


_LOSS_RE = re.compile(r"(\d+) packets transmitted, (\d+) received")


def parse_ping_received(text: str) -> tuple[int, int]:
    """(transmitted, received) from ping's summary line."""
    m = _LOSS_RE.search(text)
    if not m:
        raise AssertionError(f"no ping summary in: {text!r}")
    return int(m.group(1)), int(m.group(2))


def _pings(fab: Fabric, hosts: list[int], count: int) -> dict[tuple[int, int], subprocess.Popen[str]]:
    return {
        (a, b): subprocess.Popen(
            ["ip", "netns", "exec", fab.host_ns[a], "ping", "-n", "-c", str(count), "-i", "0.2", "-W", "1",
             f"{SUBNET}.{b}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for a, b in itertools.combinations(hosts, 2)
    }  # fmt: skip


def reachability(fab: Fabric, hosts: list[int]) -> dict[tuple[int, int], bool]:
    """For every host pair: True when 0% loss, False when 100% loss (anything else fails).
    One ping per pair first, not counted: right after a port changed VLAN, ARP and the
    userspace datapath's first upcall can lose the first packet of a pair that does reach."""
    for p in _pings(fab, hosts, 1).values():
        p.communicate(timeout=30)
    procs = _pings(fab, hosts, 2)
    result: dict[tuple[int, int], bool] = {}
    for pair, p in procs.items():
        out, _ = p.communicate(timeout=30)
        sent, got = parse_ping_received(out)
        assert got in (0, sent), f"h{pair[0]} -> h{pair[1]}: partial loss {got}/{sent}\n{out}"
        result[pair] = got == sent
    return result


def expected(tenants: dict[int, int | None]) -> dict[tuple[int, int], bool]:
    return {
        (a, b): tenants[a] is not None and tenants[a] == tenants[b]
        for a, b in itertools.combinations(sorted(tenants), 2)
    }


def test_parse_ping_received() -> None:
    out = "--- 198.18.0.2 ping statistics ---\n2 packets transmitted, 0 received, 100% packet loss, time 201ms\n"
    assert parse_ping_received(out) == (2, 0)


def test_tenants_isolated_then_move_flips_the_matrix(fabric: Fabric) -> None:
    tenants: dict[int, int | None] = {1: A, 2: B, 3: A, 4: B, 5: None, 6: None}
    for cfg in fabric.bind(tenants):
        assert fabric.observed(cfg) == cfg
    before = {br: d.transactions for br, d in fabric.drivers.items()}
    got = reachability(fabric, sorted(tenants))
    assert got == expected(tenants)
    assert got[(1, 3)] and got[(2, 4)]  # same tenant across leaf-spine-leaf
    assert not got[(1, 2)] and not got[(3, 4)] and not got[(5, 6)]

    tenants[3] = B  # move h3 (leaf2) from tenant A to tenant B: one transaction on leaf2
    fabric.bind({3: B})
    assert fabric.drivers[fabric.leaf(2)].transactions == before[fabric.leaf(2)] + 1
    got = reachability(fabric, sorted(tenants))
    assert got == expected(tenants)
    assert got[(3, 4)] and got[(2, 3)] and not got[(1, 3)]


def test_shut_port_reaches_nobody(fabric: Fabric) -> None:
    tenants: dict[int, int | None] = {1: A, 2: A, 3: A, 4: B, 5: B, 6: B}
    fabric.bind(tenants)
    assert all(reachability(fabric, [1, 2, 3]).values())
    tenants[1] = None
    fabric.bind({1: None})
    got = reachability(fabric, sorted(tenants))
    assert got == expected(tenants)
    assert not got[(1, 2)] and not got[(1, 3)] and got[(2, 3)]
    # shut ports on different leaves: the quarantine VLAN is not on the uplink trunks
    fabric.bind({3: None})
    assert reachability(fabric, [1, 2, 3]) == {(1, 2): False, (1, 3): False, (2, 3): False}


def test_trunk_carries_only_listed_vlans(fabric: Fabric) -> None:
    """VLAN 103 is not on the uplink trunks: it works inside leaf1, never across the spine."""
    fabric.bind({1: 103, 2: 103, 3: 103})
    assert reachability(fabric, [1, 2, 3]) == {(1, 2): True, (1, 3): False, (2, 3): False}


def test_quarantine_vlan_alone_would_leak_protected_stops_it(fabric: Fabric) -> None:
    """The control: two ports in the quarantine VLAN *without* ``protected`` do talk;
    the driver's SHUTDOWN (same VLAN, protected) does not."""
    _, p5 = fabric.host_port(5)
    _, p6 = fabric.host_port(6)
    fabric.ovs.vsctl("set", "port", p5, "vlan_mode=access", f"tag={Q.value}", "protected=false",
                     "--", "set", "port", p6, "vlan_mode=access", f"tag={Q.value}", "protected=false")  # fmt: skip
    fabric.settle()
    assert reachability(fabric, [5, 6]) == {(5, 6): True}
    fabric.bind({5: None, 6: None})
    assert reachability(fabric, [5, 6]) == {(5, 6): False}


def test_fixture_names_fit_linux_limits(fabric: Fabric) -> None:
    names = [fabric.leaf(1), fabric.leaf(2), fabric.spine, *(fabric.host_port(h)[1] for h in HOST_LEAF)]
    assert all(len(n) <= 15 for n in names)
    assert all(n.startswith(fabric.prefix) for n in names)
