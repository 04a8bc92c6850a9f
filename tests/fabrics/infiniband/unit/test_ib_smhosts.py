"""SM hosts of the OpenSM driver: sm_hosts validation, the write order, checksums, the audit rule.

The SSH side is replaced by an in-memory host (:class:`FakeExec` runs the same shell scripts
through /bin/sh on a temp dir, so the scripts themselves are exercised); a host can be made
to lie about its checksum or to fail.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from gpufabric.domain.errors import ApplyError, ConfigError, ValidationError
from gpufabric.domain.severity import Severity
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.audit.sm_files import sm_file_violations
from gpufabric.fabrics.infiniband.drivers.opensm.config import OpenSMConfig
from gpufabric.fabrics.infiniband.drivers.opensm.fleet import SmFleet
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import SmHostConfig, SshSmHost, parse_sm_hosts
from gpufabric.fabrics.infiniband.state import IbFabricState, SmFileSeen

from unit.audit_scenarios import Scenario

LOG: list[tuple[str, str]] = []


class FakeExec:
    """Runs each script with /bin/sh locally (the SM host is this machine's temp dir)."""

    def __init__(self, name: str, *, lie: bool = False, fail_writes: bool = False) -> None:
        self.name, self.lie, self.fail_writes = name, lie, fail_writes

    def run(self, script: str, stdin: bytes = b"") -> tuple[int, str, str]:
        LOG.append((self.name, script.split()[0]))
        if self.fail_writes and ".gpufabric-partitions." in script:
            return 1, "", "sh: cannot create: Permission denied"
        p = subprocess.run(["/bin/sh", "-c", script], input=stdin, capture_output=True, check=False)
        out = p.stdout.decode()
        if self.lie and "sha256sum" in script and out:
            out = "0" * 64 + out[64:]
        return p.returncode, out, p.stderr.decode()

    def close(self) -> None:
        pass


def host(tmp: Path, name: str, **kw: bool) -> SshSmHost:
    d = tmp / name
    d.mkdir(exist_ok=True)
    cfg = SmHostConfig(name, "192.0.2.1", 22, "root", Path("/k"), Path("/kh"), d / "partitions.conf", d / "log",
                       pid_file=d / "pid", port_guid=Guid(0x10 + len(name)))  # fmt: skip
    return SshSmHost(cfg, FakeExec(name, **kw))  # type: ignore[arg-type]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_write_all_writes_standbys_first_then_the_master_and_checks_each_checksum(tmp_path: Path) -> None:
    a, b, c = host(tmp_path, "sm-a"), host(tmp_path, "sm-b"), host(tmp_path, "sm-c")
    fleet = SmFleet([a, b, c])
    LOG.clear()
    fleet.write_all(b, "Default=0x7fff : ALL=limited ;\n")
    assert [n for n, first in LOG if first == "set"] == ["sm-a", "sm-c", "sm-b"]  # the master (b) last
    for h in (a, b, c):
        assert h.partitions_conf.read_text() == "Default=0x7fff : ALL=limited ;\n"
        assert h.checksum(h.partitions_conf) == sha("Default=0x7fff : ALL=limited ;\n")
    assert not list(tmp_path.rglob(".gpufabric-partitions.*"))  # no temp file left behind


def test_checksum_mismatch_is_an_error_naming_the_host(tmp_path: Path) -> None:
    a, b = host(tmp_path, "sm-a"), host(tmp_path, "sm-b", lie=True)
    a.partitions_conf.write_text("old\n")
    b.partitions_conf.write_text("old\n")
    with pytest.raises(ApplyError) as ei:
        SmFleet([a, b]).write_all(a, "new\n")  # b (a standby) is written first and lies
    assert ei.value.message.startswith("SM host sm-b:")
    assert ei.value.fields["sm_host"] == "sm-b"
    assert ei.value.fields["sha256_written"] == sha("new\n")
    assert a.partitions_conf.read_text() == "old\n"  # the master never got the new file


def test_a_host_that_cannot_be_written_fails_the_apply_and_the_others_get_their_file_back(tmp_path: Path) -> None:
    a, b, c = host(tmp_path, "sm-a"), host(tmp_path, "sm-b"), host(tmp_path, "sm-c", fail_writes=True)
    for h in (a, b, c):
        h.partitions_conf.write_text("old\n")
    with pytest.raises(ApplyError) as ei:
        SmFleet([a, b, c]).write_all(c, "new\n", restore="old\n")  # standbys a, b written; the master c fails
    assert "sm-c" in ei.value.message
    assert ei.value.fields["sm_hosts_written"] == ["sm-a", "sm-b"]
    assert ei.value.fields["sm_hosts_restored"] == ["sm-a", "sm-b"]
    assert [h.partitions_conf.read_text() for h in (a, b, c)] == ["old\n"] * 3


def test_master_is_the_host_smInfo_names_else_the_first(tmp_path: Path) -> None:
    a, b = host(tmp_path, "sm-a"), host(tmp_path, "sm-bb")
    fleet = SmFleet([a, b])
    assert fleet.master(b.port_guid) is b
    assert fleet.master(None) is a
    assert fleet.master(Guid(0x999)) is a


def test_files_seen_and_the_audit_rule(tmp_path: Path) -> None:
    a, b = host(tmp_path, "sm-a"), host(tmp_path, "sm-b")
    fleet = SmFleet([a, b])
    fleet.write_all(a, "good\n")
    fleet.write_all(a, "good\n", last_good=True)
    seen = fleet.files_seen(a.port_guid, None)  # expected from the master's last-good copy
    assert sm_file_violations(IbFabricState(sm_files=seen)) == ()
    b.partitions_conf.write_text("stale\n")
    found = sm_file_violations(IbFabricState(sm_files=fleet.files_seen(a.port_guid, "good\n")))
    assert [(v.invariant, v.severity, v.device) for v in found] == [
        ("IB-SM-CONFIG-DIVERGED", Severity.CRITICAL, "sm-b")
    ]
    a.partitions_conf.write_text("master edited\n")  # the master's own file is not this rule's business
    assert len(sm_file_violations(IbFabricState(sm_files=fleet.files_seen(a.port_guid, "good\n")))) == 1
    b.partitions_conf.unlink()
    (missing,) = sm_file_violations(IbFabricState(sm_files=fleet.files_seen(a.port_guid, "good\n")))
    assert missing.severity is Severity.HIGH and "unreadable" in missing.message


def test_audit_rule_unknown_expected_is_high() -> None:
    (v,) = sm_file_violations(IbFabricState(sm_files=(SmFileSeen("sm-b", "standby", "ab" * 32, ""),)))
    assert v.severity is Severity.HIGH


def test_reload_by_pid_file_or_systemctl(tmp_path: Path) -> None:
    h = host(tmp_path, "sm-a")
    seen: list[str] = []
    h.ssh.run = lambda script, stdin=b"": (seen.append(script), (0, "", ""))[1]  # type: ignore[method-assign]
    h.reload()
    cfg = SmHostConfig("s", "h", 22, "u", Path("/k"), Path("/kh"), Path("/p"), Path("/l"), unit="opensm")
    s = SshSmHost(cfg, h.ssh)
    s.reload()
    s.restart()
    assert seen == [
        f'kill -HUP "$(cat {tmp_path / "sm-a" / "pid"})"', "systemctl reload opensm", "systemctl restart opensm",
    ]  # fmt: skip
    h.restart()  # a pid-file host is restarted by its pid file (tests/fabrics/infiniband/unit/test_ib_smrestart.py)
    assert seen[-1].startswith(f"set -e; pf={tmp_path / 'sm-a' / 'pid'}; ") and "systemctl" not in seen[-1]


GOOD = {"host": "sm-01", "user": "root", "key_file": "/k", "known_hosts": "/kh",
        "partitions_conf": "/etc/opensm/partitions.conf", "pid_file": "/run/opensm.pid",
        "log_file": "/var/log/opensm.log"}  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({**GOOD, "known_hosts": ""}, "sm_hosts[0].known_hosts"),
        ({k: v for k, v in GOOD.items() if k != "known_hosts"}, "sm_hosts[0].known_hosts"),
        ({**GOOD, "port": 70000}, "sm_hosts[0].port"),
        ({**GOOD, "partitions_conf": "partitions.conf"}, "sm_hosts[0].partitions_conf"),
        ({**GOOD, "reload": "kill"}, "sm_hosts[0].reload"),
        ({k: v for k, v in GOOD.items() if k != "pid_file"}, "sm_hosts[0].pid_file"),
        ({**GOOD, "insecure": True}, "sm_hosts[0].insecure"),
        ({**GOOD, "port_guid": "zz"}, "sm_hosts[0].port_guid"),
    ],
)
def test_bad_sm_host_is_a_config_error_naming_the_field(entry: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as ei:
        parse_sm_hosts([entry])
    assert ei.value.field == f"infiniband.options.{field}"
    assert "\n" not in ei.value.message


def test_duplicate_names_and_local_options() -> None:
    with pytest.raises(ConfigError):
        parse_sm_hosts([GOOD, GOOD])
    two = parse_sm_hosts([GOOD, {**GOOD, "host": "sm-02", "reload": "systemctl", "pid_file": None}])
    assert [(h.name, h.pid_file, h.unit) for h in two] == [
        ("sm-01:22", Path("/run/opensm.pid"), None), ("sm-02:22", None, "opensm"),
    ]  # fmt: skip
    cfg = OpenSMConfig.from_options({"sm_hosts": [GOOD], "trusted_sm_guids": ["0x1"]})
    assert cfg.partitions_conf is None and cfg.sm_hosts[0].host == "sm-01"
    with pytest.raises(ConfigError):
        OpenSMConfig.from_options({"trusted_sm_guids": ["0x1"]})  # neither local files nor sm_hosts


def known_hosts(tmp: Path, host: str) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "hk")], check=True)
    kh = tmp / "known_hosts"
    kh.write_text(f"{host} " + " ".join((tmp / "hk.pub").read_text().split()[:2]) + "\n")
    return kh


