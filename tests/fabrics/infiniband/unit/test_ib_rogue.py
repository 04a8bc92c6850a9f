"""Pure rogue-SM detection and OpenSM driver option parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ConfigError, FabricError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.audit.rogue import containment_targets, find_rogue_sms
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort
from gpufabric.fabrics.infiniband.state import IbFabricState, SmSeen, SmState

TRUSTED = Guid(0x0002C90310000001)
ROGUE = Guid(0x0002C90310000401)
VICTIM = Guid(0x0002C90310000101)
SWITCH_LID = 3
PORTS = {
    TRUSTED: CaPort(TRUSTED, 1, 1, "sm-01 mlx5_0", SWITCH_LID, 18),
    VICTIM: CaPort(VICTIM, 4, 1, "gpu-a01 mlx5_0", SWITCH_LID, 1),
    ROGUE: CaPort(ROGUE, 7, 1, "gpu-a04 mlx5_0", SWITCH_LID, 4),
}


@pytest.mark.parametrize(
    ("sms", "master", "expected"),
    [
        ((SmSeen(TRUSTED, 1, 15, SmState.MASTER, "sm-01"),), TRUSTED, []),
        (
            (SmSeen(TRUSTED, 1, 15, SmState.MASTER), SmSeen(ROGUE, 7, 15, SmState.MASTER, "gpu-a04")),
            ROGUE,
            [(ROGUE, "gpu-a04", "untrusted master SM")],
        ),
        (
            (SmSeen(TRUSTED, 1, 15, SmState.MASTER), SmSeen(ROGUE, 7, 3, SmState.STANDBY)),
            TRUSTED,
            [(ROGUE, "gpu-a04", "untrusted SM")],
        ),
        ((), ROGUE, [(ROGUE, "gpu-a04", "untrusted master SM")]),
    ],
    ids=["clean", "rogue-master", "rogue-standby", "master-only-from-portinfo"],
)
def test_find_rogue_sms(sms: tuple[SmSeen, ...], master: Guid, expected: list[tuple[Guid, str, str]]) -> None:
    found = find_rogue_sms(IbFabricState(sms=sms, master_guid=master), [TRUSTED], {ROGUE: "gpu-a04"})
    assert [(f.guid, f.node, f.reason) for f in found] == expected
    for f in found:
        assert str(ROGUE) in str(f)


def test_config_from_options() -> None:
    c = OpenSMConfig.from_options(
        {
            "partitions_conf": "/etc/opensm/partitions.conf",
            "log_path": "/var/log/opensm.log",
            "systemd_unit": "opensm",
            "trusted_sm_guids": ["0x0002c90310000001"],
            "diag_env": {"SIM_HOST": "sm-01 mlx5_0"},
        }
    )
    assert c.trusted_sm_guids == (TRUSTED,)
    assert c.last_good == Path("/etc/opensm/partitions.conf.last-good")
    assert c.diag_env == (("SIM_HOST", "sm-01 mlx5_0"),)


@pytest.mark.parametrize(
    "options",
    [{"log_path": "/x"}, {"partitions_conf": "/p", "log_path": "/x", "bogus": 1}],
    ids=["missing-required", "unknown-option"],
)
def test_config_rejects(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        OpenSMConfig.from_options(options)


# SMInfo as a forged SM would answer (ibsim cannot make an SM lie about its GUID): the
# observation keeps the claimed GUID and the port discovery found at the answering LID.
FORGED: list[tuple[str, tuple[SmSeen, ...], list[tuple[int, Guid | None]]]] = [
    ("trusted-sm-where-it-is", (SmSeen(TRUSTED, 1, 15, SmState.MASTER, "sm-01", TRUSTED),), []),
    ("rogue-claims-trusted-guid",
     (SmSeen(TRUSTED, 1, 15, SmState.MASTER, "sm-01", TRUSTED), SmSeen(TRUSTED, 7, 15, SmState.MASTER, "", ROGUE)),
     [(7, ROGUE)]),
    ("rogue-claims-victim-guid",
     (SmSeen(TRUSTED, 1, 15, SmState.MASTER, "sm-01", TRUSTED), SmSeen(VICTIM, 7, 15, SmState.MASTER, "", ROGUE)),
     [(7, ROGUE)]),
    ("rogue-own-guid",
     (SmSeen(TRUSTED, 1, 15, SmState.MASTER, "sm-01", TRUSTED), SmSeen(ROGUE, 7, 15, SmState.MASTER, "", ROGUE)),
     [(7, ROGUE)]),
]  # fmt: skip


@pytest.mark.parametrize(("sms", "expected"), [f[1:] for f in FORGED], ids=[f[0] for f in FORGED])
def test_rogue_identified_by_location_not_by_claimed_guid(
    sms: tuple[SmSeen, ...], expected: list[tuple[int, Guid | None]]
) -> None:
    found = find_rogue_sms(IbFabricState(sms=sms, master_guid=TRUSTED), [TRUSTED])
    assert [(f.lid, f.port_guid) for f in found] == expected
    # containment cuts off the answering LID's own switch port: never the victim's, never the SM's
    targets, alerts = containment_targets(found, PORTS, [TRUSTED])
    assert [(p.guid, p.switch_port) for p in targets] == [(ROGUE, 4) for _ in expected]
    assert alerts == []


def test_containment_never_disables_a_trusted_port_or_an_unplaced_lid() -> None:
    claims_at_sm = find_rogue_sms(IbFabricState(sms=(SmSeen(VICTIM, 1, 15, SmState.MASTER, "", TRUSTED),)), [TRUSTED])
    assert [f.lid for f in claims_at_sm] == [1]
    targets, alerts = containment_targets(claims_at_sm, PORTS, [TRUSTED])
    assert targets == [] and [(f.lid, "trusted SM port" in why) for f, why in alerts] == [(1, True)]
    nowhere = find_rogue_sms(IbFabricState(sms=(SmSeen(ROGUE, 99, 15, SmState.MASTER),)), [TRUSTED])
    targets, alerts = containment_targets(nowhere, PORTS, [TRUSTED])
    assert targets == [] and [(f.lid, "lid 99" in why) for f, why in alerts] == [(99, True)]


def test_a_decoy_finding_is_an_alert_and_the_real_rogue_is_still_cut() -> None:
    """Regression: one finding at a LID no CA port has (a decoy MasterSMLID of 999) aborted
    the whole containment before anything was disabled."""
    sms = (SmSeen(ROGUE, 7, 15, SmState.MASTER, "", ROGUE), SmSeen(Guid(0), 999, -1, SmState.UNKNOWN))
    found = find_rogue_sms(IbFabricState(sms=sms, master_guid=TRUSTED), [TRUSTED])
    assert sorted(f.lid for f in found) == [7, 999]
    targets, alerts = containment_targets(found, PORTS, [TRUSTED])
    assert [p.guid for p in targets] == [ROGUE]
    assert [f.lid for f, _ in alerts] == [999]


def test_observe_keeps_an_sm_borrowing_the_trusted_guid_at_its_own_lid() -> None:
    from gpufabric.fabrics.infiniband.drivers.opensm.observe import locate_sms

    by_lid = {p.lid: p for p in PORTS.values()}
    replies = [
        SmSeen(TRUSTED, 1, 15, SmState.MASTER),
        SmSeen(TRUSTED, 1, 15, SmState.MASTER),
        FabricError("x", fabric="infiniband"),
    ]
    sms = locate_sms([1, 7, 4], replies, by_lid)  # the forged reply even names lid 1: not believed
    assert [(s.lid, s.guid, s.port_guid) for s in sms] == [
        (1, TRUSTED, TRUSTED), (7, TRUSTED, ROGUE), (4, VICTIM, VICTIM)
    ]  # fmt: skip
    assert sms[2].state is SmState.UNKNOWN


def test_infiniband_without_trusted_sm_guids_is_a_config_error() -> None:
    """Regression: without trusted SM GUIDs the trusted SM itself was "rogue" and repair
    disabled its own switch port."""

    def lookup(name: str) -> type:
        return OpenSMDriver

    section = {"driver": "opensm", "options": {"partitions_conf": "/tmp/x", "log_path": "/tmp/y"}}
    with pytest.raises(ConfigError) as ei:
        InfinibandKind().build(section, lookup, {"trusted_sm_guids": ()})
    assert ei.value.field == "trusted_sm_guids"
    backend = InfinibandKind().build(section, lookup, {"trusted_sm_guids": ("0x0002c90310000001",)})
    assert [str(g) for g in backend.trusted_sm_guids] == ["0x0002c90310000001"]


def test_a_rogue_sm_is_named_by_the_port_the_store_holds_not_by_its_description() -> None:
    """Issue 31 item 5: root on gpu-a04 described its HCA as "gpu-a01 mlx5_0"; the finding
    named gpu-a01 (the description), the switch port cut was gpu-a04's all the same."""
    from gpufabric.fabrics.infiniband.drivers.opensm.observe import locate_sms

    lying = {**PORTS, ROGUE: CaPort(ROGUE, 7, 1, "gpu-a01 mlx5_0", SWITCH_LID, 4)}
    sms = locate_sms([1, 7], [SmSeen(TRUSTED, 1, 15, SmState.MASTER), SmSeen(ROGUE, 7, 15, SmState.MASTER)],
                     {p.lid: p for p in lying.values()})  # fmt: skip
    (f,) = find_rogue_sms(IbFabricState(sms=tuple(sms), master_guid=ROGUE), [TRUSTED], {ROGUE: "gpu-a04", VICTIM: "gpu-a01"})
    assert f.node == "gpu-a04" and "on node gpu-a04" in str(f), str(f)
    assert "on gpu-a01" not in str(f) and "on node gpu-a01" not in str(f)
    assert "'gpu-a01 mlx5_0'" in str(f)  # quoted as what it is: the host's claim


def test_a_port_the_store_does_not_know_is_named_by_its_stored_cabling() -> None:
    from gpufabric.fabrics.infiniband.audit.places import Places
    from gpufabric.fabrics.infiniband.entries import IbPort

    leaf = Guid(0x0002C90330000001)
    places = Places.of([IbPort("gpu-a04", "mlx5_0", 1, Guid(0x0002C90310000499), Guid(0x0002C90310000490), leaf, 4)])
    sm = SmSeen(ROGUE, 7, 15, SmState.MASTER, "gpu-a01 mlx5_0", ROGUE, leaf, 4)  # a GUID the inventory lacks
    (f,) = find_rogue_sms(IbFabricState(sms=(sm,), master_guid=ROGUE), [TRUSTED], places)
    assert f.node == "gpu-a04" and "cabled where node gpu-a04's port is" in str(f) and "'gpu-a01 mlx5_0'" in str(f)
    nowhere = find_rogue_sms(IbFabricState(sms=(SmSeen(ROGUE, 7, 15, SmState.MASTER, "gpu-a01 mlx5_0", ROGUE),)),
                             [TRUSTED], places)  # fmt: skip
    assert nowhere[0].node == "" and "on node" not in str(nowhere[0])
