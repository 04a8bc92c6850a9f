"""A node's identity in an outside inventory (``nodes.host_id``, migration 0019): what Neutron's
``binding:host_id`` names for it (Ironic's node UUID). Written by an import that knows it
(:attr:`Inventory.host_ids`, from ``inventory import --from ironic``), in the import's
transaction; read by the API's ``GET /api/v1/nodes?host_id=`` (the Neutron driver's lookup)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.orm import Session

from gpufabric.domain.errors import ValidationError
from gpufabric.store.tables import NodeRow

MAX = 255


def write_host_ids(s: Session, rows: Mapping[str, NodeRow], pairs: Sequence[tuple[str, str]]) -> None:
    """Each (node, host id) of ``pairs`` on its node's row (``rows``: every node by name, those
    added by the import included). The outside inventory is the source of its ids: a host id
    another node held (a node renamed there) moves to the node it names now; the store's unique
    constraint refuses two nodes with one id."""
    if not pairs:
        return
    wanted = dict(pairs)
    if len(set(wanted.values())) != len(wanted):
        raise ValidationError("host_ids", str(sorted(wanted.values()))[:200], "one node per host id")
    for name, hid in wanted.items():
        if not hid or len(hid) > MAX:
            raise ValidationError(f"node {name} host_id", hid[:60], f"1-{MAX} characters")
        if name not in rows:
            raise ValidationError(f"node {name} host_id", hid, "a node of the import")
    taken = set(wanted.values())
    for name, row in rows.items():
        if row.host_id in taken and wanted.get(name) != row.host_id:
            row.host_id = None
    s.flush()  # the ids released first: the unique constraint checks each row as it is written
    for name, hid in wanted.items():
        rows[name].host_id = hid
