"""``gpufabric node power-cycled NODE``: an operator power-cycled a node (cold), and every fabric
kind that reads something of it only at boot reads it again (``FabricKind.power_cycled``, e.g.
a DPU's mode and firmware). No kind is named here: the registered kinds that react
(``power_cycle_needs``) are asked, each of its configured instances (or, when fabrics.yaml
configures none, the kind's default instance, which then names what it misses)."""

from __future__ import annotations

from typing import Any

from gpufabric.cli.common import fabrics_path, open_store, segment_config
from gpufabric.cli.kinds import EngineAccess
from gpufabric.domain.errors import NotFoundError, ValidationError
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.hooks import PowerCycled


def power_cycled(name: str) -> list[tuple[str, PowerCycled]]:
    """(instance, what it read again) of every kind that reacted to ``name``'s power cycle, in
    the registry's order. NotFoundError for an unknown node; ValidationError naming what a node
    needs when no kind reacted; a kind's own error while its facts still say a change is pending."""
    from gpufabric.engine.fabrics import Fabrics
    from gpufabric.engine.moves import MoveEngine
    from gpufabric.store.registry import Registry

    registry, cfg = Registry.from_entry_points(), segment_config()
    engine = MoveEngine(open_store(), Fabrics.load(fabrics_path(), registry, cfg), cfg)
    try:
        access = EngineAccess(engine)
        node = next((n for n in access.tenancy().nodes if n.name == name), None)
        if node is None:
            raise NotFoundError("node", name)
        kinds = _reacting(registry.ordered_kinds(), engine.fabrics.kinds)
        answers = [(k.instance, a) for k in kinds if (a := k.power_cycled(node, access)) is not None]
    finally:
        engine.fabrics.close()
    if not answers:
        needs = dict.fromkeys(str(k.power_cycle_needs) for k in kinds)
        raise ValidationError("node", name, " or ".join(needs) or "a node of a fabric kind that reacts to a power cycle")
    return answers


def _reacting(registered: list[FabricKind[Any, Any]], configured: dict[str, FabricKind[Any, Any]]) -> list[FabricKind[Any, Any]]:
    """The kinds that react to a power cycle: each one's configured instances, else the kind itself."""
    out: list[FabricKind[Any, Any]] = []
    for kind in registered:
        if kind.power_cycle_needs is not None:
            out += [k for k in configured.values() if k.name == kind.name] or [kind]
    return out


def document(answers: list[tuple[str, PowerCycled]]) -> Any:
    """The ``--json`` document: the one kind's that reacted (every deployment today), else
    instance -> each one's."""
    return answers[0][1].doc if len(answers) == 1 else {instance: a.doc for instance, a in answers}
