"""M_Key on every SMP tool command line (argv recorded by a stand-in tool), the M_Key file
checks, and ``trusted_sm_guids`` required with an ``infiniband`` section (pure / no fabric)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpufabric.domain.errors import ConfigError, FabricError
from gpufabric.domain.secrets import Secret
from gpufabric.fabrics.infiniband.diag import Diag
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.opensm import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.smchecks import load_m_key
from gpufabric.fabrics.infiniband.smpread import BatchSmpReader

KEY = "0x00000000c0ffee42"


def key_file(tmp_path: Path, text: str = KEY + "\n", mode: int = 0o600) -> Path:
    p = tmp_path / "m_key"
    p.write_text(text)
    p.chmod(mode)
    return p


def recorder(tmp_path: Path) -> tuple[tuple[str, ...], Path]:
    """A prefix that records its argv and fails (the commands need no fabric)."""
    log = tmp_path / "argv.log"
    script = tmp_path / "record.sh"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexit 3\n')
    script.chmod(0o755)
    return (str(script),), log


def test_every_smp_tool_gets_the_m_key(tmp_path: Path) -> None:
    prefix, log = recorder(tmp_path)
    diag = Diag(prefix=prefix, m_key=Secret(KEY))
    calls = [
        diag.discover,
        lambda: diag.pkeys(3, 1),
        lambda: diag.portinfo(3, 1),
        lambda: diag.nodeinfo(3),
        lambda: diag.sminfo(1),
        lambda: diag.switchinfo(2),
        lambda: diag.port_disable(2, 4),
        lambda: diag.port_enable(2, 4),
    ]
    for call in calls:
        with pytest.raises(FabricError) as ei:
            call()
        assert KEY not in ei.value.message and "***" in ei.value.message  # the key is never in an error
    lines = log.read_text().splitlines()
    assert [line.split()[0] for line in lines] == [
        "ibnetdiscover", "smpquery", "smpquery", "smpquery", "sminfo", "smpquery", "ibportstate", "ibportstate",
    ]  # fmt: skip
    assert all(f"-y {KEY}" in line for line in lines), lines
    assert lines[-2].endswith(f"ibportstate -y {KEY} 2 4 disable")


def test_no_m_key_no_flag(tmp_path: Path) -> None:
    prefix, log = recorder(tmp_path)
    with pytest.raises(FabricError):
        Diag(prefix=prefix).port_disable(2, 4)
    assert log.read_text().split() == ["ibportstate", "2", "4", "disable"]


def test_batch_reader_gets_the_m_key(tmp_path: Path) -> None:
    argv = tmp_path / "argv"
    fake = tmp_path / "fake.py"
    fake.write_text(
        f"import sys, json\nopen({str(argv)!r}, 'w').write(' '.join(sys.argv[1:]))\nprint(json.dumps({{'fatal': 'x'}}))\n"
    )
    r = BatchSmpReader(cwd=tmp_path, command=(sys.executable, str(fake)), m_key=Secret(KEY))
    with pytest.raises(FabricError):
        r._ensure()
    assert f"-y {KEY}" in argv.read_text()


def test_driver_loads_the_m_key_file_into_its_diag_and_reader(tmp_path: Path) -> None:
    opts = {
        "partitions_conf": str(tmp_path / "p.conf"),
        "log_path": str(tmp_path / "l"),
        "m_key_file": str(key_file(tmp_path)),
    }
    drv = OpenSMDriver(OpenSMConfig.from_options(opts))
    assert drv.diag.key_args() == ["-y", KEY]
    assert getattr(drv.reader, "m_key", None) == drv.diag.m_key
    assert KEY not in repr(drv.diag.m_key)


@pytest.mark.parametrize(
    ("text", "mode", "why"),
    [
        (KEY, 0o644, "mode 0600"),
        ("", 0o600, "non-empty"),
        ("not-a-key", 0o600, "64-bit M_Key"),
        ("0x0", 0o600, "64-bit M_Key"),
        ("0x1ffffffffffffffff", 0o600, "64-bit M_Key"),
    ],
)
def test_bad_m_key_file_is_a_one_line_config_error(tmp_path: Path, text: str, mode: int, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as ei:
        load_m_key(key_file(tmp_path, text, mode))
    assert ei.value.field == "m_key_file"
    assert "\n" not in str(ei.value) and (text not in str(ei.value) or text == "")


def test_unreadable_m_key_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        load_m_key(tmp_path / "missing")
    assert ei.value.field == "m_key_file"
    if os.geteuid() != 0:  # root reads a 0000 file: only the missing case is portable
        p = key_file(tmp_path, mode=0o000)
        with pytest.raises(ConfigError):
            load_m_key(p)


def test_bad_ipoib_option_refused_at_build() -> None:
    section = {"driver": "opensm", "options": {"partitions_conf": "/tmp/x", "log_path": "/tmp/y", "ipoib": {"mtu": 9}}}
    with pytest.raises(ConfigError) as ei:
        InfinibandKind().build(section, lambda n: OpenSMDriver, {"trusted_sm_guids": ("0x0002c90310000001",)})
    assert ei.value.field == "infiniband.options.ipoib.mtu"