def test_an_sm_host_missing_from_known_hosts_is_refused_when_the_driver_is_built(tmp_path: Path) -> None:
    from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMDriver

    kh = known_hosts(tmp_path, "sm-01")
    entries = [{**GOOD, "known_hosts": str(kh)}, {**GOOD, "host": "sm-02", "known_hosts": str(kh)}]
    with pytest.raises(ConfigError) as ei:
        OpenSMDriver(OpenSMConfig.from_options({"sm_hosts": entries, "trusted_sm_guids": ["0x1"]}))
    assert ei.value.field == "infiniband.options.sm_hosts[sm-02:22].known_hosts"
    assert "host key of sm-02" in ei.value.message


def test_no_subnet_up_after_the_reload_is_an_error_naming_the_sm_host(tmp_path: Path) -> None:
    from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMDriver

    entry = {**GOOD, "known_hosts": str(known_hosts(tmp_path, "sm-01"))}
    cfg = OpenSMConfig.from_options({"sm_hosts": [entry], "trusted_sm_guids": ["0x1"], "sweep_timeout": 0.2})
    drv = OpenSMDriver(cfg)
    h = host(tmp_path, "sm-b")
    h.log_file.write_text("osm_ucast_mgr_process: ...\n")
    drv.fleet = SmFleet([h])
    with pytest.raises(ApplyError) as ei:
        drv._wait_subnet_up(h, 0)
    assert ei.value.message.startswith("SM host sm-b: no SUBNET UP in")
    assert ei.value.fields["sm_host"] == "sm-b"
    h.log_file.write_text("osm_ucast_mgr_process: ...\nSUBNET UP\n")
    assert drv._wait_subnet_up(h, 0).subnet_up


