"""The OVSDB driver against a private ovsdb-server/ovs-vswitchd: what only OVS can show.

The transaction count is checked twice: by the driver's own counter and by the
database log of ovsdb-server itself (``ovsdb-tool show-log -m conf.db``), where every
committed OVSDB transaction is one record.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufabric.domain.errors import ApplyError, FabricError, ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import COMMENT_PREFIX, OvsdbSwitchDriver
from gpufabric.fabrics.ethernet.readers.ovs_columns import ALL_VLANS
from gpufabric.fabrics.ethernet.readers.ovsdb_log import LogRecord, parse_show_log, records_with_comment
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode
from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.procs import run

pytestmark = pytest.mark.root

Q = VlanId(4000)
N_PORTS = 50


@dataclass
class Lab:
    ovs: OvsServer
    bridge: str
    ports: tuple[str, ...]
    prefix: str

    def log(self) -> tuple[LogRecord, ...]:
        return parse_show_log(run(["ovsdb-tool", "show-log", "-m", str(self.ovs.db)]))

    def driver(self, **kw: object) -> OvsdbSwitchDriver:
        return OvsdbSwitchDriver(self.bridge, self.ovs.remote, Q, 10, **kw)  # type: ignore[arg-type]


def _start(run_dir: Path, n_ports: int) -> Lab:
    prefix = "gd" + secrets.token_hex(2)
    ovs = OvsServer(run_dir, netns=f"{prefix}-ovs")  # own netns: one netdev datapath per netns
    ovs.start()
    bridge = f"{prefix}br"
    ports = tuple(f"{prefix}p{i:02d}" for i in range(n_ports))
    ovs.add_bridge(bridge, ports)
    return Lab(ovs, bridge, ports, prefix)


def _stop(lab: Lab) -> None:
    try:
        lab.ovs.vsctl("--if-exists", "del-br", lab.bridge)
    finally:
        lab.ovs.stop()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab = _start(tmp_path_factory.mktemp("ovsdb-driver"), N_PORTS)
    try:
        yield lab
    finally:
        _stop(lab)


def access(lab: Lab, port: str, vlan: int) -> EthernetPortConfig:
    return EthernetPortConfig(lab.bridge, port, PortMode.ACCESS, VlanId(vlan))


def test_binding_50_ports_is_one_ovsdb_transaction(lab: Lab) -> None:
    before = lab.log()
    with lab.driver() as d:
        d.apply([access(lab, p, 2000 + i) for i, p in enumerate(lab.ports)])
        assert d.transactions == 1
        state = d.observe()
    assert [state.port(p) for p in lab.ports] == [access(lab, p, 2000 + i) for i, p in enumerate(lab.ports)]
    new = lab.log()[len(before) :]
    # from ovsdb-server's own log: exactly one committed transaction touched Port rows ...
    touching_ports = [r for r in new if r.rows_of("Port")]
    assert len(touching_ports) == 1
    (txn,) = touching_ports
    # ... it is ours, and it holds all 50 ports
    assert txn.comment == f"{COMMENT_PREFIX} {N_PORTS} port(s) on {lab.bridge}"
    assert sorted(r.name for r in txn.rows_of("Port")) == sorted(lab.ports)
    assert records_with_comment(new, COMMENT_PREFIX) == (txn,)


def test_reapply_sends_no_transaction(lab: Lab) -> None:
    batch = [access(lab, p, 2100) for p in lab.ports[:5]]
    with lab.driver() as d:
        d.apply(batch)
        assert d.transactions == 1
        before = d.observe()
        n = len(lab.log())
        d.apply(batch)
        assert d.transactions == 1
        assert d.observe() == before
        assert [r for r in lab.log()[n:] if r.rows_of("Port")] == []
        # one port differing: one transaction again (the log records only the rows that changed)
        d.apply([*batch[:4], access(lab, batch[4].port, 2101)])
        assert d.transactions == 2
    (txn,) = records_with_comment(lab.log()[n:], COMMENT_PREFIX)
    assert [r.name for r in txn.rows_of("Port")] == [batch[4].port]


def test_unknown_port_sends_nothing_to_ovsdb(lab: Lab) -> None:
    with lab.driver() as d:
        n = len(lab.log())
        before = d.observe()
        with pytest.raises(ApplyError) as ei:
            d.apply([access(lab, lab.ports[0], 2200), access(lab, "gdnosuch", 2200)])
        assert ei.value.fields["ports"] == ["gdnosuch"]
        assert d.transactions == 0
        assert d.observe() == before
    assert [r for r in lab.log()[n:] if r.rows_of("Port")] == []


def test_port_of_another_bridge_is_unknown(lab: Lab) -> None:
    other = f"{lab.prefix}b2"
    lab.ovs.add_bridge(other)
    try:
        lab.ovs.vsctl("add-port", other, f"{lab.prefix}x", "--", "set", "interface", f"{lab.prefix}x", "type=internal")
        with lab.driver() as d, pytest.raises(ApplyError):
            d.apply([access(lab, f"{lab.prefix}x", 2300)])
        assert lab.ovs.vsctl("get", "port", f"{lab.prefix}x", "tag").strip() == "[]"
    finally:
        lab.ovs.vsctl("--if-exists", "del-br", other)


def test_observe_reads_what_others_wrote(lab: Lab) -> None:
    a, b, c = lab.ports[10], lab.ports[11], lab.ports[12]
    lab.ovs.vsctl("set", "port", a, "vlan_mode=access", "tag=4000", "protected=true")
    lab.ovs.vsctl("set", "port", b, "vlan_mode=access", "tag=4000", "protected=false")
    lab.ovs.vsctl("clear", "port", c, "vlan_mode", "--", "clear", "port", c, "tag", "--", "clear", "port", c, "trunks")
    with lab.driver() as d:
        state = d.observe()
    assert state.port(a) == EthernetPortConfig(lab.bridge, a, PortMode.SHUTDOWN)
    assert state.port(b) == access(lab, b, 4000)  # quarantine VLAN without `protected` is not shut
    got_c = state.port(c)
    assert got_c is not None and got_c.mode is PortMode.TRUNK and got_c.trunks == ALL_VLANS  # untagged = every VLAN


def test_shutdown_columns_in_ovsdb(lab: Lab) -> None:
    p = lab.ports[13]
    with lab.driver() as d:
        d.apply([EthernetPortConfig(lab.bridge, p, PortMode.SHUTDOWN)])
    cols = lab.ovs.vsctl("--columns=vlan_mode,tag,trunks,protected", "list", "port", p)
    assert " ".join(cols.split()) == "vlan_mode : access tag : 4000 trunks : [] protected : true"


def test_quarantine_vlan_is_not_a_tenant_vlan(lab: Lab) -> None:
    with lab.driver() as d, pytest.raises(ValidationError) as ei:
        d.apply([access(lab, lab.ports[14], 4000)])
    assert ei.value.field.endswith(".vlan")


def test_bridge_and_patch_ports_only_when_asked(lab: Lab) -> None:
    patch = f"{lab.prefix}pa"
    lab.ovs.vsctl(
        "add-port", lab.bridge, patch, "--", "set", "interface", patch, "type=patch", f"options:peer={lab.prefix}pz"
    )
    try:
        with lab.driver() as d:
            names = {p.port for p in d.observe().ports}
        assert names == set(lab.ports)
        with lab.driver(include_patch_ports=True, include_bridge_port=True) as d:
            names = {p.port for p in d.observe().ports}
            d.apply([EthernetPortConfig(lab.bridge, patch, PortMode.TRUNK, None, (VlanId(11), VlanId(12)))])
            got = d.observe().port(patch)
        assert names == {*lab.ports, patch, lab.bridge}
        assert got is not None and got.vlans() == {11, 12}
    finally:
        lab.ovs.vsctl("--if-exists", "del-port", lab.bridge, patch)


def test_two_drivers_on_two_servers_in_one_process(lab: Lab, tmp_path: Path) -> None:
    other = _start(tmp_path / "ovs2", 2)
    try:
        with lab.driver() as d1, other.driver() as d2:
            d2.apply([access(other, other.ports[0], 2400)])
            d1.apply([access(lab, lab.ports[20], 2401)])
            assert {p.port for p in d2.observe().ports} == set(other.ports)
            assert d2.observe().port(other.ports[0]) == access(other, other.ports[0], 2400)
            assert d1.observe().port(lab.ports[20]) == access(lab, lab.ports[20], 2401)
    finally:
        _stop(other)


def test_unreachable_ovsdb_is_a_fabric_error(tmp_path: Path) -> None:
    d = OvsdbSwitchDriver("gdnone", f"unix:{tmp_path / 'missing.sock'}", Q, timeout=2)
    with pytest.raises(FabricError) as ei:
        d.observe()
    assert ei.value.device == "gdnone" and ei.value.fabric == "ethernet"


def test_missing_bridge_is_a_fabric_error(lab: Lab) -> None:
    with OvsdbSwitchDriver(f"{lab.prefix}nobr", lab.ovs.remote, Q) as d:
        with pytest.raises(FabricError):
            d.observe()
        with pytest.raises(ApplyError):
            d.apply([EthernetPortConfig(f"{lab.prefix}nobr", "x", PortMode.ACCESS, VlanId(5))])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"switch": ""}, "switch", id="no-switch"),
        pytest.param({"remote": ""}, "remote", id="no-remote"),
        pytest.param({"quarantine_vlan": 1}, "quarantine_vlan", id="quarantine-vlan-1"),
        pytest.param({"quarantine_vlan": 5000}, "quarantine_vlan", id="quarantine-out-of-range"),
        pytest.param({"timeout": 0}, "timeout", id="timeout-0"),
    ],
)
def test_constructor_validates(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"switch": "br", "remote": "unix:/x", "quarantine_vlan": 4000, "timeout": 5, **kwargs}
    with pytest.raises(ValidationError) as ei:
        OvsdbSwitchDriver(**args)  # type: ignore[arg-type]
    assert ei.value.field == field
