"""create/delete_network_postcommit: adopt Neutron's segment on gpufabric's physnets only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_gpufabric import FakeGpufabric
from gpufabric_neutron import client as gf
from gpufabric_neutron import names
from gpufabric_neutron.mech import GpufabricDriverError, GpufabricMechanismDriver, Refused
from oslo_config import cfg

from conftest import TOKEN, network_context, segment


@pytest.mark.parametrize(
    ("physnet", "seg_id", "want"),
    [
        ("physnet1", 2100, [{"fabric": "ethernet", "seg_id": 2100, "vlan": 2100, "pkey": None}]),
        ("ib", 3005, [{"fabric": "infiniband", "seg_id": 3005, "vlan": None, "pkey": "0x0a05"}]),
    ],
    ids=["ethernet-vlan-adopted", "ib-seg-adopted-to-pkey"],
)
def test_network_on_our_physnet_is_adopted(driver: GpufabricMechanismDriver, fake: FakeGpufabric, physnet: str,
                                           seg_id: int, want: list[dict[str, object]]) -> None:  # fmt: skip
    ctx = network_context([segment(physnet, seg_id)])
    driver.create_network_postcommit(ctx)
    net = fake.state.networks[names.network_name(ctx.current["id"])]
    assert net["tenant"] == "tenant-a"
    assert net["segments"] == want


@pytest.mark.parametrize(
    "seg",
    [segment("physnet9", 2100), segment("physnet1", None, "flat"), segment(None, 77, "vxlan")],
    ids=["other-physnet", "flat", "vxlan"],
)
def test_network_not_ours_is_ignored(driver: GpufabricMechanismDriver, fake: FakeGpufabric, seg: dict[str, object]) -> None:
    driver.create_network_postcommit(network_context([seg]))
    assert fake.state.networks == {}
    assert fake.state.requests == []


def test_multi_segment_network_keeps_only_our_segments(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    ctx = network_context([segment("physnet1", 2200), segment("ib", 3001), segment("physnet9", 2300)])
    driver.create_network_postcommit(ctx)
    segs = fake.state.networks[names.network_name(ctx.current["id"])]["segments"]
    assert [(s["fabric"], s["seg_id"]) for s in segs] == [("ethernet", 2200), ("infiniband", 3001)]


def test_create_is_idempotent_across_retries(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    ctx = network_context([segment("physnet1", 2101)])
    driver.create_network_postcommit(ctx)
    driver.create_network_postcommit(ctx)  # ML2 retry, or a gpufabric that kept the network over a restart
    assert list(fake.state.networks) == [names.network_name(ctx.current["id"])]


def test_ib_seg_id_outside_mapped_range_is_refused_with_range(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    ctx = network_context([segment("ib", 4005)])
    with pytest.raises(GpufabricDriverError) as e:
        driver.create_network_postcommit(ctx)
    assert "3000-3999" in str(e.value)
    assert "infiniband.seg_id" in str(e.value)
    assert fake.state.networks == {}


def test_segment_taken_by_another_network_is_a_conflict(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    driver.create_network_postcommit(network_context([segment("physnet1", 2102)]))
    with pytest.raises(GpufabricDriverError, match="409"):
        driver.create_network_postcommit(network_context([segment("physnet1", 2102)], project="tenant-b"))


def test_project_id_becomes_a_valid_tenant_name(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    driver.create_network_postcommit(network_context([segment("physnet1", 2103)], project="3F2A9C0E5B7D4E1F8A6B2C3D4E5F6A7B"))
    driver.create_network_postcommit(network_context([segment("physnet1", 2104)], project="Project With Spaces"))
    assert "3f2a9c0e5b7d4e1f8a6b2c3d4e5f6a7b" in fake.state.tenants
    other = fake.state.tenants - {"3f2a9c0e5b7d4e1f8a6b2c3d4e5f6a7b"}
    assert len(other) == 1 and next(iter(other)).startswith("os-")


def test_delete_network_removes_it_and_tolerates_gone(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    ctx = network_context([segment("ib", 3002)])
    driver.create_network_postcommit(ctx)
    driver.delete_network_postcommit(ctx)
    assert fake.state.networks == {}
    driver.delete_network_postcommit(ctx)  # retry: already gone is fine


def test_delete_network_not_ours_sends_nothing(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    driver.delete_network_postcommit(network_context([segment("physnet9", 2100)]))
    assert fake.state.requests == []


def test_gpufabric_unreachable_fails_the_create(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    fake.stop()
    driver.client.retry_for = 0.3
    with pytest.raises(GpufabricDriverError, match="gpufabric"):
        driver.create_network_postcommit(network_context([segment("physnet1", 2105)]))


def test_wrong_token_is_refused(conf: object, fake: FakeGpufabric, token_file: Path) -> None:
    token_file.write_text("not-the-token")
    d = GpufabricMechanismDriver()
    d.initialize()
    with pytest.raises(GpufabricDriverError, match="401"):
        d.create_network_postcommit(network_context([segment("physnet1", 2106)]))


@pytest.mark.parametrize(("mode", "content", "error"), [(0o644, TOKEN, PermissionError), (0o640, TOKEN, PermissionError),
                                                        (0o600, "", ValueError)], ids=["world-readable", "group-readable", "empty"])  # fmt: skip
def test_token_file_must_be_private_and_non_empty(conf: object, token_file: Path, mode: int, content: str,
                                                   error: type[Exception]) -> None:  # fmt: skip
    token_file.write_text(content)
    os.chmod(token_file, mode)
    with pytest.raises(error, match="token_file"):
        GpufabricMechanismDriver().initialize()


def test_driver_refuses_plain_http_unless_insecure(conf: cfg.ConfigOpts) -> None:
    conf.set_override("insecure", False, group="ml2_gpufabric")
    with pytest.raises(gf.InsecureTransport, match="scheme 'http' refused"):
        GpufabricMechanismDriver().initialize()


def test_driver_refuses_a_bad_node_map(conf: cfg.ConfigOpts, node_map: Path) -> None:
    node_map.write_text('["not", "a", "map"]')
    with pytest.raises(Refused, match="want a JSON object"):
        GpufabricMechanismDriver().initialize()


def test_update_network_forwards_name_description_and_tags(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    """Issue 31 item 11 (NCP SDN01-03): a Neutron network update reaches its gpufabric network
    (PATCH): the Neutron name and description as its description, the tags gpufabric can hold."""
    ctx = network_context([segment("physnet1", 2110)])
    driver.create_network_postcommit(ctx)
    ctx.original = dict(ctx.current)
    ctx.current = {**ctx.current, "name": "vpc-a", "description": "training\nrack 4", "tags": ["env=prod", "bad tag"]}
    driver.update_network_postcommit(ctx)
    net = fake.state.networks[names.network_name(ctx.current["id"])]
    assert (net["description"], net["tags"]) == ("vpc-a: training rack 4", ["env=prod"])
    assert len([r for r in fake.state.requests if r[0] == "PATCH"]) == 1
    ctx.original = dict(ctx.current)  # an update of something gpufabric does not keep: nothing sent
    driver.update_network_postcommit(ctx)
    assert len([r for r in fake.state.requests if r[0] == "PATCH"]) == 1


def test_update_network_not_ours_sends_nothing(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    ctx = network_context([segment("physnet9", 2111)])
    ctx.current = {**ctx.current, "description": "x"}
    driver.update_network_postcommit(ctx)
    assert not [r for r in fake.state.requests if r[0] == "PATCH"]
