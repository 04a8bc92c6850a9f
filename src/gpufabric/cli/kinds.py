"""The fabric kinds' own command groups (``FabricKind.cli_group``, e.g. ``gpufabric offload``)
and the :class:`~gpufabric.domain.views.CliHost` the CLI lends them: output, the fabrics of
fabrics.yaml over the store, inventory files and the local labs. No kind is named here: the
registered kinds say which groups they add."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import Any

from gpufabric.domain.fabric import FabricBackend, Tenancy
from gpufabric.domain.models import Inventory
from gpufabric.domain.views import CliGroup, FabricAccess


def kind_groups() -> dict[str, CliGroup]:
    """Every registered kind's command group, by name (imports the kinds, not their views)."""
    from gpufabric.store.registry import Registry

    kinds = Registry.from_entry_points(drivers=False).ordered_kinds()
    return {g.name: g for k in kinds if (g := k.cli_group()) is not None}


class _EngineAccess:
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
            yield _EngineAccess(engine)
        finally:
            engine.fabrics.close()

    def inventory(self, path: Path) -> Inventory:
        from gpufabric.workflow.inventory import load_inventory

        return load_inventory(path)

    def lab_status(self, lab: str, root: Path) -> Mapping[str, Any]:
        status: Mapping[str, Any] = import_module(f"gpufabric.lab.{lab}").status(root)
        return status


HOST = Host()
