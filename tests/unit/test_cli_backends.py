"""One CLI path for local and remote (issue 19): every step a command takes is a method of the
backend, and the local backend (``cli/local.Local``, the store here) has exactly the methods of
the remote one (``cli/backend.Remote``, the API), with the same parameters. The command modules
no longer reach the store's reads and writes themselves; only the commands that run on this
machine by nature (serve, lab, move retry/resume, reconcile, power-cycled) open the engine."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from gpufabric.cli.backends.base import Terms
from gpufabric.cli.backends.choose import backend
from gpufabric.cli.backends.local import Local
from gpufabric.cli.backends.remote import Remote

CLI = Path(__file__).resolve().parents[2] / "src" / "gpufabric" / "cli"
HTTP = {"get", "post", "post_text", "delete", "stream"}  # Remote's transport, not steps of a command
LOCAL_ONLY = {"engine"}  # the local engine the steps share (the server has its own)


def _steps(cls: type) -> dict[str, list[str]]:
    return {
        name: [p for p in inspect.signature(fn).parameters if p != "self"]
        for name, fn in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in HTTP | LOCAL_ONLY
    }


def test_the_local_backend_has_the_remote_ones_steps_with_the_same_parameters() -> None:
    local, remote = _steps(Local), _steps(Remote)
    assert local == remote
    assert {"nodes", "node", "preview", "request_moves", "create_lease", "end_lease", "run", "audit", "import_inventory",
            "import_format", "moves", "cancel_move", "create_token", "events"} <= set(local)  # fmt: skip


def test_backend_is_local_without_an_api_url_and_remote_with_one(monkeypatch: object) -> None:
    import os

    os.environ.pop("GPUFABRIC_API", None)
    assert isinstance(backend(), Local) and backend().remote is False
    os.environ["GPUFABRIC_API"], os.environ["GPUFABRIC_TOKEN"] = "http://127.0.0.1:1", "x"
    try:
        assert isinstance(backend(), Remote) and backend().remote is True
    finally:
        del os.environ["GPUFABRIC_API"], os.environ["GPUFABRIC_TOKEN"]


def test_the_command_modules_act_only_through_the_backend() -> None:
    """No command module calls the store's reader or the workflow's actions itself any more."""
    used = {p.name: re.findall(r"\b(reader|actions)\(\)", p.read_text()) for p in CLI.glob("*_cmd.py")}
    assert {name: calls for name, calls in used.items() if calls} == {}


def test_a_requests_terms_are_the_apis_body() -> None:
    assert Terms("acme").body() == {"networks": None, "offering": "baremetal"}
    assert Terms("acme", ("n1",), "openshift", (("gpus", 4),)).body() == {"networks": ["n1"], "offering": "openshift", "gpus": 4}
