"""One check of a switch's port names for every way an inventory comes in (issue 31, item 6):
``POST /api/v1/inventory`` on a real uvicorn checks each port against the naming of its switch's
dialect in the server's fabrics.yaml, as ``inventory import FILE`` does on a local store (an NX-OS
range ``Ethernet1/1-48`` would configure 48 ports), and ``gpufabric --api URL inventory import``
from a home with no fabrics.yaml of its own is refused by the server the same way; nothing is
written. The dialect renderer re-checks each name it renders (tests/fabrics/ethernet/unit/test_ssh_dialects.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from support.api_world import World, build_world
from support.live_api import gf, live_api

FABRICS = {"ethernet": [{"driver": "ssh", "options": {"switch": "leaf-nx", "dialect": "nxos"}},
                        {"driver": "ssh", "options": {"switch": "leaf-cl", "dialect": "nvue"}}]}  # fmt: skip
NXOS = "a nxos interface name, e.g. Ethernet1/12, Ethernet1/1/2"


def _doc(switch: str, port: str, node: str = "gpu-nx") -> dict[str, Any]:
    return {"version": 1, "nodes": [{"name": node, "ethernet": [{"name": "eth0", "switch": switch, "switch_port": port}]}]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, str]]:
    w = build_world(tmp_path_factory.mktemp("names"), nodes=2, leased=0)
    w.ctx.fabrics_settings = lambda: FABRICS  # the server's fabrics.yaml
    with live_api(w.ctx) as base:
        yield w, base
    w.store.close()


@pytest.mark.parametrize(("switch", "port", "allowed"), [
    ("leaf-nx", "Ethernet1/1-48", NXOS),  # a range: `interface Ethernet1/1-48` configures 48 ports
    ("leaf-nx", "swp1", NXOS),
    ("leaf-cl", "Ethernet1/1", "a nvue interface name, e.g. swp12, swp1s2"),
])  # fmt: skip
def test_the_api_refuses_a_port_name_its_switchs_dialect_refuses(served: tuple[World, str], switch: str, port: str,
                                                                 allowed: str) -> None:  # fmt: skip
    w, base = served
    before = {n.name for n in w.store.nodes()}
    r = httpx.post(base + "/api/v1/inventory", json=_doc(switch, port), headers=w.headers("admin"), timeout=60)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert (err["field"], err["value"], err["allowed"]) == ("nodes[0].ethernet[0].switch_port", port, allowed)
    assert {n.name for n in w.store.nodes()} == before  # nothing written


def test_the_api_takes_the_names_its_switchs_dialect_takes(served: tuple[World, str]) -> None:
    w, base = served
    for switch, port, node in (("leaf-nx", "Ethernet1/7", "gpu-nx"), ("leaf-cl", "swp7", "gpu-cl"),
                               ("leaf-free", "Ethernet1/1-48", "gpu-free")):  # a switch of no dialect: the generic check
        r = httpx.post(base + "/api/v1/inventory", json=_doc(switch, port, node), headers=w.headers("admin"), timeout=60)
        assert r.status_code == 200 and r.json()["added"] == 1, r.text


def test_the_cli_through_the_api_is_checked_by_the_servers_fabrics(served: tuple[World, str], tmp_path: Path) -> None:
    w, base = served
    remote = tmp_path / "remote"  # no fabrics.yaml here: the server's names the switch's dialect
    remote.mkdir()
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(_doc("leaf-nx", "Ethernet1/1-48", "gpu-cli")))
    r = gf(remote, "--api", base, "inventory", "import", str(tmp_path / "inv.yaml"), "--json",
           GPUFABRIC_TOKEN=w.tokens["admin"])  # fmt: skip
    assert r.returncode == 2, (r.stdout, r.stderr)
    err = json.loads(r.stdout)["error"]
    assert (err["field"], err["allowed"]) == ("nodes[0].fabrics.ethernet[0].switch_port", NXOS)  # the CLI sends each port under its instance
    assert "gpu-cli" not in {n.name for n in w.store.nodes()}
