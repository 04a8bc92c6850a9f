"""Adopted segments per fabric instance (issues 19, 20): Neutron's ``POST /networks`` names an
instance (``ib-compute``, ``ib-storage``, the default ``infiniband``...) per segmentation id;
each lands on its instance through its kind's ``FabricKind.adopt`` (range and the kind's shared
pool), in one transaction that writes nothing on any error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConflictError, ValidationError
from gpufabric.domain.models import Network
from gpufabric.engine.fabrics import network_kinds
from gpufabric.fabrics.ethernet.segments import segment_vlan
from gpufabric.fabrics.infiniband.segments import segment_pkey
from gpufabric.fabrics.nvlink.kind import NvlinkKind
from gpufabric.store.core import Store
from gpufabric.store.registry import Registry, parse_segments
from gpufabric.store.tenants import adopt_network

CFG = parse_segments()  # ethernet 2000-2999; infiniband 3000-3999 -> PKey 0x0a00 + (id - 3000)
TWO_SUBNETS = {"fabrics": [{"name": "ib-compute", "kind": "infiniband"}, {"name": "ib-storage", "kind": "infiniband"}]}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    s.create_tenant("beta")
    yield s
    s.close()


def kinds() -> list[Any]:
    return network_kinds(TWO_SUBNETS, Registry.from_entry_points())


def segs(n: Network) -> dict[str, tuple[int, int | None, int | None]]:
    return {s.fabric: (s.seg_id, segment_vlan(s).value if segment_vlan(s) else None, segment_pkey(s).value if segment_pkey(s) else None) for s in n.segments}


def stored(store: Store) -> dict[str, dict[str, tuple[int, int | None, int | None]]]:
    return {n.name: segs(n) for n in store.networks("beta")}


def test_each_adopted_segment_lands_on_its_instance_with_its_pkey(store: Store) -> None:
    made = adopt_network(store, "n1", "beta", CFG, {"ib-storage": 3200, "ib-compute": 3100}, kinds())
    assert segs(made) == {"ib-compute": (3100, None, 0x0A64), "ib-storage": (3200, None, 0x0AC8)}
    assert stored(store) == {"n1": segs(made)}  # no segment on ethernet nor on a default 'infiniband'
    eth = adopt_network(store, "n2", "beta", CFG, {"ethernet": 2500}, kinds())
    assert segs(eth) == {"ethernet": (2500, 2500, None)}


def test_an_id_out_of_range_names_its_instance_and_writes_nothing(store: Store) -> None:
    with pytest.raises(ValidationError) as e:
        adopt_network(store, "n1", "beta", CFG, {"ib-compute": 3100, "ib-storage": 4500}, kinds())
    assert (e.value.field, e.value.value, e.value.allowed) == ("segments.ib-storage.seg_id", 4500, "3000-3999")
    assert stored(store) == {}


def test_an_unknown_instance_is_refused_naming_the_instances_that_adopt(store: Store) -> None:
    with pytest.raises(ValidationError) as e:
        adopt_network(store, "n1", "beta", CFG, {"ib-compute": 3100, "infiniband": 3200}, kinds())
    assert (e.value.field, e.value.value) == ("segments.fabric", "infiniband")
    assert e.value.allowed == "ethernet, ib-compute or ib-storage"
    with pytest.raises(ValidationError, match="fabric nvlink does not take explicit segmentation ids"):
        adopt_network(store, "n1", "beta", CFG, {"nvlink": 5}, kinds())  # configured, but its kind adopts none
    assert stored(store) == {}


def test_a_taken_id_conflicts_across_sibling_instances_and_writes_nothing(store: Store) -> None:
    adopt_network(store, "n1", "beta", CFG, {"ib-compute": 3100}, kinds())
    allocated = store.create_network("n2", "beta", CFG, kinds())
    on_storage = segs(allocated)["ib-storage"][0]
    before = stored(store)
    for name, ask in (
        ("n3", {"ethernet": 2600, "ib-storage": 3100}),  # adopted on the sibling
        ("n4", {"ib-compute": on_storage}),  # allocated on the sibling
        ("n5", {"ib-compute": 3300, "ib-storage": 3300}),  # twice in one request
    ):
        with pytest.raises(ConflictError, match=r"^ib-(compute|storage) segment \d+ is already used$"):
            adopt_network(store, name, "beta", CFG, ask, kinds())
    assert stored(store) == before  # not even n3's free VLAN 2600
    again = adopt_network(store, "n3", "beta", CFG, {"ethernet": 2600, "ib-storage": 3101}, kinds())
    assert segs(again) == {"ethernet": (2600, 2600, None), "ib-storage": (3101, None, 0x0A65)}


def test_the_default_instances_keep_todays_names_and_errors(store: Store) -> None:
    made = adopt_network(store, "n1", "beta", CFG, {"ethernet": 2500, "infiniband": 3100})
    assert segs(made) == {"ethernet": (2500, 2500, None), "infiniband": (3100, None, 0x0A64)}
    with pytest.raises(ConflictError, match=r"^infiniband segment 3100 is already used$"):
        adopt_network(store, "n2", "beta", CFG, {"infiniband": 3100})
    with pytest.raises(ValidationError) as e:
        adopt_network(store, "n2", "beta", CFG, {"infiniband": 4500})
    assert (e.value.field, e.value.allowed) == ("segments.infiniband.seg_id", "3000-3999")
    with pytest.raises(ValidationError) as e:
        adopt_network(store, "n2", "beta", CFG, {"ib-storage": 3200})
    assert (e.value.field, e.value.allowed) == ("segments.fabric", "ethernet or infiniband")
    assert list(stored(store)) == ["n1"]


def test_a_kind_without_the_hook_refuses_explicit_ids() -> None:
    with pytest.raises(ValidationError) as e:
        NvlinkKind().bind("nvl-a").adopt(Network("n", "beta"), 5, (), CFG)
    assert (e.value.field, e.value.value) == ("segments.fabric", "nvl-a")
    assert "fabric nvl-a does not take explicit segmentation ids" in str(e.value)
