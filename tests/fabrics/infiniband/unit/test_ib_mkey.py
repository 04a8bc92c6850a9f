"""The M_Key of every SMP tool over its stdin, never on its command line (argv and stdin
recorded by a stand-in tool, or subprocess intercepted), the M_Key file
checks, and ``trusted_sm_guids`` required with an ``infiniband`` section (pure / no fabric)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError, FabricError
from gpufabric.fabrics.infiniband.drivers.opensm import diag as diag_mod
from gpufabric.fabrics.infiniband.drivers.opensm import smpbatch
from gpufabric.fabrics.infiniband.drivers.opensm.checks import load_m_key
from gpufabric.fabrics.infiniband.drivers.opensm.diag import Diag
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import BatchSmpReader
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.transport.secrets import Secret

KEY = "0x00000000c0ffee42"
SRC = Path(__file__).resolve().parents[4] / "src" / "gpufabric"


def key_file(tmp_path: Path, text: str = KEY + "\n", mode: int = 0o600) -> Path:
    p = tmp_path / "m_key"
    p.write_text(text)
    p.chmod(mode)
    return p


def recorder(tmp_path: Path) -> tuple[tuple[str, ...], Path, Path]:
    """A prefix that records its argv and its stdin, and fails (the commands need no fabric)."""
    log, stdin = tmp_path / "argv.log", tmp_path / "stdin.log"
    script = tmp_path / "record.sh"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\ncat >> {stdin}\nexit 3\n')
    script.chmod(0o755)
    return (str(script),), log, stdin


def diag_calls(diag: Diag) -> list[Callable[[], object]]:
    return [
        diag.discover,
        lambda: diag.pkeys(3, 1),
        lambda: diag.portinfo(3, 1),
        lambda: diag.nodeinfo(3),
        lambda: diag.sminfo(1),
        lambda: diag.sminfo(),
        lambda: diag.switchinfo(2),
        lambda: diag.port_disable(2, 4),
        lambda: diag.port_enable(2, 4),
    ]


def test_every_smp_tool_reads_the_m_key_from_stdin_not_argv(tmp_path: Path) -> None:
    prefix, log, stdin = recorder(tmp_path)
    diag = Diag(prefix=prefix, m_key=Secret(KEY))
    for call in diag_calls(diag):
        with pytest.raises(FabricError) as ei:
            call()
        assert KEY not in ei.value.message
    lines = log.read_text().splitlines()
    assert [line.split()[0] for line in lines] == [
        "ibnetdiscover", "smpquery", "smpquery", "smpquery", "sminfo", "sminfo", "smpquery", "ibportstate", "ibportstate",
    ]  # fmt: skip
    assert all(line.split()[1:3] == ["-z", "/dev/stdin"] for line in lines), lines
    assert not any(KEY in line or KEY[2:] in line or "-y" in line.split() for line in lines), lines
    assert lines[-2] == "ibportstate -z /dev/stdin 2 4 disable"
    # each tool read its config, the key, on its stdin pipe (a prefix: no local ibdiag.conf sent)
    assert stdin.read_text() == f"m_key={KEY}\n" * len(lines)


def test_no_m_key_no_config(tmp_path: Path) -> None:
    prefix, log, stdin = recorder(tmp_path)
    with pytest.raises(FabricError):
        Diag(prefix=prefix).port_disable(2, 4)
    assert log.read_text().split() == ["ibportstate", "2", "4", "disable"]
    assert stdin.read_text() == ""


def test_the_local_ibdiag_conf_goes_ahead_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "ibdiag.conf"
    conf.write_text("CA=mlx5_1\nPort=1\nm_key=0x1234\n")
    monkeypatch.setattr(diag_mod, "IBDIAG_CONF", str(conf))
    assert Diag(m_key=Secret(KEY)).key_config() == f"CA=mlx5_1\nPort=1\nm_key={KEY}\n"
    assert Diag(prefix=("ssh", "sm-01"), m_key=Secret(KEY)).key_config() == f"m_key={KEY}\n"  # not this host's
    assert Diag().key_config() is None


def test_no_diag_or_reader_argv_holds_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """subprocess intercepted: every argv the diag tools and the batch reader are started
    with, and what reaches their stdin."""
    argvs: list[list[str]] = []
    stdins: list[str] = []

    def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        argvs.append(list(argv))
        stdins.append(kw.get("input") or "")
        return subprocess.CompletedProcess(argv, 3, "", "refused")

    class Popen:
        def __init__(self, argv: list[str], **kw: Any) -> None:
            argvs.append(list(argv))
            raise OSError("intercepted")

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(subprocess, "Popen", Popen)
    diag = Diag(m_key=Secret(KEY))
    for call in diag_calls(diag):
        with pytest.raises(FabricError):
            call()
    with pytest.raises(FabricError):
        BatchSmpReader(cwd=tmp_path, m_key=Secret(KEY))._ensure()
    assert len(argvs) == len(diag_calls(diag)) + 1
    for argv in argvs:
        assert "-y" not in argv and "--m_key" not in argv, argv
        assert not any(KEY[2:] in a.lower() or str(int(KEY, 0)) in a for a in argv), argv
    assert all(s.endswith(f"m_key={KEY}\n") for s in stdins)
    assert argvs[-1][-1] == "--m-key-stdin"


def test_batch_reader_gets_the_m_key_on_its_stdin(tmp_path: Path) -> None:
    got = tmp_path / "got"
    fake = tmp_path / "fake.py"
    fake.write_text(
        "import sys, json\n"
        f"open({str(got)!r}, 'w').write(json.dumps([sys.argv[1:], sys.stdin.readline()]))\n"
        "print(json.dumps({'fatal': 'x'}))\n"
    )
    r = BatchSmpReader(cwd=tmp_path, command=(sys.executable, str(fake)), m_key=Secret(KEY))
    with pytest.raises(FabricError):
        r._ensure()
    argv, first_line = json.loads(got.read_text())
    assert argv == ["--idle-exit", "5.0", "--m-key-stdin"]
    assert json.loads(first_line) == {"m_key": KEY}


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"", "no M_Key line"),
        (b'{"m_key": "0xzz"}\n', "not {"),
        (b'{"key": "0x1"}\n', "not {"),
        (b'{"m_key": "0x0"}\n', "non-zero 64-bit"),
        (b'{"m_key": "0x1ffffffffffffffff"}\n', "non-zero 64-bit"),
    ],
)
def test_smpbatch_refuses_a_bad_key_line_without_echoing_it(line: bytes, why: str) -> None:
    r, w = os.pipe()
    os.write(w, line)
    os.close(w)
    try:
        with pytest.raises(ValueError, match=why) as ei:
            smpbatch.read_m_key(r)
    finally:
        os.close(r)
    assert "zz" not in str(ei.value) and "1ffff" not in str(ei.value)


def test_smpbatch_reads_the_key_line_and_nothing_after_it() -> None:
    r, w = os.pipe()
    os.write(w, b'{"m_key": "0xc0ffee42"}\n{"q": []}\n')
    os.close(w)
    try:
        assert smpbatch.read_m_key(r) == 0xC0FFEE42
        assert os.read(r, 100) == b'{"q": []}\n'  # the request stream is left whole
    finally:
        os.close(r)


def test_no_secret_is_revealed_into_a_list_display() -> None:
    """Static: a ``.reveal()`` inside a list/tuple display is a secret going onto an argv
    (``["-y", key.reveal()]``): none in the source."""
    hits = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.List | ast.Tuple):
                for elt in node.elts:
                    for sub in ast.walk(elt):
                        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "reveal":
                            hits.append(f"{path.relative_to(SRC)}:{sub.lineno}")
    assert hits == []


def test_driver_loads_the_m_key_file_into_its_diag_and_reader(tmp_path: Path) -> None:
    opts = {
        "partitions_conf": str(tmp_path / "p.conf"),
        "log_path": str(tmp_path / "l"),
        "m_key_file": str(key_file(tmp_path)),
    }
    drv = OpenSMDriver(OpenSMConfig.from_options(opts))
    assert drv.diag.key_args() == ["-z", "/dev/stdin"]
    assert drv.diag.key_config() is not None and drv.diag.key_config().endswith(f"m_key={KEY}\n")  # type: ignore[union-attr]
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
