"""``gpufabric tenant create|list|delete``, ``network create|list|delete`` and
``offering list|show`` — locally on the store or through the API (``--api``)."""

from __future__ import annotations

from typing import Any

import typer

from gpufabric.cli.backend import ALL, backend, items
from gpufabric.cli.common import JSON_OPT, actions, reader
from gpufabric.cli.output import console, emit_json, table
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import NotFoundError
from gpufabric.domain.models import Network, Tenant

tenant_app = typer.Typer(no_args_is_help=True)
network_app = typer.Typer(no_args_is_help=True)
offering_app = typer.Typer(no_args_is_help=True)


@tenant_app.command("create")
def create_tenant(name: str, json_out: bool = JSON_OPT) -> None:
    """Create a tenant."""
    Tenant(name)  # validate before touching the store
    r = backend()
    if r:
        t = r.post("/tenants", {"name": name})
    else:
        actions().create_tenant(LOCAL_ADMIN, name)
        t = reader().tenants(LOCAL_ADMIN, 1, 0, name)[0][0]
    emit_json(t) if json_out else console.print(f"tenant [bold]{t['name']}[/] created", highlight=False)


@tenant_app.command("list")
def list_tenants(json_out: bool = JSON_OPT) -> None:
    r = backend()
    ts = items(r.get("/tenants", limit=1000)) if r else reader().tenants(LOCAL_ADMIN, ALL, 0)[0]
    if json_out:
        emit_json(ts)
    else:
        table(f"{len(ts)} tenants", ["tenant", "created"], [(t["name"], t["created_at"] or "-") for t in ts])


@tenant_app.command("delete")
def delete_tenant(name: str, json_out: bool = JSON_OPT) -> None:
    """Delete a tenant; refused while leases or networks use it (they are named)."""
    r = backend()
    t = r.delete(f"/tenants/{name}") if r else {"name": actions().delete_tenant(LOCAL_ADMIN, name).name}
    emit_json(t) if json_out else console.print(f"tenant [bold]{t['name']}[/] deleted", highlight=False)


def _segments_row(n: dict[str, Any]) -> tuple[str, str, str, str]:
    seg = {s["fabric"]: s for s in n["segments"]}
    eth, ib = seg.get("ethernet"), seg.get("infiniband")
    return (
        n["name"],
        n["tenant"],
        str(eth["vlan"]) if eth and eth["vlan"] else "-",
        f"seg {ib['seg_id']} -> pkey {ib['pkey']}" if ib and ib["pkey"] else "-",
    )


@network_app.command("create")
def create_network(
    name: str, tenant: str = typer.Option(..., "--tenant", help="Owning tenant."), json_out: bool = JSON_OPT
) -> None:
    """Create a tenant network: one VLAN and one PKey (through the segmentation-id mapping)."""
    Network(name, tenant)  # validate names before touching the store
    r = backend()
    if r:
        n = r.post("/networks", {"name": name, "tenant": tenant})
    else:
        actions().create_network(LOCAL_ADMIN, name, tenant)
        n = reader().networks(LOCAL_ADMIN, 1, 0, tenant, name)[0][0]
    if json_out:
        emit_json(n)
    else:
        table("network created", ["network", "tenant", "VLAN", "InfiniBand"], [_segments_row(n)])


@network_app.command("list")
def list_networks(tenant: str = typer.Option(None, "--tenant"), json_out: bool = JSON_OPT) -> None:
    r = backend()
    ns = items(r.get("/networks", tenant=tenant, limit=1000)) if r else reader().networks(LOCAL_ADMIN, ALL, 0, tenant)[0]
    if json_out:
        emit_json(ns)
    else:
        table(f"{len(ns)} networks", ["network", "tenant", "VLAN", "InfiniBand"], [_segments_row(n) for n in ns])


@network_app.command("delete")
def delete_network(
    name: str, tenant: str = typer.Option(..., "--tenant", help="Owning tenant."), json_out: bool = JSON_OPT
) -> None:
    """Delete a network and free its segments; refused while leases use it (they are named)."""
    r = backend()
    if r:
        n = r.delete(f"/networks/{tenant}/{name}")
    else:
        found = reader().networks(LOCAL_ADMIN, 1, 0, tenant, name)[0]
        if not found:
            raise NotFoundError("network", f"{tenant}/{name}")
        actions().delete_network(LOCAL_ADMIN, name, tenant)
        n = found[0]
    emit_json(n) if json_out else console.print(f"network {tenant}/{name} deleted", highlight=False)


@offering_app.command("list")
def list_offerings(json_out: bool = JSON_OPT) -> None:
    r = backend()
    os_ = items(r.get("/offerings", limit=1000)) if r else reader().offerings(ALL, 0)[0]
    if json_out:
        emit_json(os_)
    else:
        table(f"{len(os_)} offerings", ["offering", "DPU mode", "description"],
              [(o["name"], o["dpu_mode"], o["description"]) for o in os_])


@offering_app.command("show")
def show_offering(name: str, json_out: bool = JSON_OPT) -> None:
    r = backend()
    if r:
        o = r.get(f"/offerings/{name}")
    else:
        found = reader().offerings(1, 0, name)[0]
        if not found:
            raise NotFoundError("offering", name)
        o = found[0]
    if json_out:
        emit_json(o)
        return
    console.print(f"[bold]{o['name']}[/]  DPU mode={o['dpu_mode']}\n{o['description']}", highlight=False)
    if o["settings"]:
        table("settings", ["key", "value"], sorted(o["settings"].items()))
