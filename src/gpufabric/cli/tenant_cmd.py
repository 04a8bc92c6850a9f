"""``gpufabric tenant create|list`` and ``gpufabric network create|list``."""

from __future__ import annotations

import typer

from gpufabric.cli.common import JSON_OPT, open_store, segment_config
from gpufabric.cli.output import console, emit_json, jsonable, table
from gpufabric.domain.models import Fabric, Network, Tenant

tenant_app = typer.Typer(no_args_is_help=True)
network_app = typer.Typer(no_args_is_help=True)


@tenant_app.command("create")
def create_tenant(name: str, json_out: bool = JSON_OPT) -> None:
    """Create a tenant."""
    Tenant(name)  # validate before touching the store
    t = open_store().create_tenant(name)
    if json_out:
        emit_json(jsonable(t))
    else:
        console.print(f"tenant [bold]{t.name}[/] created")


@tenant_app.command("list")
def list_tenants(json_out: bool = JSON_OPT) -> None:
    ts = open_store().tenants()
    if json_out:
        emit_json(jsonable(ts))
    else:
        table(f"{len(ts)} tenants", ["tenant"], [(t.name,) for t in ts])


def _segments_row(n: Network) -> tuple[str, str, str, str]:
    eth = n.segment(Fabric.ETHERNET)
    ib = n.segment(Fabric.INFINIBAND)
    return (
        n.name,
        n.tenant,
        str(eth.vlan) if eth and eth.vlan else "-",
        f"seg {ib.seg_id} -> pkey {ib.pkey}" if ib and ib.pkey else "-",
    )


@network_app.command("create")
def create_network(
    name: str, tenant: str = typer.Option(..., "--tenant", help="Owning tenant."), json_out: bool = JSON_OPT
) -> None:
    """Create a tenant network: one VLAN and one PKey (through the segmentation-id mapping)."""
    Network(name, tenant)  # validate names before touching the store
    cfg = segment_config()
    n = open_store().create_network(name, tenant, cfg)
    if json_out:
        emit_json(jsonable(n))
    else:
        table("network created", ["network", "tenant", "VLAN", "InfiniBand"], [_segments_row(n)])


@network_app.command("list")
def list_networks(tenant: str = typer.Option(None, "--tenant"), json_out: bool = JSON_OPT) -> None:
    ns = open_store().networks(tenant)
    if json_out:
        emit_json(jsonable(ns))
    else:
        table(f"{len(ns)} networks", ["network", "tenant", "VLAN", "InfiniBand"], [_segments_row(n) for n in ns])
