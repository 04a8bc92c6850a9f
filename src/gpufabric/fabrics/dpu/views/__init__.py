"""The DPU kind's own command group and API routes, as the core mounts them
(:meth:`DpuKind.cli_group` / :meth:`DpuKind.api_router` return these). Light on purpose: the
``gpufabric.commands`` entry point names :func:`cli_group`, so ``gpufabric offload ...`` loads
this package and :mod:`.cli`, not the kinds (nor their SSH stacks)."""

from __future__ import annotations

from typing import Any

from gpufabric.domain.views import ApiHost, CliGroup, CliHost


def _cli(host: CliHost) -> Any:
    from gpufabric.fabrics.dpu.views.cli import build

    return build(host)


def cli_group() -> CliGroup:
    return CliGroup("offload", "DPU offload report (hw / tc / datapath per tenant) and SR-IOV policy.", _cli)


def api_router(host: ApiHost) -> Any:
    from gpufabric.fabrics.dpu.views.api import build  # fastapi: imported by the API only

    return build(host)
