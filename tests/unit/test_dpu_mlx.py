"""DPU mode and firmware parsers on recorded real outputs (tests/fixtures/real/, provenance in
PROVENANCE.md); expected readings written by hand from the files. And the offload gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ConflictError, ValidationError
from gpufabric.fabrics.dpu.dpumode import DpuFacts, facts_of, gate, mode_of
from gpufabric.fabrics.dpu.mlx import (
    parse_flint_query,
    parse_mlxconfig,
    parse_mlxfwmanager,
    parse_mlxprivhost,
)

REAL = Path(__file__).parent.parent / "fixtures" / "real"


def real(name: str) -> str:
    return (REAL / name).read_text()


def test_bf2_next_boot_only_table() -> None:
    cfg = parse_mlxconfig(real("mlxconfig/bf2-embedded-next-boot.txt"))
    assert cfg.device_type == "BlueField2"
    assert cfg.device == "/dev/mst/mt41686_pciconf0"
    assert cfg.next_boot["INTERNAL_CPU_MODEL"] == "EMBEDDED_CPU(1)"
    assert cfg.next_boot["_INTERNAL_CPU_MODEL"] == "SEPARATED_HOST(0)"  # a separate key, not the mode
    assert cfg.next_boot["LINK_TYPE_P2"] == "ETH(2)"
    assert cfg.next_boot["HOST_CHAINING_DESCRIPTORS"] == "Array[0..7]"
    assert len(cfg.next_boot) == 20
    assert not cfg.has_current and cfg.current["INTERNAL_CPU_MODEL"] is None
    assert cfg.pending() == {}  # nothing known to differ
    f = facts_of("gpu-a01", cfg, None)
    assert (f.mode, f.next_mode) == ("unknown", "embedded")  # running mode never guessed from Next Boot


def test_bf2_separated() -> None:
    cfg = parse_mlxconfig(real("mlxconfig/bf2-separated-next-boot.txt"))
    assert cfg.device == "/dev/mst/mt41686_pciconf0.1"
    assert facts_of("h", cfg, None).next_mode == "separated"


def test_bf3_three_columns_dpu_mode() -> None:
    cfg = parse_mlxconfig(real("mlxconfig/bf3-dpu-mode-e-q.txt"))
    assert cfg.device_type == "BlueField3" and cfg.has_current
    assert cfg.current == {"INTERNAL_CPU_OFFLOAD_ENGINE": "ENABLED(0)"}
    f = facts_of("gpu-a02", cfg, None)
    assert (f.mode, f.next_mode, f.power_cycle_pending) == ("embedded", "embedded", False)


def test_pending_rows_from_a_real_e_q() -> None:
    cfg = parse_mlxconfig(real("mlxconfig/cx4-pending-e-q.txt"))
    assert cfg.current["KEEP_IB_LINK_UP_P2"] == "True(1)"
    assert cfg.pending() == {"MEMIC_SIZE_LIMIT": ("_256KB(1)", "DISABLED(0)")}
    grep = parse_mlxconfig(real("mlxconfig/sriov-ib-routing-grep-pending.txt"))
    assert grep.pending() == {"SRIOV_IB_ROUTING_MODE_P1": ("GID(1)", "GID(0)")}
    # not a mode key: no power cycle pending for the DPU gate
    assert facts_of("h", cfg, None).pending == ()


def test_flint_and_mlxfwmanager() -> None:
    a = parse_flint_query(real("flint/cx6lx-query.txt"))
    assert (a.version, a.psid, a.source) == ("26.33.1048", "MT_0000000575", "flint")
    b = parse_flint_query(real("flint/cx6dx-query.txt"))
    assert (b.version, b.psid) == ("22.27.1016", "MT_0000000359")
    c = parse_mlxfwmanager(real("mlxfwmanager/bf2-query.txt"))
    assert (c.version, c.psid, c.device_type) == ("24.29.2008", "MT_0000000559", "BlueField2")
    d = parse_mlxfwmanager(real("mlxfwmanager/cx3pro-query.txt"))
    assert (d.version, d.psid) == ("2.42.5700", "HP_1380110017")
    assert c.key == (24, 29, 2008) and c.key > (24, 28, 9999)
    assert parse_mlxprivhost(real("mlxprivhost/bf2-query-privileged.txt")) == "privileged"


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
        parse_mlxfwmanager(real("mlxconfig/bf3-dpu-mode-e-q.txt"))


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
