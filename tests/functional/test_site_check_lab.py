"""``gpufabric site check`` on the real lab (OVS leaf/spine + ibsim/OpenSM + stand-in Fabric Managers,
2 nodes x 2 HCAs x 8 GPUs):
the lab as `lab up` writes it passes; each broken site (a wrong trusted SM GUID, an SSH switch
whose host key is unknown, a VLAN pool the uplink trunk does not carry, a PKey of the pool
already used by a partition gpufabric did not write, an inventory port not on its switch nor
on the subnet, a store one migration behind) gives its finding, naming the key and the device,
and the exit code of its level. The command runs as an operator runs it (its own process)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufabric.domain.models import Inventory
from gpufabric.domain.values import Guid
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports
from gpufabric.lab.sshd import SshServer
from gpufabric.store.core import Store

from support.ports import port_node, replace_ports

pytestmark = pytest.mark.root
GPUFABRIC = str(Path(sys.executable).parent / "gpufabric")


def cli(home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUFABRIC_")}
    e.update(env or {})
    return subprocess.run([GPUFABRIC, "--home", str(home), *args], capture_output=True, text=True, env=e,
                          timeout=timeout, check=False)  # fmt: skip


def site_check(home: Path, **env: str) -> tuple[int, list[dict[str, str]]]:
    p = cli(home, "site", "check", "--json", env=env)
    assert p.stdout, p.stderr
    out = json.loads(p.stdout)
    assert out["exit_code"] == p.returncode
    return p.returncode, out["checks"]


def bad(checks: list[dict[str, str]]) -> list[dict[str, str]]:
    return [c for c in checks if c["severity"] != "ok"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    h = tmp_path_factory.mktemp("sitecheck")
    try:
        up = cli(h, "lab", "up", "--nodes", "2", "--json")  # 8 GPUs each: a stand-in Fabric Manager per node
        assert up.returncode == 0, up.stderr
        yield h
    finally:
        down = cli(h, "lab", "down")
        assert down.returncode == 0, down.stderr


@pytest.fixture(scope="module")
def fabrics(home: Path) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load((home / "fabrics.yaml").read_text())
    return raw


def write(path: Path, data: Any) -> str:
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_the_lab_passes(home: Path) -> None:
    p = cli(home, "site", "check")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "site check: ok" in p.stdout
    assert "infiniband: checking its devices" in p.stderr  # progress on stderr
    rc, checks = site_check(home)
    ids = {c["id"] for c in checks}
    assert rc == 0 and bad(checks) == []
    assert {"STORE-MIGRATIONS", "STORE-CLOCK", "ETH-REACH", "ETH-TRUNK-VLANS", "ETH-INVENTORY-PORT", "IB-REACH",
            "IB-TRUSTED-SM", "IB-HARDENING", "IB-PKEY-POOL", "IB-INVENTORY-PORT"} <= ids  # fmt: skip
    assert sorted(c["subject"] for c in checks if c["id"] == "NVLINK-REACH") == ["gpu-a01", "gpu-a02"]
    sm = next(c for c in checks if c["id"] == "IB-TRUSTED-SM")
    assert sm["subject"] == "0x0002c90310000001" and "master" in sm["message"]


def test_wrong_trusted_sm_guid_is_critical(home: Path, fabrics: dict[str, Any], tmp_path: Path) -> None:
    wrong = "0x0002c903100000ff"
    f = json.loads(json.dumps(fabrics))
    f["trusted_sm_guids"] = [wrong]
    f["infiniband"]["options"]["trusted_sm_guids"] = [wrong]
    rc, checks = site_check(home, GPUFABRIC_FABRICS=write(tmp_path / "fabrics.yaml", f))
    assert rc == 4
    found = {(c["severity"], c["subject"]) for c in bad(checks)}
    assert found == {("critical", "0x0002c90310000001"), ("error", wrong)}
    msgs = " | ".join(c["message"] for c in bad(checks))
    assert "not in fabrics.yaml trusted_sm_guids" in msgs and f"trusted_sm_guids {wrong}: no SM answers" in msgs


def test_unknown_ssh_host_key_is_critical(home: Path, fabrics: dict[str, Any], tmp_path: Path) -> None:
    sshd = SshServer(tmp_path / "ssh")
    sshd.start()
    try:
        empty = tmp_path / "known_hosts"
        empty.write_text("")
        leaf = fabrics["ethernet"][0]["options"]
        f = json.loads(json.dumps(fabrics))
        f["ethernet"].append({"driver": "ssh", "options": {
            "switch": "ssh-leaf", "host": sshd.host, "port": sshd.port, "username": sshd.username,
            "key_filename": str(sshd.client_key), "known_hosts": str(empty), "dialect": "ovs", "retries": 0,
            "command_prefix": f"ovs-vsctl --db={leaf['remote']}", "bridge": leaf["switch"]}})  # fmt: skip
        rc, checks = site_check(home, GPUFABRIC_FABRICS=write(tmp_path / "fabrics.yaml", f))
    finally:
        sshd.stop()
    assert rc == 4
    [c] = bad(checks)
    assert (c["id"], c["severity"], c["subject"]) == ("ETH-HOSTKEY", "critical", "ssh-leaf")
    assert f"SSH host key of 127.0.0.1:{sshd.port} is unknown" in c["message"] and "known_hosts" in c["message"]


def test_vlan_pool_not_on_the_uplink_trunk(home: Path, tmp_path: Path) -> None:
    cfg = {"segments": {"user_vlan_range": "2-1899", "ethernet": {"vlan_range": "1900-2999"}}}
    rc, checks = site_check(home, GPUFABRIC_CONFIG=write(tmp_path / "config.yaml", cfg))
    assert rc == 3
    [c] = bad(checks)
    assert (c["id"], c["severity"]) == ("ETH-TRUNK-VLANS", "error")
    assert c["subject"].endswith("-l01-up") and "segments.ethernet.vlan_range 1900-2999" in c["message"]
    assert "VLAN(s) 1900-1999 not allowed" in c["message"]


def test_pkey_used_by_a_partition_gpufabric_did_not_write(home: Path, fabrics: dict[str, Any]) -> None:
    conf = Path(fabrics["infiniband"]["options"]["partitions_conf"])
    good = conf.read_text()
    try:
        conf.write_text(good + "storage=0x0a05 : 0x0002c90310000101=full, 0x0002c90310000201=full ;\n")
        assert cli(home, "lab", "restart-sm").returncode == 0
        rc, checks = site_check(home)
    finally:
        conf.write_text(good)
        assert cli(home, "lab", "restart-sm").returncode == 0
    assert rc == 3
    [c] = bad(checks)
    assert (c["id"], c["severity"], c["subject"]) == ("IB-PKEY-POOL", "error", "pkey:0x0a05")
    assert "segments.infiniband" in c["message"] and "partition storage" in c["message"]
    assert site_check(home)[0] == 0  # and back to good once the partition is gone


def test_inventory_port_not_on_its_fabric(home: Path, fabrics: dict[str, Any], tmp_path: Path) -> None:
    shutil.copy(home / "gpufabric.db", tmp_path / "g.db")
    url = f"sqlite:///{tmp_path / 'g.db'}"
    leaf = fabrics["ethernet"][0]["options"]["switch"]
    ghost = port_node("gpu-zz9", ethernet=(EthernetPort("gpu-zz9", "eth0", leaf, "no-such-port"),),
                 ib=(IbPort("gpu-zz9", "mlx5_0", 1, Guid(0x0002C903100099AA), Guid(0x0002C903100099A0)),))  # fmt: skip
    with Store.open(url) as s:
        s.upsert_inventory(Inventory((*s.nodes(), ghost)))
    rc, checks = site_check(home, GPUFABRIC_DB=url)
    assert rc == 3
    found = {(c["id"], c["subject"]) for c in bad(checks)}
    assert found == {("ETH-INVENTORY-PORT", f"{leaf}/no-such-port"), ("IB-INVENTORY-PORT", "0x0002c903100099aa")}
    assert all("gpu-zz9" in c["message"] for c in bad(checks))


def test_store_one_migration_behind(home: Path, tmp_path: Path) -> None:
    shutil.copy(home / "gpufabric.db", tmp_path / "g.db")
    with sqlite3.connect(tmp_path / "g.db") as c:
        head = c.execute("SELECT version_num FROM alembic_version").fetchone()[0]
        c.execute("UPDATE alembic_version SET version_num = ?", (f"{int(head) - 1:04d}",))
    rc, checks = site_check(home, GPUFABRIC_DB=f"sqlite:///{tmp_path / 'g.db'}")
    assert rc == 3
    c = next(c for c in bad(checks) if c["id"] == "STORE-MIGRATIONS")
    assert f"at migration {int(head) - 1:04d}, this gpufabric's head is {head}" in c["message"]


def test_fabric_port_of_a_known_host_not_in_the_inventory(home: Path, tmp_path: Path) -> None:
    shutil.copy(home / "gpufabric.db", tmp_path / "g.db")
    url = f"sqlite:///{tmp_path / 'g.db'}"
    with Store.open(url) as s:
        a01 = s.node("gpu-a01")
        s.upsert_inventory(Inventory((replace_ports(a01, ib=all_ib_ports(a01)[:1]),)))
        dropped = all_ib_ports(a01)[1]
    rc, checks = site_check(home, GPUFABRIC_DB=url)
    assert rc == 1
    [c] = bad(checks)
    assert (c["id"], c["severity"], c["subject"]) == ("IB-UNKNOWN-PORT", "warning", str(dropped.port_guid))
    assert "inventory node gpu-a01" in c["message"] and f"gpu-a01 {dropped.device}" in c["message"]
