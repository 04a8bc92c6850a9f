"""``gpufabric tenant create|list|delete``, ``network create|list|update|delete`` and
``offering list|show`` — locally on the store or through the API (``--api``)."""

from __future__ import annotations

from typing import Any, Final

from gpufabric.cli.backends.choose import backend
from gpufabric.cli.common import JSON_OPT
from gpufabric.cli.decl import Group, Option
from gpufabric.cli.output import ELLIPSIS, console, emit_json, table
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import Network, Tenant
from gpufabric.domain.values import (
    DESCRIPTION_ALLOWED,
    TAG_ALLOWED,
    TAGS_MAX,
    check_description,
    check_name,
    check_tags,
)

tenant_app = Group(no_args_is_help=True)
network_app = Group(no_args_is_help=True)
offering_app = Group(no_args_is_help=True)


@tenant_app.command("create")
def create_tenant(name: str, json_out: bool = JSON_OPT) -> None:
    """Create a tenant."""
    Tenant(name)  # validate before touching the store
    t = backend().create_tenant(name)
    emit_json(t) if json_out else console.print(f"tenant [bold]{t['name']}[/] created", highlight=False)


@tenant_app.command("list")
def list_tenants(json_out: bool = JSON_OPT) -> None:
    ts = backend().tenants()
    if json_out:
        emit_json(ts)
    else:
        table(f"{len(ts)} tenants", ["tenant", "created"], [(t["name"], t["created_at"] or "-") for t in ts])


@tenant_app.command("delete")
def delete_tenant(name: str, json_out: bool = JSON_OPT) -> None:
    """Delete a tenant; refused while leases or networks use it or it owns nodes (they are named)."""
    t = backend().delete_tenant(name)
    emit_json(t) if json_out else console.print(f"tenant [bold]{t['name']}[/] deleted", highlight=False)


NETWORK_COLUMNS = ["network", "tenant", "segments"]
ABOUT_COLUMNS = ["description", "tags"]
DESCRIPTION_CELL: Final = 32
TAGS_CELL: Final = 24
"""The widest description and tags cells of a network table (longer text ends in an ellipsis:
``--json`` has it whole)."""


def _about_cells(n: dict[str, Any]) -> tuple[str, str]:
    """A network's description and tags as table cells, each cut to its width (``-``: none)."""
    return (_cut(n.get("description") or "-", DESCRIPTION_CELL),
            _cut(", ".join(n.get("tags") or []) or "-", TAGS_CELL))  # fmt: skip


def _cut(text: str, width: int) -> str:
    line = " ".join(text.split())  # one line: a description may hold newlines
    return line if len(line) <= width else line[: width - 1] + ELLIPSIS


def _segments_row(n: dict[str, Any]) -> tuple[str, str, str]:
    """One table row: the network's segment on each instance it spans, as its kind labels it
    (``ethernet: vlan 2000``, ``infiniband: seg 3000 -> pkey 0x0a00``), with its own settings."""

    def own(s: dict[str, Any]) -> str:  # the network's own settings there (--option)
        opts = s.get("options") or {}
        return f" ({', '.join(f'{k}={str(v).lower()}' for k, v in sorted(opts.items()))})" if opts else ""

    cells = [f"{s['fabric']}: {s['label']}{own(s)}" for s in n["segments"]]
    return n["name"], n["tenant"], "\n".join(cells) or "-"


FABRIC_OPT = Option(
    None, "--fabric", help="A fabric instance the network spans (repeatable; default: every configured one)."
)


OPTION_OPT = Option(
    None, "--option", help="The network's own setting on one instance, INSTANCE.KEY=VALUE (repeatable), e.g. "
    "ib-compute.mtu=5 or ib-compute.ipoib=false (InfiniBand: ipoib, mtu 1-5, rate 2-22, sl 0-15, scope 1-15).",
)  # fmt: skip


def parse_options(raw: list[str]) -> dict[str, dict[str, int | bool]]:
    """``--option INSTANCE.KEY=VALUE`` values as instance -> {key: value} (true/false -> bool,
    digits -> int); a ValidationError naming ``--option`` otherwise."""
    out: dict[str, dict[str, int | bool]] = {}
    for item in raw:
        where, eq, value = item.partition("=")
        instance, dot, key = where.rpartition(".")
        if not (eq and dot and instance and key and value):
            raise ValidationError("--option", item, "INSTANCE.KEY=VALUE, e.g. ib-compute.mtu=5")
        low = value.strip().lower()
        if low in ("true", "false"):
            out.setdefault(instance, {})[key] = low == "true"
        elif low.isdigit():
            out.setdefault(instance, {})[key] = int(low)
        else:
            raise ValidationError(f"--option {where}", value, "an integer or true/false")
    return out


DESCRIPTION_OPT = Option(None, "--description", help=f"The network's own text ({DESCRIPTION_ALLOWED}).")
TAG_OPT = Option(None, "--tag", help=f"A tag of the network (repeatable; {TAG_ALLOWED}; at most {TAGS_MAX}).")


