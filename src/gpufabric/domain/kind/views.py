"""The views facet of a fabric kind: its cells of the node table and fragments of the API's node
answer, its own command group and routes (what the core lends them: :mod:`gpufabric.domain.views`),
and its reaction to a node's power cycle (:mod:`gpufabric.domain.hooks`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gpufabric.domain.hooks import PowerCycled
from gpufabric.domain.kind.identity import KindIdentity
from gpufabric.domain.models import Node
from gpufabric.domain.tenancy import Tenancy
from gpufabric.domain.views import ApiHost, CliGroup, FabricAccess


class KindViews(KindIdentity):
    """How a kind shows itself and what it adds to the CLI and the API."""

    # ---- display
    def summary(self, node: Node, tenancy: Tenancy | None = None) -> str:
        """One cell of the node table: this fabric's resources of ``node``, one line per
        resource in full (``node list --wide``; the 80-column table abbreviates it).
        ``tenancy``: who holds the node now (None: unknown, shown as in quarantine)."""
        return ""

    def node_view(self, node: Node, tenancy: Tenancy | None = None) -> Mapping[str, Any]:
        """This fabric's JSON fragment of ``node`` (``GET /api/v1/nodes/N`` and
        ``node list --json``, under ``fabrics.<instance>``). Default: nothing."""
        return {}

    # ---- a node's power cycle (``gpufabric node power-cycled``, gpufabric.domain.hooks)
    power_cycle_needs: ClassVar[str | None] = None
    """What a node must have for this kind to react to its power cycle, as an error's
    ``allowed`` says it (e.g. "a node with a DPU in the inventory"); None: it never reacts."""

    def power_cycled(self, node: Node, fabrics: FabricAccess) -> PowerCycled | None:
        """An operator power-cycled ``node`` (cold): read again what this kind reads of it only
        at boot, through ``fabrics`` (this instance's backend), and refuse (a GpufabricError
        naming the node) while it still reports a change pending. None: this kind has nothing on
        ``node`` (the default)."""
        return None

    # ---- the kind's own commands and routes (gpufabric.domain.views)
    def cli_group(self) -> CliGroup | None:
        """A command group of this kind's own (``gpufabric <name> ...``), mounted by the CLI
        beside the core's. Default: none."""
        return None

    def api_router(self, host: ApiHost) -> Any:
        """A FastAPI ``APIRouter`` of this kind's own routes, mounted under ``/api/v1`` (None:
        none; the default)."""
        return None
