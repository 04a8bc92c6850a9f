"""One error shape and one move-run shape, defined once (domain/errors.py, domain/move_json.py)
and used by the API and by the CLI's ``--json`` (local and ``--api``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from gpufabric.api.deps import error_body
from gpufabric.cli.backends.remote import Answer, _raise
from gpufabric.domain.errors import ConflictError, GpufabricError, NotFoundError, ValidationError
from gpufabric.domain.move_json import PHASE_KEYS, RUN_KEYS, move_detail, run_json

KEYS = {"code", "field", "value", "allowed", "message"}


@pytest.mark.parametrize("err", [NotFoundError("node", "gpu-x"), ValidationError("gpus", 9, "1..8"),
                                 ConflictError("tenant beta holds 3 leases", field="tenant", value="beta", leases=3),
                                 GpufabricError("move 7 failed: boom", move=7)])  # fmt: skip
def test_the_api_and_the_cli_print_one_error_shape(err: GpufabricError) -> None:
    body = err.to_json()
    assert body == error_body(err)  # the API's body is the domain's
    assert set(body["error"]) == KEYS and body["error"]["message"] == err.message
    extra = {k: v for k, v in err.fields.items() if k not in ("field", "kind", "value", "name", "allowed")}
    assert body.get("details", {}) == extra


def test_an_api_error_read_back_by_the_cli_prints_the_servers_body() -> None:
    for status, err in ((404, NotFoundError("move", "99")), (409, ConflictError("busy", field="status", value="running",
                                                                                  allowed="pending, failed", move=4)),
                        (422, ValidationError("gpus", 9, "1..8"))):  # fmt: skip
        sent = err.to_json()
        with pytest.raises(GpufabricError) as ei:
            _raise(Answer(status, json.dumps(sent).encode()))
        assert ei.value.to_json() == sent and type(ei.value) is type(err)


def test_an_error_of_another_code_keeps_its_code() -> None:
    sent = {"error": {"code": "rate_limited", "field": "write_rate", "value": "u", "allowed": None, "message": "slow"}}
    with pytest.raises(GpufabricError) as ei:
        _raise(Answer(429, json.dumps(sent).encode()))
    assert ei.value.to_json() == sent


def test_a_local_cli_error_is_the_api_shape(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufabric.cli.main import app

    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))
    monkeypatch.delenv("GPUFABRIC_API", raising=False)
    r = CliRunner().invoke(app, ["move", "show", "99", "--json"])
    assert isinstance(r.exception, NotFoundError)
    assert r.exception.to_json() == {"error": {"code": "not_found", "field": "move", "value": "99", "allowed": None,
                                               "message": "move not found: 99"}}  # fmt: skip


def test_a_run_seen_from_outside_has_the_keys_of_a_run_made_here() -> None:
    row = {"id": 3, "node": "n1", "from_tenant": "a", "to_tenant": "b", "status": "done", "phase": "done"}
    events = [{"id": 1, "phase": "quarantine", "message": "q", "seconds": 0.02, "at": None},
              {"id": 2, "phase": "join", "message": "j", "seconds": 0.03, "at": None},
              {"id": 3, "phase": "done", "message": "ok", "seconds": None, "at": None}]  # fmt: skip
    d = move_detail(row, events)
    assert d["timings"] == {"quarantine": 0.02, "join": 0.03} and len(d["events"]) == 3
    here = run_json([d], [{"phase": "quarantine", "seconds": 0.02, "changes": 2, "devices": {"leaf1": 0.01},
                           "observed_first": False}], {"quarantine": {"ethernet": []}})  # fmt: skip
    there = run_json([d])
    assert tuple(here) == tuple(there) == RUN_KEYS
    assert all(tuple(p) == PHASE_KEYS for p in (*here["phases"], *there["phases"]))
    assert [(p["phase"], p["seconds"], p["changes"]) for p in there["phases"]] == [("quarantine", 0.02, None),
                                                                                     ("join", 0.03, None)]  # fmt: skip
    assert there["total_seconds"] == 0.05 and there["plans"] == {} and run_json([])["phases"] == []
