"""v1 nodes: list/show with ports on every fabric, inventory import, owners, node
attachments for integrations (Neutron, Kubernetes), and port lookup."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from gpufabric.api import bodies
from gpufabric.api.deps import CTX, PAGE, PRINCIPAL, ApiContext, Page, json, paged
from gpufabric.api.v1.schemas import (
    NAME_PATTERN,
    AttachmentIn,
    AttachmentOut,
    FormatImportOut,
    ImportOut,
    InventoryIn,
    OwnerIn,
    PortLookupOut,
    errors,
)
from gpufabric.api.v1.schemas_nodes import NodeOut, NodePage
from gpufabric.domain.auth import LOCAL_ADMIN, Principal, Verb
from gpufabric.domain.errors import NotFoundError, ValidationError
from gpufabric.domain.moves import Move
from gpufabric.domain.serial import jsonable
from gpufabric.engine.columns import registered_kinds, with_fabrics

router = APIRouter(tags=["nodes"])
NodeName = Annotated[str, Path(min_length=1, max_length=63, pattern=NAME_PATTERN)]
StateQ = Literal["available", "leased", "moving", "maintenance"]
HostIdQ = Annotated[str | None, Query(min_length=1, max_length=255, description="The node an outside inventory names so: "
                    "what Neutron's binding:host_id carries (Ironic's node UUID, written by inventory import --from ironic)")]
FabricQ = Annotated[str | None, Query(max_length=63, pattern=NAME_PATTERN, description="A fabric instance or kind: nodes with ports on it")]


@router.get("/nodes", summary="List nodes with their ports on every fabric", responses={200: {"model": NodePage}, **errors(304)})
async def list_nodes(
    request: Request,
    p: Principal = PRINCIPAL,
    c: ApiContext = CTX,
    pg: Page = PAGE,
    tenant: Annotated[str | None, Query(max_length=63, pattern=NAME_PATTERN)] = None,
    state: StateQ | None = None,
    fabric: FabricQ = None,
    host_id: HostIdQ = None,
) -> Response:
    rows = None if fabric is None else _rows(c, fabric)

    def build() -> dict[str, Any]:
        items, total = c.reader.nodes(p, pg.limit, pg.offset, tenant, state, rows, host_id=host_id)
        return paged(with_fabrics(items, c.store, c.view_kinds()), total, pg)

    return await c.cached(request, (p.role, p.tenant), build)


def _rows(c: ApiContext, fabric: str) -> tuple[str, ...]:
    """The port rows a ``fabric`` filter matches: the instance's own, and its kind's default
    instance's (which an instance without entries of its own reads); a ValidationError naming
    the known instances and kinds for any other."""
    kinds = c.view_kinds() or registered_kinds()
    kind_of = {k.name: k.name for k in kinds} | {k.instance: k.name for k in kinds}
    if fabric not in kind_of:
        raise ValidationError("fabric", fabric, f"a fabric instance or kind: {', '.join(sorted(kind_of))}")
    return tuple(sorted({fabric, kind_of[fabric]}))


@router.get("/nodes/{node}", summary="One node", responses={200: {"model": NodeOut}, **errors(304, 404)})
async def show_node(request: Request, node: NodeName, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    def build() -> dict[str, Any]:
        items, _ = c.reader.nodes(p, 1, 0, name=node)
        if not items:
            raise NotFoundError("node", node)
        return with_fabrics(items, c.store, c.view_kinds())[0]

    return await c.cached(request, (p.role, p.tenant), build)


@router.post(
    "/inventory",
    status_code=200,
    summary="Import (upsert) an inventory: {nodes: [...]} as in inventory files",
    responses={200: {"model": ImportOut}, **errors(403, 409)},
    openapi_extra=bodies.json_body(InventoryIn),
)
def import_inventory(raw: bytes = bodies.RAW, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    from gpufabric.workflow.inventory import inventory_from_dict, port_namings

    p.require("node", Verb.CREATE)
    doc = bodies.parsed(InventoryIn, raw, "nodes")  # here, in a worker thread, a node at a time
    named = any(n.get("fabrics") for n in doc["nodes"])  # ports on named instances: those of fabrics.yaml
    instances = c.engine().fabrics.kinds if named and c.engine is not None else {}
    namings = port_namings(c.fabrics_settings())  # each switch's dialect: its port names, as a file's
    inv = inventory_from_dict(doc, namings, instances)
    r = c.actions.import_inventory(p, inv)  # the store refuses a port key another node holds (409)
    return json({"added": r.added, "updated": r.updated, "unchanged": r.unchanged})


@router.post(
    "/inventory/{fmt}",
    status_code=200,
    summary="Import a fabric kind's discovery output (the text as the body, e.g. ibnetdiscover's)",
    responses={200: {"model": FormatImportOut}, **errors(403, 409, 413)},
    openapi_extra=bodies.text_body("The text, as the tool printed it"),
)
def import_format(
    fmt: Annotated[str, Path(min_length=1, max_length=63, pattern=NAME_PATTERN, description="A kind's format")],
    body: bytes = bodies.RAW,
    fabric: Annotated[str | None, Query(min_length=1, max_length=63, pattern=NAME_PATTERN,
                                        description="The fabric instance the text's ports are on")] = None,
    strict: Annotated[bool, Query(description="Refuse the whole text when one device matches no node")] = False,
    confirm: Annotated[list[str] | None, Query(description="Held changes to apply, as the answer's `pending` names "
                                               "them (`PORT_GUID=NODE`), or `all` (repeatable)")] = None,
    p: Principal = PRINCIPAL,
    c: ApiContext = CTX,
) -> Response:
    """``gpufabric inventory import --format NAME`` through ``--api``: read on the server against its
    own fabrics.yaml and store, imported as the token's principal (admin; an owner for its nodes)."""
    from gpufabric.workflow import kind_import

    p.require("node", Verb.CREATE)
    registry = kind_import.registered()  # once: the format's lookup and the instances it reads with
    found = kind_import.find(fmt, registry)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValidationError("body", f"byte {e.start}", "UTF-8 text") from None
    return json(kind_import.imported(c.actions, p, fmt, found, text, c.fabrics_settings(), fabric, strict, registry,
                                     confirm or ()))  # fmt: skip


