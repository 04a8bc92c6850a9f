"""Unit tests of the pure OpenSM hardening functions over real ``opensm -c`` dumps (3.3.23)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.infiniband.audit.hardening import (
    OPENSM_DEFAULTS,
    HardeningPolicy,
    Severity,
    check_hardening,
    parse_opensm_conf,
    render_opensm_conf_overrides,
)

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "opensm"
DEFAULT = parse_opensm_conf((FIX / "opensm.conf.default").read_text())
HARDENED = parse_opensm_conf((FIX / "opensm.conf.hardened").read_text())
HARDENED_FULL = parse_opensm_conf((FIX / "opensm.conf.hardened-full").read_text())
POLICY = HardeningPolicy(sm_key=0x5EC2E7C0FFEE0001, sa_key=0x5A5A5A5A00C0FFEE, m_key=0x3C3C3C3CDEADBEEF)


def ids(findings: list) -> list[str]:  # type: ignore[type-arg]
    return [f.id for f in findings]


# ------------------------------------------------------------------ parse
def test_parse_real_default_dump() -> None:
    assert len(DEFAULT) > 150
    assert DEFAULT["sm_key"] == "0x0000000000000001"
    assert DEFAULT["sa_key"] == "0x0000000000000001"
    assert DEFAULT["m_key"] == "0x0000000000000000"
    assert DEFAULT["part_enforce"] == "both"
    assert DEFAULT["allow_both_pkeys"] == "FALSE"
    assert DEFAULT["sm_priority"] == "0"
    assert DEFAULT["qos_vlarb_high"] == "(null)"
    assert DEFAULT["cc_ca_cong_setting_ccti_timer"] == "0 0"  # multi-word value kept whole
    assert not any(k.startswith("#") for k in DEFAULT)


def test_our_defaults_table_matches_the_real_dump() -> None:
    for key, value in OPENSM_DEFAULTS.items():
        assert DEFAULT[key] == value, key


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("# only a comment\n\n", {}),
        ("sm_key 0x2\n", {"sm_key": "0x2"}),
        ("  sm_key\t0x2  \n", {"sm_key": "0x2"}),
        ("sm_key 0x2\nsm_key 0x3\n", {"sm_key": "0x3"}),
        ("lonely_key\n", {"lonely_key": ""}),
        ("a b c\n", {"a": "b c"}),
    ],
    ids=["empty", "comments", "simple", "whitespace", "last-wins", "no-value", "multiword"],
)
def test_parse_forms(text: str, expected: dict[str, str]) -> None:
    assert parse_opensm_conf(text) == expected


# ------------------------------------------------------------------ render
def test_render_round_trips_to_recorded_fixture() -> None:
    assert render_opensm_conf_overrides(POLICY) == (FIX / "opensm.conf.hardened").read_text()


def test_opensm_rewrote_our_overrides_unchanged() -> None:
    """opensm -F hardened -c full: OpenSM itself wrote back every rendered value."""
    for key, value in HARDENED.items():
        assert HARDENED_FULL[key] == value, key


def test_generate_makes_distinct_valid_keys() -> None:
    seq = iter([0, 1, 7, 7, 9, 11, 9, 13])
    p = HardeningPolicy.generate(lambda _bits: next(seq))
    assert (p.sm_key, p.sa_key, p.m_key, p.cc_key) == (7, 9, 11, 13)
    real = HardeningPolicy.generate()
    assert check_hardening(parse_opensm_conf(render_opensm_conf_overrides(real))) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sm_key": 1},
        {"sa_key": 0},
        {"m_key": 0},
        {"m_key": 1 << 64},
        {"sa_key": 0x5EC2E7C0FFEE0001},
        {"sm_priority": 16},
        {"m_key_protection_level": 1},
        {"m_key_lease_period": 0},
        {"m_key_lease_period": 70000},
    ],
    ids=["sm-key-1", "sa-key-0", "m-key-0", "m-key-65bit", "reuse", "prio-16", "protect-1", "lease-0", "lease-big"],
)
def test_policy_rejects_weak_values(kwargs: dict[str, int]) -> None:
    base = {"sm_key": POLICY.sm_key, "sa_key": POLICY.sa_key, "m_key": POLICY.m_key}
    with pytest.raises(ValidationError):
        HardeningPolicy(**{**base, **kwargs})


# ------------------------------------------------------------------ check
ALL_DEFAULT_FINDINGS = [
    "IB-HARD-SM-PRIORITY",
    "IB-HARD-SM-KEY",
    "IB-HARD-SA-KEY",
    "IB-HARD-M-KEY",
    "IB-HARD-M-KEY-PROTECT",
    "IB-HARD-M-KEY-LEASE",
]


def test_default_config_reports_each_weak_setting_by_name() -> None:
    found = check_hardening(DEFAULT)
    assert ids(found) == ALL_DEFAULT_FINDINGS
    by_id = {f.id: f for f in found}
    assert by_id["IB-HARD-SM-KEY"].setting == "sm_key"
    assert by_id["IB-HARD-SM-KEY"].observed == "0x0000000000000001"
    assert by_id["IB-HARD-SA-KEY"].setting == "sa_key"
    assert by_id["IB-HARD-M-KEY"].observed == "0x0000000000000000"
    assert by_id["IB-HARD-SM-PRIORITY"].expected == "15"
    assert by_id["IB-HARD-M-KEY-LEASE"].severity is Severity.LOW
    assert all(f.description and "\n" not in f.description for f in found)


def test_empty_settings_take_opensm_defaults() -> None:
    assert ids(check_hardening({})) == ALL_DEFAULT_FINDINGS


@pytest.mark.parametrize("settings", [HARDENED, HARDENED_FULL], ids=["overrides", "opensm-rewritten-full"])
def test_hardened_config_has_no_findings(settings: dict[str, str]) -> None:
    assert check_hardening(settings) == []


WEAK = [
    ("sm_priority", "14", "IB-HARD-SM-PRIORITY"),
    ("sm_priority", "0", "IB-HARD-SM-PRIORITY"),
    ("sm_key", "0x0000000000000001", "IB-HARD-SM-KEY"),
    ("sm_key", "0x0", "IB-HARD-SM-KEY"),
    ("sm_key", "not-hex", "IB-HARD-SM-KEY"),
    ("sa_key", "0x0000000000000001", "IB-HARD-SA-KEY"),
    ("sa_key", "0", "IB-HARD-SA-KEY"),
    ("m_key", "0x0000000000000000", "IB-HARD-M-KEY"),
    ("m_key", "0x10000000000000000", "IB-HARD-M-KEY"),
    ("sa_key", "0x5ec2e7c0ffee0001", "IB-HARD-KEY-REUSE"),
    ("m_key_protection_level", "0", "IB-HARD-M-KEY-PROTECT"),
    ("m_key_protection_level", "1", "IB-HARD-M-KEY-PROTECT"),
    ("m_key_lease_period", "0", "IB-HARD-M-KEY-LEASE"),
    ("m_key_lease_period", "65536", "IB-HARD-M-KEY-LEASE"),
    ("part_enforce", "off", "IB-HARD-PART-ENFORCE"),
    ("part_enforce", "in", "IB-HARD-PART-ENFORCE"),
    ("part_enforce", "out", "IB-HARD-PART-ENFORCE"),
    ("no_partition_enforcement", "TRUE", "IB-HARD-NO-PART-ENFORCEMENT"),
    ("allow_both_pkeys", "TRUE", "IB-HARD-ALLOW-BOTH-PKEYS"),
    ("sm_inactive", "TRUE", "IB-HARD-SM-INACTIVE"),
    ("console", "socket", "IB-HARD-CONSOLE"),
    ("console", "loopback", "IB-HARD-CONSOLE"),
]


@pytest.mark.parametrize(("setting", "value", "finding"), WEAK, ids=[f"{s}={v}" for s, v, _ in WEAK])
def test_each_weak_value_gives_exactly_its_finding(setting: str, value: str, finding: str) -> None:
    found = check_hardening({**HARDENED_FULL, setting: value})
    assert ids(found) == [finding]
    assert found[0].setting == setting
    if finding != "IB-HARD-KEY-REUSE":
        assert found[0].observed == value
    else:
        assert found[0].observed == "sm_key == sa_key"  # names, never the secret


@pytest.mark.parametrize(
    ("setting", "value"),
    [("sm_priority", "15"), ("m_key_protection_level", "3"), ("console", "local"), ("part_enforce", "BOTH")],
    ids=["prio-15", "protect-3", "console-local", "enforce-uppercase"],
)
def test_acceptable_alternatives_give_no_finding(setting: str, value: str) -> None:
    assert check_hardening({**HARDENED_FULL, setting: value}) == []