def test_the_infiniband_kind_audit_reports_a_diverged_standby() -> None:
    from gpufabric.fabrics.infiniband.kind import InfinibandKind

    observed = IbFabricState(
        sm_files=(
            SmFileSeen("sm-01", "master", "aa" * 32, "aa" * 32),
            SmFileSeen("sm-02", "standby", "bb" * 32, "aa" * 32),
        )
    )
    from gpufabric.domain.fabric import Tenancy

    found = InfinibandKind().audit(Tenancy((), {}, {}), None, observed)
    assert [(v.invariant, v.severity, v.device) for v in found] == [
        ("IB-SM-CONFIG-DIVERGED", Severity.CRITICAL, "sm-02")
    ]


def test_the_service_audit_passes_the_finding_through_with_its_severity() -> None:
    """The kind declares IB-SM-CONFIG-DIVERGED and reports it from the observed SM files: the
    audit run keeps it with its severity."""
    from gpufabric.audit import registry_for, run_audit
    from gpufabric.fabrics.infiniband.kind import InfinibandKind

    kind = InfinibandKind()
    s = Scenario()
    s.sm_files.append(SmFileSeen("sm-02", "standby", "bb" * 32, "aa" * 32))
    [v] = run_audit(s.build(), only=["IB-SM-CONFIG-DIVERGED"], registry=registry_for([kind])).violations
    assert (v.invariant, v.severity, v.device) == ("IB-SM-CONFIG-DIVERGED", Severity.CRITICAL, "sm-02")
