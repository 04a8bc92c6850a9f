"""What the core lends a fabric kind's own CLI commands and API routes (issue 19: a fabric is
one folder end to end). A kind contributes them through :meth:`FabricKind.cli_group` and
:meth:`FabricKind.api_router`; its view modules import only ``gpufabric.domain`` (and typer /
fastapi / pydantic), so every service they need (output, the configured fabrics, the store's
tenancy, the inventory, the lab) comes through the hosts below, which the CLI and the API
implement. The core mounts whatever the registered kinds contribute and never names one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from gpufabric.domain.kind.backend import FabricBackend
from gpufabric.domain.models import Inventory
from gpufabric.domain.tenancy import Tenancy


class FabricAccess(Protocol):
    """The configured fabrics and who owns each node now, as a view reads them."""

    def backend(self, instance: str) -> FabricBackend[Any] | None:
        """The backend of fabric instance ``instance`` (None: not configured in fabrics.yaml)."""

    def tenancy(self) -> Tenancy:
        """Who owns each node now (the store's leases)."""


class CliHost(Protocol):
    """What ``gpufabric`` lends a kind's command group."""

    def emit_json(self, data: Any) -> None: ...

    def table(self, title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None: ...

    def echo(self, markup: str) -> None:
        """One line of console markup (``[bold]...[/]``)."""

    def fabrics(self) -> AbstractContextManager[FabricAccess]:
        """The fabrics of fabrics.yaml over the store, closed on exit."""

    def inventory(self, path: Path) -> Inventory:
        """An inventory file, parsed and checked."""

    def lab_status(self, lab: str, root: Path) -> Mapping[str, Any]:
        """The status of the local lab ``gpufabric.lab.<lab>`` running under ``root``."""


class CliGroup(NamedTuple):
    """A command group a kind adds: ``gpufabric <name> ...``; ``build(host)`` gives its typer
    app (called only when the group is mounted, so the kind's view module is imported only then)."""

    name: str
    help: str
    build: Callable[[CliHost], Any]


class ApiHost(Protocol):
    """What the API lends a kind's router (mounted under ``/api/v1``)."""

    principal: Any  # a FastAPI dependency: the caller's Principal
    fabrics: Any  # a FastAPI dependency: a FabricAccess (503 when no fabrics are configured)

    def errors(self, *codes: int, params: bool = True) -> dict[int | str, dict[str, Any]]:
        """The documented error answers of a route (401 always, 422 with parameters, ``codes``)."""

    def json(self, data: Any, status: int = 200) -> Any:
        """The API's JSON response of ``data``."""
