"""What the CLI prints is for people: no Python repr (``ImportResult(added=...)``, a dict) in the
output of the everyday commands, and ``node list`` fits an 80-column terminal."""

from __future__ import annotations

import os
import re
from pathlib import Path

from typer.testing import CliRunner

from gpufabric.cli.inventory_cmd import import_line
from gpufabric.cli.main import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "inventory.yaml"
REPR = re.compile(r"\b[A-Z][A-Za-z]+\(\w+=|\{'|\[\('")


def test_everyday_commands_print_no_repr(tmp_path: Path) -> None:
    env = {**os.environ, "GPUFABRIC_HOME": str(tmp_path), "GPUFABRIC_DB": "", "COLUMNS": "80"}
    env.pop("GPUFABRIC_API", None)
    outputs: dict[str, list[str]] = {}
    for cmd in (
        ["inventory", "import", str(EXAMPLE)],
        ["inventory", "import", str(EXAMPLE)],  # the second time: unchanged
        ["tenant", "create", "alpha"],
        ["network", "create", "alpha-net", "--tenant", "alpha"],
        ["node", "list"],
        ["node", "list", "--wide"],
        ["node", "show", "gpu-h100-03"],
        ["tenant", "list"],
        ["network", "list"],
        ["lease", "list"],
    ):
        r = CliRunner().invoke(app, cmd, env=env)
        assert r.exit_code == 0, (cmd, r.output)
        outputs.setdefault(" ".join(cmd[:3]), []).append(r.output)
        assert not REPR.search(r.output), (cmd, r.output)
    first, again = (" ".join(o.split()) for o in outputs[f"inventory import {EXAMPLE}"])
    assert "3 added, 0 updated, 0 unchanged" in first and "0 added, 0 updated, 3 unchanged" in again
    table = outputs["node list"][0].splitlines()
    assert max(len(ln) for ln in table) <= 80
    assert [ln.split()[0] for ln in table if ln.startswith("gpu-")] == ["gpu-h100-01", "gpu-h100-02", "gpu-h100-03"]
    assert "0x0002c90300000100" in outputs["node list --wide"][0]  # --wide: every port in full


def test_the_api_import_answer_is_a_sentence() -> None:
    assert import_line({"added": 6, "updated": 1, "unchanged": 0}) == "6 added, 1 updated, 0 unchanged"
