"""The API client's error reading and token checks (no server needed)."""

from __future__ import annotations

import pytest
from gpufabric_neutron import client as gf
from gpufabric_neutron.names import Physnets, link_refs, normalize_guid, tenant_name


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
    p = Physnets(frozenset({"physnet1"}), "ib")
    segs = [{"network_type": "vlan", "physical_network": "ib", "segmentation_id": 3001},
            {"network_type": "vlan", "physical_network": "physnet1", "segmentation_id": 2001}]  # fmt: skip
    assert p.gpufabric_segments(segs) == [{"fabric": "infiniband", "seg_id": 3001}, {"fabric": "ethernet", "seg_id": 2001}]
    assert tenant_name("a" * 64).startswith("os-") and len(tenant_name("a" * 64)) <= 63
