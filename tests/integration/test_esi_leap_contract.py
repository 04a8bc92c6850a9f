"""A real esi-leap (dummy nodes) mirrored into gpufabric by ``gpufabric-esi-leap-sync``,
against the loopback contract server: a lease created, fulfilled by esi-leap's manager job,
mirrored as a gpufabric lease for the lessee; expired by esi-leap, mirrored as a move to
quarantine. The lab + real gpufabric version is test_esi_leap_real.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .esi_env import EsiLeap, ensure_venv
from .neutron_env import ROOT, free_port

pytestmark = pytest.mark.integration

FAKE = ROOT / "integrations" / "neutron" / "tests" / "fake_gpufabric.py"
LESSEE = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EsiLeap, str, Path, Path]]:
    d = tmp_path_factory.mktemp("esi")
    t = time.monotonic()
    ensure_venv()
    print(f"esi-leap venv ready in {time.monotonic() - t:.1f}s")
    token = d / "gpufabric.token"
    token.write_text("contract-token\n")
    os.chmod(token, 0o600)
    seed = d / "seed.json"
    seed.write_text(json.dumps({"switch_ports": [["leaf1", "p1", "node1"]], "guids": {}}))
    port = free_port()
    fake = subprocess.Popen([sys.executable, str(FAKE), "--port", str(port), "--token-file", str(token), "--seed", str(seed),
                             "--state-out", str(d / "state.json")], stdout=subprocess.PIPE)  # fmt: skip
    assert fake.stdout is not None and b"fake gpufabric" in fake.stdout.readline()
    esi = EsiLeap(d / "esi")
    try:
        esi.start()
        yield esi, f"http://127.0.0.1:{port}", token, d / "state.json"
    finally:
        esi.stop()
        fake.terminate()
        fake.wait(timeout=10)


def state(p: Path) -> dict[str, Any]:
    return json.loads(p.read_text()) if p.exists() else {}


def test_lease_fulfil_and_expiry_are_mirrored(env: tuple[EsiLeap, str, Path, Path], tmp_path: Path) -> None:
    esi, url, token, gf_state = env
    node = esi.add_node()
    node_map = {node: "node1"}
    esi.lease(node, LESSEE, seconds=15)
    t0 = time.monotonic()  # the lease ends by t0 + its length; a loaded machine takes seconds to start each esi-leap job
    esi.tick()  # esi-leap fulfils: the dummy node gets the lessee
    assert esi.node(node)["project_id"] == LESSEE
    esi.sync(url, token, node_map, tmp_path / "sync.json")
    assert state(gf_state)["node_tenant"]["node1"] == LESSEE
    assert [(x["tenant"], x["networks"], x["active"]) for x in state(gf_state)["leases"]] == [(LESSEE, [], True)]

    time.sleep(max(0.0, 15.5 - (time.monotonic() - t0)))
    esi.tick()  # esi-leap expires: the dummy node is cleared
    assert "project_id" not in esi.node(node)
    assert [e["event_type"] for e in esi.events()][-1] == "esi_leap.lease.delete.end"
    esi.sync(url, token, node_map, tmp_path / "sync.json")
    st = state(gf_state)
    assert st["node_tenant"]["node1"] == "quarantine"
    assert [(m["node"], m["to_tenant"], m["status"]) for m in st["moves"]] == [("node1", LESSEE, "done"), ("node1", "quarantine", "done")]
    assert ["DELETE", "/api/v1/leases/1"] in st["writes"] and ["POST", "/api/v1/moves"] not in st["writes"]
    assert json.loads((tmp_path / "sync.json").read_text())["last_event_id"] == max(e["id"] for e in esi.events())
