"""The API client's error reading and token checks (no server needed)."""

from __future__ import annotations

import logging

import pytest
from gpufabric_neutron import client as gf
from gpufabric_neutron.names import (
    LinkRef,
    Physnets,
    foreign_links,
    link_refs,
    links,
    node_name,
    normalize_guid,
    tenant_name,
)


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ({"error": {"code": "invalid", "field": "segments.infiniband.seg_id", "value": 4005, "allowed": "3000-3999",
                    "message": "invalid segments.infiniband.seg_id"}},
         ("invalid", "segments.infiniband.seg_id", 4005, "3000-3999")),
        ({"error": "conflict", "message": "network already exists", "field": "name", "value": "n"},
         ("conflict", "name", "n", None)),
        ("<html>bad gateway</html>", (None, None, None, None)),
    ],
    ids=["v1-shape", "flat-shape", "not-json"],
)  # fmt: skip
def test_api_error_reads_both_error_shapes(body: object, want: tuple[object, ...]) -> None:
    e = gf.ApiError(422, body, "POST", "/networks")
    assert (e.code, e.field, e.value, e.allowed) == want
    assert str(e).startswith("POST /networks: gpufabric 422")


def test_error_message_names_field_and_allowed_range() -> None:
    e = gf.ApiError(422, {"error": {"code": "invalid", "field": "f", "value": 1, "allowed": "2-3", "message": "m"}})
    assert "field f=1, allowed: 2-3" in str(e)


@pytest.mark.parametrize(
    ("raw", "want"),
    [("0x0002C90300000101", "0x0002c90300000101"), ("0002c90300000101", "0x0002c90300000101"),
     ("00:02:c9:03:00:00:01:01", "0x0002c90300000101"), ("0002:c903:0000:0101", "0x0002c90300000101"),
     ("Ethernet1/1", None), ("0x12", None)],
    ids=["0x-upper", "bare", "colon-bytes", "sysfs", "eth-port", "short"],
)  # fmt: skip
def test_guid_forms(raw: str, want: str | None) -> None:
    assert normalize_guid(raw) == want


def test_link_refs_order_and_dedupe() -> None:
    profile = {"local_link_information": [{"switch_info": "leaf1", "switch_id": "leaf1", "port_id": "p1"}, "junk"]}
    assert [(r.switch, r.port) for r in link_refs(profile, "ethernet")] == [("leaf1", "p1")]


def test_physnets_never_mix_fabrics() -> None:
    p = Physnets({"physnet1": "ethernet"}, {"ib": "infiniband"})
    segs = [{"network_type": "vlan", "physical_network": "ib", "segmentation_id": 3001},
            {"network_type": "vlan", "physical_network": "physnet1", "segmentation_id": 2001}]  # fmt: skip
    assert p.gpufabric_segments(segs) == [{"fabric": "infiniband", "seg_id": 3001}, {"fabric": "ethernet", "seg_id": 2001}]
    assert tenant_name("a" * 64).startswith("os-") and len(tenant_name("a" * 64)) <= 63


@pytest.mark.parametrize("url", ["http://gpufabric:8480", "HTTP://127.0.0.1:8480", "ftp://x", "gpufabric:8480", ""])
def test_client_refuses_plain_http_and_other_schemes(url: str) -> None:
    with pytest.raises(gf.InsecureTransport, match="refused; allowed: https://, or http:// with the explicit insecure"):
        gf.GpufabricClient(url, "t")


@pytest.mark.parametrize(("url", "what"), [("http://127.0.0.1:8480", "plain HTTP"), ("https://gf:8443", "not verified")])
def test_insecure_transport_is_explicit_and_logged(url: str, what: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gpufabric_neutron.client"):
        c = gf.GpufabricClient(url, "t", insecure=True)
    assert [r.getMessage() for r in caplog.records if "TRANSPORT-INSECURE" in r.getMessage() and what in r.getMessage()]
    assert c.ssl is None if url.startswith("http:") else c.ssl is not None and not c.ssl.check_hostname


def test_https_is_verified_and_silent(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        c = gf.GpufabricClient("https://gf:8443", "t")
    assert c.ssl is not None and c.ssl.check_hostname and not caplog.records


@pytest.mark.parametrize(
    ("host", "want"),
    [("1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "gpu-a01"), ("gpu-b02", "gpu-b02"), ("Ironic Node", None), ("", None),
     (None, None), ("mapped-to-junk", None)],
    ids=["mapped", "name-itself", "not-a-name", "empty", "none", "map-value-not-a-name"],
)  # fmt: skip
def test_host_id_names_the_node(host: str | None, want: str | None) -> None:
    m = {"1be26c0b-03f2-4d2e-ae87-c02d7f33c123": "gpu-a01", "mapped-to-junk": "Not/A/Name"}
    assert node_name(host, m) == want


PORTS = {"ethernet": [{"switch": "leaf1", "switch_port": "p1"}], "infiniband": [{"port_guid": "0x0002C90300000101"}]}


@pytest.mark.parametrize(
    ("lli", "fabric", "foreign"),
    [([{"switch_info": "leaf1", "port_id": "p1"}], "ethernet", []),
     ([{"switch_info": "unknown", "switch_id": "leaf1", "port_id": "p1"}], "ethernet", []),
     ([{"switch_info": "leaf1", "port_id": "p2"}], "ethernet", [(LinkRef("leaf1", "p2"),)]),
     ([{"switch_info": "leaf1", "port_id": "p1"}, {"switch_info": "leaf2", "port_id": "p1"}], "ethernet",
      [(LinkRef("leaf2", "p1"),)]),
     ([{"port_id": "00:02:c9:03:00:00:01:01"}], "infiniband", []),
     ([{"port_guid": "0x0002c90300000201"}], "infiniband", [(LinkRef(guid="0x0002c90300000201"),)])],
    ids=["eth-own", "eth-switch-id-fallback", "eth-other-port", "one-of-two-foreign", "ib-own-guid", "ib-other-guid"],
)  # fmt: skip
def test_foreign_links_are_the_links_that_are_not_the_nodes_ports(lli: list[dict[str, str]], fabric: str,
                                                                   foreign: list[tuple[LinkRef, ...]]) -> None:  # fmt: skip
    found = links({"local_link_information": lli}, fabric)
    assert len(found) == len(lli)
    assert foreign_links(found, {"ports": PORTS}) == foreign
