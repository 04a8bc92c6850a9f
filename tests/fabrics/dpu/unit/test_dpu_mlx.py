"""DPU mode and firmware parsers on recorded real outputs (tests/fixtures/real/<parser>/, one
``.source.yaml`` manifest beside each with its provenance and the reading expected of it, written by
hand from the file; the outputs themselves are located by support.real_outputs and skip when
absent). And the offload gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ConflictError, ValidationError
from gpufabric.fabrics.dpu.readers.dpumode import DpuFacts, facts_of, gate, mode_of
from gpufabric.fabrics.dpu.readers.mlx import (
    parse_flint_query,
    parse_mlxconfig,
    parse_mlxfwmanager,
    parse_mlxprivhost,
    version_key,
)

from support.real_outputs import Manifest, manifest, manifests, real_output

EMBEDDED = (
    "Device type:    BlueField2\n"
    "Configurations:                              Default         Current         Next Boot\n"
    "         INTERNAL_CPU_MODEL                  EMBEDDED_CPU(1) EMBEDDED_CPU(1) EMBEDDED_CPU(1)\n"
)


@pytest.mark.parametrize("m", manifests("mlxconfig"), ids=lambda m: m.file)
def test_mlxconfig_real_outputs(m: Manifest) -> None:
    exp = m.expected
    cfg = parse_mlxconfig(real_output(m))
    assert cfg.device_type == exp.get("device_type", "")
    assert cfg.device == exp.get("device", "")
    assert len(cfg.next_boot) == exp["rows"]
    assert cfg.has_current is exp["has_current"]
    for k, v in exp.get("next_boot", {}).items():
        assert cfg.next_boot[k] == v
    for k, v in exp.get("current", {}).items():
        assert cfg.current[k] == v
    if "pending" in exp:
        assert cfg.pending() == {k: tuple(v) for k, v in exp["pending"].items()}
    f = facts_of("gpu-a01", cfg, None)
    assert (f.mode, f.next_mode) == (exp["mode"], exp["next_mode"])  # never guessed from Next Boot
    assert f.pending == ()  # no recording has a pending INTERNAL_CPU_* key (the stand-in test has)


@pytest.mark.parametrize("m", manifests("flint"), ids=lambda m: m.file)
def test_flint_real_outputs(m: Manifest) -> None:
    """``version`` is what the device runs (``FW Version(Running)`` when flint prints one: a
    burned image not yet active); ``flashed`` the image on flash (issue 31 item 3)."""
    fw = parse_flint_query(real_output(m))
    exp = m.expected
    assert (fw.version, fw.psid, fw.source) == (exp["version"], exp["psid"], "flint")
    assert (fw.flashed, fw.pending) == (exp.get("flashed", exp["version"]), "flashed" in exp)


@pytest.mark.parametrize("m", manifests("mlxfwmanager"), ids=lambda m: m.file)
def test_mlxfwmanager_real_outputs(m: Manifest) -> None:
    """``version`` is the ``FW (Running)`` row when there is one (wherever it stands in the
    Versions table), else ``FW``; ``flashed`` the ``FW`` row (issue 31 item 3)."""
    fw = parse_mlxfwmanager(real_output(m))
    exp = m.expected
    assert (fw.version, fw.psid, fw.device_type) == (exp["version"], exp["psid"], exp["device_type"])
    assert (fw.flashed, fw.pending) == (exp.get("flashed", exp["version"]), "flashed" in exp)


def test_regression_burned_firmware_not_yet_running_is_pending() -> None:
    """NVIDIA's BlueField-2 runbook output: FW 24.40.1000 flashed, FW (Running) 24.35.2000. The
    facts carry the running one, report the flashed one and a power cycle pending; the
    openshift gate refuses it even with a minimum the flashed image meets (fails on be1d2a3:
    the FW row was read as the running firmware)."""
    fw = parse_mlxfwmanager(real_output(manifest("mlxfwmanager", "bmm-bf2-burned-not-running.txt")))
    f = facts_of("gpu-a01", parse_mlxconfig(EMBEDDED), fw)
    assert (f.mode, f.firmware, f.flashed_firmware, f.power_cycle_pending) == ("embedded", "24.35.2000",
                                                                               "24.40.1000", True)
    assert f.to_dict()["pending"] == [{"key": "firmware", "current": "24.35.2000", "next_boot": "24.40.1000"}]
    with pytest.raises(ConflictError, match=r"gpu-a01: DPU power cycle pending \(firmware 24.35.2000 -> 24.40.1000\)"):
        gate(f, "openshift", {"dpu_min_firmware": "24.40.1000"})


@pytest.mark.parametrize("m", manifests("mlxprivhost"), ids=lambda m: m.file)
def test_mlxprivhost_real_outputs(m: Manifest) -> None:
    assert parse_mlxprivhost(real_output(m)) == m.expected["level"]


def test_version_order() -> None:
    assert version_key("24.29.2008") == (24, 29, 2008) and version_key("24.29.2008") > (24, 28, 9999)


@pytest.mark.parametrize(
    "text, field",
    [("", "mlxconfig"), ("Device type: BlueField2\n", "mlxconfig")],
)
def test_mlxconfig_garbage(text: str, field: str) -> None:
    with pytest.raises(ValidationError) as e:
        parse_mlxconfig(text)
    assert e.value.fields["field"] == field


def test_firmware_garbage() -> None:
    with pytest.raises(ValidationError):
        parse_flint_query("Image type: FS4\n")
    with pytest.raises(ValidationError):
        parse_flint_query("FW Version:            x.y\n")
    with pytest.raises(ValidationError):
        parse_mlxfwmanager("Device #1:\n----------\n  Device Type:      BlueField3\n")


def test_modes() -> None:
    assert mode_of({"INTERNAL_CPU_MODEL": "EMBEDDED_CPU(1)", "INTERNAL_CPU_OFFLOAD_ENGINE": "DISABLED(1)"}) == "nic"
    assert mode_of({"INTERNAL_CPU_MODEL": "EMBEDDED_CPU(1)"}, "restricted") == "restricted"
    assert mode_of({"INTERNAL_CPU_MODEL": "SEPARATED_HOST(0)"}) == "separated"
    assert mode_of({}) == "unknown"


def F(**kw: object) -> DpuFacts:
    base: dict[str, object] = {"host": "gpu-a01", "mode": "embedded", "next_mode": "embedded", "firmware": "24.35.1012"}
    base.update(kw)
    return DpuFacts(**base)  # type: ignore[arg-type]


def test_gate() -> None:
    gate(F(), "openshift", {})
    gate(F(mode="restricted"), "openshift", {"dpu_min_firmware": "24.35.1012"})
    with pytest.raises(ConflictError, match=r"gpu-a01: DPU is in separated mode; offering openshift needs"):
        gate(F(mode="separated"), "openshift", {})
    with pytest.raises(ConflictError, match=r"DPU firmware 24.29.2008 is below 24.35.1012"):
        gate(F(firmware="24.29.2008"), "openshift", {"dpu_min_firmware": "24.35.1012"})
    with pytest.raises(ConflictError, match=r"power cycle pending \(INTERNAL_CPU_MODEL SEPARATED_HOST\(0\) -> "
                                            r"EMBEDDED_CPU\(1\)\).*gpufabric node power-cycled gpu-a01"):
        gate(F(pending=(("INTERNAL_CPU_MODEL", "SEPARATED_HOST(0)", "EMBEDDED_CPU(1)"),)), "openshift", {})
    with pytest.raises(ConflictError, match="could not be read"):
        gate(F(error="mlxconfig: exit 3"), "openshift", {})
    with pytest.raises(ValidationError) as e:
        gate(F(), "openshift", {"dpu_min_firmware": "new"})
    assert e.value.fields["field"] == "offerings[openshift].settings.dpu_min_firmware"


def test_glued_enum_columns_and_unreadable_mode_rows() -> None:
    head = "Configurations:                              Default         Current         Next Boot\n"
    glued = head + "         INTERNAL_CPU_MODEL                  SEPARATED_HOST(0)SEPARATED_HOST(0)EMBEDDED_CPU(1)\n"
    cfg = parse_mlxconfig(glued)
    assert cfg.current["INTERNAL_CPU_MODEL"] == "SEPARATED_HOST(0)"
    assert cfg.pending() == {"INTERNAL_CPU_MODEL": ("SEPARATED_HOST(0)", "EMBEDDED_CPU(1)")}
    with pytest.raises(ValidationError) as e:  # never silently read a DPU without its mode row
        parse_mlxconfig(head + "         INTERNAL_CPU_MODEL                  SEPARATED_HOST(0) x\n")
    assert e.value.fields["field"] == "mlxconfig.INTERNAL_CPU_MODEL"


def test_lab_standin_speaks_the_recorded_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpufabric.lab.mlxstub import main, write_state

    st = tmp_path / "d.json"
    write_state(st, mode="separated", firmware="24.33.1048")

    def run(*args: str) -> str:
        assert main([str(st), *args]) == 0
        return capsys.readouterr().out

    run("mlxconfig", "-d", "/dev/mst/mt41686_pciconf0", "-y", "set", "INTERNAL_CPU_MODEL=EMBEDDED_CPU")
    f = facts_of("h", parse_mlxconfig(run("mlxconfig", "-d", "/dev/mst/mt41686_pciconf0", "-e", "q")),
                 parse_flint_query(run("flint", "-d", "/dev/mst/mt41686_pciconf0", "q")))  # fmt: skip
    assert (f.mode, f.next_mode, f.firmware) == ("separated", "embedded", "24.33.1048")
    assert f.pending == (("INTERNAL_CPU_MODEL", "SEPARATED_HOST(0)", "EMBEDDED_CPU(1)"),)
    run("power-cycle")
    f = facts_of("h", parse_mlxconfig(run("mlxconfig", "-d", "x", "-e", "q")), None)
    assert (f.mode, f.power_cycle_pending) == ("embedded", False)
