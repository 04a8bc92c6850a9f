"""Pydantic models of every v1 request, response and error (they are the OpenAPI schema)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictBool, StrictInt, create_model, field_validator

from gpufabric.api.v1.kind_fields import with_offering_fields, with_terms
from gpufabric.domain.values import (
    DESCRIPTION_ALLOWED,
    DESCRIPTION_MAX,
    DESCRIPTION_PATTERN,
    TAG_PATTERN,
    TAGS_ALLOWED,
    TAGS_MAX,
)

NAME_PATTERN = r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$"
Name = Annotated[
    str, Field(min_length=1, max_length=63, pattern=NAME_PATTERN, description="1-63 chars of a-z 0-9 . _ -")
]
TenantOrQuarantine = Name
MAX_ADOPTED_SEGMENTS = 8  # segments one adopted network names (one per fabric instance)
MAX_NETWORK_FABRICS = 32  # fabric instances one network may name


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- errors
class ErrorDetail(BaseModel):
    code: str = Field(description="not_found, conflict, invalid, unauthorized, forbidden, unavailable, ...")
    field: str | None = None
    value: Any = None
    allowed: str | None = None
    message: str


class Error(BaseModel):
    error: ErrorDetail


def errors(*codes: int, params: bool = True) -> dict[int | str, dict[str, Any]]:
    """Documented answers: 401 always, 422 when the call takes parameters, plus ``codes``."""
    if params:
        codes = (*codes, 422)
    text = {
        304: "Not modified (If-None-Match matched the ETag)",
        400: "Bad request",
        401: "No valid bearer token",
        403: "The principal's role lacks this verb",
        404: "Not found (or not visible to this principal)",
        405: "Method not allowed (see Allow)",
        409: "Conflicts with the current state",
        413: "The request body is larger than the server's cap (named in the error)",
        422: "A field is outside its allowed range",
        429: "A tenant quota, or a per-principal limit (write rate, open event streams), is used up: named in the error",
        503: "A needed dependency (fabrics) is not configured",
    }
    out: dict[int | str, dict[str, Any]] = {}
    for c in (401, *codes):
        out[c] = {"description": text[c]} if c == 304 else {"model": Error, "description": text[c]}
        if c == 429:
            out[c]["headers"] = RETRY_AFTER
    return out


RETRY_AFTER = {"Retry-After": {"description": "Seconds until the limit allows this call again",
                               "schema": {"type": "integer", "minimum": 1}}}


# ---------------------------------------------------------------- nodes
class _NodeIn(Strict):
    name: Name
    offering: Name | None = None
    fabrics: dict[str, list[dict[str, Any]]] | None = Field(
        None, description="Ports on fabric instances, by instance (validated by the instance's kind)"
    )


def _kind_keys() -> dict[str, Any]:
    """Each registered kind's own key of a node entry (``FabricKind.inventory_key``, e.g. the GPUs
    and the DPUs): its entries on the kind's default instance, checked by the kind as in files."""
    from gpufabric.store.registry import registered_kinds

    return {k.inventory_key: (list[dict[str, Any]] | None, Field(None, max_length=64, description=(
        f"The {k.name} fabric kind's entries of this node (its default instance), as in inventory files"),
        json_schema_extra={"items": dict(k.entry_schema)} if k.entry_schema else None))
        for k in registered_kinds() if k.inventory_key}  # fmt: skip


if TYPE_CHECKING:
    NodeIn = _NodeIn
else:  # the core's fields and each kind's own key
    NodeIn = create_model("NodeIn", __base__=_NodeIn, **_kind_keys())


class InventoryIn(Strict):
    version: Literal[1] = 1
    nodes: list[NodeIn] = Field(max_length=10_000)


class ImportOut(BaseModel):
    added: int
    updated: int
    unchanged: int


class FormatImportOut(BaseModel):
    """``POST /inventory/{format}``: what ``inventory import --format NAME --json`` prints; the
    format's own fields (e.g. every device of the text, matched or skipped) come beside these."""

    model_config = ConfigDict(extra="allow")
    format: str
    nodes: int
    sm_hosts: list[str] = Field(description="Nodes the import holds in maintenance (never leasable)")
    held: dict[str, str] = Field(description="node -> why it is held in maintenance")
    result: ImportOut
    messages: list[str] = Field(description="What the format reports, as a person reads it (the CLI prints them)")
    pending: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Changes held for an operator's confirmation, not written (ibnetdiscover: a node description "
        "is a claim); each one's `confirm` is the value of the `confirm` query parameter that applies it",
    )


