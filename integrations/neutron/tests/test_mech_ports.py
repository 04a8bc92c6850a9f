"""bind_port / update_port_postcommit / delete_port_postcommit against the fake gpufabric.

The outcome is read from values: the binding the driver set on the autospecced PortContext
(or that it set none: ML2 then marks the port binding_failed) and the attachments gpufabric
holds after the move."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from fake_gpufabric import FakeGpufabric
from gpufabric_neutron import names
from gpufabric_neutron.mech import GpufabricDriverError, GpufabricMechanismDriver
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api
from oslo_config import cfg

from conftest import network_context, port, port_context, segment

ETH_LLI = [{"switch_id": "aa:bb:cc:dd:ee:01", "port_id": "p1", "switch_info": "leaf1"}]
IB_GUID_LLI = [{"port_guid": "0x0002c90300000101"}]


def bound_segment(ctx: Any) -> str | None:
    """The segment id the driver bound, after checking the binding is complete and ACTIVE."""
    if not ctx.set_binding.call_args_list:
        return None
    (seg_id, vif_type, _details), kw = ctx.set_binding.call_args
    assert (vif_type, kw) == (portbindings.VIF_TYPE_OTHER, {"status": "ACTIVE"})
    return str(seg_id)


def attached(fake: FakeGpufabric) -> dict[str, set[str]]:
    return {n: nets for n, nets in fake.state.attachments.items() if nets}


def writes(fake: FakeGpufabric) -> list[tuple[str, str]]:
    """Every request that could change gpufabric (anything but GET)."""
    return [(m, path) for m, path, _ in fake.state.requests if m != "GET"]


def bind(driver: GpufabricMechanismDriver, lli: list[dict[str, Any]] | None, seg: dict[str, Any], **kw: Any) -> tuple[Any, Any]:
    net = network_context([seg])
    ctx = port_context(port(lli, **kw), net)
    driver.bind_port(ctx)
    return ctx, net


@pytest.mark.parametrize(
    ("lli", "physnet", "seg_id"),
    [
        (ETH_LLI, "physnet1", 2100),
        ([{"switch_id": "aa:bb:cc:dd:ee:01", "port_id": "p1", "switch_info": "unknown-name"}], "physnet1", 2100),
        (IB_GUID_LLI, "ib", 3004),
        ([{"port_id": "00:02:c9:03:00:00:01:01", "switch_id": "ib-leaf"}], "ib", 3004),
        ([{"guid": "0002:c903:0000:0101"}], "ib", 3004),
    ],
    ids=["ethernet-switch-info", "ethernet-switch-id-fallback", "ib-port-guid", "ib-guid-in-port-id", "ib-sysfs-guid"],
)
def test_bind_attaches_node_then_binds(driver: GpufabricMechanismDriver, fake: FakeGpufabric, lli: list[dict[str, Any]],
                                       physnet: str, seg_id: int) -> None:  # fmt: skip
    seg = segment(physnet, seg_id)
    ctx, net = bind(driver, lli, seg)
    assert bound_segment(ctx) == seg[api.ID]
    assert attached(fake) == {"node1": {names.network_name(net.current["id"])}}
    moves = list(fake.state.moves.values())
    assert [(m["kind"], m["status"], m["tenant"]) for m in moves] == [("attach", "done", "tenant-a")]


def test_bind_creates_a_network_gpufabric_does_not_know(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    """A network created before the driver was installed, or lost by gpufabric, is adopted at bind."""
    ctx, net = bind(driver, ETH_LLI, segment("physnet1", 2150))
    assert bound_segment(ctx) is not None
    gnet = fake.state.networks[names.network_name(net.current["id"])]
    assert [(s["fabric"], s["seg_id"]) for s in gnet["segments"]] == [("ethernet", 2150)]


def test_bind_picks_our_segment_among_others(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    ours = segment("physnet1", 2160)
    net = network_context([segment("physnet9", 10), ours])
    ctx = port_context(port(ETH_LLI), net)
    driver.bind_port(ctx)
    assert bound_segment(ctx) == ours[api.ID]


@pytest.mark.parametrize(
    ("lli", "seg", "vnic"),
    [
        (ETH_LLI, segment("physnet1", 2100), portbindings.VNIC_NORMAL),
        (ETH_LLI, segment("physnet9", 2100), portbindings.VNIC_BAREMETAL),
        (ETH_LLI, segment(None, 5, "vxlan"), portbindings.VNIC_BAREMETAL),
    ],
    ids=["not-baremetal", "other-physnet", "vxlan"],
)
def test_bind_leaves_ports_that_are_not_ours(driver: GpufabricMechanismDriver, fake: FakeGpufabric,
                                             lli: list[dict[str, Any]], seg: dict[str, Any], vnic: str) -> None:  # fmt: skip
    ctx, _ = bind(driver, lli, seg, vnic=vnic)
    assert bound_segment(ctx) is None
    assert fake.state.requests == []


@pytest.mark.parametrize(
    "lli",
    [None, [], [{"switch_info": "leaf1"}], [{"switch_id": "leaf9", "port_id": "p1"}], [{"port_guid": "0x0002c903000009ff"}]],
    ids=["no-profile", "empty-lli", "no-port-id", "unknown-switch", "unknown-guid"],
)
def test_bind_fails_when_node_cannot_be_found(driver: GpufabricMechanismDriver, fake: FakeGpufabric,
                                              lli: list[dict[str, Any]] | None) -> None:  # fmt: skip
    physnet = "ib" if lli and "port_guid" in lli[0] else "physnet1"
    ctx, _ = bind(driver, lli, segment(physnet, 3010 if physnet == "ib" else 2100))
    assert bound_segment(ctx) is None
    assert attached(fake) == {}
    assert fake.state.moves == {}
    assert writes(fake) == []


def test_failed_move_is_a_binding_failure(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    fake.state.fail_moves = True
    ctx, _ = bind(driver, ETH_LLI, segment("physnet1", 2100))
    assert bound_segment(ctx) is None
    assert attached(fake) == {}
    assert [m["status"] for m in fake.state.moves.values()] == ["failed"]


def test_move_past_timeout_is_a_binding_failure(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    fake.state.hang_moves = True
    cfg.CONF.set_override("bind_timeout", 0.2, group="ml2_gpufabric")
    t = time.monotonic()
    ctx, _ = bind(driver, ETH_LLI, segment("physnet1", 2100))
    assert time.monotonic() - t < 3
    assert bound_segment(ctx) is None
    assert attached(fake) == {}


def test_ib_seg_outside_mapped_range_is_a_binding_failure(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    ctx, _ = bind(driver, IB_GUID_LLI, segment("ib", 4090))
    assert bound_segment(ctx) is None
    assert fake.state.networks == {} and fake.state.moves == {}


def test_bind_survives_a_gpufabric_restart(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    fake.stop()
    threading.Timer(0.5, fake.start).start()  # back on the same port with its state
    ctx, _ = bind(driver, ETH_LLI, segment("physnet1", 2170))
    assert bound_segment(ctx) is not None
    assert attached(fake) == {"node1": {next(iter(fake.state.networks))}}


def test_rebind_of_a_bound_port_is_idempotent(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    seg = segment("physnet1", 2180)
    net = network_context([seg])
    for _ in range(2):
        ctx = port_context(port(ETH_LLI), net)
        driver.bind_port(ctx)
        assert bound_segment(ctx) == seg[api.ID]
    assert attached(fake) == {"node1": {names.network_name(net.current["id"])}}


def _bound(driver: GpufabricMechanismDriver, fake: FakeGpufabric, lli: list[dict[str, Any]], seg: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    ctx, net = bind(driver, lli, seg)
    assert bound_segment(ctx) is not None
    return as_bound(ctx), net


def as_bound(ctx: Any) -> dict[str, Any]:
    """The port as Neutron holds it after the driver's set_binding (vif type and details)."""
    (_seg, vif_type, details), _kw = ctx.set_binding.call_args
    return dict(ctx.current, **{portbindings.VIF_TYPE: vif_type, portbindings.VIF_DETAILS: details})