@network_app.command("create")
def create_network(
    name: str,
    tenant: str = Option(..., "--tenant", help="Owning tenant."),
    fabric: list[str] = FABRIC_OPT,
    option: list[str] = OPTION_OPT,
    description: str = DESCRIPTION_OPT,
    tag: list[str] = TAG_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """Create a tenant network: one segment per fabric instance it spans (a VLAN on Ethernet, a
    segmentation id and its PKey on each InfiniBand subnet), with its own settings (--option),
    description and tags."""
    about = _about(Network(name, tenant), description, tag)  # validate before touching the store
    fabrics = list(dict.fromkeys(fabric)) if fabric else None
    options = parse_options(option or [])
    try:
        n = backend().create_network(name, tenant, fabrics, options, about.description, about.tags)
    except ValidationError as e:
        raise as_option(as_option(e, "fabrics", "--fabric"), "options", "--option") from None
    if json_out:
        emit_json(n)
    else:
        table("network created", [*NETWORK_COLUMNS, *ABOUT_COLUMNS], [(*_segments_row(n), *_about_cells(n))])


def _about(n: Network, description: str | None, tags: list[str] | None) -> Network:
    """``n`` with ``description`` and ``tags`` (None: its own), each checked naming its option."""
    return Network(
        n.name, n.tenant,
        description=n.description if description is None else check_description("--description", description),
        tags=n.tags if not tags else check_tags("--tag", tags),
    )  # fmt: skip


@network_app.command("update")
def update_network(
    name: str,
    tenant: str = Option(..., "--tenant", help="Owning tenant."),
    new_name: str = Option(None, "--name", help="The network's new name (its segments stay)."),
    description: str = DESCRIPTION_OPT,
    tag: list[str] = TAG_OPT,
    no_tags: bool = Option(False, "--no-tags", help="Remove every tag."),
    json_out: bool = JSON_OPT,
) -> None:
    """Rename, describe or tag a network (what is not given stays); its tenant and segments are
    fixed (a new segment is a new network). Every value is checked before anything is written."""
    if no_tags and tag:
        raise ValidationError("--no-tags", " ".join(tag), "either --tag or --no-tags, not both")
    Network(name, tenant)
    if new_name is not None:
        check_name("--name", new_name)
    _about(Network(name, tenant), description, tag)
    tags: list[str] | None = [] if no_tags else (tag or None)
    try:
        n = backend().update_network(name, tenant, new_name, description, tags)
    except ValidationError as e:
        raise as_option(as_option(as_option(e, "name", "--name"), "description", "--description"), "tags", "--tag") from None
    if json_out:
        emit_json(n)
    else:
        table("network updated", [*NETWORK_COLUMNS, *ABOUT_COLUMNS], [(*_segments_row(n), *_about_cells(n))])


def as_option(e: ValidationError, field: str, option: str) -> ValidationError:
    """``e`` naming the CLI option ``option`` where it names the request field ``field``."""
    if e.field != field and not e.field.startswith(f"body.{field}"):
        return e
    out = ValidationError(option, e.value, e.allowed)
    out.message = e.message.replace(f"invalid {e.field}:", f"invalid {option}:", 1)
    out.args = (out.message,)
    return out


@network_app.command("list")
def list_networks(tenant: str = Option(None, "--tenant"), json_out: bool = JSON_OPT) -> None:
    ns = backend().networks(tenant)
    if json_out:
        emit_json(ns)
    else:
        table(f"{len(ns)} networks", [*NETWORK_COLUMNS, *ABOUT_COLUMNS], [(*_segments_row(n), *_about_cells(n)) for n in ns])


@network_app.command("delete")
def delete_network(
    name: str, tenant: str = Option(..., "--tenant", help="Owning tenant."), json_out: bool = JSON_OPT
) -> None:
    """Delete a network and free its segments; refused while leases use it (they are named)."""
    n = backend().delete_network(name, tenant)
    emit_json(n) if json_out else console.print(f"network {tenant}/{name} deleted", highlight=False)


OFFERING_KEYS = ("name", "description", "settings")
"""An offering answer's own keys; every other is a fabric kind's setting shown as a field
(``FabricKind.offering_settings``, e.g. the DPU kind's mode): a column of its own."""


def kind_fields(o: dict[str, object]) -> list[str]:
    return [k for k in o if k not in OFFERING_KEYS]


@offering_app.command("list")
def list_offerings(json_out: bool = JSON_OPT) -> None:
    os_ = backend().offerings()
    if json_out:
        emit_json(os_)
    else:
        keys = kind_fields(os_[0]) if os_ else []
        table(f"{len(os_)} offerings", ["offering", *keys, "description"],
              [(o["name"], *(o.get(k, "") for k in keys), o["description"]) for o in os_])  # fmt: skip


@offering_app.command("show")
def show_offering(name: str, json_out: bool = JSON_OPT) -> None:
    o = backend().offering(name)
    if json_out:
        emit_json(o)
        return
    fields = "".join(f"  {k}={o[k]}" for k in kind_fields(o))
    console.print(f"[bold]{o['name']}[/]{fields}\n{o['description']}", highlight=False)
    if o["settings"]:
        table("settings", ["key", "value"], sorted(o["settings"].items()))
