"""Ironic's own multi-tenant networking in the loop (issue 34, toward item 3): a real Ironic 39.0.0
with the ``neutron`` network interface and a cleaning network, a real Neutron 29 with the gpufabric
ML2 driver (against the loopback contract server, integrations/neutron/tests/fake_gpufabric.py),
and the driver's ``node_map`` written by ``gpufabric inventory import --from ironic --node-map``
(no hand-written map). ``openstack baremetal node manage`` then ``provide`` (automated cleaning;
the ``direct`` deploy interface, whose in-band cleaning binds the cleaning network, with fake
power/boot/management) makes Ironic create one Neutron port per Ironic port on the cleaning
network, ``binding:host_id`` = the node's UUID, ``local_link_information`` = the Ironic port's;
the driver binds each to the node the imported map names. The node waits in ``clean wait``
(no agent ever calls back), ``abort`` ends it.

What this shows today (the gap item 3 closes): the driver treats Ironic's cleaning network as a
TENANT network of Ironic's own project: the node is attached to it, not moved to quarantine, and
a cleaning network of another project than the one Ironic creates its ports in is refused
(``binding_failed``; Ironic then never leaves ``cleaning``)."""

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
import yaml

from .ironic_env import FABRICS, NODES, SEED_COMMANDS, Ironic, ensure_venvs
from .neutron_env import ETH_PHYSNET, ROOT, Neutron, free_port
from .neutron_env import ensure_venv as ensure_neutron_venv

pytestmark = [pytest.mark.integration]

GF = str(Path(sys.executable).parent / "gpufabric")
FAKE = ROOT / "integrations" / "neutron" / "tests" / "fake_gpufabric.py"
IRONIC_PROJECT = "fake_project_id"  # the project Ironic creates its ports in under noauth (its service project)
A01 = NODES["gpu-a01"]
CLEANING = "ironic-cleaning"  # Ironic's cleaning_network, by name


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ironic, Neutron, Path, dict[str, Any]]]:
    d = tmp_path_factory.mktemp("ironic-cleaning")
    ensure_venvs()
    ensure_neutron_venv()
    token = d / "gpufabric.token"
    token.write_text("contract-token\n")
    os.chmod(token, 0o600)
    seed = d / "seed.json"
    seed.write_text(json.dumps({"switch_ports": [["leaf1", "swp1", "gpu-a01"], ["leaf2", "swp1", "gpu-a01"],
                                                 ["leaf1", "swp11", "gpu-a01"], ["leaf1", "swp2", "gpu-a02"]]}))  # fmt: skip
    port = free_port()
    fake = subprocess.Popen([sys.executable, str(FAKE), "--port", str(port), "--token-file", str(token), "--seed", str(seed),
                             "--state-out", str(d / "state.json")], stdout=subprocess.PIPE)  # fmt: skip
    assert fake.stdout is not None and b"fake gpufabric" in fake.stdout.readline()
    # 1. Ironic with the nodes, read by gpufabric: the node map the driver is given
    ironic: Ironic | None = None
    neutron: Neutron | None = None
    try:
        neutron_port = free_port()  # Ironic is told where Neutron will be; it calls it only to clean
        home = d / "gfhome"
        home.mkdir()
        (home / "fabrics.yaml").write_text(yaml.safe_dump(FABRICS))
        node_map = d / "node-map.json"
        ironic = Ironic(d / "ironic", neutron_url=f"http://127.0.0.1:{neutron_port}", network_interface="neutron",
                        automated_clean=True, deploy_interfaces="fake,direct",
                        networks={"cleaning_network": CLEANING, "provisioning_network": CLEANING})  # fmt: skip
        ironic.start()
        ironic.session(*(c.replace("--network-interface noop", "--network-interface neutron") for c in SEED_COMMANDS))
        env = {**os.environ, "GPUFABRIC_HOME": str(home), "GPUFABRIC_IRONIC_URL": ironic.url}
        r = subprocess.run([GF, "inventory", "import", "--from", "ironic", "--node-map", str(node_map), "--json"], env=env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert r.returncode == 0, (r.stdout, r.stderr)
        # the driver is given the map the import wrote
        neutron = Neutron(d / "neutron", f"http://127.0.0.1:{port}", token, bind_timeout=20, port=neutron_port,
                          node_map=json.loads(node_map.read_text()))  # fmt: skip
        neutron.start()
        clean = neutron.create_network(IRONIC_PROJECT, CLEANING, ETH_PHYSNET, 2900)
        yield ironic, neutron, d, clean
    finally:
        if ironic is not None:
            ironic.stop()
        if neutron is not None:
            neutron.stop()
        fake.terminate()
        fake.wait(timeout=10)


def test_cleaning_binds_the_nodes_ports_through_the_gpufabric_driver(
    stack: tuple[Ironic, Neutron, Path, dict[str, Any]],
) -> None:
    ironic, neutron, d, clean = stack
    t = time.monotonic()
    ironic.session("baremetal node set gpu-a01 --deploy-interface direct", "baremetal node manage gpu-a01")
    assert ironic.wait_state("gpu-a01", "manageable")["provision_state"] == "manageable"
    ironic.session("baremetal node provide gpu-a01")
    node = ironic.wait_state("gpu-a01", "clean wait", 120, also=("clean failed",))
    print(f"manage + provide to clean wait: {time.monotonic() - t:.1f}s")
    assert node["provision_state"] == "clean wait", (node["last_error"], ironic.log_tail(2000))
    ports = [p for p in neutron.ok("GET", "/ports")["ports"] if p["network_id"] == clean["id"]]
    assert {p["mac_address"] for p in ports} == {"52:54:00:a1:00:01", "52:54:00:a1:00:02", "52:54:00:a1:00:03"}
    for p in ports:  # what Ironic sends, bound by gpufabric to the node the imported map names
        assert (p["binding:host_id"], p["binding:vnic_type"], p["project_id"]) == (A01, "baremetal", IRONIC_PROJECT)
        assert p["binding:profile"]["physical_network"] == ETH_PHYSNET
        assert (p["binding:vif_type"], p["binding:vif_details"].get("gpufabric_node")) == ("other", "gpu-a01"), p
    lli = sorted(
        (x["switch_info"], x["port_id"]) for p in ports for x in p["binding:profile"]["local_link_information"]
    )
    assert lli == [("leaf1", "swp1"), ("leaf1", "swp11"), ("leaf2", "swp1")]
    state = json.loads((d / "state.json").read_text())
    assert list(state["attachments"]["gpu-a01"]) == [
        "neutron-" + clean["id"].replace("-", "")[:12]
    ]  # a tenant attach today
    ironic.session("baremetal node abort gpu-a01")
    assert ironic.wait_state("gpu-a01", "clean failed", 60)["provision_state"] == "clean failed"
