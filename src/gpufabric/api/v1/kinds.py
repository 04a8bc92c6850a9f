"""The fabric kinds' own routes (``FabricKind.api_router``, e.g. ``GET /api/v1/offload``) and
the :class:`~gpufabric.domain.views.ApiHost` the API lends them. No kind is named here: the
registered kinds say which routes they add."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from gpufabric.api.deps import CTX, PRINCIPAL, ApiContext, json
from gpufabric.api.v1.schemas import errors
from gpufabric.domain.fabric import FabricBackend, Tenancy


class _Access:
    """The running engine's fabrics, reached on first use (so a route checks its principal
    before a missing fabrics.yaml answers 503)."""

    def __init__(self, c: ApiContext) -> None:
        self._c = c

    def backend(self, instance: str) -> FabricBackend[Any] | None:
        b: FabricBackend[Any] | None = self._c.need_engine().fabrics.backends.get(instance)
        return b

    def tenancy(self) -> Tenancy:
        t: Tenancy = self._c.need_engine().tenancy()
        return t


def _access(c: ApiContext = CTX) -> _Access:
    return _Access(c)


class Host:
    """The API's :class:`~gpufabric.domain.views.ApiHost`."""

    principal: Any = PRINCIPAL
    fabrics: Any = Depends(_access)

    def errors(self, *codes: int, params: bool = True) -> dict[int | str, dict[str, Any]]:
        return errors(*codes, params=params)

    def json(self, data: Any, status: int = 200) -> Response:
        return json(data, status)


def routers() -> list[APIRouter]:
    """Every registered kind's router (imports the kinds and their API views)."""
    from gpufabric.store.registry import Registry

    host = Host()
    kinds = Registry.from_entry_points(drivers=False).ordered_kinds()
    return [r for k in kinds if (r := k.api_router(host)) is not None]
