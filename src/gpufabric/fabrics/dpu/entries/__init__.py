"""A node's DPU entries in the inventory: the DPU kind's own column of the generic port table.

A node's DPUs come from its ``dpus: [...]`` key (:attr:`DpuKind.inventory_key`, the kind's
default instance ``dpu``) or from ``fabrics: {<instance>: [...]}``. Each entry is a mapping
with ``name`` (required), ``mode`` (``full``, ``dpu`` or ``dpu-host``; default ``full``)
and the pairing facts of :data:`DETAIL_KEYS` (strings or integers; ``representors`` also a
list of names). ``parse_dpus`` checks that shape and the names' uniqueness on the node, and
``dump_dpus`` writes back what it reads (the stored JSON); the facts' values are checked where
the fabric uses them (:class:`gpufabric.fabrics.dpu.entries.info.DpuInfo`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.entries import listed, mapping, required, short
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import FabricPorts
from gpufabric.domain.values import check_name

DETAIL_KEYS: Final = frozenset(
    {"dpu_node", "pf", "vfs", "mgmt_vf", "representors", "nic_model", "ovsdb", "gw_interface", "gw_nexthop", "mst_device"}
)
"""Pairing facts a DPU entry may carry next to name and mode."""
KEYS: Final = frozenset({"name", "mode"}) | DETAIL_KEYS
KIND: Final = "dpu"
"""The kind's name (:attr:`DpuKind.name`): its default instance, where ``dpus:`` entries are kept."""


class DpuMode(enum.StrEnum):
    """OVN-Kubernetes ovnkube-node modes: a DPU entry's ``mode`` and an offering's
    :data:`MODE_SETTING` (the host's role, :func:`gpufabric.fabrics.dpu.plan.profiles.offering_role`)."""

    FULL = "full"
    DPU = "dpu"
    DPU_HOST = "dpu-host"


MODE_SETTING: Final = "dpu_mode"
"""The offering setting (``Offering.settings``) of its OVN-Kubernetes mode; unset: ``full``.
Shown as the ``dpu_mode`` field of an offering's answer (:attr:`DpuKind.offering_settings`)."""


@dataclass(frozen=True)
class Dpu:
    """A DPU/SmartNIC paired with its x86 host node."""

    node: str  # the host it sits in
    name: str
    mode: DpuMode = DpuMode.FULL
    details: tuple[tuple[str, str], ...] = ()  # pairing facts (PF, VFs, mgmt VF, ...), sorted by key


def parse_dpu(path: str, node: str, raw: Any) -> Dpu:
    """One entry at ``path`` (e.g. ``nodes[2].dpus[0]``) of host ``node``."""
    raw = mapping(path, raw, KEYS)
    required(path, raw, "name")
    try:
        name = check_name(f"{path}.name", raw["name"])
    except ValidationError as e:
        raise ValidationError(f"{path}.name", raw["name"], e.allowed) from None
    mode_raw = raw.get("mode", DpuMode.FULL.value)
    try:
        mode = DpuMode(mode_raw)
    except ValueError:
        raise ValidationError(f"{path}.mode", mode_raw, " or ".join(x.value for x in DpuMode)) from None
    details: list[tuple[str, str]] = []
    for key in sorted(DETAIL_KEYS & set(raw)):
        value = raw[key]
        if isinstance(value, list) and all(isinstance(x, str) for x in value):
            value = ",".join(value)  # representors: a list of netdev names
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValidationError(f"{path}.{key}", short(value), "a string or an integer (representors: a list)")
        details.append((key, str(value)))
    return Dpu(node, name, mode, tuple(details))


def parse_dpus(node: str, raw: Any, where: str) -> tuple[Dpu, ...]:
    """A node's entries at ``where`` (a list), each checked, names unique on the node; sorted by name."""
    out: dict[str, Dpu] = {}
    at: dict[str, int] = {}
    for k, entry in enumerate(listed(where, raw)):
        d = parse_dpu(f"{where}[{k}]", node, entry)
        if d.name in out:
            raise ValidationError(f"{where}[{k}].name", d.name, f"unique DPU names per node (also at {where}[{at[d.name]}].name)",
                                  "duplicate")  # fmt: skip
        out[d.name], at[d.name] = d, k
    return tuple(out[n] for n in sorted(out))


def dump_dpus(dpus: tuple[Dpu, ...]) -> list[dict[str, str]]:
    """The JSON entries ``parse_dpus`` reads back as ``dpus``."""
    return [{"name": d.name, "mode": d.mode.value, **dict(d.details)} for d in dpus]


def dpu_ports(*dpus: Dpu, instance: str = KIND) -> tuple[FabricPorts, ...]:
    """A node's ``fabric_ports`` holding ``dpus`` on ``instance`` (none: no entry)."""
    return (FabricPorts.of(instance, dump_dpus(tuple(sorted(dpus, key=lambda d: d.name)))),) if dpus else ()
