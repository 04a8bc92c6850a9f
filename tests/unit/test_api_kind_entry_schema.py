"""A kind's inventory entries in the API's OpenAPI schema (issue 19: "its API node fields (schema
fragment)"): each registered kind's own node key of ``POST /api/v1/inventory`` (``NodeIn``) carries
the kind's ``entry_schema`` as its items, and that schema names exactly the keys the kind's parser
takes (a key added to one and not the other fails here)."""

from __future__ import annotations

from typing import Any

from gpufabric.api.v1.schemas import InventoryIn
from gpufabric.fabrics.ethernet import entries as eth
from gpufabric.fabrics.infiniband import entries as ib
from gpufabric.store.registry import registered_kinds


def _node_in() -> dict[str, Any]:
    schema = InventoryIn.model_json_schema()
    node: dict[str, Any] = schema["$defs"]["NodeIn"]
    return node


def test_the_built_in_kinds_node_fields_show_their_entries() -> None:
    props = _node_in()["properties"]
    assert props["ethernet"]["items"]["required"] == ["name", "switch", "switch_port"]
    assert props["ethernet"]["items"]["properties"]["bond_mode"]["enum"] == ["lacp", "active-backup"]
    assert props["ib"]["items"]["required"] == ["device", "port_guid", "node_guid"]
    assert props["ib"]["items"]["properties"]["port_num"]["maximum"] == 254


def test_each_entry_schema_names_the_keys_its_parser_takes() -> None:
    assert set(eth.ENTRY_SCHEMA["properties"]) == eth.KEYS
    assert set(ib.ENTRY_SCHEMA["properties"]) == ib.KEYS
    with_schema = {k.inventory_key for k in registered_kinds() if k.entry_schema}
    assert {"ethernet", "ib"} <= with_schema
    props = _node_in()["properties"]
    assert all("items" in props[key] for key in with_schema)
