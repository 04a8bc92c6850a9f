"""Site-check findings without devices: levels and exit codes, the trusted-SM comparison, the
hardening reading, the PKey pool against foreign partitions, VLAN range rendering."""

from __future__ import annotations

from pathlib import Path

from gpufabric.domain.errors import ApplyError
from gpufabric.domain.models import Network, Node
from gpufabric.domain.site_check import CheckLevel, SiteCheck, SiteContext, worst
from gpufabric.domain.values import Guid, ModuleId, PKey, VlanId
from gpufabric.fabrics.ethernet.drivers.base import EthernetSwitchDriver
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.ethernet.site_check import _ranges, ethernet_site_checks
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState
from gpufabric.fabrics.infiniband.audit.hardening import OPENSM_DEFAULTS
from gpufabric.fabrics.infiniband.site_check import hardening, pkey_pool, standby_files, trusted_sms
from gpufabric.fabrics.infiniband.state import IbFabricState, PkeyTable, SmFileSeen, SmSeen, SmState
from gpufabric.store.registry import parse_segments

from support.ports import port_node
from support.segments import segment

SM, ROGUE = Guid(0x0002C90310000001), Guid(0x0002C903100000AA)


def test_exit_codes_by_worst_level() -> None:
    assert [lv.exit_code for lv in CheckLevel] == [0, 1, 3, 4]
    checks = [SiteCheck("A", CheckLevel.OK, "x"), SiteCheck("B", CheckLevel.ERROR, "y"), SiteCheck("C", CheckLevel.WARNING, "z")]
    assert worst(checks) is CheckLevel.ERROR and worst([]) is CheckLevel.OK
    assert checks[1].to_dict() == {"id": "B", "severity": "error", "message": "y", "subject": ""}


def test_trusted_sm_answering_is_ok_and_a_rogue_is_critical() -> None:
    state = IbFabricState(sms=(SmSeen(SM, 1, 15, SmState.MASTER, "sm-01"), SmSeen(ROGUE, 7, 15, SmState.STANDBY)))
    got = {(c.subject, c.level) for c in trusted_sms(state, (SM,))}
    assert got == {(str(SM), CheckLevel.OK), (str(ROGUE), CheckLevel.CRITICAL)}
    missing = trusted_sms(IbFabricState(sms=(SmSeen(ROGUE, 7, 15, SmState.MASTER),)), (SM,))
    assert [(c.level, c.subject) for c in missing] == [(CheckLevel.CRITICAL, str(ROGUE)), (CheckLevel.ERROR, str(SM))]
    assert [c.level for c in trusted_sms(IbFabricState(), (SM,))] == [CheckLevel.ERROR, CheckLevel.ERROR]


def test_a_standby_sm_file_edited_by_hand_is_critical_and_one_as_written_is_ok() -> None:
    ok, edited = "a" * 64, "b" * 64
    master = SmFileSeen("sm-01", "master", ok, ok)
    fine = standby_files(IbFabricState(sm_files=(master, SmFileSeen("sm-02", "standby", ok, ok))), "opensm")
    assert [(c.id, c.level, c.subject) for c in fine] == [("IB-SM-CONFIG-DIVERGED", CheckLevel.OK, "opensm")]
    assert "sm-02 is what gpufabric wrote" in fine[0].message
    bad = standby_files(IbFabricState(sm_files=(master, SmFileSeen("sm-02", "standby", edited, ok),
                                                SmFileSeen("sm-03", "standby", "", ok, "no such file"))), "opensm")  # fmt: skip
    assert [(c.level, c.subject) for c in bad] == [(CheckLevel.CRITICAL, "sm-02"), (CheckLevel.ERROR, "sm-03")]
    assert "revert tenant isolation" in bad[0].message and "no such file" in bad[1].message
    assert standby_files(IbFabricState(sm_files=(SmFileSeen("local", "master", ok, ok),)), "opensm") == []


def test_hardening_defaults_are_errors_naming_sm_key() -> None:
    found = hardening(IbFabricState(settings=tuple(OPENSM_DEFAULTS.items())), "opensm")
    assert any(c.subject == "opensm:sm_key" and c.level is CheckLevel.ERROR for c in found)
    assert hardening(IbFabricState(), "ufm")[0].level is CheckLevel.WARNING  # not checked: why


