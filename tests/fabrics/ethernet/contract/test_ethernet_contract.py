"""The contract every Ethernet switch driver passes: same scenarios, same assertions.

The drivers under test are listed in ``ethernet_targets.ETHERNET_TARGETS`` (one line
per driver). Each scenario configures ports of a switch and reads them back: real switches
(OVS, root), the in-memory switch, and the SSH driver in every dialect against the vendor-CLI
doubles (tests/support/ssh_double).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpufabric.domain.errors import ApplyError, FabricError, ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

from fabrics.ethernet.contract.ethernet_targets import (
    ETHERNET_TARGETS,
    MIN_PORTS,
    EthernetTarget,
    EthernetTargetFactory,
)


@pytest.fixture(scope="module", params=ETHERNET_TARGETS)
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EthernetTarget]:
    factory: EthernetTargetFactory = request.param
    with factory(tmp_path_factory.mktemp("ethernet-target")) as t:
        assert len(t.ports) >= MIN_PORTS
        yield t


def access(t: EthernetTarget, port: str, vlan: int) -> EthernetPortConfig:
    return EthernetPortConfig(t.switch, port, PortMode.ACCESS, VlanId(vlan))


def trunk(t: EthernetTarget, port: str, vlans: tuple[int, ...], native: int | None = None) -> EthernetPortConfig:
    return EthernetPortConfig(
        t.switch, port, PortMode.TRUNK, VlanId(native) if native else None, tuple(VlanId(v) for v in sorted(vlans))
    )


def shutdown(t: EthernetTarget, port: str) -> EthernetPortConfig:
    return EthernetPortConfig(t.switch, port, PortMode.SHUTDOWN)


def observed(t: EthernetTarget, port: str) -> EthernetPortConfig:
    state = t.driver.observe()
    assert state.switch == t.switch
    got = state.port(port)
    assert got is not None, f"{port} missing from observe()"
    return got


def test_observe_lists_every_port(target: EthernetTarget) -> None:
    names = {p.port for p in target.driver.observe().ports}
    assert set(target.ports) <= names
    assert target.switch not in names  # the bridge's own internal port is not a switch port


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda t, p: access(t, p, 101), id="access"),
        pytest.param(lambda t, p: trunk(t, p, (201, 202, 203)), id="trunk"),
        pytest.param(lambda t, p: trunk(t, p, (211, 212), native=210), id="trunk-native"),
        pytest.param(lambda t, p: shutdown(t, p), id="shutdown"),
    ],
)
def test_observe_after_apply_equals_desired(target: EthernetTarget, make: object) -> None:
    assert callable(make)
    desired: EthernetPortConfig = make(target, target.ports[0])
    target.driver.apply([desired])
    assert observed(target, target.ports[0]) == desired


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda t, p: access(t, p, 120), id="access"),
        pytest.param(lambda t, p: trunk(t, p, (221, 222)), id="trunk"),
        pytest.param(lambda t, p: shutdown(t, p), id="shutdown"),
    ],
)
def test_aggregate_takes_vlans_like_a_port(target: EthernetTarget, make: object) -> None:
    """A bond's VLANs sit on its aggregate (port-channel / ae / bond): rendered and read back
    in the dialect's own aggregate name."""
    if not target.aggregates:
        pytest.skip("this target has no aggregate interface (OVS bonds: tests/fabrics/ethernet/functional/test_ethernet_bond.py)")
    assert callable(make)
    desired: EthernetPortConfig = make(target, target.aggregates[0])
    target.driver.apply([desired])
    assert observed(target, target.aggregates[0]) == desired


def test_apply_leaves_other_ports_alone(target: EthernetTarget) -> None:
    a, b = target.ports[1], target.ports[2]
    target.driver.apply([access(target, a, 300), access(target, b, 301)])
    target.driver.apply([access(target, a, 302)])
    assert observed(target, a) == access(target, a, 302)
    assert observed(target, b) == access(target, b, 301)


def test_reapply_is_idempotent(target: EthernetTarget) -> None:
    batch = [access(target, target.ports[3], 401), trunk(target, target.ports[4], (402, 403))]
    target.driver.apply(batch)
    first = target.driver.observe()
    target.driver.apply(batch)
    assert target.driver.observe() == first
    assert [first.port(c.port) for c in batch] == batch


