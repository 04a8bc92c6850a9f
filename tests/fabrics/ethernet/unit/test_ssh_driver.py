"""SshSwitchDriver logic with a recording fake connection (no network): what is sent,
in which order, and how failures become ApplyError/FabricError."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError, ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ssh.connection import CommandResult
from gpufabric.fabrics.ethernet.drivers.ssh.driver import SshSwitchDriver
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

from support.ssh_double import make_double
from support.ssh_double.iosjson import JSON_SHOW

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "ssh"


def json_answer(dialect: str) -> str:
    """What nxos / eos now read: the `| json` answers (the double's, of the recorded sample)."""
    double = make_double(dialect, (), 999)
    return "".join(double.command(c).out for c in JSON_SHOW[dialect])


class FakeConnection:
    """Stands in for SshConnection: records scripts, answers from a queue."""

    def __init__(self, answers: list[CommandResult]) -> None:
        self.answers = answers
        self.sent: list[tuple[str, str]] = []
        self.connects = 0

    def _answer(self, kind: str, text: str) -> CommandResult:
        self.sent.append((kind, text))
        self.connects = 1
        return replace(self.answers.pop(0), command=text)

    def run_exec(self, script: str) -> CommandResult:
        return self._answer("exec", script)

    def run_shell(self, lines: list[str]) -> CommandResult:
        return self._answer("shell", "\n".join(lines))

    def close(self) -> None:
        pass


def ok(out: str = "") -> CommandResult:
    return CommandResult("", out, "", 0)


def driver(dialect: str, answers: list[CommandResult], **kw: object) -> tuple[SshSwitchDriver, FakeConnection]:
    args: dict[str, object] = {"quarantine_vlan": 999, "insecure": True, **kw}
    d = SshSwitchDriver(
        host="192.0.2.1",
        username="admin",
        key_filename="/nonexistent",
        dialect=dialect,
        switch="leaf1",
        **args,  # type: ignore[arg-type]
    )
    fake = FakeConnection(answers)
    d.connection = fake  # type: ignore[assignment]
    return d, fake


def access(port: str, vlan: int, switch: str = "leaf1") -> EthernetPortConfig:
    return EthernetPortConfig(switch, port, PortMode.ACCESS, VlanId(vlan))


def test_shell_dialect_sends_the_whole_batch_in_one_shell_session() -> None:
    """EOS stages the batch in a configuration session and commits it in a second one."""
    running = json_answer("eos")
    d, fake = driver("eos", [ok(running), ok(), ok("Copy completed successfully.")])
    d.apply([access("Ethernet1", 10), access("Ethernet2", 11)])
    assert len(fake.sent) == 3  # a cold driver reads the interface list once, then the batch, then the commit
    kind, text = fake.sent[1]
    assert kind == "shell"
    session = text.splitlines()[0].removeprefix("configure session ")
    assert session.startswith("gpf_") and len(session) == 16
    assert "interface Ethernet2\nswitchport mode access\nswitchport access vlan 11" in text
    assert text.splitlines()[-1] == "end"
    assert fake.sent[2] == ("shell", f"configure session {session} commit\nwrite memory")


def test_eos_batch_with_a_refused_line_is_aborted_not_committed() -> None:
    running = json_answer("eos")
    d, fake = driver("eos", [ok(running), ok("% Invalid input"), ok()])
    with pytest.raises(ApplyError, match="batch was aborted: nothing left applied"):
        d.apply([access("Ethernet1", 10)])
    session = fake.sent[1][1].splitlines()[0].removeprefix("configure session ")
    assert fake.sent[2] == ("shell", f"configure session {session} abort")


def test_needs_current_dialect_reads_then_writes_with_header() -> None:
    running = (FIX / "sonic" / "running-config.json").read_text()
    d, fake = driver("sonic", [ok(running), ok()])
    d.apply([access("Ethernet4", 100)])
    assert [k for k, _ in fake.sent] == ["exec", "exec"]
    assert fake.sent[0][1] == "set -ex\nshow runningconfiguration all"
    script = fake.sent[1][1].splitlines()
    assert script[0] == "set -ex"
    assert "sudo config vlan member del 200 Ethernet4" in script
    assert "sudo config vlan member add -u 100 Ethernet4" not in script  # already a member


def test_exec_failure_names_the_traced_command() -> None:
    err = CommandResult(
        "",
        "",
        "+ sudo config vlan member add 401 Ethernet12\nError: Vlan401 doesn't exist\n",
        1,
    )
    running = (FIX / "sonic" / "running-config.json").read_text()
    d, _ = driver("sonic", [ok(running), err])
    with pytest.raises(ApplyError) as e:
        d.apply([EthernetPortConfig("leaf1", "Ethernet12", PortMode.TRUNK, None, (VlanId(401),))])
    assert e.value.fields["command"] == "sudo config vlan member add 401 Ethernet12"
    assert e.value.device == "leaf1"
    assert e.value.fabric == "ethernet"
    assert "Vlan401 doesn't exist" in e.value.message
    assert e.value.fields["ports"] == ["Ethernet12"]


def test_shell_failure_is_found_by_error_pattern_even_with_exit_status_zero() -> None:
    bad = CommandResult("", "% Invalid command at '^' marker.\n", "", 0)
    d, _ = driver("nxos", [bad, bad])  # the `| json` read, then the text read it falls back to
    with pytest.raises(ApplyError) as e:
        d.apply([access("Ethernet1/1", 10)])
    assert "% Invalid command" in e.value.message
    assert e.value.fields["command"] == "% Invalid command at '^' marker."


def test_observe_failure_is_a_fabric_error_not_an_apply_error() -> None:
    d, _ = driver("nvue", [CommandResult("", "", "+ nv config show -o json\nError: permission denied\n", 1)])
    with pytest.raises(FabricError) as e:
        d.observe()
    assert not isinstance(e.value, ApplyError)
    assert e.value.fields["command"] == "nv config show -o json"
    assert "permission denied" in e.value.message


def test_port_map_renames_both_ways_and_limits_observe() -> None:
    running = json_answer("eos")
    d, fake = driver(
        "eos", [ok(running), ok(), ok(), ok(running)], port_map={"gpu01": "Ethernet1", "gpu02": "Ethernet2"}
    )
    d.apply([access("gpu02", 20)])
    assert "interface Ethernet2" in fake.sent[1][1]
    assert "gpu02" not in fake.sent[1][1]
    state = d.observe()
    assert [p.port for p in state.ports] == ["gpu01", "gpu02"]
    assert state.port("gpu01") == access("gpu01", 100)


def test_unknown_port_is_refused_before_any_config_line_is_sent() -> None:
    """IOS-like CLIs run a batch line by line: a bad port in the middle would leave the lines
    before it applied, so the driver checks every port against the switch's interfaces."""
    running = json_answer("nxos")
    d, fake = driver("nxos", [ok(running), ok(running)])
    d.observe()
    with pytest.raises(ApplyError, match="no such port.*nosuch0") as e:
        d.apply([access("Ethernet1/1", 10), access("nosuch0", 10)])
    assert e.value.fields["ports"] == ["nosuch0"]
    reads = "terminal length 0\nshow interface | json\nshow interface switchport | json"
    assert [t for _, t in fake.sent] == [reads] * 2  # re-read once on a miss


def test_known_interfaces_cost_no_extra_read() -> None:
    running = json_answer("nxos")
    d, fake = driver("nxos", [ok(running), ok(), ok("Copy complete.")])
    d.observe()
    d.apply([access("Ethernet1/2", 10)])
    assert len(fake.sent) == 3  # the read, the batch and its commit: no extra read
    assert fake.sent[1][1].startswith("terminal dont-ask\ncheckpoint file gpf_")
    assert fake.sent[2][1].startswith("copy running-config startup-config\n")


@pytest.mark.parametrize(
    ("change", "kw"),
    [
        (access("Ethernet1", 10, switch="leaf2"), {}),
        (access("gpu09", 10), {"port_map": {"gpu01": "Ethernet1"}}),
    ],
    ids=["other-switch", "unmapped-port"],
)
def test_refused_before_anything_is_sent(change: EthernetPortConfig, kw: dict[str, object]) -> None:
    d, fake = driver("eos", [], **kw)
    with pytest.raises(ValidationError):
        d.apply([change])
    assert fake.sent == []


def test_empty_batch_sends_nothing() -> None:
    d, fake = driver("nxos", [])
    d.apply([])
    assert fake.sent == []


@pytest.mark.parametrize("q", [1, 0, 4095], ids=["vlan-1", "zero", "too-big"])
def test_bad_quarantine_vlan(q: int) -> None:
    with pytest.raises(ValidationError):
        driver("ovs", [], quarantine_vlan=q)


def test_bad_port_map_name_is_refused() -> None:
    with pytest.raises(ValidationError):
        driver("ovs", [], port_map={"gpu01": "eth0;reboot"})


def _build(**kw: object) -> SshSwitchDriver:
    args: dict[str, object] = {
        "host": "192.0.2.1", "username": "admin", "key_filename": "/nonexistent", "dialect": "eos",
        "switch": "leaf1", "quarantine_vlan": 999, **kw,
    }  # fmt: skip
    return SshSwitchDriver(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({}, "known_hosts"),
        ({"known_hosts": "/nonexistent/known_hosts"}, "known_hosts"),
        ({"insecure": "yes"}, "known_hosts"),
        ({"insecure": True, "passphrase": "inline"}, "passphrase"),
        ({"insecure": True, "passphrase_env": "GPUFABRIC_TEST_UNSET_VAR"}, "passphrase_env"),
    ],
    ids=["no-known-hosts", "missing-known-hosts-file", "insecure-not-a-bool", "inline-passphrase", "unset-env"],
)
def test_host_keys_strict_unless_explicitly_insecure(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as ei:
        _build(**kw)
    assert ei.value.field == field


def test_known_hosts_and_insecure_together_refused(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    assert _build(known_hosts=str(kh)).transport_notes() == ()
    with pytest.raises(ConfigError, match="insecure"):
        _build(known_hosts=str(kh), insecure=True)


def test_insecure_is_reported_and_passphrase_never_printed(tmp_path: Path) -> None:
    pf = tmp_path / "pass"
    pf.write_text("key-pass-phrase\n")
    pf.chmod(0o644)
    with pytest.raises(ConfigError, match="0600"):
        _build(insecure=True, passphrase_file=str(pf))
    pf.chmod(0o600)
    d = _build(insecure=True, passphrase_file=str(pf))
    assert [n.setting for n in d.transport_notes()] == ["insecure"]
    assert d.connection.target.passphrase is not None
    assert d.connection.target.passphrase.reveal() == "key-pass-phrase"
    assert "key-pass-phrase" not in repr(d.connection.target) + str(d.connection.target.passphrase)
