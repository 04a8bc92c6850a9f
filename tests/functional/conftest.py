"""Fixtures shared by the API tests: a template world (6 nodes, gpu-0000 leased to alpha,
gpu-0001 to beta, gpu-0005 owned by alpha; every node with 8 GPUs) built once per module, and
a fresh copy of it behind a TestClient per test. A module may define its own to override them.
``fresh_url``: an empty store of ``store_url``'s backend, for the store backup tests."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app

from support.api_world import World, build_world, clone_world


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = build_world(tmp_path_factory.mktemp("tpl"), nodes=6, leased=2)
    yield w
    w.store.close()


@pytest.fixture
def world(template: World, tmp_path: Path) -> Iterator[tuple[World, TestClient]]:
    w = clone_world(template, tmp_path)
    with TestClient(create_app(w.ctx)) as client:
        yield w, client
    w.store.close()


@pytest.fixture
def fresh_url(request: pytest.FixtureRequest, store_url: str, tmp_path: Path) -> Iterator[str]:
    """An empty store of the same backend as ``store_url``, in a fresh home / database."""
    if store_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'restored-home' / 'gpufabric.db'}"
        return
    cluster = request.getfixturevalue("postgres_cluster")
    name = f"r{os.getpid()}_{time.monotonic_ns()}"
    with cluster.admin() as c:
        c.execute(f'CREATE DATABASE "{name}"')
    yield cluster.url(name)
    with cluster.admin() as c:
        c.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
