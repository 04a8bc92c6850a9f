"""Several IB subnets (issue 20): ``ib_physnets`` maps one physnet per gpufabric IB instance.

The mapping and its errors are checked on :func:`physnets.parse` and at driver start; a
network with segments on two IB physnets becomes one gpufabric network with each id adopted on
its own subnet; a port binds the segment of the subnet its HCA is on (the fake lists each IB
instance's ports under ``fabrics.<instance>.ports``, as gpufabric does)."""

from __future__ import annotations

from typing import Any

import pytest
from fake_gpufabric import FakeGpufabric
from gpufabric_neutron import names, physnets
from gpufabric_neutron.mech import GpufabricDriverError, GpufabricMechanismDriver
from neutron_lib.plugins.ml2 import api
from oslo_config import cfg

from conftest import network_context, port, port_context, segment

COMPUTE_GUID, STORAGE_GUID = "0x0002c90300000101", "0x0002c90500000101"  # node1's HCAs on each subnet
TWO_SUBNETS = ["ib-compute:infiniband", "ib-storage:ib-storage"]


def vlan(physnet: str, seg_id: int) -> dict[str, Any]:
    return {"network_type": "vlan", "physical_network": physnet, "segmentation_id": seg_id}


def test_ib_physnets_map_each_physnet_to_its_instance() -> None:
    p = physnets.parse(["physnet1", "physnet2:eth-storage"], TWO_SUBNETS, "ib")
    assert p.ib == {"ib-compute": "infiniband", "ib-storage": "ib-storage"}
    assert p.ethernet == {"physnet1": "ethernet", "physnet2": "eth-storage"}
    segs = [vlan("ib-compute", 3001), vlan("ib-storage", 3501), vlan("physnet2", 2001), vlan("ib", 3002)]
    assert p.gpufabric_segments(segs) == [{"fabric": "infiniband", "seg_id": 3001},
                                          {"fabric": "ib-storage", "seg_id": 3501},
                                          {"fabric": "eth-storage", "seg_id": 2001}]  # fmt: skip
    assert [p.fabric_of(s) for s in segs] == ["infiniband", "infiniband", "ethernet", None]  # ib_physnet replaced


@pytest.mark.parametrize(
    ("ib_physnets", "ib_physnet", "want"),
    [([], "ib", {"ib": "infiniband"}), ([], "", {}), (["ib-a"], "ib", {"ib-a": "infiniband"}),
     ([" ib-a : sub-a ", "ib-b:sub.b_2"], None, {"ib-a": "sub-a", "ib-b": "sub.b_2"})],
    ids=["old-ib-physnet-default-instance", "no-ib", "bare-physnet-default-instance", "spaces-and-name-chars"],
)  # fmt: skip
def test_old_ib_physnet_and_bare_entries(ib_physnets: list[str], ib_physnet: str | None, want: dict[str, str]) -> None:
    assert physnets.parse(["physnet1"], ib_physnets, ib_physnet).ib == want


@pytest.mark.parametrize(
    ("eth", "ib", "ib_one", "message"),
    [(["physnet1"], ["ib-a:infiniband", "ib-a:ib-storage"], None, "ib_physnets: physnet ib-a is listed twice"),
     (["physnet1", "physnet1:eth-b"], [], "ib", "ethernet_physnets: physnet physnet1 is listed twice"),
     (["physnet1"], ["ib-a:IB_Storage"], None, "ib_physnets: instance 'IB_Storage' of physnet ib-a is not a valid"),
     (["physnet1"], ["ib-a:"], None, "ib_physnets: instance '' of physnet ib-a is not a valid"),
     (["physnet1:-bad"], [], None, "ethernet_physnets: instance '-bad' of physnet physnet1 is not a valid"),
     (["physnet1"], [":ib-storage"], None, "ib_physnets: entry ':ib-storage' names no physnet"),
     (["physnet1", "ib-a"], ["ib-a:ib-storage"], None, "ib_physnets: physnet ib-a is also in ethernet_physnets"),
     (["physnet1"], [], "physnet1", "ib_physnet: physnet physnet1 is also in ethernet_physnets"),
     (["physnet1"], ["ib-a", "ib-b:infiniband"], None, "physnets ib-a and ib-b are both mapped to instance infiniband"),
     (["physnet1"], ["ib-a:ethernet"], None, "ib_physnets: physnet ib-a is mapped to instance ethernet"),
     (["physnet1:infiniband"], [], None, "ethernet_physnets: physnet physnet1 is mapped to instance infiniband")],
    ids=["ib-twice", "eth-twice", "bad-instance", "empty-instance", "bad-eth-instance", "no-physnet",
         "ib-also-ethernet", "old-ib-also-ethernet", "two-physnets-one-subnet", "ib-on-ethernet", "eth-on-ib"],
)  # fmt: skip
def test_bad_mapping_is_one_line_naming_the_option(
    eth: list[str], ib: list[str], ib_one: str | None, message: str
) -> None:
    with pytest.raises(physnets.PhysnetError) as e:
        physnets.parse(eth, ib, ib_one)
    assert message in str(e.value)
    assert str(e.value).startswith("[ml2_gpufabric] ") and "\n" not in str(e.value)


