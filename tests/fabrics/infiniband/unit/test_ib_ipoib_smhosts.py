"""IPoIB groups read back from an SM host over SSH: the script sent, the parse, the finding.

The SSH side is an in-memory host that records each script and runs it with /bin/sh on a temp
dir holding a recorded ``opensm-sa.dump`` (OpenSM 3.3.23 + ibsim, groups of 0x0a01 and 0x0a02).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpufabric.domain.errors import ConfigError, VerifyError
from gpufabric.fabrics.infiniband.drivers.opensm.checks import wait_for_groups
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import SmHostConfig, SshSmHost, parse_sm_hosts, read_script

FIX = Path(__file__).parents[3] / "fixtures" / "infiniband-diags" / "opensm-sa.dump.txt"


class RecordingExec:
    def __init__(self) -> None:
        self.scripts: list[str] = []

    def run(self, script: str, stdin: bytes = b"") -> tuple[int, str, str]:
        self.scripts.append(script)
        p = subprocess.run(["/bin/sh", "-c", script], input=stdin, capture_output=True, check=False)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def close(self) -> None:
        pass


def sm_host(tmp: Path) -> tuple[SshSmHost, RecordingExec, Path]:
    dump = tmp / "osm tmp" / "opensm-sa.dump"  # a space: the path must be quoted
    dump.parent.mkdir()
    dump.write_text(FIX.read_text())
    cfg = SmHostConfig("sm-02", "192.0.2.1", 22, "root", Path("/k"), Path("/kh"), tmp / "partitions.conf",
                       tmp / "log", pid_file=tmp / "pid", sa_dump=dump)  # fmt: skip
    ex = RecordingExec()
    return SshSmHost(cfg, ex), ex, dump  # type: ignore[arg-type]


def test_read_script_quotes_the_path_and_exits_3_when_absent() -> None:
    assert read_script(Path("/var/osm tmp/opensm-sa.dump")) == (
        "if [ -e '/var/osm tmp/opensm-sa.dump' ]; then cat '/var/osm tmp/opensm-sa.dump'; else exit 3; fi"
    )


def test_groups_read_over_ssh_from_the_host_pass_when_every_pkey_has_its_group(tmp_path: Path) -> None:
    h, ex, dump = sm_host(tmp_path)
    assert h.sa_dump == dump
    wait_for_groups(dump, [0x0A01, 0x0A02], 0.0, read=h.read, host=h.name)
    assert ex.scripts == [read_script(dump)]  # one exec: the dump read on the host


def test_a_missing_group_is_a_verify_error_naming_the_host_and_the_pkey(tmp_path: Path) -> None:
    h, _, dump = sm_host(tmp_path)
    with pytest.raises(VerifyError) as ei:
        wait_for_groups(dump, [0x0A01, 0x0A02, 0x0A03], 0.0, read=h.read, host=h.name)
    msg = ei.value.message
    assert msg.startswith("SM host sm-02: OpenSM's SA database (")
    assert "ff12:401b:8a03::ffff:ffff (PKey 0x8a03)" in msg and "8a01" not in msg
    assert ei.value.fields["sm_host"] == "sm-02" and ei.value.fields["missing_pkeys"] == ["0x8a03"]
    # a dump the host does not have: every group missing, still named by the host
    with pytest.raises(VerifyError) as ei:
        wait_for_groups(tmp_path / "none", [0x0A01], 0.0, read=h.read, host=h.name)
    assert ei.value.fields["missing_pkeys"] == ["0x8a01"] and ei.value.fields["device"] == "sm-02"


def test_sm_hosts_sa_dump_is_parsed_and_must_be_absolute() -> None:
    good = {"host": "sm-01", "user": "root", "key_file": "/k", "known_hosts": "/kh", "partitions_conf": "/p",
            "log_file": "/l", "pid_file": "/pid"}  # fmt: skip
    assert parse_sm_hosts([good])[0].sa_dump is None
    assert parse_sm_hosts([{**good, "sa_dump": "/var/osm/opensm-sa.dump"}])[0].sa_dump == Path("/var/osm/opensm-sa.dump")
    with pytest.raises(ConfigError) as ei:
        parse_sm_hosts([{**good, "sa_dump": "opensm-sa.dump"}])
    assert ei.value.field == "infiniband.options.sm_hosts[0].sa_dump"
