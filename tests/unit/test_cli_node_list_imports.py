"""A local ``node list`` / ``node show`` needs the configured instances' kinds (their columns), not
their drivers: run in a fresh interpreter against a home whose fabrics.yaml configures the Ethernet
``ssh`` and the InfiniBand ``ufm`` drivers, then read its ``sys.modules``: no driver module loaded,
and the kinds' columns are there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpufabric.cli.main import app

from unit.test_cli_imports import run as probe

DRIVERS = ("gpufabric.fabrics.ethernet.drivers.ssh.driver", "gpufabric.fabrics.ethernet.drivers.ssh.connection", "gpufabric.fabrics.infiniband.drivers.ufm.driver",
           "gpufabric.fabrics.nvlink.drivers.fmpm.driver")  # fmt: skip
FABRICS = {"fabrics": [
    {"name": "ethernet", "kind": "ethernet", "driver": "ssh", "options": {
        "host": "192.0.2.1", "username": "u", "key_filename": "/k", "known_hosts": "/kh", "switch": "leaf1"}},
    {"name": "infiniband", "kind": "infiniband", "driver": "ufm", "options": {"url": "https://192.0.2.2"}},
]}  # fmt: skip


def run(home: Path, *args: str) -> tuple[int, list[str], str]:
    return probe(*args, home=str(home))  # the import probe of test_cli_imports, in this home


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "fabrics.yaml").write_text(yaml.safe_dump(FABRICS))
    inv = {"version": 1, "nodes": [{"name": "n1", "ethernet": [{"name": "eth0", "switch": "leaf1", "switch_port": "p1"}]}]}
    (tmp_path / "inv.json").write_text(json.dumps(inv))
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))
    monkeypatch.setenv("GPUFABRIC_DB", "")
    r = CliRunner().invoke(app, ["inventory", "import", str(tmp_path / "inv.json"), "--json"])
    assert r.exit_code == 0, r.output
    return tmp_path


@pytest.mark.parametrize("cmd", [("node", "list"), ("node", "show", "n1")])
def test_local_node_list_and_show_load_the_kinds_but_no_driver(home: Path, cmd: tuple[str, ...]) -> None:
    code, modules, out = run(home, *cmd, "--json")
    assert code == 0, out
    got = json.loads(out)
    row = got[0] if isinstance(got, list) else got
    assert row["name"] == "n1" and set(row["fabrics"]) == {"ethernet", "infiniband"}  # the configured columns
    assert row["fabrics"]["ethernet"]["summary"] == "leaf1/p1"
    assert "gpufabric.fabrics.ethernet.kind" in modules and "gpufabric.fabrics.infiniband.kind" in modules
    assert [m for m in DRIVERS if m in modules] == []
