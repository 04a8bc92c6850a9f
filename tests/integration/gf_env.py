"""A lab (ibsim + OpenSM + OVS + netns, as tests/e2e) and a real ``gpufabric serve`` on it
with a ``service`` API token in a 0600 file (what the Neutron driver and the esi-leap sync are
given: not admin) and an admin token the tests use to read what gpufabric recorded: what the
OpenStack integrations talk to."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from .neutron_env import free_port
from e2e.conftest import GF, LabEnv


def lab_up(tmp_path_factory: pytest.TempPathFactory, nodes: int) -> Iterator[LabEnv]:
    env = LabEnv(tmp_path_factory.mktemp("gfhome"), {})
    env.status = env.gfj("lab", "up", "--nodes", str(nodes), "--hcas-per-node", "1")
    try:
        yield env
    finally:
        env.gf("lab", "down", check=False)


def _find_token(out: Any) -> str | None:
    if isinstance(out, dict):
        for k in ("secret", "token", "bearer"):
            if isinstance(out.get(k), str):
                return str(out[k])
        for v in out.values():
            t = _find_token(v)
            if t:
                return t
    return None


def issue_token(lab: LabEnv, role: str = "service", name: str = "openstack") -> str:
    """A token from ``gpufabric token create --role ROLE --name NAME --json`` (as docs/openstack.md)."""
    p = lab.gf("token", "create", "--role", role, "--name", name, "--json", check=False)
    tok = _find_token(json.loads(p.stdout)) if p.returncode == 0 else None
    if not tok:
        raise AssertionError(f"gpufabric token create --role {role}: {p.returncode} {p.stdout[-300:]} {p.stderr[-300:]}")
    return tok


class GpufabricServe:
    """``gpufabric serve`` on a free loopback port of the lab's home; ``api()`` calls it."""

    def __init__(self, lab: LabEnv, d: Path) -> None:
        self.lab, self.dir = lab, d
        self.token_file = d / "gpufabric.token"  # the service token the integrations get
        self.admin_token = ""  # the tests' own reads (events, moves) and set-up outside OpenStack
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> GpufabricServe:
        self.token_file.write_text(issue_token(self.lab, "service", "openstack") + "\n")
        self.admin_token = issue_token(self.lab, "admin", "integration-tests")
        os.chmod(self.token_file, 0o600)
        log = open(self.dir / "gpufabric-serve.log", "wb")
        self.proc = subprocess.Popen([GF, "serve", "--port", str(self.port), "--interval", "0"], env=self.lab.env,
                                     stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/openapi.json", timeout=2).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"gpufabric serve did not start: {(self.dir / 'gpufabric-serve.log').read_text()[-2000:]}") from None
                time.sleep(0.3)

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def api(self, method: str, path: str, body: Any = None, *, admin: bool = False) -> Any:
        """A call with the service token (what the integrations may do), or the admin one."""
        token = self.admin_token if admin else self.token_file.read_text().strip()
        req = urllib.request.Request(self.url + "/api/v1" + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + token,
                                              "Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=60) as r:
            raw = r.read()
            return json.loads(raw) if raw else None
