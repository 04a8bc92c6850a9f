"""SDN04-05 (issue 31): a bad key setting in fabrics.yaml stops the installed ``gpufabric`` with
one line naming the field and the allowed range (exit 2), the key never echoed, nothing written
(no store created)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from support.live_api import gf

KEY = "0x5ec2e7c0ffee0001"


@pytest.mark.parametrize(
    ("option", "value", "line"),
    [
        ("cc_key", KEY, "invalid infiniband.options.cc_key: '*** (inline)' (inline secrets are refused); allowed: "
                        "infiniband.options.cc_key_file: (mode 0600) or infiniband.options.cc_key_env:"),
        ("cc_key_file", "0xZZ", "invalid infiniband.options.cc_key: '***' (from file {file}); allowed: "
                                "0x followed by up to 16 hex digits, 0x1-0xffffffffffffffff"),
        ("sm_key_file", "0x1", "invalid infiniband.options.sm_key: '***' (from file {file}); allowed: "
                               "0x followed by up to 16 hex digits, 0x2-0xffffffffffffffff"),
        ("n2n_key_file", KEY, "invalid infiniband.options.n2n_key_file: '***'; allowed: one of sm_key_file/_env, "
                              "sa_key_file/_env, cc_key_file/_env and m_key_file (OpenSM 3.3.23 takes no n2n_key)"),
    ],
)
def test_a_bad_key_setting_is_one_line_and_nothing_is_written(tmp_path: Path, option: str, value: str, line: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    key = tmp_path / "key"
    key.write_text(value + "\n")
    key.chmod(0o600)
    options = {"partitions_conf": str(tmp_path / "p.conf"), "log_path": str(tmp_path / "osm.log"),
               option: str(key) if option.endswith("_file") else value}  # fmt: skip
    (home / "fabrics.yaml").write_text(yaml.safe_dump({"trusted_sm_guids": ["0x0002c90310000001"],
                                                      "infiniband": {"driver": "opensm", "options": options}}))  # fmt: skip
    r = gf(home, "audit")
    assert r.returncode == 2 and r.stderr.splitlines() == [f"error: {line.format(file=key)}"], r.stderr
    assert KEY not in r.stderr + r.stdout
    assert sorted(p.name for p in home.iterdir()) == ["fabrics.yaml"]  # no store, nothing written
