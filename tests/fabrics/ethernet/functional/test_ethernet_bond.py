"""A bonded node on a real LACP bond: gpufabric sets the VLAN on the leaf's bond (OVS Port of
two interfaces), never on the members; traffic crosses the bond; a member link cut keeps the
node reachable; quarantine shuts the bond as a whole.

Topology (one userspace-datapath OVS in its own netns, ../shared/notes/recipes/ovs-lacp-bond.sh:
the kernel has no bonding, so the bonded host is an OVS bridge of its own)::

    netns B: eth0 -- [host bridge H: access port hx, LACP bond hb(h1,h2)]
                                        || two veth pairs h1-l1, h2-l2
                      [leaf bridge L: LACP bond lb(l1,l2), port pa] -- eth0 :netns A

Inventory: node ``bonded`` has eth0/eth1 on L's l1/l2, both members of bond ``lb``; node
``plain`` has L's ``pa``. Addresses in 198.18.1.0/24 (RFC 2544), only inside the namespaces.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Lease, Network, Node
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.backend import EthernetBackend
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.state import PortMode
from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.procs import run

from support.ports import port_node
from support.segments import segment

pytestmark = pytest.mark.root

Q, VLAN = 4000, 101
KIND = EthernetKind()
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Bonded:
    p: str
    ovs: OvsServer
    drv: OvsdbSwitchDriver

    @property
    def ns(self) -> str:
        return f"{self.p}-ovs"

    def appctl(self, *args: str) -> str:
        return run(["ip", "netns", "exec", self.ns, "ovs-appctl", "-t", str(self.ovs.run_dir / "ovs-vswitchd.ctl"), *args])

    def nodes(self) -> tuple[Node, ...]:
        p = self.p
        bonded = port_node("bonded", ethernet=tuple(
            EthernetPort("bonded", f"eth{i}", f"{p}L", f"{p}l{i + 1}", "", f"{p}lb", "lacp") for i in range(2)))
        return bonded, port_node("plain", ethernet=(EthernetPort("plain", "eth0", f"{p}L", f"{p}pa"),))  # fmt: skip

    def move(self, tenant_of: dict[str, str | None]) -> list[tuple[str, PortMode]]:
        """Plan against the switch's real state and apply through the backend; the changes."""
        nodes = self.nodes()
        net = Network("n1", "acme", (segment("ethernet", VLAN, vlan=VlanId(VLAN)),))
        owners = {n.name: (Lease(t, n.name, T0, networks=("n1",)) if t else None) for n, t in
                  ((n, tenant_of[n.name]) for n in nodes)}  # fmt: skip
        t = Tenancy(nodes, owners, {("acme", "n1"): net}, settings={"quarantine_vlan": Q})
        plan = KIND.diff(KIND.desired(t), (self.drv.observe(),))
        EthernetBackend({self.drv.switch: self.drv}).apply(plan)
        self.appctl("revalidator/wait")
        assert list(KIND.audit(t, KIND.desired(t), (self.drv.observe(),))) == []
        return [(c.after.port, c.after.mode) for c in plan.changes]

    def ping(self) -> bool:
        r = subprocess.run(["ip", "netns", "exec", f"{self.p}-B", "ping", "-c", "2", "-i", "0.2", "-W", "1", "198.18.1.1"],
                           capture_output=True)  # fmt: skip
        return r.returncode == 0

    def tag(self, port: str) -> str:
        return self.ovs.vsctl("get", "port", port, "tag").strip()


