"""Ironic's networks are gpufabric's quarantine (gpufabric_neutron.ironic, issue 34 item 3),
against the fake gpufabric and a loopback stand-in for Ironic's node API: a bind on Ironic's
cleaning network ends the node's lease (quarantine on every fabric) and binds; a node already in
quarantine stays there; link info of another node is refused with no write; Ironic's networks
never become gpufabric networks and their unbind changes nothing; a tenant bind while Ironic
cleans the node is refused with one line naming the node and the provision state."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fake_gpufabric import FakeGpufabric
from gpufabric_neutron import names
from gpufabric_neutron.mech import GpufabricMechanismDriver
from neutron_lib.api.definitions import portbindings
from oslo_config import cfg
from test_mech_ports import ETH_LLI, attached, bound_segment, writes

from conftest import network_context, port, port_context, segment

CLEANING = "ironic-cleaning"


def cleaning_net(seg: dict[str, Any]) -> Any:
    net = network_context([seg], project="ironic-service")
    net.current["name"] = CLEANING
    return net


@pytest.fixture
def ironic_states() -> Iterator[dict[str, str]]:
    """{node uuid: provision_state} served as Ironic's GET /v1/nodes/{uuid}; its URL in ``url``."""
    states: dict[str, str] = {}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:
            uuid = self.path.split("?")[0].rsplit("/", 1)[-1]
            ok = uuid in states and self.headers.get("X-OpenStack-Ironic-API-Version")
            raw = json.dumps(
                {"uuid": uuid, "provision_state": states.get(uuid)} if ok else {"error_message": "nf"}
            ).encode()
            self.send_response(200 if ok else 404)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    states["url"] = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield states
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def idriver(conf: cfg.ConfigOpts, ironic_states: dict[str, str]) -> Iterator[GpufabricMechanismDriver]:
    conf.set_override("ironic_networks", [CLEANING, "ironic-provision-uuid"], group="ml2_gpufabric")
    conf.set_override("ironic_url", ironic_states["url"], group="ml2_gpufabric")
    d = GpufabricMechanismDriver()
    d.initialize()
    yield d
    for k in ("ironic_networks", "ironic_url"):
        conf.clear_override(k, group="ml2_gpufabric")


def _lease_node1(d: GpufabricMechanismDriver, fake: FakeGpufabric) -> str:
    ctx, net = _tenant_bind(d, 2600)
    assert bound_segment(ctx) is not None and fake.state.node_tenant["node1"] == "tenant-a"
    return names.network_name(net.current["id"])


def _tenant_bind(d: GpufabricMechanismDriver, seg_id: int) -> tuple[Any, Any]:
    net = network_context([segment("physnet1", seg_id)])
    ctx = port_context(port(ETH_LLI), net)
    d.bind_port(ctx)
    return ctx, net


def test_cleaning_bind_moves_the_node_to_quarantine(idriver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    _lease_node1(idriver, fake)
    nets = set(fake.state.networks)
    seg = segment("physnet1", 2900)
    ctx = port_context(port(ETH_LLI, project="ironic-service"), cleaning_net(seg))
    idriver.bind_port(ctx)
    assert bound_segment(ctx) == seg["id"]
    assert ctx.set_binding.call_args[0][2] == {"gpufabric_node": "node1", "gpufabric_quarantine": True}
    assert fake.state.node_tenant["node1"] == "quarantine" and attached(fake) == {}
    assert [(m["kind"], m["status"]) for m in fake.state.moves.values()] == [("attach", "done"), ("release", "done")]
    assert set(fake.state.networks) == nets  # the cleaning network is no gpufabric network


def test_a_node_in_quarantine_stays_there(idriver: GpufabricMechanismDriver, fake: FakeGpufabric) -> None:
    seg = segment("physnet1", 2900)
    ctx = port_context(port(ETH_LLI, project="ironic-service"), cleaning_net(seg))
    idriver.bind_port(ctx)
    assert bound_segment(ctx) == seg["id"]
    assert writes(fake) == [] and fake.state.moves == {}


def test_cleaning_bind_with_another_nodes_link_info_is_refused(idriver: GpufabricMechanismDriver,
                                                               fake: FakeGpufabric) -> None:  # fmt: skip
    net_a = _lease_node1(idriver, fake)
    before = writes(fake)
    ctx = port_context(
        port(ETH_LLI, host="node-uuid-2", project="ironic-service"), cleaning_net(segment("physnet1", 2900))
    )
    idriver.bind_port(ctx)
    assert bound_segment(ctx) is None
    assert writes(fake) == before and attached(fake) == {"node1": {net_a}}


def test_ironic_networks_are_never_gpufabric_networks_and_their_unbind_changes_nothing(
    idriver: GpufabricMechanismDriver, fake: FakeGpufabric
) -> None:
    seg = segment("physnet1", 2900)
    net = cleaning_net(seg)
    idriver.create_network_postcommit(net)
    provision = network_context([segment("physnet1", 2901)], project="ironic-service", net_id="ironic-provision-uuid")
    idriver.create_network_postcommit(provision)
    assert fake.state.requests == []
    ctx = port_context(port(ETH_LLI, project="ironic-service"), net)
    idriver.bind_port(ctx)
    bound = dict(ctx.current, **{portbindings.VIF_TYPE: portbindings.VIF_TYPE_OTHER,
                                 portbindings.VIF_DETAILS: ctx.set_binding.call_args[0][2]})  # fmt: skip
    fake.state.requests.clear()
    idriver.delete_port_postcommit(port_context(bound, net, top=seg))
    idriver.delete_network_postcommit(net)
    assert fake.state.requests == []


def test_a_tenant_bind_while_ironic_cleans_is_refused(idriver: GpufabricMechanismDriver, fake: FakeGpufabric,
                                                      ironic_states: dict[str, str],
                                                      caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    ironic_states["node-uuid-1"] = "clean wait"
    with caplog.at_level(logging.ERROR):
        ctx, _ = _tenant_bind(idriver, 2610)
    assert bound_segment(ctx) is None
    assert writes(fake) == [] and fake.state.node_tenant.get("node1", "quarantine") == "quarantine"
    line = next(r.getMessage() for r in caplog.records if "refused" in r.getMessage())
    assert "node node1 (Ironic node node-uuid-1) is in Ironic provision_state 'clean wait'" in line
    ironic_states["node-uuid-1"] = "active"  # cleaned and deployed: the join goes through
    ctx, _ = _tenant_bind(idriver, 2611)
    assert bound_segment(ctx) is not None
