"""Site-check findings without devices: levels and exit codes, the trusted-SM comparison, the
hardening reading, the PKey pool against foreign partitions, VLAN range rendering."""

from __future__ import annotations

from gpufabric.domain.models import Fabric, Network, Segment
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.site_check import CheckLevel, SiteCheck, SiteContext, worst
from gpufabric.domain.state import IbFabricState, PkeyTable, SmSeen, SmState
from gpufabric.domain.values import Guid, PKey
from gpufabric.fabrics.ethernet.site_check import _ranges
from gpufabric.fabrics.infiniband.hardening import OPENSM_DEFAULTS
from gpufabric.fabrics.infiniband.site_check import hardening, pkey_pool, trusted_sms

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


def test_hardening_defaults_are_errors_naming_sm_key() -> None:
    found = hardening(IbFabricState(settings=tuple(OPENSM_DEFAULTS.items())), "opensm")
    assert any(c.subject == "opensm:sm_key" and c.level is CheckLevel.ERROR for c in found)
    assert hardening(IbFabricState(), "ufm")[0].level is CheckLevel.WARNING  # not checked: why


def test_pkey_pool_against_foreign_partitions_and_tables() -> None:
    cfg = SegmentConfig.default()  # PKeys 0x0a00.. for seg 3000..
    table = PkeyTable(Guid(0x101), (0xFFFF, 0x8A03, 0x8A07, 0x9000))  # 0x0a03 ours, 0x0a07 not, 0x1000 out of pool
    ours = Network("n", "alpha", (Segment(Fabric.INFINIBAND, 3003, pkey=PKey(0x0A03)),))
    ctx = SiteContext(networks=(ours,), segments=cfg)
    got = pkey_pool(IbFabricState(tables=(table,)), ctx, {0x0A05: "partition storage of partitions.conf"})
    assert [(c.level, c.subject) for c in got] == [(CheckLevel.ERROR, "pkey:0x0a05"), (CheckLevel.ERROR, "pkey:0x0a07")]
    assert "seg_id 3007" in got[1].message and f"port {Guid(0x101)}" in got[1].message
    assert [c.level for c in pkey_pool(IbFabricState(tables=(table,)), SiteContext(networks=(ours,), segments=cfg), {})][:1] == [CheckLevel.ERROR]
    clean = pkey_pool(IbFabricState(), ctx, {})
    assert [c.level for c in clean] == [CheckLevel.OK]


def test_vlan_ranges_render_compactly() -> None:
    assert _ranges([5, 1, 2, 3, 9, 10]) == "1-3,5,9-10"