@router.put("/nodes/{node}/owner", summary="Set the tenant that owns a node (may lease it out)",
            responses={200: {"model": NodeOut}, **errors(403, 404)})
def set_owner(node: NodeName, body: OwnerIn, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    c.actions.set_owner(p, node, body.owner)
    items, _ = c.reader.nodes(p, 1, 0, name=node)
    return json(with_fabrics(items, c.store, c.view_kinds())[0])


def _attachment(c: ApiContext, node: str, move: Move | None, lease: Any) -> dict[str, Any]:
    m = None
    if move is not None and move.id is not None:  # the move it just made, as the moves endpoints show it
        m = c.reader.move(LOCAL_ADMIN, move.id)
    lj = None
    if lease is not None:
        lj = {**jsonable(lease), "networks": list(lease.networks), "active": True}
    return {"node": node, "move": m, "lease": lj}


@router.post(
    "/nodes/{node}/attachments",
    status_code=202,
    summary="Put the node in a tenant with a network added (a move through quarantine if the tenant changes)",
    responses={202: {"model": AttachmentOut}, **errors(403, 404, 409, 429)},
)
def attach(node: NodeName, body: AttachmentIn, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    move, lease = c.actions.attach(p, node, body.network, body.tenant)
    return json(_attachment(c, node, move, lease), 202)


@router.delete(
    "/nodes/{node}/attachments/{network}",
    status_code=202,
    summary="Release a network from the node (to quarantine if it was its last)",
    responses={202: {"model": AttachmentOut}, **errors(403, 404, 409)},
)
def detach(
    node: NodeName,
    network: Annotated[str, Path(min_length=1, max_length=63, pattern=NAME_PATTERN)],
    p: Principal = PRINCIPAL,
    c: ApiContext = CTX,
) -> Response:
    move, lease = c.actions.detach(p, node, network)
    return json(_attachment(c, node, move, lease), 202)


@router.get(
    "/ports/lookup",
    summary="The node behind a switch port (?switch=&port=) or an InfiniBand port GUID (?guid=)",
    responses={200: {"model": PortLookupOut}, **errors(404)},
)
def lookup(
    p: Principal = PRINCIPAL,
    c: ApiContext = CTX,
    switch: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
    port: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
    guid: Annotated[str | None, Query(pattern=r"^0x[0-9a-fA-F]{16}$")] = None,
) -> Response:
    query = {k: v for k, v in (("switch", switch), ("port", port), ("guid", guid)) if v is not None}
    key = next((k for kind in registered_kinds() if (k := kind.lookup_key(query)) is not None), None)
    if key is None:
        raise ValidationError("switch", switch, "switch and port, or guid")
    name = c.reader.lookup_port(p, key.scope, key.key)
    if name is None:
        raise NotFoundError("port", guid or f"{switch}/{port}")
    return json({"node": name})
