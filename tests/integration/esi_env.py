"""A real esi-leap 1.0.0 (PyPI, in .venv-esi-leap) on loopback with dummy_node resources.

Installed by ``scripts/openstack-venv.sh esi-leap`` (idempotent; ≈ 1 min the first time). Schema by
``esi-leap-dbsync create_schema`` on SQLite (WAL, or the API's nested sessions lock it);
``esi-leap-api`` with ``[pecan] auth_enable = False`` (admin by ``X-Roles`` header) serves the
event feed. Leases are created and fulfilled/expired through esi-leap's own object layer
and manager jobs (esi_leap_driver.py): its API would build the lease response from Keystone
and Ironic, neither of which runs here, and its manager only ticks every 60 s.
Dummy nodes live in /tmp/nodes (esi-leap reads that option at import time); each test
uses fresh names and removes its files.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .neutron_env import ROOT, free_port

VENV = Path(os.environ.get("ESI_LEAP_VENV", ROOT / ".venv-esi-leap"))
DRIVER = Path(__file__).with_name("esi_leap_driver.py")
NODE_DIR = Path("/tmp/nodes")
OWNER = "11111111111111111111111111111111"

CONF = """[DEFAULT]
host = esi-test
transport_url = fake:/
[database]
connection = sqlite:///{dir}/esi.db
[pecan]
auth_enable = False
[api]
host_ip = 127.0.0.1
port = {port}
api_workers = 1
default_resource_type = dummy_node
[dummy_node]
dummy_node_dir = {nodes}
[oslo_concurrency]
lock_path = {dir}/lock
[oslo_messaging_notifications]
driver = noop
"""


def ensure_venv() -> float:
    t = time.monotonic()
    subprocess.run(["bash", str(ROOT / "scripts" / "openstack-venv.sh"), "esi-leap"], check=True, capture_output=True, timeout=900)
    return time.monotonic() - t


@dataclass
class EsiLeap:
    dir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    nodes: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def conf(self) -> Path:
        return self.dir / "esi.conf"

    def start(self) -> EsiLeap:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "lock").mkdir(exist_ok=True)
        NODE_DIR.mkdir(exist_ok=True)
        self.conf.write_text(CONF.format(dir=self.dir, port=self.port, nodes=NODE_DIR))
        subprocess.run([str(VENV / "bin" / "esi-leap-dbsync"), "--config-file", str(self.conf), "create_schema"],
                       check=True, capture_output=True, timeout=120)  # fmt: skip
        with sqlite3.connect(self.dir / "esi.db") as c:
            c.execute("PRAGMA journal_mode=WAL")
        log = open(self.dir / "api.log", "wb")  # noqa: SIM115 (the server's output for its lifetime)
        self.proc = subprocess.Popen([str(VENV / "bin" / "esi-leap-api"), "--config-file", str(self.conf)],
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/", timeout=2).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("esi-leap-api did not start: " + (self.dir / "api.log").read_text()[-2000:]) from None
                time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the API and its worker: a group this test started
            try:  # oslo.service drains for up to graceful_shutdown_timeout (60 s): a test API need not
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for n in self.nodes:
            (NODE_DIR / n).unlink(missing_ok=True)

    def add_node(self) -> str:
        """A dummy node owned by OWNER; returns its resource uuid."""
        name = f"gftest-{uuid.uuid4().hex[:12]}"
        (NODE_DIR / name).write_text(json.dumps({"project_owner_id": OWNER, "resource_class": "gpu", "properties": {}}))
        self.nodes.append(name)
        return name

    def node(self, name: str) -> dict[str, Any]:
        return json.loads((NODE_DIR / name).read_text())  # type: ignore[no-any-return]

    def _driver(self, *args: str) -> str:
        p = subprocess.run([str(VENV / "bin" / "python"), str(DRIVER), str(self.conf), *args],
                           capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        if p.returncode != 0:
            raise AssertionError(f"esi_leap_driver {args} exited {p.returncode}: {p.stderr[-2000:]}")
        return p.stdout.strip()

    def lease(self, node: str, lessee: str, seconds: float) -> str:
        return self._driver("lease", node, lessee, OWNER, str(seconds)).splitlines()[-1]

    def tick(self) -> None:
        """One run of esi-leap-manager's periodic jobs (fulfil, then expire)."""
        self._driver("tick")

    def events(self) -> list[dict[str, Any]]:
        req = urllib.request.Request(self.url + "/v1/events", headers={"X-Roles": "admin"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())["events"]  # type: ignore[no-any-return]

    def sync(self, gpufabric_url: str, token_file: Path, node_map: dict[str, str], state: Path) -> str:
        """One pass of the mirror, as its CLI runs in the esi-leap venv (gpufabric over plain http
        on loopback: ``--insecure``, logged as TRANSPORT-INSECURE)."""
        m = self.dir / "node-map.json"
        m.write_text(json.dumps(node_map))
        p = subprocess.run([str(VENV / "bin" / "gpufabric-esi-leap-sync", ), "--esi-leap-url", self.url,
                            "--esi-leap-header", "X-Roles:admin", "--gpufabric-url", gpufabric_url, "--token-file",
                            str(token_file), "--node-map", str(m), "--state-file", str(state), "--timeout", "120",
                            "--once", "--insecure"], capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        if p.returncode != 0:
            raise AssertionError(f"gpufabric-esi-leap-sync exited {p.returncode}: {p.stdout}\n{p.stderr}")
        return p.stderr