def test_pkey_pool_against_foreign_partitions_and_tables() -> None:
    cfg = parse_segments()  # PKeys 0x0a00.. for seg 3000..
    table = PkeyTable(Guid(0x101), (0xFFFF, 0x8A03, 0x8A07, 0x9000))  # 0x0a03 ours, 0x0a07 not, 0x1000 out of pool
    ours = Network("n", "alpha", (segment("infiniband", 3003, pkey=PKey(0x0A03)),))
    ctx = SiteContext(networks=(ours,), segments=cfg)
    got = pkey_pool(IbFabricState(tables=(table,)), ctx, {0x0A05: "partition storage of partitions.conf"})
    assert [(c.level, c.subject) for c in got] == [(CheckLevel.ERROR, "pkey:0x0a05"), (CheckLevel.ERROR, "pkey:0x0a07")]
    assert "seg_id 3007" in got[1].message and f"port {Guid(0x101)}" in got[1].message
    assert [c.level for c in pkey_pool(IbFabricState(tables=(table,)), SiteContext(networks=(ours,), segments=cfg), {})][:1] == [CheckLevel.ERROR]
    clean = pkey_pool(IbFabricState(), ctx, {})
    assert [c.level for c in clean] == [CheckLevel.OK]


def test_vlan_ranges_render_compactly() -> None:
    assert _ranges([5, 1, 2, 3, 9, 10]) == "1-3,5,9-10"


class _Fails:
    def read(self) -> None:
        raise ValueError("certificate verify failed: self-signed certificate")


class _Reads:
    def read(self) -> tuple[()]:
        return ()


class _Dpu:
    def __init__(self) -> None:
        self.ovs = {"gpu-a01": _Reads()}
        self.ovn, self.k8s = _Fails(), None


def test_dpu_refused_certificate_and_a_dpu_host_without_remote() -> None:
    from gpufabric.fabrics.dpu.entries import Dpu, dpu_ports
    from gpufabric.fabrics.dpu.site_check import dpu_site_checks

    nodes = (Node("gpu-a01"), Node("gpu-a02", fabric_ports=dpu_ports(Dpu("gpu-a02", "bf3-0"))))
    got = [(c.id, c.level, c.subject) for c in dpu_site_checks(_Dpu(), SiteContext(nodes=nodes))]
    assert got == [("DPU-REACH", CheckLevel.OK, "ovs:gpu-a01"), ("DPU-REACH", CheckLevel.ERROR, "ovn_nb"),
                   ("DPU-INVENTORY", CheckLevel.ERROR, "gpu-a02")]  # fmt: skip
    assert "certificate verify failed" in dpu_site_checks(_Dpu(), SiteContext())[1].message


def test_nvlink_node_with_gpus_but_no_fabric_manager(tmp_path: Path) -> None:
    from gpufabric.fabrics.nvlink.backend import FmpmDriver, nvlink_site_checks
    from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports

    drv = FmpmDriver(fm={"gpu-a01": f"unix:{tmp_path}/no-fm.sock"}, fmpm=["false"], timeout=5)
    nodes = (Node("gpu-a02", fabric_ports=gpu_ports(Gpu("gpu-a02", ModuleId(1)))),)
    got = [(c.id, c.level, c.subject) for c in nvlink_site_checks(drv, SiteContext(nodes=nodes))]
    assert got == [("NVLINK-REACH", CheckLevel.ERROR, "gpu-a01"), ("NVLINK-INVENTORY", CheckLevel.ERROR, "gpu-a02")]


class _Switch(EthernetSwitchDriver):
    def __init__(self, ports: tuple[EthernetPortConfig, ...], error: Exception | None = None) -> None:
        self.ports, self.error = ports, error

    @property
    def switch(self) -> str:
        return "leaf9"

    def observe(self) -> SwitchState:
        if self.error is not None:
            raise self.error
        return SwitchState("leaf9", self.ports)

    def apply(self, changes: object) -> None:
        raise AssertionError("site check never applies")


def _access(port: str) -> EthernetPortConfig:
    return EthernetPortConfig("leaf9", port, PortMode.ACCESS, VlanId(4000))