def test_driver_start_fails_on_a_bad_mapping(conf: cfg.ConfigOpts, fake: FakeGpufabric) -> None:
    conf.set_override("ib_physnets", ["ib-compute:infiniband", "physnet1:ib-storage"], group="ml2_gpufabric")
    with pytest.raises(physnets.PhysnetError, match=r"^\[ml2_gpufabric\] ib_physnets: physnet physnet1 is also in "):
        GpufabricMechanismDriver().initialize()
    assert fake.state.requests == []


@pytest.fixture
def two_subnets(conf: cfg.ConfigOpts, fake: FakeGpufabric) -> GpufabricMechanismDriver:
    """gpufabric with IB instances infiniband (3000-3499, PKeys 0x0a00+) and ib-storage
    (3500-3999, PKeys 0x1a00+; Neutron's VLAN ids end at 4094); node1 has one HCA on each,
    node2 one on compute only."""
    fake.state.instances["infiniband"] = ("infiniband", range(3000, 3500), 0x0A00)
    fake.state.instances["ib-storage"] = ("infiniband", range(3500, 4000), 0x1A00)
    fake.state.guids[STORAGE_GUID] = "node1"
    fake.state.guid_instance[STORAGE_GUID] = "ib-storage"
    conf.set_override("ib_physnets", TWO_SUBNETS, group="ml2_gpufabric")
    d = GpufabricMechanismDriver()
    d.initialize()
    return d


def test_network_on_two_ib_physnets_is_one_network_on_both_subnets(two_subnets: GpufabricMechanismDriver,
                                                                    fake: FakeGpufabric) -> None:  # fmt: skip
    ctx = network_context([segment("ib-compute", 3007), segment("ib-storage", 3507), segment("physnet1", 2107)])
    two_subnets.create_network_postcommit(ctx)
    assert list(fake.state.networks) == [names.network_name(ctx.current["id"])]
    segs = fake.state.networks[names.network_name(ctx.current["id"])]["segments"]
    assert [(s["fabric"], s["seg_id"], s["pkey"]) for s in segs] == [
        ("infiniband", 3007, "0x0a07"), ("ib-storage", 3507, "0x1a07"), ("ethernet", 2107, None)]  # fmt: skip
    two_subnets.create_network_postcommit(ctx)  # a retry: the existing network has the same segments
    assert len(fake.state.networks) == 1


def test_seg_id_checked_against_its_own_subnet(two_subnets: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    """3008 is in the compute subnet's range, not the storage subnet's: refused naming that instance."""
    with pytest.raises(GpufabricDriverError) as e:
        two_subnets.create_network_postcommit(network_context([segment("ib-storage", 3008)]))
    assert "ib-storage.seg_id" in str(e.value) and "3500-3999" in str(e.value)
    assert fake.state.networks == {}


@pytest.mark.parametrize(("guid", "physnet"), [(COMPUTE_GUID, "ib-compute"), (STORAGE_GUID, "ib-storage")],
                         ids=["compute-hca", "storage-hca"])  # fmt: skip
def test_port_binds_the_segment_of_its_hcas_subnet(two_subnets: GpufabricMechanismDriver, fake: FakeGpufabric,
                                                   guid: str, physnet: str) -> None:  # fmt: skip
    segs = [segment("ib-compute", 3009), segment("ib-storage", 3509)]
    net = network_context(segs)
    ctx = port_context(port([{"port_guid": guid}]), net)
    two_subnets.bind_port(ctx)
    want = next(s for s in segs if s[api.PHYSICAL_NETWORK] == physnet)
    assert ctx.set_binding.call_args[0][0] == want[api.ID]
    assert fake.state.attachments == {"node1": {names.network_name(net.current["id"])}}


def test_hca_of_the_other_subnet_is_refused(two_subnets: GpufabricMechanismDriver, fake: FakeGpufabric,
                                            caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """node1's storage HCA on a compute-only network: not a port of node1 on that subnet; nothing written."""
    net = network_context([segment("ib-compute", 3010)])
    ctx = port_context(port([{"port_guid": STORAGE_GUID}]), net)
    two_subnets.bind_port(ctx)
    assert not ctx.set_binding.called
    assert [(m, p) for m, p, _ in fake.state.requests if m != "GET"] == []
    assert any(f"{STORAGE_GUID} is not a port of node node1 on infiniband" in r.getMessage() for r in caplog.records)


def test_ib_physnets_replaces_ib_physnet_and_says_so(two_subnets: GpufabricMechanismDriver, fake: FakeGpufabric,
                                                      caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """The fixture keeps ib_physnet = ib: with ib_physnets set, a segment on ib is not gpufabric's."""
    two_subnets.create_network_postcommit(network_context([segment("ib", 3011)]))
    assert fake.state.requests == []
    d = GpufabricMechanismDriver()
    with caplog.at_level("WARNING"):
        d.initialize()
    assert any("ib_physnet ib ignored: ib_physnets is set" in r.getMessage() for r in caplog.records)