def _wait(what: str, ok: object, timeout: float = 20.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if ok():  # type: ignore[operator]
            return time.monotonic() - t0
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout}s")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bonded]:
    p = "gb" + secrets.token_hex(2)
    ns = f"{p}-ovs"
    ovs = OvsServer(tmp_path_factory.mktemp("bond") / "ovs", netns=ns)
    hosts = (f"{p}-A", f"{p}-B")
    drv: OvsdbSwitchDriver | None = None
    try:
        ovs.start()
        ovs.add_bridge(f"{p}L")
        ovs.add_bridge(f"{p}H")
        for i in (1, 2):
            run(["ip", "-n", ns, "link", "add", f"{p}h{i}", "type", "veth", "peer", "name", f"{p}l{i}"])
            run(["ip", "-n", ns, "link", "set", f"{p}h{i}", "up"])
            run(["ip", "-n", ns, "link", "set", f"{p}l{i}", "up"])
        ovs.vsctl("add-bond", f"{p}H", f"{p}hb", f"{p}h1", f"{p}h2", "lacp=active", "bond_mode=balance-tcp")
        # the leaf's bond is born in quarantine (access 4000, protected), like every new port
        ovs.vsctl("add-bond", f"{p}L", f"{p}lb", f"{p}l1", f"{p}l2", "lacp=active", "bond_mode=balance-tcp",
                  "--", "set", "port", f"{p}lb", "vlan_mode=access", f"tag={Q}", "protected=true")  # fmt: skip
        for h, (br, port, ip) in zip(hosts, ((f"{p}L", f"{p}pa", "198.18.1.1"), (f"{p}H", f"{p}hx", "198.18.1.2")),
                                     strict=True):  # fmt: skip
            run(["ip", "netns", "add", h])
            run(["ip", "-n", ns, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h])
            run(["ip", "-n", h, "addr", "add", f"{ip}/24", "dev", "eth0"])
            run(["ip", "-n", h, "link", "set", "eth0", "up"])
            run(["ip", "-n", ns, "link", "set", port, "up"])
            extra = ["--", "set", "port", port, "vlan_mode=access", f"tag={Q}", "protected=true"] if br.endswith("L") else []
            ovs.vsctl("add-port", br, port, *extra)
        drv = OvsdbSwitchDriver(f"{p}L", ovs.remote, VlanId(Q), 10)
        yield Bonded(p, ovs, drv)
    finally:
        if drv is not None:
            drv.close()
        for h in hosts:
            subprocess.run(["ip", "netns", "del", h], capture_output=True, check=False)
        ovs.stop()


def test_lease_sets_the_bond_not_its_members_and_traffic_crosses_it(lab: Bonded) -> None:
    def negotiated() -> bool:
        out = lab.appctl("lacp/show", f"{lab.p}lb")
        return "status: active negotiated" in out and out.count("current attached") == 2

    secs = _wait("LACP negotiated, both members attached", negotiated)
    print(f"LACP negotiated in {secs:.2f}s")
    assert secs < 20
    assert not lab.ping()  # both in quarantine
    changes = lab.move({"bonded": "acme", "plain": "acme"})
    assert sorted(changes) == sorted([(f"{lab.p}lb", PortMode.ACCESS), (f"{lab.p}pa", PortMode.ACCESS)])
    assert lab.tag(f"{lab.p}lb") == str(VLAN)
    assert {m: lab.ovs.vsctl("get", "interface", m, "type").strip() for m in (f"{lab.p}l1", f"{lab.p}l2")} == {
        f"{lab.p}l1": '""', f"{lab.p}l2": '""'}  # the members stay interfaces of the bond, untouched
    _wait("ping through the bond", lab.ping)


def test_a_member_link_cut_keeps_the_node_reachable(lab: Bonded) -> None:
    run(["ip", "-n", lab.ns, "link", "set", f"{lab.p}l1", "down"])
    try:
        print(f"reachable again {_wait('ping over the remaining member', lab.ping):.2f}s after the cut")
        assert "disabled" in lab.appctl("bond/show", f"{lab.p}lb").split(f"member {lab.p}l1", 1)[1].split("\n", 1)[0]
        assert lab.tag(f"{lab.p}lb") == str(VLAN)
    finally:
        run(["ip", "-n", lab.ns, "link", "set", f"{lab.p}l1", "up"])


def test_quarantine_shuts_the_bond_as_a_whole(lab: Bonded) -> None:
    changes = lab.move({"bonded": None, "plain": "acme"})
    assert changes == [(f"{lab.p}lb", PortMode.SHUTDOWN)]
    assert lab.tag(f"{lab.p}lb") == str(Q)
    assert lab.ovs.vsctl("get", "port", f"{lab.p}lb", "protected").strip() == "true"
    assert not lab.ping()


def test_a_member_cut_during_a_move_leaves_the_bond_in_one_tenant(lab: Bonded) -> None:
    """l1 goes down while the node moves back into the tenant: the move sets the bond (not
    the members), the node is reachable over l2, and both members attach again afterwards."""
    run(["ip", "-n", lab.ns, "link", "set", f"{lab.p}l1", "down"])
    try:
        assert lab.move({"bonded": "acme", "plain": "acme"}) == [(f"{lab.p}lb", PortMode.ACCESS)]
        assert lab.tag(f"{lab.p}lb") == str(VLAN)
        _wait("ping over l2 alone", lab.ping)
    finally:
        run(["ip", "-n", lab.ns, "link", "set", f"{lab.p}l1", "up"])
    _wait("both members attached again", lambda: lab.appctl("lacp/show", f"{lab.p}lb").count("current attached") == 2)
    _wait("ping over both", lab.ping)
