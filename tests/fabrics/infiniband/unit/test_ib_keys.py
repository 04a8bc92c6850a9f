"""SDN04-05 (issue 31): every InfiniBand key the NCP requirement names, audited on the SM's
opensm.conf (configured / unset / not supported by OpenSM 3.3.23), and the fabrics.yaml
settings of the keys OpenSM takes (sm_key, sa_key, cc_key as a 0600 file or an environment
variable; the M_Key's m_key_file): a bad hex value, one out of range, an inline key, a key
OpenSM does not take are each one ConfigError naming the field and the allowed range, the key
never echoed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.severity import Severity
from gpufabric.fabrics.infiniband.audit.hardening import (
    OPENSM_DEFAULTS,
    SETTINGS_UNREADABLE,
    HardeningPolicy,
    check_keys,
    parse_opensm_conf,
    render_opensm_conf_overrides,
)
from gpufabric.fabrics.infiniband.audit.keys import KEY_DIFFERS, differing, key_states
from gpufabric.fabrics.infiniband.drivers.opensm.config import OpenSMConfig
from gpufabric.transport.secrets import Secret

DEFAULT = parse_opensm_conf((Path(__file__).resolve().parents[3] / "fixtures" / "opensm" / "opensm.conf.default").read_text())
POLICY = HardeningPolicy(sm_key=0x5EC2E7C0FFEE0001, sa_key=0x5A5A5A5A00C0FFEE, m_key=0x3C3C3C3CDEADBEEF, cc_key=0xCC01)
HARDENED = parse_opensm_conf(render_opensm_conf_overrides(POLICY))
BASE = {"partitions_conf": "/tmp/p.conf", "log_path": "/tmp/osm.log"}


def states(settings: dict[str, str]) -> dict[str, str]:
    return {k.name: k.status for k in key_states(settings, OPENSM_DEFAULTS)}


def test_opensm_3_3_23_defaults_leave_every_key_unset_and_four_unsupported() -> None:
    """The SM's defaults: every key it takes unset (CC_Key a finding of its own, the others the
    older sm_key/sa_key/m_key findings); the four keys it has no option for are "not supported"
    in the key report, never a finding (nothing could clear it)."""
    assert states(DEFAULT) == {"P_Key": "configured", "M_Key": "unset", "SM_Key": "unset", "SA_Key": "unset",
                               "CC_Key": "unset", "AM_Key": "not supported", "VS_Key": "not supported",
                               "N2N_Key": "not supported", "M2N_Key": "not supported"}  # fmt: skip
    assert not {"am_key", "vs_key", "n2n_key", "m2n_key"} & set(DEFAULT)  # opensm -c: no such options
    [cc] = check_keys(DEFAULT)
    assert (cc.id, cc.severity, cc.setting, cc.observed) == ("IB-HARD-CC-KEY", Severity.LOW, "cc_key", "unset")
    am = next(k for k in key_states(DEFAULT, OPENSM_DEFAULTS) if k.name == "AM_Key")
    assert "OpenSM 3.3.23 has no am_key option" in am.detail and "SHARP's Aggregation Manager" in am.detail


def test_a_hardened_sm_has_each_key_it_takes_configured() -> None:
    assert HARDENED["cc_key"] == "0x000000000000cc01"
    assert {k: v for k, v in states(HARDENED).items() if v != "not supported"} == dict.fromkeys(
        ["P_Key", "M_Key", "SM_Key", "SA_Key", "CC_Key"], "configured")  # fmt: skip
    assert check_keys(HARDENED) == []
    assert states({**HARDENED, "part_enforce": "in"})["P_Key"] == "unset"
    assert check_keys({SETTINGS_UNREADABLE: "no file"}) == []


def test_a_key_other_than_fabrics_yamls_is_high_without_either_value() -> None:
    given = {"cc_key": Secret("0x000000000000beef"), "sm_key": Secret(f"0x{POLICY.sm_key:016x}")}
    assert differing(given, HARDENED) == ("cc_key",)
    found = check_keys({**HARDENED, KEY_DIFFERS: "cc_key"})
    [cc] = [f for f in found if f.setting == "cc_key"]
    assert (cc.id, cc.severity, cc.observed) == ("IB-HARD-CC-KEY-DIFFERS", Severity.HIGH, "differs")
    assert "beef" not in cc.description and "cc01" not in cc.description
    assert differing({"cc_key": Secret("0x1")}, DEFAULT) == ("cc_key",)  # the SM has none


def key_file(tmp_path: Path, text: str, mode: int = 0o600) -> str:
    p = tmp_path / "key"
    p.write_text(text)
    p.chmod(mode)
    return str(p)


def test_keys_come_from_a_0600_file_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GF_SA", "0x5A5A5A5A00C0FFEE")
    c = OpenSMConfig.from_options({**BASE, "cc_key_file": key_file(tmp_path, "0xCC01\n"), "sa_key_env": "GF_SA"})
    keys = dict(c.keys)
    assert {n: s.reveal() for n, s in keys.items()} == {"cc_key": "0x000000000000cc01", "sa_key": "0x5a5a5a5a00c0ffee"}
    assert "cc01" not in repr(c) and "c0ffee" not in repr(c)  # a Secret never shows itself


@pytest.mark.parametrize(
    ("options", "field", "allowed"),
    [
        ({"cc_key_file": "0xZZ"}, "infiniband.options.cc_key", "0x followed by up to 16 hex digits, 0x1-0xffffffffffffffff"),
        ({"cc_key_file": "1234"}, "infiniband.options.cc_key", "0x1-0xffffffffffffffff"),
        ({"cc_key_file": "0x0"}, "infiniband.options.cc_key", "0x1-0xffffffffffffffff"),
        ({"cc_key_file": "0x10000000000000000"}, "infiniband.options.cc_key", "0x1-0xffffffffffffffff"),
        ({"sm_key_file": "0x1"}, "infiniband.options.sm_key", "0x2-0xffffffffffffffff"),
        ({"sa_key_file": "0x0"}, "infiniband.options.sa_key", "0x2-0xffffffffffffffff"),
        ({"cc_key": "0x5ec2e7c0ffee0001"}, "infiniband.options.cc_key", "infiniband.options.cc_key_file: (mode 0600)"),
        ({"sm_key": "0x5ec2e7c0ffee0001"}, "infiniband.options.sm_key", "_file: (mode 0600)"),
        ({"m_key": "0x5ec2e7c0ffee0001"}, "infiniband.options.m_key", "m_key_file: (mode 0600)"),
        ({"vs_key_file": "/etc/vs"}, "infiniband.options.vs_key_file", "OpenSM 3.3.23 takes no vs_key"),
        ({"n2n_key_env": "X"}, "infiniband.options.n2n_key_env", "OpenSM 3.3.23 takes no n2n_key"),
        ({"am_key": "0x5"}, "infiniband.options.am_key", "OpenSM 3.3.23 takes no am_key"),
        ({"m2n_key_file": "/etc/m2n"}, "infiniband.options.m2n_key_file", "OpenSM 3.3.23 takes no m2n_key"),
        ({"cc_key_env": "GF_UNSET_VARIABLE"}, "infiniband.options.cc_key_env", "set, non-empty environment variable"),
    ],
)
def test_bad_key_settings_are_one_error_naming_the_field_and_range(
    tmp_path: Path, options: dict[str, str], field: str, allowed: str
) -> None:
    opts = {k: key_file(tmp_path, v) if k.endswith("_file") and k[:2] in ("cc", "sm", "sa") else v for k, v in options.items()}
    with pytest.raises(ConfigError) as e:
        OpenSMConfig.from_options({**BASE, **opts})
    assert e.value.field == field and allowed in str(e.value.allowed), (e.value.field, e.value.allowed)
    said = str(e.value)
    assert "\n" not in said and "c0ffee" not in said and "0xzz" not in said.lower()  # one line; the key never echoed


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        OpenSMConfig.from_options({**BASE, "cc_key_file": key_file(tmp_path, "0xcc01", 0o644)})
    assert e.value.field == "infiniband.options.cc_key_file" and "0600" in str(e.value.allowed)
    with pytest.raises(ConfigError) as e:
        OpenSMConfig.from_options({**BASE, "cc_key_file": key_file(tmp_path, "0xcc01"), "cc_key_env": "HOME"})
    assert e.value.field == "infiniband.options.cc_key" and "more than once" in str(e.value.value)


def test_the_key_report_of_an_sm_whose_settings_cannot_be_read_is_unverified() -> None:
    from gpufabric.fabrics.infiniband.views import _states

    got = _states({SETTINGS_UNREADABLE: "UFM's documented REST API does not expose its SM's settings"})
    assert [(s.name, s.status) for s in got][:3] == [("P_Key", "unverified"), ("M_Key", "unverified"), ("SM_Key", "unverified")]
    assert len(got) == 9 and all("REST API" in s.detail for s in got)
