"""The shared-host model (issue 33): a node leased in an offering whose ``shared`` setting is
``slots`` (the built-in ``vm-host``) is a hypervisor whose GPUs are rented in **slots**, one VM each.

A slot is a node of its own (:attr:`Node.host <gpufabric.domain.models.Node.host>`, ``slot_modules``),
named after its host and GPUs (:func:`slot_name`), created when a slot lease is asked for and leased
and moved like any node: a slot move is quarantine -> swap -> join of that slot only. It holds no
ports: every kind derives the slot's resources from its host's entries and the slot's GPU module ids
(NVLink: the partition of exactly those GPUs; InfiniBand: their rail HCAs; Ethernet: their VM ports
on the host's OVS), so two slots of one host never hold the same resource when their GPUs are
disjoint — which the allocator keeps, as Fabric Manager's partitions of one board are.

Who governs a host's GPU (:func:`gpu_unit`): on a shared host the slot that holds it (nobody: in
quarantine when no slot does), on any other host the host itself. Pure values, no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import Node, Offering

SHARED: Final = "shared"
"""The offering setting that makes a leased node a shared host."""
SLOTS: Final = "slots"
"""Its value: the host's GPUs are rented in VM slots."""
VM_HOST: Final = "vm-host"
"""The built-in shared offering."""
SIZE_TERM: Final = "gpus"
"""The lease term that sizes a slot: the NVLink kind's, which the CLI spells ``--gpus`` (on a
shared host it names the slot's GPU count; the slot's lease itself carries no such term: its size
is its GPUs)."""
SLOT_SIZES: Final = (1, 2, 4, 8)
"""GPU counts a slot lease may ask for (the partition sizes of an HGX 8-GPU board)."""
SLOT_SIZES_ALLOWED: Final = "1, 2, 4 or 8 GPUs"


def is_shared(offering: Offering | None) -> bool:
    """A node leased in ``offering`` is a shared host."""
    return offering is not None and offering.setting(SHARED) == SLOTS


def slot_name(host: str, modules: Iterable[int]) -> str:
    """The name of the slot of ``host`` holding GPU modules ``modules`` (e.g. ``gpu-a01.s5x2``: two GPUs from
    module 5): one name per partition of a board, so a slot's name says where it is."""
    mine = sorted(modules)
    if not mine:
        raise ValidationError("slot.gpus", [], "at least one GPU module id")
    return f"{host}.s{mine[0]}x{len(mine)}"


def check_slot_size(count: object) -> int:
    """A slot lease's GPU count, checked (``ValidationError`` naming ``gpus``)."""
    if isinstance(count, bool) or not isinstance(count, int) or count not in SLOT_SIZES:
        raise ValidationError("gpus", count, SLOT_SIZES_ALLOWED, "a slot of a vm-host")
    return count


def slots_by_host(nodes: Iterable[Node]) -> Mapping[str, tuple[Node, ...]]:
    """Every host's slots, by host name (slots sorted by name)."""
    out: dict[str, list[Node]] = {}
    for n in nodes:
        if n.host:
            out.setdefault(n.host, []).append(n)
    return {h: tuple(sorted(s, key=lambda n: n.name)) for h, s in out.items()}


def gpu_unit(host: str, module: int, shared: bool, slots: Iterable[Node]) -> str | None:
    """The node whose lease governs GPU ``module`` of ``host`` and the resources that follow it:
    the slot holding it on a shared host (None: no slot does, the GPU is in quarantine), the host
    itself on any other."""
    if not shared:
        return host
    return next((s.name for s in slots if module in s.slot_modules), None)
