"""schemathesis over every v1 operation of the served OpenAPI schema, bounded, with a valid
admin token: no server errors, every answer conforms to the schema (status documented,
body matching its model, content type), and the documented error shape on every 4xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from gpufabric.api.app import create_app
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.store.registry import parse_segments

from support.api_world import World, build_world

_world: dict[str, World] = {}
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]


def _app() -> Any:
    import tempfile

    w = build_world(Path(tempfile.mkdtemp(prefix="gf-schema-")), nodes=6, leased=2)
    # fabrics with no devices: preview and audit run (on an empty observed state) instead of answering 503
    w.ctx.engine = lambda: MoveEngine(w.store, Fabrics(), parse_segments())
    _world["w"] = w
    return create_app(w.ctx)


APP = _app()
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture(scope="module", autouse=True)
def _close() -> Iterator[None]:
    yield
    _world["w"].store.close()


@schema.parametrize()
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_v1_conforms_to_its_schema(case: Any) -> None:
    headers = _world["w"].headers("admin")
    response = case.call(headers=headers)
    case.validate_response(response, checks=CHECKS)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"code", "field", "value", "allowed", "message"}


@schema.parametrize()
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_v1_conforms_to_its_schema_for_a_lessee(case: Any) -> None:
    """The same for a lessee: its 403s and 404s are documented and shaped like every error."""
    response = case.call(headers=_world["w"].headers("lessee-beta"))
    case.validate_response(response, checks=CHECKS)
    assert response.status_code < 500, response.text


@schema.parametrize()
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_v1_conforms_to_its_schema_for_an_owner(case: Any) -> None:
    """The same for an owner (alpha owns gpu-0005): its 403s, 404s, 413s and 429s are documented."""
    response = case.call(headers=_world["w"].headers("owner-alpha"))
    case.validate_response(response, checks=CHECKS)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"code", "field", "value", "allowed", "message"}


@schema.parametrize()
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_v1_conforms_to_its_schema_for_a_service(case: Any) -> None:
    """The same for a service token (the Neutron driver's and the esi-leap sync's role): what it
    may not do answers a documented 403 shaped like every error, never a server error."""
    response = case.call(headers=_world["w"].headers("service"))
    case.validate_response(response, checks=CHECKS)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"code", "field", "value", "allowed", "message"}