@pytest.mark.parametrize(("lli", "seg"), [(ETH_LLI, segment("physnet1", 2200)), (IB_GUID_LLI, segment("ib", 3020))],
                         ids=["ethernet", "infiniband"])  # fmt: skip
def test_unbind_detaches(driver: GpufabricMechanismDriver, fake: FakeGpufabric, lli: list[dict[str, Any]], seg: dict[str, Any]) -> None:
    old, net = _bound(driver, fake, lli, seg)
    new = dict(old, **{portbindings.VIF_TYPE: portbindings.VIF_TYPE_UNBOUND, portbindings.HOST_ID: "",
                       portbindings.PROFILE: {}})  # fmt: skip
    driver.update_port_postcommit(port_context(new, net, original=old, original_top=seg))
    assert attached(fake) == {}
    assert [m["kind"] for m in fake.state.moves.values()] == ["attach", "detach"]


def test_update_that_keeps_the_binding_detaches_nothing(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    seg = segment("physnet1", 2210)
    old, net = _bound(driver, fake, ETH_LLI, seg)
    new = dict(old, name="renamed")
    driver.update_port_postcommit(port_context(new, net, original=old, original_top=seg, top=seg))
    assert attached(fake) == {"node1": {names.network_name(net.current["id"])}}


def test_update_moving_the_port_to_another_node_detaches_the_old_one(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    seg = segment("physnet1", 2220)
    old, net = _bound(driver, fake, ETH_LLI, seg)
    new = dict(old, **{portbindings.HOST_ID: "node-uuid-2",
                       portbindings.PROFILE: {"local_link_information": [{"switch_info": "leaf1", "port_id": "p2"}]}})  # fmt: skip
    driver.update_port_postcommit(port_context(new, net, original=old, original_top=seg, top=seg))
    assert "node1" not in attached(fake)


def test_update_of_a_port_we_did_not_bind_sends_nothing(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    seg = segment("physnet1", 2230)
    net = network_context([seg])
    old = port(ETH_LLI, vif=portbindings.VIF_TYPE_BINDING_FAILED)
    driver.update_port_postcommit(port_context(dict(old, **{portbindings.HOST_ID: ""}), net, original=old, original_top=None))
    assert fake.state.requests == []


def test_failed_detach_is_reported(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    seg = segment("physnet1", 2240)
    old, net = _bound(driver, fake, ETH_LLI, seg)
    fake.state.fail_moves = True
    new = dict(old, **{portbindings.VIF_TYPE: portbindings.VIF_TYPE_UNBOUND})
    with pytest.raises(GpufabricDriverError, match="failed at phase"):
        driver.update_port_postcommit(port_context(new, net, original=old, original_top=seg))


def test_delete_bound_port_detaches_and_tolerates_retry(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    seg = segment("ib", 3030)
    p, net = _bound(driver, fake, IB_GUID_LLI, seg)
    for _ in range(2):  # the second is a retry: not attached any more -> fine
        driver.delete_port_postcommit(port_context(p, net, top=seg))
    assert attached(fake) == {}


@pytest.mark.parametrize("vif", [portbindings.VIF_TYPE_UNBOUND, portbindings.VIF_TYPE_BINDING_FAILED])
def test_delete_of_unbound_port_sends_nothing(driver: GpufabricMechanismDriver, fake: FakeGpufabric, vif: str) -> None:
    seg = segment("physnet1", 2250)
    driver.delete_port_postcommit(port_context(port(ETH_LLI, vif=vif), network_context([seg]), top=None))
    assert fake.state.requests == []


def test_second_project_stays_on_its_own_network(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    a, b = segment("physnet1", 2300), segment("physnet1", 2301)
    net_a, net_b = network_context([a], project="tenant-a"), network_context([b], project="tenant-b")
    ca = port_context(port(ETH_LLI), net_a)
    cb = port_context(port([{"switch_info": "leaf1", "port_id": "p2"}], host="node-uuid-2", project="tenant-b"), net_b)
    driver.bind_port(ca)
    driver.bind_port(cb)
    assert attached(fake) == {"node1": {names.network_name(net_a.current["id"])},
                              "node2": {names.network_name(net_b.current["id"])}}  # fmt: skip
    assert {m["node"]: m["tenant"] for m in fake.state.moves.values()} == {"node1": "tenant-a", "node2": "tenant-b"}


def test_second_network_of_the_same_project_converges_without_a_move(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    eth, ib = segment("physnet1", 2400), segment("ib", 3040)
    net_eth, net_ib = network_context([eth], project="tenant-a"), network_context([ib], project="tenant-a")
    driver.bind_port(c1 := port_context(port(ETH_LLI), net_eth))
    driver.bind_port(c2 := port_context(port(IB_GUID_LLI), net_ib))
    assert bound_segment(c1) == eth[api.ID] and bound_segment(c2) == ib[api.ID]
    assert attached(fake) == {"node1": {names.network_name(net_eth.current["id"]), names.network_name(net_ib.current["id"])}}
    assert [m["kind"] for m in fake.state.moves.values()] == ["attach"], "one move into the tenant; the IB network converges"
    # unbinding the IB port keeps the node on the Ethernet network (converge, no move)
    p2 = as_bound(c2)
    driver.delete_port_postcommit(port_context(p2, net_ib, top=ib))
    assert attached(fake) == {"node1": {names.network_name(net_eth.current["id"])}}
    assert fake.state.node_tenant["node1"] == "tenant-a"


def test_failed_converge_is_a_binding_failure(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    driver.bind_port(c1 := port_context(port(ETH_LLI), network_context([segment("physnet1", 2410)])))
    assert bound_segment(c1) is not None
    fake.state.converge_fails = True
    driver.bind_port(c2 := port_context(port(IB_GUID_LLI), network_context([segment("ib", 3041)])))
    assert bound_segment(c2) is None


def test_bind_waits_for_an_open_move_then_attaches(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    """A Neutron retry while gpufabric still runs the first attempt's move."""
    seg = segment("physnet1", 2420)
    net = network_context([seg])
    driver.create_network_postcommit(net)
    fake.state.move_polls = 3
    status, _ = fake.handle("POST", "/api/v1/nodes/node1/attachments",
                            {}, {"network": names.network_name(net.current["id"]), "tenant": "tenant-a"})  # fmt: skip
    assert status == 202
    ctx = port_context(port(ETH_LLI), net)
    driver.bind_port(ctx)
    assert bound_segment(ctx) == seg[api.ID]
    assert attached(fake) == {"node1": {names.network_name(net.current["id"])}}
    assert [m["status"] for m in fake.state.moves.values()] == ["done"], "no second move: the retry found it attached"


# ---- refusals: the host's node, the port's project (issue 18); nothing is written to gpufabric
def _b_holds_node2(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> Any:
    """Project B's port on node2 bound (B holds node2 through its attachment's lease)."""
    net_b = network_context([segment("physnet1", 2500), segment("ib", 3050)], project="tenant-b")
    cb = port_context(port([{"switch_info": "leaf1", "port_id": "p2"}], host="node-uuid-2", project="tenant-b"), net_b)
    driver.bind_port(cb)
    assert bound_segment(cb) is not None and fake.state.node_tenant["node2"] == "tenant-b"
    return net_b


@pytest.mark.parametrize(
    ("lli", "physnet", "seg_id", "host"),
    [
        ([{"switch_info": "leaf1", "port_id": "p2"}], "physnet1", 2510, "node-uuid-1"),
        ([{"switch_id": "leaf1", "port_id": "p2"}], "physnet1", 2510, "node-uuid-1"),
        ([{"port_guid": "0x0002c90300000201"}], "ib", 3051, "node-uuid-1"),
        ([{"switch_info": "leaf1", "port_id": "p1"}, {"switch_info": "leaf1", "port_id": "p2"}], "physnet1", 2510, "node-uuid-1"),
        ([{"switch_info": "leaf1", "port_id": "p2"}], "physnet1", 2510, "no-such-host"),
        ([{"switch_info": "leaf1", "port_id": "p2"}], "physnet1", 2510, ""),
        ([{"switch_info": "leaf1", "port_id": "p2"}], "physnet1", 2510, "Not A Node!"),
    ],
    ids=["eth-other-nodes-port", "eth-switch-id", "ib-other-nodes-guid", "one-link-of-two-foreign", "host-unknown",
         "no-host", "host-not-a-name"],
)  # fmt: skip
def test_bind_refuses_link_info_that_is_not_the_hosts_nodes(driver: GpufabricMechanismDriver, fake: FakeGpufabric,
                                                            lli: list[dict[str, Any]], physnet: str, seg_id: int,
                                                            host: str) -> None:  # fmt: skip
    """Project A's port names project B's node2 in its link info: refused, B's node untouched."""
    net_b = _b_holds_node2(driver, fake)
    before = (dict(fake.state.node_tenant), attached(fake), len(fake.state.moves), [dict(x) for x in fake.state.leases])
    fake.state.requests.clear()
    net_a = network_context([segment(physnet, seg_id)], project="tenant-a")
    ctx = port_context(port(lli, host=host, project="tenant-a"), net_a)
    driver.bind_port(ctx)
    assert bound_segment(ctx) is None
    assert writes(fake) == [], "a refused bind writes nothing to gpufabric (no tenant, network, move or lease)"
    after = (dict(fake.state.node_tenant), attached(fake), len(fake.state.moves), [dict(x) for x in fake.state.leases])
    assert after == before
    assert attached(fake)["node2"] == {names.network_name(net_b.current["id"])}


def test_bind_refuses_a_port_on_another_projects_network(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    """A port of project A on project B's network: never attached into B (the network's project)."""
    net_b = network_context([segment("physnet1", 2520)], project="tenant-b")
    driver.create_network_postcommit(net_b)
    fake.state.requests.clear()
    ctx = port_context(port(ETH_LLI, host="node-uuid-1", project="tenant-a"), net_b)
    driver.bind_port(ctx)
    assert bound_segment(ctx) is None
    assert writes(fake) == [] and fake.state.requests == [], "refused before asking gpufabric anything"
    assert fake.state.node_tenant.get("node1", "quarantine") == "quarantine" and attached(fake) == {}


def test_bind_refuses_a_node_another_tenant_holds(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    """Host and link info both name node2, which project B holds: A may not take it."""
    net_b = _b_holds_node2(driver, fake)
    moves = len(fake.state.moves)
    fake.state.requests.clear()
    ctx = port_context(port([{"switch_info": "leaf1", "port_id": "p2"}], host="node-uuid-2", project="tenant-a"),
                       network_context([segment("physnet1", 2530)], project="tenant-a"))  # fmt: skip
    driver.bind_port(ctx)
    assert bound_segment(ctx) is None
    assert writes(fake) == []
    assert (fake.state.node_tenant["node2"], len(fake.state.moves)) == ("tenant-b", moves)
    assert attached(fake)["node2"] == {names.network_name(net_b.current["id"])}


def test_host_id_that_is_a_node_name_needs_no_map(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    ctx, net = bind(driver, [{"switch_info": "leaf1", "port_id": "p2"}], segment("physnet1", 2540), host="node2")
    assert bound_segment(ctx) is not None
    assert attached(fake) == {"node2": {names.network_name(net.current["id"])}}


def test_unbind_detaches_the_node_the_binding_recorded(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    """Teardown clears host and link info: the node comes from binding:vif_details."""
    seg = segment("physnet1", 2550)
    old, net = _bound(driver, fake, ETH_LLI, seg)
    assert old[portbindings.VIF_DETAILS] == {"gpufabric_node": "node1"}
    new = dict(old, **{portbindings.VIF_TYPE: portbindings.VIF_TYPE_UNBOUND, portbindings.HOST_ID: "node-uuid-2",
                       portbindings.PROFILE: {"local_link_information": [{"switch_info": "leaf1", "port_id": "p2"}]}})  # fmt: skip
    driver.update_port_postcommit(port_context(new, net, original=old, original_top=seg))
    assert attached(fake) == {}
    assert [(m["kind"], m["node"]) for m in fake.state.moves.values()] == [("attach", "node1"), ("detach", "node1")]


def test_unbind_of_a_binding_without_record_uses_the_hosts_node(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    seg = segment("physnet1", 2560)
    old, net = _bound(driver, fake, ETH_LLI, seg)
    old.pop(portbindings.VIF_DETAILS)  # bound by an older driver
    driver.delete_port_postcommit(port_context(old, net, top=seg))
    assert attached(fake) == {}


def test_host_id_gpufabric_stores_needs_no_map(driver: GpufabricMechanismDriver, fake: FakeGpufabric,
                                               conf: cfg.ConfigOpts) -> None:  # fmt: skip
    """No node_map: Ironic's UUID is the node's host id in gpufabric (inventory import --from
    ironic stored it), looked up by GET /nodes?host_id=."""
    conf.set_override("node_map", None, group="ml2_gpufabric")
    fake.state.host_ids["6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a02"] = "node2"
    ctx, net = bind(driver, [{"switch_info": "leaf1", "port_id": "p2"}], segment("physnet1", 2545),
                    host="6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a02")  # fmt: skip
    assert bound_segment(ctx) is not None
    assert attached(fake) == {"node2": {names.network_name(net.current["id"])}}
    assert fake.state.requests[0][:2] == ("GET", "/api/v1/nodes")  # the lookup (the fake records the path only)


def test_host_id_no_node_has_is_refused(driver: GpufabricMechanismDriver, fake: FakeGpufabric,
                                        conf: cfg.ConfigOpts) -> None:  # fmt: skip
    conf.set_override("node_map", None, group="ml2_gpufabric")
    fake.state.host_ids["6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a02"] = "node2"
    ctx, _ = bind(driver, [{"switch_info": "leaf1", "port_id": "p2"}], segment("physnet1", 2546),
                  host="6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0aff")  # fmt: skip
    assert bound_segment(ctx) is None
    assert writes(fake) == [] and attached(fake) == {}


def test_node_map_entry_wins_over_a_stored_host_id(driver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    fake.state.host_ids["node-uuid-1"] = "node2"  # the site's map says node1
    ctx, net = bind(driver, ETH_LLI, segment("physnet1", 2547), host="node-uuid-1")
    assert bound_segment(ctx) is not None
    assert attached(fake) == {"node1": {names.network_name(net.current["id"])}}
