"""A network's segments as people and the API see them (issue 19: a kind's network segment is
its own): each kind labels its segments and adds its own fields (``segment_label``,
``segment_view``), and ``network list`` shows one labelled cell per instance, a kind the core
does not know included (before, the table had a VLAN and an InfiniBand column and nothing else)."""

from __future__ import annotations

from gpufabric.cli.tenant_cmd import _segments_row
from gpufabric.domain.models import Segment
from gpufabric.engine.columns import with_segment_views
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.segments import VLAN, segment_vlan, vlan_segment
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.segments import PKEY, pkey_segment, segment_pkey

NET = {"name": "alpha-net", "tenant": "alpha", "segments": [
    {"fabric": "ethernet", "seg_id": 2000, "scope": VLAN, "key": 2000},
    {"fabric": "ib-storage", "seg_id": 3500, "scope": PKEY, "key": 0x0C00, "options": {"mtu": 5}},
    {"fabric": "memory", "seg_id": 7, "scope": None, "key": None},
]}  # fmt: skip


def test_each_kind_labels_its_segments_and_adds_its_fields() -> None:
    kinds = [EthernetKind(), InfinibandKind().bind("ib-storage")]
    (net,) = with_segment_views([NET], kinds)
    eth, ib, mem = net["segments"]
    assert (eth["label"], eth["vlan"], "pkey" in eth) == ("vlan 2000", 2000, False)
    assert (ib["label"], ib["pkey"], "vlan" in ib) == ("seg 3500 -> pkey 0x0c00", "0x0c00", False)
    assert mem == {**NET["segments"][2], "label": "seg 7"}  # an instance no kind here knows: its id only
    assert _segments_row(net) == ("alpha-net", "alpha", "ethernet: vlan 2000\nib-storage: seg 3500 -> pkey 0x0c00 (mtu=5)\nmemory: seg 7")


def test_the_kinds_segments_keep_their_keys_under_their_scopes() -> None:
    eth, ib = vlan_segment("ethernet", 2001), pkey_segment("infiniband", 3001, 0x8A01)
    assert (eth.key, eth.scope, ib.key, ib.scope) == (2001, VLAN, 0x0A01, PKEY)  # a PKey without its membership bit
    assert segment_vlan(eth) is not None and segment_vlan(eth).value == 2001 and segment_pkey(eth) is None
    assert segment_pkey(ib) is not None and segment_pkey(ib).value == 0x0A01 and segment_vlan(ib) is None
    assert segment_vlan(Segment("memory", 7)) is None