class OwnerIn(Strict):
    owner: Name | None = None


class PortLookupOut(BaseModel):
    node: str


class AttachmentIn(Strict):
    network: Name
    tenant: Name


# ---------------------------------------------------------------- tenants, networks, offerings
class TenantIn(Strict):
    name: Name


class TenantOut(BaseModel):
    name: str
    created_at: str | None = None


class TenantPage(BaseModel):
    items: list[TenantOut]
    total: int
    limit: int
    offset: int


class SegmentIn(Strict):
    fabric: Name = Field(description="A configured fabric instance (e.g. ethernet, infiniband, ib-storage)")
    seg_id: int = Field(ge=1, le=65535)


Description = Annotated[
    str, Field(max_length=DESCRIPTION_MAX, pattern=DESCRIPTION_PATTERN, description=f"The network's own text: {DESCRIPTION_ALLOWED}")
]
Tags = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=60, pattern=TAG_PATTERN)]],
    Field(max_length=TAGS_MAX, description=f"The network's own tags, in order, repeats dropped: {TAGS_ALLOWED}"),
]


class NetworkIn(Strict):
    name: Name
    tenant: Name
    description: Description = ""
    tags: Tags = []
    segments: list[SegmentIn] | None = Field(
        None, max_length=MAX_ADOPTED_SEGMENTS,
        description="Explicit segmentation ids to adopt (Neutron), one per fabric instance; others are allocated",
    )  # fmt: skip

    fabrics: list[Name] | None = Field(
        None, min_length=1, max_length=MAX_NETWORK_FABRICS,
        description="The configured fabric instances the network spans (e.g. [ib-compute]); omitted: every one "
        "that gives networks a segment. With segments: exactly their instances",
    )  # fmt: skip
    options: dict[Name, dict[Name, StrictInt | StrictBool]] | None = Field(
        None, max_length=MAX_NETWORK_FABRICS,
        description="The network's own settings per spanned instance, checked by its kind: on an InfiniBand "
        "subnet ipoib (true/false), mtu 1-5, rate 2-22, sl 0-15, scope 1-15 (e.g. {ib-compute: {mtu: 5}})",
    )  # fmt: skip

    @field_validator("segments")
    @classmethod
    def _one_per_instance(cls, v: list[SegmentIn] | None) -> list[SegmentIn] | None:
        seen = [s.fabric for s in v or []]
        if twice := next((f for i, f in enumerate(seen) if f in seen[:i]), None):
            raise ValueError(f"two segments on fabric instance {twice}: one per instance")
        return v


class SegmentOut(BaseModel):
    """A network's segment on one fabric instance; its kind adds fields of its own (the Ethernet
    kind's ``vlan``, the InfiniBand kind's ``pkey``)."""

    model_config = ConfigDict(extra="allow")
    fabric: str
    seg_id: int
    scope: str | None = Field(description="What ``key`` is, by the fabric's kind (e.g. ethernet.vlan); null: no key")
    key: int | None = Field(description="The fabric's own id of the segment (a VLAN, a 15-bit PKey), unique per scope")
    label: str = Field(description="The segment as a person reads it, e.g. 'vlan 2000' or 'seg 3000 -> pkey 0x0a00'")
    options: dict[str, int | bool] | None = Field(None, description="The network's own settings here (when set)")


class NetworkOut(BaseModel):
    name: str
    tenant: str
    description: str
    tags: list[str]
    segments: list[SegmentOut]


class NetworkPage(BaseModel):
    items: list[NetworkOut]
    total: int
    limit: int
    offset: int


class _OfferingOut(BaseModel):
    """An offering; the settings the fabric kinds declare as fields (``FabricKind.offering_settings``)
    come beside these, each with its value when unset; ``settings`` holds the others."""

    name: str
    description: str
    settings: dict[str, str]


if TYPE_CHECKING:
    OfferingOut = _OfferingOut
else:
    OfferingOut = with_offering_fields(_OfferingOut)


class OfferingPage(BaseModel):
    items: list[OfferingOut]
    total: int
    limit: int
    offset: int


