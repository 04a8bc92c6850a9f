"""``gpufabric offload report --from DIR`` and ``offload sriov-policy`` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from gpufabric.cli.main import app

FIX = Path(__file__).resolve().parents[1] / "fixtures"
runner = CliRunner()


def test_report_json_from_recorded_dir() -> None:
    r = runner.invoke(app, ["offload", "report", "--from", str(FIX / "dpu-offload"), "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    rows = {(x["node"], x["tenant"]): x for x in rep["rows"]}
    assert rows[("gpu-a01", "acme")]["hw_flows"] == 2
    assert rows[("gpu-a01", "acme")]["datapath_flows"] == 1  # pf0vf2 (police rule, repaired JSON)
    assert rows[("gpu-a02", "beta")]["datapath_flows"] > 0
    kinds = {(a["node"], a["kind"]) for a in rep["alerts"]}
    assert kinds == {("gpu-a01", "skip_sw_not_in_hw"), ("gpu-a02", "quarantined_node_flows")}


def test_report_tables_and_prometheus() -> None:
    r = runner.invoke(app, ["offload", "report", "--from", str(FIX / "dpu-offload"), "--capacity", "BlueField-2=2"])
    assert r.exit_code == 0, r.output
    assert "Offload by tenant" in r.output and "offload_table" in r.output
    r = runner.invoke(app, ["offload", "report", "--from", str(FIX / "dpu-offload"), "--prometheus"])
    assert 'gpufabric_dpu_offload_flows{node="gpu-a01",tenant="acme",path="hw"} 2' in r.output


def test_report_needs_one_source() -> None:
    r = runner.invoke(app, ["offload", "report"])
    assert r.exit_code != 0


def test_sriov_policy_yaml(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("nodes:\n  - name: gpu-a01\n    dpus: [{name: bf0, mode: dpu, pf: ens1f0, vfs: 4}]\n")
    r = runner.invoke(app, ["offload", "sriov-policy", "gpu-a01", "-i", str(inv)])
    assert r.exit_code == 0, r.output
    spec = yaml.safe_load(r.output)["spec"]
    assert spec["nicSelector"]["pfNames"] == ["ens1f0#1-3"] and spec["eSwitchMode"] == "switchdev"
