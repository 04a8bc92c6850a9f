"""A fabric kind's own command group and API routes (``FabricKind.cli_group`` /
``api_router``, issue 19) are mounted by the core from the registry alone: an in-memory kind
contributes ``gpufabric memview`` and ``GET /api/v1/memview`` with no core file naming it, and a
core command never loads the kinds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from fastapi import APIRouter
from typer.testing import CliRunner

from gpufabric.cli import kinds as cli_kinds
from gpufabric.cli.main import build_app
from gpufabric.domain.auth import Principal
from gpufabric.domain.views import ApiHost, CliGroup, CliHost
from gpufabric.store.registry import Registry

from support.memfabric import MemoryKind


def _cli(host: CliHost) -> typer.Typer:
    app = typer.Typer(no_args_is_help=True, add_completion=False)

    @app.command("hello")
    def hello(name: str = typer.Argument(...), json_out: bool = typer.Option(False, "--json")) -> None:
        if json_out:
            host.emit_json({"hello": name})
        else:
            host.table("Hello", ["name"], [(name,)])

    return app


class ViewKind(MemoryKind):
    def cli_group(self) -> CliGroup:
        return CliGroup("memview", "The in-memory kind's own commands.", _cli)

    def api_router(self, host: ApiHost) -> APIRouter:
        router = APIRouter()

        @router.get("/memview", responses=host.errors(params=False))
        def memview(p: Principal = host.principal) -> Any:
            return host.json({"role": p.role.value})

        return router


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    loads: list[int] = []
    real = Registry.from_entry_points

    def with_view(*a: Any, **kw: Any) -> Registry:
        loads.append(1)
        reg = real(*a, **kw)
        reg.register_kind(ViewKind())
        return reg

    monkeypatch.setattr(Registry, "from_entry_points", staticmethod(with_view))
    yield loads


def test_a_kind_group_is_mounted_by_name(registry: list[int]) -> None:
    r = CliRunner().invoke(build_app("memview"), ["memview", "hello", "a01", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"hello": "a01"}
    r = CliRunner().invoke(build_app("memview"), ["memview", "hello", "a01"])
    assert r.exit_code == 0 and "Hello" in r.output and "a01" in r.output


def test_the_whole_app_lists_every_kind_group(registry: list[int]) -> None:
    r = CliRunner().invoke(build_app(), ["--help"])
    assert r.exit_code == 0 and "memview" in r.output and "offload" in r.output and "node" in r.output


def test_a_core_command_never_loads_the_kinds(registry: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: Any) -> dict[str, CliGroup]:
        raise AssertionError("kinds loaded for a core command")

    monkeypatch.setattr(cli_kinds, "kind_groups", boom)
    app = build_app("node")
    assert [g.name for g in app.registered_groups] == ["node"] and registry == []


def test_an_unknown_command_gets_the_whole_app(registry: list[int]) -> None:
    r = CliRunner().invoke(build_app("nosuch"), ["nosuch"])
    assert r.exit_code != 0 and "No such command" in r.output


def test_a_kind_router_is_mounted_with_the_api_host(registry: list[int]) -> None:
    from gpufabric.api.deps import PRINCIPAL
    from gpufabric.api.v1.kinds import Host, routers

    got = {route.path for r in routers() for route in r.routes}  # type: ignore[attr-defined]
    assert {"/memview", "/offload"} <= got
    assert Host.principal is PRINCIPAL
    assert 401 in Host().errors(params=False) and 422 in Host().errors()


def test_a_registered_kind_group_loads_no_other_kind() -> None:
    """``gpufabric offload ...`` finds its group through the ``gpufabric.commands`` entry point:
    no other kind (nor the DPU's SSH stack) is imported. Fails on a stale install: ``pip install -e .``."""
    import subprocess
    import sys

    code = (
        "import sys; from gpufabric.cli.main import build_app; build_app('offload'); "
        "print(sorted({m.split('.')[2] for m in sys.modules if m.startswith('gpufabric.fabrics.')}), "
        "'paramiko' in sys.modules, 'sqlalchemy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["['dpu']", "False", "False"], out