# ---------------------------------------------------------------- leases
NETWORKS_DOC = (
    "The tenant networks the node joins. Omitted or null: every network of the tenant when the caller acts"
    " in that tenant (admin, service, or the tenant's own token), none otherwise. []: none (ports stay shut"
    " until a network attaches)."
)


def networks_arg(networks: list[str] | None) -> tuple[str, ...] | None:
    """A body's ``networks`` for the workflow: None stays None (see :data:`NETWORKS_DOC`)."""
    return None if networks is None else tuple(networks)


class _LeaseIn(Strict):
    tenant: Name
    node: Name
    networks: list[Name] | None = Field(None, max_length=16, description=NETWORKS_DOC)
    offering: Name = "baremetal"
    start: AwareDatetime | None = Field(None, description="Timezone-aware; default now")
    end: AwareDatetime | None = Field(None, description="Timezone-aware; the worker releases the node to quarantine then")
    slot: bool = Field(
        False,
        description="Lease a slot of a shared host (vm-host) of the GPU count given (refused on a host that is not shared);"
        " on a vm-host a lease with a GPU count is a slot anyway",
    )


class _LeaseOut(BaseModel):
    """A lease; the fabric kinds' declared lease terms come beside these fields (null: unset)."""

    id: int
    tenant: str
    node: str
    start: str | None
    end: str | None
    networks: list[str]
    offering: str
    owner: str
    active: bool


if TYPE_CHECKING:
    LeaseIn = _LeaseIn
    LeaseOut = _LeaseOut
else:  # the core's fields and each declared lease term
    LeaseIn = with_terms(_LeaseIn)
    LeaseOut = with_terms(_LeaseOut, answer=True)


class LeasePage(BaseModel):
    items: list[LeaseOut]
    total: int
    limit: int
    offset: int


# ---------------------------------------------------------------- moves
class _MoveIn(Strict):
    """A move request; the fabric kinds' declared lease terms come beside these fields."""

    node: Name
    to_tenant: TenantOrQuarantine = Field(description="A tenant, or quarantine to release the node")
    networks: list[Name] | None = Field(None, max_length=16, description=NETWORKS_DOC)
    offering: Name = "baremetal"


class _MovesIn(Strict):
    """Move requests of several nodes; the declared lease terms (each node's) come beside these fields."""

    nodes: list[Name] = Field(min_length=1, max_length=256, description="The nodes, each once")
    to_tenant: TenantOrQuarantine = Field(description="A tenant, or quarantine to release the nodes")
    networks: list[Name] | None = Field(None, max_length=16, description=NETWORKS_DOC)
    offering: Name = "baremetal"


if TYPE_CHECKING:
    MoveIn = _MoveIn
    MovesIn = _MovesIn
else:
    MoveIn = with_terms(_MoveIn)
    MovesIn = with_terms(_MovesIn)


class MoveEventOut(BaseModel):
    id: int
    at: str | None
    phase: str
    message: str
    seconds: float | None


class MoveOut(BaseModel):
    id: int
    node: str
    from_tenant: str
    to_tenant: str
    offering: str
    networks: list[str]
    phase: str
    status: str
    attempts: int
    error: str
    created_at: str | None
    updated_at: str | None
    claimed_by: str | None


class LeaseEndOut(BaseModel):
    lease: LeaseOut
    move: MoveOut | None


class MoveDetail(MoveOut):
    events: list[MoveEventOut]
    timings: dict[str, float]


class MoveList(BaseModel):
    items: list[MoveOut]


class MovePage(BaseModel):
    items: list[MoveOut]
    total: int
    limit: int
    offset: int


class AttachmentOut(BaseModel):
    node: str
    move: MoveOut | None = Field(description="The move that carries the change (tenant changes)")
    lease: LeaseOut | None = Field(description="The lease whose networks changed (same tenant)")


class _PreviewIn(Strict):
    """The same fields as a move request (a lease's dry run sends its offering and terms)."""

    node: Name
    to_tenant: TenantOrQuarantine
    networks: list[Name] | None = Field(None, max_length=16, description=NETWORKS_DOC)
    offering: Name = "baremetal"


if TYPE_CHECKING:
    PreviewIn = _PreviewIn
else:
    PreviewIn = with_terms(_PreviewIn)


class PreviewOut(BaseModel):
    phases: dict[str, Any]
    lines: dict[str, list[str]] = Field(description="Each phase's plan as the CLI prints it, one change per line")
