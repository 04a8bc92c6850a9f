"""The inventory facet of a fabric kind: a node's ports on the kind's instances (parsed from and
dumped to the generic ``node_fabric_ports`` table, their unique keys, the API's listing and port
lookup) and the inventory import formats of the kind's own."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

from gpufabric.domain.entries import node_entries
from gpufabric.domain.errors import ConfigError
from gpufabric.domain.hooks import ImportFormat
from gpufabric.domain.kind.identity import KindIdentity
from gpufabric.domain.models import FabricPorts, Node, PortKey
from gpufabric.domain.values import PortNaming


class KindInventory(KindIdentity):
    """A kind keeps a node's ports in the generic ``node_fabric_ports`` table (``ports_section``):
    it parses and dumps a node's entries; :meth:`ports` reads them back."""

    ports_section: bool = False
    """True: this kind keeps a node's ports in the generic table, read from the node entries'
    ``fabrics: {<instance>: [...]}`` section of the inventory (``parse_ports``/``dump_ports``)."""
    inventory_key: ClassVar[str | None] = None
    """A node entry's own inventory key for this kind's entries on its default instance (the DPU
    kind's ``dpus``: files from before ``fabrics:`` keep working). Needs ``ports_section``."""
    entry_schema: ClassVar[Mapping[str, Any] | None] = None
    """The JSON Schema of one of this kind's inventory entries: what the API's OpenAPI schema shows
    for its node field (the kind's ``parse_ports`` still checks every entry). None: any mapping."""

    def parse_ports(self, node: str, raw: Any, where: str) -> tuple[Any, ...]:
        """A node's entries of this kind's inventory section -> immutable port values; raise a
        ValidationError whose field starts with ``where`` (e.g. ``nodes[2].fabrics.mem-a[0]``)."""
        raise ConfigError(f"{where}", self.name, "a fabric kind with an inventory section (ports_section)")

    def dump_ports(self, ports: tuple[Any, ...]) -> list[Any]:
        """The JSON-able entries ``parse_ports`` reads back as ``ports``."""
        return []

    def port_keys(self, ports: tuple[Any, ...]) -> Iterable[PortKey | Any]:
        """What ``ports`` (one node's, on this instance) hold that no other node may: each a
        :class:`PortKey`, once per node (the store keeps them unique with a database constraint
        and finds a port's node by them). A plain value ``v`` means
        ``PortKey(<instance>, str(v))``: unique on this instance. Default: none."""
        return ()

    def keys(self, ports: tuple[Any, ...]) -> tuple[PortKey, ...]:
        """:meth:`port_keys` as :class:`PortKey` values (a plain value: unique on this instance)."""
        out: dict[tuple[str, str], PortKey] = {}
        for k in self.port_keys(ports):
            key = k if isinstance(k, PortKey) else PortKey(self.instance, str(k), "", f"ports on fabric {self.instance}",
                                                           f"port {k} on fabric {self.instance}")  # fmt: skip
            out.setdefault((key.scope, key.key), key)
        return tuple(out.values())

    def stored(self, ports: tuple[Any, ...]) -> FabricPorts:
        """One node's ``ports`` on this instance as the store keeps them: dumped, with their keys."""
        return FabricPorts.of(self.instance, self.dump_ports(ports), self.keys(ports))

    def for_inventory(self, namings: Mapping[str, PortNaming]) -> Self:
        """This kind reading an inventory file whose devices name their ports by ``namings``
        (device -> naming, from every kind's :meth:`port_namings`): a kind whose entries name
        device ports checks them against it in :meth:`parse_ports`. Default: itself."""
        return self

    def listed_ports(self, node: Node, instances: Collection[str] = ()) -> Sequence[Mapping[str, Any]] | None:
        """Every port of ``node`` on this kind's default instance and its ``instances`` (the
        configured ones), as the API's node answer lists them under ``ports.<kind>`` (what
        integrations such as the Neutron driver match a port binding against); None: the kind
        lists none there. Default: None."""
        return None

    def lookup_key(self, query: Mapping[str, str]) -> PortKey | None:
        """The :class:`PortKey` the port lookup ``query`` (``GET /api/v1/ports/lookup``'s
        parameters) names on this kind, or None when it names none of this kind's ports."""
        return None

    def ports(self, node: Node) -> tuple[Any, ...]:
        """``node``'s ports on this instance (its generic-table entries, parsed; a kind with an
        ``inventory_key``: its default instance's when the node has none of its own here)."""
        return node_entries(node, self.instance, self.parse_ports, self.name if self.inventory_key else None)

    def import_formats(self) -> Sequence[ImportFormat]:
        """Inventory import formats of this kind's own (``inventory import --format NAME``,
        :mod:`gpufabric.domain.hooks`). Default: none."""
        return ()

    def port_namings(self, fabrics_yaml: Mapping[str, Any]) -> Mapping[str, PortNaming]:
        """device -> the naming its ports must follow in an inventory file, for this kind's
        devices in a ``fabrics.yaml`` mapping (an inventory file is checked against it on
        import). Default: none."""
        return {}
