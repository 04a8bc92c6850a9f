"""``lab up --sm-pair`` without running anything: the net file gets sm-02's HCA, fabrics.yaml gets
the pair's ``sm_hosts`` (both GUIDs trusted) and loads as an OpenSM driver configuration, and
without the flag both stay what they were; ``lab up --help`` documents the flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufabric.cli.main import app
from gpufabric.domain.errors import LabError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.opensm.config import OpenSMConfig
from gpufabric.fabrics.infiniband.state.partitions import parse_partitions_conf
from gpufabric.lab.fabrics_config import fabrics_config
from gpufabric.lab.ib import SAFE_PARTITIONS
from gpufabric.lab.lab import Lab, LabStatus
from gpufabric.lab.labib import SmHostStatus, SmPairStatus, net_plan, pair_partitions
from gpufabric.lab.netfile import generate_netfile
from gpufabric.lab.smpair import STANDBY_NODE, STANDBY_PORT_GUID

SM = "0x0002c90310000001"


def test_the_pairs_net_file_adds_sm_02_on_leaf_01_port_17_and_the_default_is_unchanged() -> None:
    plain, paired = net_plan(None, 3, 1, False), net_plan(None, 3, 1, True)
    assert plain.text == generate_netfile(3, 1)
    assert (plain.sm_host, plain.order) == (paired.sm_host, paired.order) == ("sm-01 mlx5_0", ["gpu-a01", "gpu-a02", "gpu-a03"])  # fmt: skip
    added = set(paired.text.splitlines()) - set(plain.text.splitlines())
    assert added == {'[17] "sm-02 mlx5_0"[1]', f"caguid={STANDBY_PORT_GUID.value - 1:#018x}", 'Hca 1 "sm-02 mlx5_0"',
                     '[1] "leaf-01"[17]'}  # fmt: skip


def test_both_sms_start_from_the_safe_default_with_both_sm_ports_full_members() -> None:
    text = pair_partitions([Guid.parse(SM), STANDBY_PORT_GUID])
    assert text.splitlines()[:3] == SAFE_PARTITIONS.splitlines()[:3]
    assert text.splitlines()[3] == ("Default=0x7fff, ipoib : ALL_CAS=limited, ALL_SWITCHES=full, SELF=full, "
                                    f"{SM}=full, {STANDBY_PORT_GUID}=full ;")  # fmt: skip
    layout = parse_partitions_conf(text)  # as gpufabric reads a running file: both SMs full members
    assert (layout.default_full, layout.default_limited_all, layout.partitions) == (
        (Guid.parse(SM), STANDBY_PORT_GUID), True, (),
    )  # fmt: skip


def test_the_pair_needs_the_master_sm_node_in_a_given_topology(tmp_path: Path) -> None:
    net = tmp_path / "f.net"
    net.write_text(generate_netfile(2, 1).replace("sm-01 mlx5_0", "other mlx5_0"))
    assert net_plan(net, 0, 0, False).sm_host is None
    with pytest.raises(LabError, match="--sm-pair: the topology has no 'sm-01 mlx5_0'"):
        net_plan(net, 0, 0, True)


def status(tmp_path: Path, pair: bool) -> LabStatus:
    hosts = (SmHostStatus("sm-01", "sm-01 mlx5_0", SM, 1, "127.0.0.1:2201", True),
             SmHostStatus("sm-02", STANDBY_NODE, str(STANDBY_PORT_GUID), 2, "127.0.0.1:2202", True))  # fmt: skip
    return LabStatus(home=str(tmp_path), running=True, sm_node="sm-01 mlx5_0", sm_port_guid=SM,
                     sm_pair=SmPairStatus(hosts, "sm-01 mlx5_0", SM, "SMINFO_MASTER") if pair else None)  # fmt: skip


def test_fabrics_yaml_of_the_pair_drives_both_sm_hosts_and_trusts_both(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    cfg = fabrics_config(lab, status(tmp_path, True), 4000)
    opts = cfg["infiniband"]["options"]
    assert [(h["name"], h["port_guid"], h["partitions_conf"]) for h in opts["sm_hosts"]] == [
        ("sm-01", SM, str(tmp_path / "lab" / "ib" / "partitions.conf")),
        ("sm-02", str(STANDBY_PORT_GUID), str(tmp_path / "lab" / "smpair" / "sm-02" / "partitions.conf")),
    ]
    assert cfg["trusted_sm_guids"] == cfg["sm_port_guids"] == [SM, str(STANDBY_PORT_GUID)]
    assert opts["trusted_sm_guids"] == [SM, str(STANDBY_PORT_GUID)]
    assert not {"partitions_conf", "log_path", "pid_file", "sa_dump"} & set(opts)
    c = OpenSMConfig.from_options(opts)
    assert [h.name for h in c.sm_hosts] == ["sm-01", "sm-02"] and c.partitions_conf is None

    plain = fabrics_config(lab, status(tmp_path, False), 4000)
    assert plain["trusted_sm_guids"] == [SM] and "sm_hosts" not in plain["infiniband"]["options"]
    assert plain["infiniband"]["options"]["partitions_conf"] == str(tmp_path / "lab" / "ib" / "partitions.conf")


def test_lab_up_help_documents_the_flag() -> None:
    out = CliRunner().invoke(app, ["lab", "up", "--help"], terminal_width=200).output
    assert "--sm-pair" in out and "master/standby OpenSM pair" in out