def test_batch_of_many_ports(target: EthernetTarget) -> None:
    ports = target.ports[:MIN_PORTS]
    batch = [access(target, p, 1000 + i) for i, p in enumerate(ports)]
    target.driver.apply(batch)
    state = target.driver.observe()
    assert [state.port(p) for p in ports] == batch


def test_move_port_between_vlans(target: EthernetTarget) -> None:
    p = target.ports[5]
    target.driver.apply([access(target, p, 501)])
    target.driver.apply([access(target, p, 502)])
    assert observed(target, p).vlans() == {502}


def known_gap(request: pytest.FixtureRequest, target: EthernetTarget) -> None:
    """Mark this test a strict xfail for a target that documents why it cannot pass it."""
    reason = target.known_gaps.get(request.node.originalname)
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


def test_unknown_port_fails_and_changes_nothing(target: EthernetTarget, request: pytest.FixtureRequest) -> None:
    known_gap(request, target)
    good = target.ports[6]
    target.driver.apply([access(target, good, 601)])
    before = target.driver.observe()
    with pytest.raises(ApplyError) as ei:
        target.driver.apply([access(target, good, 602), access(target, target.missing(), 602)])
    assert ei.value.fabric == "ethernet"
    assert ei.value.device == target.switch
    assert target.missing() in ei.value.message
    assert target.driver.observe() == before
    assert observed(target, good) == access(target, good, 601)


def test_trunk_carries_only_listed_vlans(target: EthernetTarget) -> None:
    p = target.ports[7]
    target.driver.apply([trunk(target, p, (701, 702))])
    got = observed(target, p)
    assert got.mode is PortMode.TRUNK
    assert got.vlans() == {701, 702}
    target.driver.apply([trunk(target, p, (703,), native=704)])
    assert observed(target, p).vlans() == {703, 704}


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda t, p: EthernetPortConfig(t.switch, p, PortMode.ACCESS), id="access-without-vlan"),
        pytest.param(lambda t, p: access(t, p, 1), id="access-vlan-1"),
        pytest.param(lambda t, p: EthernetPortConfig(t.switch, p, PortMode.TRUNK), id="trunk-without-vlans"),
        pytest.param(lambda t, p: trunk(t, p, (1, 801)), id="trunk-with-vlan-1"),
        pytest.param(lambda t, p: trunk(t, p, (801,), native=1), id="trunk-native-vlan-1"),
    ],
)
def test_never_untagged_or_vlan_1(target: EthernetTarget, make: object) -> None:
    assert callable(make)
    p, other = target.ports[8], target.ports[9]
    target.driver.apply([access(target, p, 800), access(target, other, 800)])
    before = target.driver.observe()
    with pytest.raises(ValidationError):
        target.driver.apply([access(target, other, 802), make(target, p)])
    assert target.driver.observe() == before
    assert 1 not in observed(target, p).vlans()


def test_change_for_another_switch_is_refused(target: EthernetTarget) -> None:
    stranger = EthernetPortConfig(target.switch + "-other", target.ports[10], PortMode.ACCESS, VlanId(900))
    before = target.driver.observe()
    with pytest.raises(ValidationError):
        target.driver.apply([stranger])
    assert target.driver.observe() == before


def test_shutdown_carries_nothing_and_comes_back(target: EthernetTarget) -> None:
    p = target.ports[11]
    target.driver.apply([access(target, p, 1101)])
    target.driver.apply([shutdown(target, p)])
    got = observed(target, p)
    assert got.mode is PortMode.SHUTDOWN
    assert got.vlans() == frozenset()
    target.driver.apply([access(target, p, 1102)])
    assert observed(target, p) == access(target, p, 1102)


def test_empty_batch_is_a_no_op(target: EthernetTarget) -> None:
    before = target.driver.observe()
    target.driver.apply([])
    assert target.driver.observe() == before


def test_driver_errors_are_fabric_errors(target: EthernetTarget, request: pytest.FixtureRequest) -> None:
    known_gap(request, target)
    with pytest.raises(FabricError) as ei:
        target.driver.apply([access(target, target.missing(1), 1200)])
    assert ei.value.to_json()["details"]["fabric"] == "ethernet"
