"""Ironic is the inventory (issue 34 item 2), on a real Ironic 39.0.0 (tests/integration/ironic_env.py):
the operator enrolls two GPU nodes with their own client (``openstack baremetal node create``,
``port group create``, ``port create ... --local-link-connection ...``, from .venv-esiclient), and
``gpufabric inventory import --from ironic --json`` reads Ironic's API into gpufabric's nodes:
named by Ironic name, each with its Ironic UUID (the ``node_map`` the Neutron driver and the
esi-leap sync read, written by ``--node-map``), NICs on the leaves of fabrics.yaml, the port group
as an LACP bond across the MLAG pair; the port on a switch fabrics.yaml does not have and the one
without link information reported, not imported. The same through ``gpufabric serve`` (``--api``):
the server reads the listing against its own fabrics.yaml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .ironic_env import FABRICS, NODES, Ironic, ensure_venvs, seed
from .neutron_env import free_port

pytestmark = [pytest.mark.integration]

GF = str(Path(sys.executable).parent / "gpufabric")
A01, A02 = NODES["gpu-a01"], NODES["gpu-a02"]


@pytest.fixture(scope="module")
def ironic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ironic]:
    t = time.monotonic()
    ensure_venvs()
    print(f"ironic and esiclient venvs ready in {time.monotonic() - t:.1f}s")
    i = Ironic(tmp_path_factory.mktemp("ironic"))
    try:
        i.start()
        print(f"ironic up in {i.started_in:.1f}s")
        t = time.monotonic()
        seed(i)
        print(f"two nodes enrolled with the client in {time.monotonic() - t:.1f}s")
        yield i
    finally:
        i.stop()


def _home(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "gfhome"
    home.mkdir()
    (home / "fabrics.yaml").write_text(yaml.safe_dump(FABRICS))
    return {**os.environ, "GPUFABRIC_HOME": str(home), "NO_COLOR": "1"}


def gf(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GF, *args], env=env, capture_output=True, text=True, timeout=120)


def check_import(doc: dict[str, Any]) -> None:
    assert doc["format"] == "ironic" and doc["nodes"] == 2
    assert doc["identities"] == {"gpu-a01": A01, "gpu-a02": A02}
    assert doc["node_map"] == {A01: "gpu-a01", A02: "gpu-a02"}
    ports = {e["name"]: {(p["name"], p["switch"], p["switch_port"], p.get("bond"), p.get("bond_mode")) for p in e["ports"]}
             for e in doc["imported"]}  # fmt: skip
    assert ports == {
        "gpu-a01": {("eth0", "leaf1", "swp1", "bond1", "lacp"), ("eth1", "leaf2", "swp1", "bond1", "lacp"),
                    ("eth2", "leaf1", "swp11", None, None)},
        "gpu-a02": {("nic-525400a20001", "leaf1", "swp2", None, None)},
    }  # fmt: skip
    unmatched = {u["address"]: u for u in doc["unmatched"]}
    assert set(unmatched) == {"52:54:00:a2:00:02", "52:54:00:a2:00:03"}
    assert (unmatched["52:54:00:a2:00:02"]["switch_info"], unmatched["52:54:00:a2:00:02"]["node"]) == (
        "spine9",
        "gpu-a02",
    )
    assert "no switch of fabrics.yaml" in unmatched["52:54:00:a2:00:02"]["why"]


def test_inventory_import_from_ironic(ironic: Ironic, tmp_path: Path) -> None:
    env = {**_home(tmp_path), "GPUFABRIC_IRONIC_URL": ironic.url}
    t = time.monotonic()
    r = gf(env, "inventory", "import", "--from", "ironic", "--json", "--node-map", str(tmp_path / "node-map.json"))
    print(f"inventory import --from ironic: {time.monotonic() - t:.2f}s")
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    check_import(doc)
    assert doc["result"]["added"] == 2
    assert json.loads((tmp_path / "node-map.json").read_text()) == {A01: "gpu-a01", A02: "gpu-a02"}
    nodes = {n["name"]: n for n in json.loads(gf(env, "node", "list", "--json").stdout)}
    assert set(nodes) >= {"gpu-a01", "gpu-a02"}
    again = gf(env, "inventory", "import", "--from", "ironic", "--json")  # an import is an upsert: nothing changes
    assert again.returncode == 0 and json.loads(again.stdout)["result"]["unchanged"] == 2, again.stdout
    text = gf(env, "inventory", "import", "--from", "ironic")  # the person's output names the reported port
    assert text.returncode == 0 and "52:54:00:a2:00:02" in text.stdout and "spine9" in text.stdout, text.stdout


def test_inventory_import_from_ironic_through_the_api(ironic: Ironic, tmp_path: Path) -> None:
    env = _home(tmp_path)
    tok = gf(env, "token", "create", "--role", "admin", "--name", "ironic-test", "--json")
    assert tok.returncode == 0, tok.stderr
    secret = json.loads(tok.stdout)["secret"]
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 (the server's output for its lifetime)
    serve = subprocess.Popen(
        [GF, "serve", "--port", str(port), "--interval", "0"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/openapi.json", timeout=2).close()
                break
            except OSError:
                assert serve.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[
                    -2000:
                ]
                time.sleep(0.3)
        client = {
            **os.environ,
            "GPUFABRIC_HOME": str(tmp_path / "client"),
            "GPUFABRIC_TOKEN": secret,
        }  # no fabrics.yaml here
        r = gf(client, "--api", f"http://127.0.0.1:{port}", "inventory", "import", "--from", "ironic",
               "--ironic-url", ironic.url, "--json")  # fmt: skip
        assert r.returncode == 0, (r.stdout, r.stderr, (tmp_path / "serve.log").read_text()[-2000:])
        check_import(json.loads(r.stdout))
        # the UUID is the node's identity: what the Neutron driver looks binding:host_id up by (no node_map)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/nodes?host_id={A02}",
                                     headers={"Authorization": f"Bearer {secret}"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=10) as got:
            items = json.loads(got.read())["items"]
        assert [(n["name"], n["host_id"]) for n in items] == [("gpu-a02", A02)]
    finally:
        serve.terminate()
        serve.wait(timeout=30)
