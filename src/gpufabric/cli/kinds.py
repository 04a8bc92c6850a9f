"""The fabric kinds' own command groups (``FabricKind.cli_group``, e.g. ``gpufabric offload``)
and the :class:`~gpufabric.domain.views.CliHost` the CLI lends them: output, the fabrics of
fabrics.yaml over the store, inventory files and the local labs. No kind is named here: the
registered kinds say which groups they add (and the ``gpufabric.commands`` entry points which
kind adds a group, so that running one loads that kind's view alone)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.fabric import FabricBackend, Tenancy
from gpufabric.domain.models import Inventory
from gpufabric.domain.views import CliGroup, FabricAccess

COMMANDS = "gpufabric.commands"
"""Entry points naming a kind's group (name -> its ``cli_group`` callable): the one group a
command line names is found without importing every kind."""


def kind_groups(only: str | None = None, core: Iterable[str] = ()) -> dict[str, CliGroup]:
    """The kinds' command groups by name: ``only`` alone when it is registered under
    :data:`COMMANDS`, else every registered kind's (``FabricKind.cli_group``), checked by
    :func:`unique_groups` against each other and the core commands ``core``."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=COMMANDS, name=only) if only is not None else ():
        g: CliGroup | None = ep.load()()
        if g is not None and g.name == only:
            return {only: g}
    from gpufabric.store.registry import Registry

    kinds = Registry.from_entry_points(drivers=False).ordered_kinds()
    return unique_groups([(k.name, g) for k in kinds if (g := k.cli_group()) is not None], core)


def unique_groups(groups: Sequence[tuple[str, CliGroup]], core: Iterable[str] = ()) -> dict[str, CliGroup]:
    """``groups`` ((kind, its group), ...) by name; a ConfigError naming the kind when a group
    takes the name of a core command (``core``) or of another kind's group: one would hide the
    other."""
    taken = dict.fromkeys(core, "gpufabric's own commands")
    out: dict[str, CliGroup] = {}
    for kind, g in groups:
        if g.name in taken:
            raise ConfigError(
                f"fabric kind {kind}: cli_group().name", g.name, f"a command name not taken by {taken[g.name]}"
            )
        taken[g.name] = f"fabric kind {kind}"
        out[g.name] = g
    return out


class EngineAccess:
    """A :class:`~gpufabric.domain.views.FabricAccess` over a move engine (its fabrics and store)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def backend(self, instance: str) -> FabricBackend[Any] | None:
        b: FabricBackend[Any] | None = self.engine.fabrics.backends.get(instance)
        return b

    def tenancy(self) -> Tenancy:
        t: Tenancy = self.engine.tenancy()
        return t


class Host:
    """The CLI's :class:`~gpufabric.domain.views.CliHost`."""

    def emit_json(self, data: Any) -> None:
        from gpufabric.cli.output import emit_json

        emit_json(data)

    def table(self, title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        from gpufabric.cli.output import table

        table(title, columns, rows)

    def echo(self, markup: str) -> None:
        from gpufabric.cli.output import console

        console.print(markup, highlight=False)

    @contextmanager
    def fabrics(self) -> Iterator[FabricAccess]:
        from gpufabric.cli.common import open_engine

        engine = open_engine()
        try:
            yield EngineAccess(engine)
        finally:
            engine.fabrics.close()

    def inventory(self, path: Path) -> Inventory:
        from gpufabric.workflow.inventory import load_inventory

        return load_inventory(path)

    def lab_status(self, lab: str, root: Path) -> Mapping[str, Any]:
        status: Mapping[str, Any] = import_module(f"gpufabric.lab.{lab}").status(root)
        return status


HOST = Host()
