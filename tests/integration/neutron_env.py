"""A real Neutron 29 (PyPI, in .venv-neutron) with the gpufabric ML2 driver, served on loopback.

Installed by ``scripts/openstack-venv.sh neutron`` (idempotent; ≈ 1 min the first time). Config as
verified in /work/shared/notes/recipes/neutron: ML2, noauth, fake transport, SQLite schema
from the models then ``neutron-db-manage stamp heads``, the ``binding:profile`` policy
override; ``[ml2_gpufabric]`` points the driver at a gpufabric API with a 0600 token file (plain http on
loopback: ``insecure = true``, which the driver logs as TRANSPORT-INSECURE) and a node map
{binding:host_id: gpufabric node} (Ironic sends the node's UUID as the host id).
The test venv never imports neutron: everything goes through Neutron's REST API.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("NEUTRON_VENV", ROOT / ".venv-neutron"))
SERVE = Path(__file__).with_name("neutron_serve.py")
ETH_PHYSNET, IB_PHYSNET = "physnet1", "ib"
IB2_PHYSNET = "ib-storage"  # a second IB subnet, when the gpufabric has that instance (ib_physnets)

NEUTRON_CONF = """[DEFAULT]
core_plugin = ml2
service_plugins =
auth_strategy = noauth
transport_url = fake:/
api_paste_config = {venv}/etc/neutron/api-paste.ini
state_path = {dir}/state
host = ctl1
debug = true
log_file = {dir}/neutron-api.log
[database]
connection = sqlite:///{dir}/neutron.db
[oslo_concurrency]
lock_path = {dir}/lock
[oslo_policy]
policy_file = {dir}/policy.yaml
"""

ML2_CONF = """[ml2]
type_drivers = vlan,flat
tenant_network_types = vlan
mechanism_drivers = gpufabric
extension_drivers = port_security
[ml2_type_vlan]
network_vlan_ranges = {eth}:2000:2999,{ib}:3000:4094,{ib2}:3000:3999,physnet2:100:199
[ml2_gpufabric]
url = {url}
token_file = {token_file}
ethernet_physnets = {eth}
ib_physnet = {ib}
bind_timeout = {bind_timeout}
poll_interval = 0.2
insecure = true
node_map = {node_map}
{extra}"""

_DB_TEMPLATE: list[Path] = []  # an empty, stamped Neutron schema made once per test session

POLICY = """"create_port:binding:profile": "rule:admin_only or rule:service_api"
"update_port:binding:profile": "rule:admin_only or rule:service_api"
"""


def ensure_venv() -> float:
    """Install .venv-neutron if needed; returns the seconds it took (≈ 0 when already there)."""
    t = time.monotonic()
    subprocess.run(["bash", str(ROOT / "scripts" / "openstack-venv.sh"), "neutron"], check=True, capture_output=True, timeout=900)
    return time.monotonic() - t


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Neutron:
    dir: Path
    gpufabric_url: str
    token_file: Path
    bind_timeout: float = 120.0
    node_map: dict[str, str] = field(default_factory=dict)
    ib_physnets: str = ""  # e.g. "ib:infiniband,ib-storage:ib-storage"; empty: ib_physnet alone
    extra_ml2: str = ""  # more [ml2_gpufabric] lines, e.g. "ironic_networks = ironic-cleaning"
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v2.0"

    def start(self) -> Neutron:
        d = self.dir
        (d / "state").mkdir(parents=True, exist_ok=True)
        (d / "lock").mkdir(exist_ok=True)
        (d / "neutron.conf").write_text(NEUTRON_CONF.format(venv=VENV, dir=d))
        (d / "node-map.json").write_text(json.dumps(self.node_map))
        (d / "ml2_conf.ini").write_text(ML2_CONF.format(url=self.gpufabric_url, token_file=self.token_file,
                                                        eth=ETH_PHYSNET, ib=IB_PHYSNET, ib2=IB2_PHYSNET,
                                                        bind_timeout=self.bind_timeout, node_map=d / "node-map.json",
                                                        extra=(f"ib_physnets = {self.ib_physnets}\n" if self.ib_physnets else "") + self.extra_ml2))  # fmt: skip
        (d / "policy.yaml").write_text(POLICY)
        # this checkout's driver first, whichever checkout the venv's editable install points at
        path = os.pathsep.join(x for x in (str(ROOT / "integrations" / "neutron"), os.environ.get("PYTHONPATH")) if x)
        env = {**os.environ, "NEUTRON_DIR": str(d), "PYTHONPATH": path}
        py = str(VENV / "bin" / "python")
        if _DB_TEMPLATE:  # the schema of the session's first Neutron: it does not depend on the config
            shutil.copyfile(_DB_TEMPLATE[0], d / "neutron.db")
        else:
            subprocess.run([py, str(SERVE), "mkdb"], env=env, check=True, capture_output=True, timeout=300)
            subprocess.run([str(VENV / "bin" / "neutron-db-manage"), "--config-file", str(d / "neutron.conf"),
                            "--config-file", str(d / "ml2_conf.ini"), "stamp", "heads"],
                           env=env, check=True, capture_output=True, timeout=300)  # fmt: skip
            shutil.copyfile(d / "neutron.db", d / "neutron.db.template")
            _DB_TEMPLATE.append(d / "neutron.db.template")
        out = open(d / "serve.out", "wb")  # noqa: SIM115 (the server's stdout for its lifetime)
        self.proc = subprocess.Popen([py, str(SERVE), "serve", str(self.port)], env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"neutron exited {self.proc.returncode}: {self.log_tail()}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=2).close()
                return self
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"neutron did not answer in 180 s: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self, n: int = 4000) -> str:
        parts = []
        for f in ("serve.out", "neutron-api.log"):
            p = self.dir / f
            if p.exists():
                parts.append(p.read_text(errors="replace")[-n:])
        return "\n".join(parts)

    def errors(self) -> list[str]:
        """Driver log lines at ERROR level (what an operator would see)."""
        return self.log_lines(" ERROR ")

    def log_lines(self, needle: str) -> list[str]:
        p = self.dir / "neutron-api.log"
        return [ln for ln in p.read_text(errors="replace").splitlines() if needle in ln] if p.exists() else []

    # ---- REST
    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, out = self.call(method, path, body)
        if status >= 300:
            raise AssertionError(f"neutron {method} {path} -> {status}: {out}\n{self.log_tail(2000)}")
        return out

    def create_network(self, project: str, name: str, physnet: str, seg_id: int) -> dict[str, Any]:
        body = {"network": {"project_id": project, "name": name, "provider:network_type": "vlan",
                            "provider:physical_network": physnet, "provider:segmentation_id": seg_id}}  # fmt: skip
        return self.ok("POST", "/networks", body)["network"]  # type: ignore[no-any-return]

    def create_port(self, project: str, network_id: str, host: str, lli: list[dict[str, Any]], name: str = "nic") -> dict[str, Any]:
        """A bare-metal port as Ironic creates it when a node is attached to a network."""
        body = {"port": {"project_id": project, "network_id": network_id, "name": name,
                         "device_owner": "baremetal:none", "binding:vnic_type": "baremetal", "binding:host_id": host,
                         "binding:profile": {"local_link_information": lli}}}  # fmt: skip
        return self.ok("POST", "/ports", body)["port"]  # type: ignore[no-any-return]

    def unbind_port(self, port_id: str) -> dict[str, Any]:
        """What Ironic does on teardown: clear host and profile."""
        body = {"port": {"binding:host_id": "", "binding:profile": {}}}
        return self.ok("PUT", f"/ports/{port_id}", body)["port"]  # type: ignore[no-any-return]

    def get_port(self, port_id: str) -> dict[str, Any]:
        return self.ok("GET", f"/ports/{port_id}")["port"]  # type: ignore[no-any-return]
