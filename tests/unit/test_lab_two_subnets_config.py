"""``lab up --ib-subnets 2`` without running anything: the storage subnet's net file (1 HCA
``mlx5_8`` per node, SM host sm-03, with the pair sm-04, no GUID of the compute subnet), the
flag's bad values refused before anything starts, and fabrics.yaml with the two instances
``ib-compute`` / ``ib-storage``, each with its own trusted SMs; the one-subnet lab's stays the
``infiniband:`` section."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufabric.cli.main import app
from gpufabric.domain.errors import ValidationError
from gpufabric.lab.fabrics_config import fabrics_config
from gpufabric.lab.lab import Lab, LabStatus
from gpufabric.lab.labib import STORAGE, SmHostStatus, SmPairStatus, net_plan
from gpufabric.lab.netfile import generate_netfile, storage_netfile
from gpufabric.lab.smpair import STORAGE_PAIR
from gpufabric.lab.subnets import SubnetStatus, check_subnets

SM_C, SM_C2 = "0x0002c90310000001", "0x0002c90340000001"
SM_S, SM_S2 = "0x0002c90510000001", "0x0002c90540000001"


def guids(text: str) -> set[str]:
    return set(re.findall(r"guid=(0x[0-9a-f]{16})", text))


def test_the_storage_net_file_has_one_mlx5_8_per_node_its_own_sm_and_no_compute_guid() -> None:
    text = storage_netfile(3)
    cas = re.findall(r'^Hca 1 "([^"]+)"', text, re.M)
    assert cas == ["gpu-a01 mlx5_8", "gpu-a02 mlx5_8", "gpu-a03 mlx5_8", "sm-03 mlx5_8"]
    assert guids(text) and not guids(text) & guids(generate_netfile(3, 2))
    paired = net_plan(None, 3, 1, True, STORAGE)
    assert (paired.sm_host, paired.order) == ("sm-03 mlx5_8", ["gpu-a01", "gpu-a02", "gpu-a03"])
    added = set(paired.text.splitlines()) - set(text.splitlines())
    assert added == {'[17] "sm-04 mlx5_8"[1]', f"caguid={STORAGE_PAIR.standby_node_guid}", 'Hca 1 "sm-04 mlx5_8"',
                     '[1] "leaf-01"[17]'}  # fmt: skip
    assert str(STORAGE_PAIR.standby_port_guid) == SM_S2


@pytest.mark.parametrize(
    ("n", "topology", "allowed"), [(3, None, "1 (one subnet) or 2"), (2, Path("f.net"), "with --topology")]
)
def test_bad_ib_subnets_is_one_line_naming_the_flag(
    n: int, topology: Path | None, allowed: str, tmp_path: Path
) -> None:
    with pytest.raises(ValidationError) as ei:
        check_subnets(n, topology)
    assert ei.value.field == "--ib-subnets" and allowed in str(ei.value)
    with pytest.raises(ValidationError):  # refused before anything starts: no lab dir written
        Lab(tmp_path).up(nodes=2, ib_subnets=n, topology=topology)
    assert not (tmp_path / "lab").exists()


def pair(names: tuple[str, str], nodes: tuple[str, str], guids: tuple[str, str]) -> SmPairStatus:
    hosts = tuple(SmHostStatus(n, d, g, 1, "127.0.0.1:2201", True) for n, d, g in zip(names, nodes, guids, strict=True))
    return SmPairStatus(hosts, nodes[0], guids[0], "SMINFO_MASTER")


def test_fabrics_yaml_of_two_subnets_has_two_instances_each_trusting_its_own_sms(tmp_path: Path) -> None:
    compute = SubnetStatus("ib-compute", "s", 1, 2, "", "", "", "sm-01 mlx5_0", SM_C,
                           sm_pair=pair(("sm-01", "sm-02"), ("sm-01 mlx5_0", "sm-02 mlx5_0"), (SM_C, SM_C2)))  # fmt: skip
    storage = SubnetStatus("ib-storage", "s", 1, 2, "", "", "", "sm-03 mlx5_8", SM_S,
                           sm_pair=pair(("sm-03", "sm-04"), ("sm-03 mlx5_8", "sm-04 mlx5_8"), (SM_S, SM_S2)))  # fmt: skip
    st = LabStatus(home=str(tmp_path), running=True, sm_node="sm-01 mlx5_0", sm_port_guid=SM_C,
                   sm_pair=compute.sm_pair, subnets=(compute, storage))  # fmt: skip
    cfg = fabrics_config(Lab(tmp_path), st, 4000)
    assert "infiniband" not in cfg
    assert [(f["name"], f["kind"], f["driver"]) for f in cfg["fabrics"]] == [
        ("ib-compute", "infiniband", "opensm"), ("ib-storage", "infiniband", "opensm"),
    ]  # fmt: skip
    opts = {f["name"]: f["options"] for f in cfg["fabrics"]}
    assert {n: o["trusted_sm_guids"] for n, o in opts.items()} == {
        "ib-compute": [SM_C, SM_C2],
        "ib-storage": [SM_S, SM_S2],
    }
    assert cfg["trusted_sm_guids"] == cfg["sm_port_guids"] == [SM_C, SM_C2, SM_S, SM_S2]
    assert [(h["name"], h["partitions_conf"]) for h in opts["ib-storage"]["sm_hosts"]] == [
        ("sm-03", str(tmp_path / "lab" / "ib-storage" / "partitions.conf")),
        ("sm-04", str(tmp_path / "lab" / "smpair-storage" / "sm-04" / "partitions.conf")),
    ]
    assert opts["ib-storage"]["restart_command"][-3:] == ["restart-sm", "--subnet", "ib-storage"]
    assert "ibsim-storage" in opts["ib-storage"]["diag_env"]["IBSIM_SOCKNAME"]
    assert opts["ib-compute"]["diag_env"]["IBSIM_SOCKNAME"].endswith("-ibsim")

    one = SubnetStatus("infiniband", "s", 1, 2, "", "", "", "sm-01 mlx5_0", SM_C)
    plain = fabrics_config(Lab(tmp_path), dataclasses.replace(st, subnets=(one,), sm_pair=None), 4000)
    assert "fabrics" not in plain and plain["trusted_sm_guids"] == [SM_C]
    assert plain["infiniband"]["options"]["restart_command"][-1] == "restart-sm"


def test_lab_up_help_documents_ib_subnets() -> None:
    out = CliRunner().invoke(app, ["lab", "up", "--help"], env={"COLUMNS": "200"}).output
    assert "--ib-subnets" in out and "ib-storage" in out