def test_ethernet_switch_ports_trunks_and_unknown_ports() -> None:
    up = EthernetPortConfig("leaf9", "up1", PortMode.TRUNK, None, tuple(VlanId(v) for v in range(2000, 2500)))
    drv = _Switch((up, _access("p1"), _access("p2"), _access("p3")))
    node = port_node("gpu-b01", ethernet=(EthernetPort("gpu-b01", "eth0", "leaf9", "p1"), EthernetPort("gpu-b01", "eth1", "leaf9", "p7")))
    ctx = SiteContext(nodes=(node,), segments=parse_segments(), settings={"quarantine_vlan": 4000})
    got = {(c.id, c.level, c.subject): c.message for c in ethernet_site_checks({"leaf9": drv}, ctx)}
    assert set(got) == {("ETH-REACH", CheckLevel.OK, "leaf9"), ("ETH-TRUNK-VLANS", CheckLevel.ERROR, "leaf9/up1"),
                        ("ETH-INVENTORY-PORT", CheckLevel.ERROR, "leaf9/p7"),
                        ("ETH-UNKNOWN-PORT", CheckLevel.WARNING, "leaf9/p2")}  # fmt: skip
    assert "VLAN(s) 2500-2999 not allowed on trunk up1" in got[("ETH-TRUNK-VLANS", CheckLevel.ERROR, "leaf9/up1")]
    assert "2 access port(s) of switch leaf9 not in the inventory: p2, p3" in got[("ETH-UNKNOWN-PORT", CheckLevel.WARNING, "leaf9/p2")]


def test_ethernet_switch_not_reachable_or_not_configured() -> None:
    down = _Switch((), ApplyError("SSH host key of 10.0.0.9:22 is unknown", fabric="ethernet", device="leaf9"))
    node = port_node("gpu-b01", ethernet=(EthernetPort("gpu-b01", "eth0", "leaf8", "p1"),))
    ctx = SiteContext(nodes=(node,), segments=parse_segments())
    got = [(c.id, c.level, c.subject) for c in ethernet_site_checks({"leaf9": down}, ctx)]
    assert got == [("ETH-HOSTKEY", CheckLevel.CRITICAL, "leaf9"), ("ETH-INVENTORY-PORT", CheckLevel.ERROR, "leaf8/p1")]
    no_trunk = ethernet_site_checks({"leaf9": _Switch((_access("p1"),))}, SiteContext(segments=parse_segments()))
    assert [c.level for c in no_trunk if c.id == "ETH-TRUNK-VLANS"] == [CheckLevel.WARNING]


def test_ipoib_readback_warns_per_sm_host_without_an_sa_dump() -> None:
    from gpufabric.fabrics.infiniband.drivers.opensm.config import OpenSMConfig
    from gpufabric.fabrics.infiniband.site_check import ipoib_readback

    def host(name: str, dump: str | None) -> dict[str, object]:
        h: dict[str, object] = {"name": name, "host": f"{name}.example", "user": "root", "key_file": "/k",
                                "known_hosts": "/kh", "partitions_conf": "/etc/opensm/partitions.conf",
                                "log_file": "/var/log/opensm.log", "pid_file": "/run/opensm.pid"}  # fmt: skip
        return h | ({"sa_dump": dump} if dump else {})

    pair = OpenSMConfig.from_options({"sm_hosts": [host("sm-01", "/var/log/opensm-sa.dump"), host("sm-02", None)]})
    got = ipoib_readback(pair, "opensm")
    assert [(c.id, c.level, c.subject) for c in got] == [("IB-IPOIB-READBACK", CheckLevel.WARNING, "sm-02")]
    assert "options.sm_hosts[1].sa_dump" in got[0].message and "\n" not in got[0].message
    both = OpenSMConfig.from_options({"sm_hosts": [host("sm-01", "/d"), host("sm-02", "/d")]})
    assert [c.level for c in ipoib_readback(both, "opensm")] == [CheckLevel.OK]
    local = {"partitions_conf": "/etc/opensm/partitions.conf", "log_path": "/var/log/opensm.log"}
    (c,) = ipoib_readback(OpenSMConfig.from_options(local), "opensm")
    assert c.level is CheckLevel.WARNING and "options.sa_dump" in c.message
    assert ipoib_readback(OpenSMConfig.from_options(local | {"ipoib": {"enabled": False}}), "opensm") == []
    assert [c.level for c in ipoib_readback(OpenSMConfig.from_options(local | {"sa_dump": "/d"}), "opensm")] == [
        CheckLevel.OK
    ]
