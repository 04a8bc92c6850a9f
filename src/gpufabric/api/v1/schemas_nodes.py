"""The v1 models of a node's answer (``GET /nodes``, ``GET /nodes/{node}``): its core fields, its
ports and every fabric's view, and a shared host's slots (issue 33)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class FabricViewOut(BaseModel):
    """One fabric's part of a node: ``summary`` (its table cell) and the kind's ``node_view``."""

    model_config = ConfigDict(extra="allow")
    summary: str = Field(
        description="The node's resources on this fabric, one line each (the node table's and the dashboard's cell; "
        "empty: none). The other keys are the fabric kind's own: ethernet and infiniband `ports`, nvlink `gpus` and "
        "`partition_gpus` (GPUs of the partition the lease holds, 0 in quarantine) and `nvlink_domain` (`id`, "
        "`cluster_uuid`, `clique_id`, `source`: `nvidia-smi` when the GPUs reported a multi-node domain, else `board`, "
        "the node's own), dpu `dpus` with their `role`"
    )


class SlotOut(BaseModel):
    """A slot of a shared host as its host's answer lists it."""

    name: str
    modules: list[int]
    tenant: str


class NodeOut(BaseModel):
    name: str
    offering: str
    state: str
    owner: str | None
    host_id: str | None = Field(None, description="Its identity in an outside inventory: what Neutron's binding:host_id "
                                "names (Ironic's node UUID; inventory import --from ironic writes it)")
    tenant: str = Field(description="The tenant holding the node now, or quarantine")
    lease: int | None
    host: str | None = Field(None, description="A slot's host (a slot is a VM's share of a shared host, issue 33); null: not a slot")
    slot_modules: list[int] = Field(default_factory=list, description="A slot's GPU module ids (one NVLink partition of its host)")
    slots: list[SlotOut] = Field(default_factory=list, description="A host's slots (live or idle), with their tenants now")
    ports: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict, description="Every port of the node, by fabric kind (each kind's own entries, on all its "
        "instances): ethernet `name, switch, switch_port, mac[, bond, bond_mode]`, infiniband `device, port_num, "
        "port_guid, node_guid, switch_guid, switch_port`; each with its `path` up the fabric: [{tier: leaf|spine|core, "
        "switches: [...]}, ...], its leaf first (InfiniBand: from the last ibnetdiscover; Ethernet: the uplinks "
        "fabrics.yaml declares per switch)"
    )
    fabrics: dict[str, FabricViewOut] = Field(
        default_factory=dict, description="Every registered fabric's view of the node, by fabric name"
    )


class NodePage(BaseModel):
    items: list[NodeOut]
    total: int
    limit: int
    offset: int
