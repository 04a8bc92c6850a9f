"""A real Ironic 39.0.0 (PyPI, in .venv-ironic) on loopback, and the user's own client
(python-esiclient 1.3.0's ``openstack``, in .venv-esiclient) to drive it.

Installed by ``scripts/openstack-venv.sh ironic esiclient`` (idempotent). API and
conductor in ONE process (Ironic's all-in-one ``ironic`` command with ``rpc_transport = none``),
``auth_strategy = noauth``, a SQLite schema made by ``ironic-dbsync create_schema``; every node
on ``fake-hardware`` (every interface fake: no BMC, no image), network interfaces ``noop``,
``flat`` and ``neutron``, whose ``[neutron]`` section points at a real Neutron (``auth_type =
none``, ``endpoint_override``) when a test gives one. The client reaches it with
``--os-auth-type none --os-endpoint URL`` (:meth:`Ironic.openstack`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .neutron_env import ROOT, free_port

VENV = Path(os.environ.get("IRONIC_VENV", ROOT / ".venv-ironic"))
CLIENT_VENV = Path(os.environ.get("ESICLIENT_VENV", ROOT / ".venv-esiclient"))
API_VERSION = "1.88"  # what the recorded answers and gpufabric's reader ask for (ports' `name`: 1.88)

FAKE = ("bios", "boot", "console", "firmware", "inspect", "management", "power", "raid", "rescue", "vendor")

CONF = """[DEFAULT]
auth_strategy = noauth
rpc_transport = none
host = ironic-gpufabric-test
enabled_hardware_types = fake-hardware
{fake}
enabled_deploy_interfaces = {deploy}
enabled_network_interfaces = noop,flat,neutron
default_network_interface = {network_interface}
enabled_storage_interfaces = noop
debug = true
log_file = {dir}/ironic.log
state_path = {dir}/state
[api]
host_ip = 127.0.0.1
port = {port}
api_workers = 1
[conductor]
automated_clean = {automated_clean}
heartbeat_interval = 1
[database]
connection = sqlite:///{dir}/ironic.db
[dhcp]
dhcp_provider = none
[neutron]
auth_type = none
endpoint_override = {neutron}
{networks}
[service_catalog]
auth_type = none
endpoint_override = http://127.0.0.1:{port}
[oslo_concurrency]
lock_path = {dir}/lock
[oslo_messaging_notifications]
driver = noop
"""


def ensure_venvs() -> float:
    """Install .venv-ironic and .venv-esiclient if needed (in parallel); the seconds it took."""
    t = time.monotonic()
    args = ["bash", str(ROOT / "scripts" / "openstack-venv.sh"), "ironic", "esiclient"]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1200)
    if p.returncode:
        raise RuntimeError(f"{args}: {p.stdout.decode(errors='replace')[-2000:]}")
    return time.monotonic() - t


@dataclass
class Ironic:
    dir: Path
    neutron_url: str = "http://127.0.0.1:9"  # no Neutron: the noop/flat interfaces never call it
    network_interface: str = "noop"
    automated_clean: bool = False
    deploy_interfaces: str = "fake"  # "fake,direct": the agent's cleaning, which binds the cleaning network
    networks: dict[str, str] = field(default_factory=dict)  # e.g. {"cleaning_network": UUID}
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    started_in: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def conf(self) -> Path:
        return self.dir / "ironic.conf"

    def start(self, timeout: float = 180) -> Ironic:
        t = time.monotonic()
        d = self.dir
        for sub in ("state", "lock"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        fake = "\n".join(f"enabled_{i}_interfaces = fake" for i in FAKE)
        self.conf.write_text(CONF.format(
            dir=d, port=self.port, neutron=self.neutron_url, fake=fake, deploy=self.deploy_interfaces, network_interface=self.network_interface,
            automated_clean=str(self.automated_clean).lower(),
            networks="\n".join(f"{k} = {v}" for k, v in self.networks.items())))  # fmt: skip
        bin_ = VENV / "bin"
        subprocess.run([str(bin_ / "ironic-dbsync"), "--config-file", str(self.conf), "create_schema"],
                       check=True, capture_output=True, timeout=300)  # fmt: skip
        out = open(d / "ironic.out", "wb")  # noqa: SIM115 (the server's output for its lifetime)
        self.proc = subprocess.Popen([str(bin_ / "ironic"), "--config-file", str(self.conf)],
                                     stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ironic exited {self.proc.returncode}: {self.log_tail()}")
            try:  # the conductor registers fake-hardware once it is up: nodes can be created from then on
                drivers = self.get("/v1/drivers")["drivers"]
                if any(x["name"] == "fake-hardware" for x in drivers):
                    self.started_in = time.monotonic() - t
                    return self
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.3)
        raise RuntimeError(f"ironic did not answer in {timeout} s: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self, n: int = 4000) -> str:
        return "\n".join(p.read_text(errors="replace")[-n:] for p in (self.dir / "ironic.out", self.dir / "ironic.log")
                         if p.exists())  # fmt: skip

    def get(self, path: str) -> Any:
        req = urllib.request.Request(self.url + path, headers={"X-OpenStack-Ironic-API-Version": API_VERSION})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    # ---- the user's own client
    def openstack(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``openstack ARGS`` from .venv-esiclient against this Ironic, noauth (as an operator
        with ``--os-auth-type none --os-endpoint``); -f json where the command prints one."""
        cmd = [str(CLIENT_VENV / "bin" / "openstack"), "--os-auth-type", "none", "--os-endpoint", self.url,
               "--os-baremetal-api-version", API_VERSION, *args]  # fmt: skip
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if check and p.returncode:
            raise AssertionError(f"{' '.join(args)}: exit {p.returncode}\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
        return p

    def session(self, *commands: str) -> subprocess.CompletedProcess[str]:
        """Several ``openstack`` commands in ONE client process (its interactive shell reading
        them from stdin: the client's start, ≈ 3-9 s here, paid once). Each command's error is
        printed and the next runs: check the result through the API."""
        cmd = [str(CLIENT_VENV / "bin" / "openstack"), "--os-auth-type", "none", "--os-endpoint", self.url,
               "--os-baremetal-api-version", API_VERSION]  # fmt: skip
        return subprocess.run(cmd, input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=300)

    def json(self, *args: str) -> Any:
        return json.loads(self.openstack(*args, "-f", "json").stdout)

    def wait_state(self, node: str, state: str, timeout: float = 60, also: tuple[str, ...] = ()) -> dict[str, Any]:
        """The node once in ``state`` (or one of ``also``: a failure not to wait out), or at ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            n: dict[str, Any] = self.get(f"/v1/nodes/{node}")
            if n["provision_state"] in (state, *also) or time.monotonic() > deadline:
                return n
            time.sleep(0.3)


def http_error(e: urllib.error.HTTPError) -> str:
    return f"{e.code} {e.read().decode(errors='replace')[:500]}"


# ---- the seed's two GPU nodes, as an operator enrolls them with the client
LEAF_A, LEAF_B, SPINE = "leaf1", "leaf2", "spine9"  # spine9: a switch the tests' fabrics.yaml does not have
NODES = {"gpu-a01": "6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a01", "gpu-a02": "6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a02"}
BOND_GROUP = "6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0b01"


def lli(switch: str, port: str, mac: str) -> str:
    return f"--local-link-connection switch_id={mac} --local-link-connection port_id={port} --local-link-connection switch_info={switch}"


SEED_COMMANDS = (
    *(
        f"baremetal node create --driver fake-hardware --name {name} --uuid {uuid} --network-interface noop"
        for name, uuid in NODES.items()
    ),
    # gpu-a01: an LACP bond of two NICs, one on each leaf of an MLAG pair (the port group), and a plain NIC
    f"baremetal port group create --node {NODES['gpu-a01']} --name bond1 --uuid {BOND_GROUP} --address 52:54:00:a1:00:01 --mode 802.3ad",
    f"baremetal port create 52:54:00:a1:00:01 --node {NODES['gpu-a01']} --name gpu-a01-eth0 --port-group {BOND_GROUP} "
    f"{lli(LEAF_A, 'swp1', '0c:00:00:00:00:01')} --physical-network physnet1",
    f"baremetal port create 52:54:00:a1:00:02 --node {NODES['gpu-a01']} --name gpu-a01-eth1 --port-group {BOND_GROUP} "
    f"{lli(LEAF_B, 'swp1', '0c:00:00:00:00:02')} --physical-network physnet1",
    f"baremetal port create 52:54:00:a1:00:03 --node {NODES['gpu-a01']} --name gpu-a01-eth2 {lli(LEAF_A, 'swp11', '0c:00:00:00:00:01')} --physical-network physnet1",
    # (Ironic's port names are unique across Ironic, as node names: "eth1" on two nodes is a 409)
    # gpu-a02: a NIC on leaf1 (no name); one on a switch fabrics.yaml does not have (reported); one without link information (reported)
    f"baremetal port create 52:54:00:a2:00:01 --node {NODES['gpu-a02']} {lli(LEAF_A, 'swp2', '0c:00:00:00:00:01')} --physical-network physnet1",
    f"baremetal port create 52:54:00:a2:00:02 --node {NODES['gpu-a02']} --name gpu-a02-eth1 {lli(SPINE, 'swp30', '0c:00:00:00:00:09')} --physical-network physnet1",
    f"baremetal port create 52:54:00:a2:00:03 --node {NODES['gpu-a02']} --name gpu-a02-ib0",
)
"""The commands (``openstack ...`` without the word) that enroll the two nodes; the recorded
listings of tests/data/ironic were made by them (its MANIFEST)."""

FABRICS = {"ethernet": [{"driver": "ssh", "options": {"switch": sw, "dialect": "nvue"}} for sw in (LEAF_A, LEAF_B)]}
"""The tests' fabrics.yaml: the MLAG pair of NVUE leaves (no switch is contacted by an import)."""


def seed(ironic: Ironic) -> None:
    """Enroll the two nodes with the client; AssertionError naming what Ironic does not hold."""
    p = ironic.session(*SEED_COMMANDS)
    ports = ironic.get("/v1/ports?detail=True")["ports"]
    nodes = {n["name"]: n["uuid"] for n in ironic.get("/v1/nodes")["nodes"]}
    if nodes != NODES or len(ports) != 6 or len(ironic.get("/v1/portgroups")["portgroups"]) != 1:
        raise AssertionError(
            f"the client's enrollment: {nodes} {len(ports)} ports\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
        )


def listings(ironic: Ironic) -> dict[str, Any]:
    """The three listings as Ironic answers them (what tests/data/ironic records)."""
    return {k: ironic.get(f"/v1/{k}?detail=True") for k in ("nodes", "ports", "portgroups")}
