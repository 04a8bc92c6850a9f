"""A DPU's mode of operation and firmware as facts, and the gate a move into an offload profile
passes (pure).

Modes (NVIDIA "BlueField Modes of Operation"), from ``mlxconfig`` keys:

* ``embedded`` (DPU mode, ECPF ownership): BlueField-2 ``INTERNAL_CPU_MODEL=EMBEDDED_CPU(1)``
  with ``INTERNAL_CPU_OFFLOAD_ENGINE`` absent or ``ENABLED(0)``; BlueField-3
  ``INTERNAL_CPU_OFFLOAD_ENGINE=ENABLED(0)``;
* ``restricted`` (zero-trust): ``embedded`` and ``mlxprivhost q`` level ``RESTRICTED``;
* ``nic``: ``INTERNAL_CPU_OFFLOAD_ENGINE=DISABLED(1)`` (Arm cores out of the data path);
* ``separated``: ``INTERNAL_CPU_MODEL=SEPARATED_HOST(0)`` (obsolete symmetric model);
* ``unknown``: none of these keys printed.

The running mode is read from the Current column (``mlxconfig -e q``); an output without it
gives ``unknown`` (never guessed from Next Boot). A DPU whose next-boot value of any
``INTERNAL_CPU_*`` key differs from the current one is **power cycle pending**: mode changes take
effect only after a power cycle of host and DPU (seed 002), not a warm reboot. So is a DPU whose
burned firmware is not the one it runs (flint's ``FW Version(Running)``, mlxfwmanager's
``FW (Running)``): its facts carry the **running** firmware (``firmware``), the image on flash
(``flashed_firmware``) and a ``firmware`` entry in ``pending`` (running -> flashed).

Gate (:func:`gate`) for a profile whose role is ``dpu-host`` (the host's DPU runs ovnkube-node in
``dpu`` mode): the DPU must run in ``embedded`` or ``restricted`` mode, with no pending change,
and the firmware it runs at least the offering's ``dpu_min_firmware`` setting (when set): a
minimum met only by a flashed image not yet running does not pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.errors import ConflictError
from gpufabric.fabrics.dpu.readers.mlx import Firmware, MlxConfig, enum_value, version_key

MODE_KEYS: Final = frozenset(
    {
        "INTERNAL_CPU_MODEL",
        "INTERNAL_CPU_OFFLOAD_ENGINE",
        "INTERNAL_CPU_PAGE_SUPPLIER",
        "INTERNAL_CPU_ESWITCH_MANAGER",
        "INTERNAL_CPU_IB_VPORT0",
    }
)
DPU_MODES: Final = ("embedded", "restricted")
FIRMWARE_KEY: Final = "firmware"  # the pending entry of a burned firmware not yet running
MIN_FIRMWARE_SETTING: Final = "dpu_min_firmware"


def mode_of(values: dict[str, str | None], privhost: str = "") -> str:
    """The mode the ``INTERNAL_CPU_*`` values (one column) describe."""
    model, model_n = enum_value(values.get("INTERNAL_CPU_MODEL"))
    engine, engine_n = enum_value(values.get("INTERNAL_CPU_OFFLOAD_ENGINE"))
    if model_n is None and engine_n is None:
        return "unknown"
    if model_n == 0 or model == "SEPARATED_HOST":
        return "separated"
    if engine_n == 1 or engine == "DISABLED":
        return "nic"
    return "restricted" if privhost == "restricted" else "embedded"


@dataclass(frozen=True)
class DpuFacts:
    """What was read from one host's DPU."""

    host: str
    mode: str  # running mode (Current column)
    next_mode: str  # after the next power cycle
    firmware: str = ""  # running firmware version ("" unknown)
    psid: str = ""
    device_type: str = ""
    pending: tuple[tuple[str, str, str], ...] = ()  # (key, current, next boot)
    privhost: str = ""  # mlxprivhost level when read
    error: str = ""  # why the facts could not be read ("" when they were)
    flashed_firmware: str = ""  # the image on flash (differs from ``firmware`` until a power cycle)

    @property
    def power_cycle_pending(self) -> bool:
        return bool(self.pending)

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "mode": self.mode,
            "next_mode": self.next_mode,
            "firmware": self.firmware,
            "flashed_firmware": self.flashed_firmware,
            "psid": self.psid,
            "device_type": self.device_type,
            "power_cycle_pending": self.power_cycle_pending,
            "pending": [{"key": k, "current": c, "next_boot": n} for k, c, n in self.pending],
            "privhost": self.privhost,
            "error": self.error,
        }


def facts_of(host: str, cfg: MlxConfig, fw: Firmware | None, privhost: str = "") -> DpuFacts:
    current = {k: v for k, v in cfg.current.items() if k in MODE_KEYS}
    nxt: dict[str, str | None] = {k: v for k, v in cfg.next_boot.items() if k in MODE_KEYS}
    mode = mode_of(current, privhost) if cfg.has_current else "unknown"
    pending = tuple(sorted((k, c, n) for k, (c, n) in cfg.pending(MODE_KEYS).items()))
    if fw is not None and fw.pending:
        pending += ((FIRMWARE_KEY, fw.version, fw.flashed),)
    return DpuFacts(
        host, mode, mode_of(nxt, privhost), fw.version if fw else "", fw.psid if fw else "",
        cfg.device_type or (fw.device_type if fw else ""), pending, privhost, "", fw.flashed if fw else "",
    )  # fmt: skip


def min_firmware(settings: dict[str, str], offering: str) -> tuple[int, ...] | None:
    raw = settings.get(MIN_FIRMWARE_SETTING)
    if not raw:
        return None
    return version_key(raw, f"offerings[{offering}].settings.{MIN_FIRMWARE_SETTING}")


def gate(facts: DpuFacts, offering: str, settings: dict[str, str]) -> None:
    """Raise ConflictError (one line) unless ``facts`` allow a move into ``offering`` (role
    ``dpu-host``)."""
    host = facts.host
    if facts.error:
        raise ConflictError(
            f"{host}: DPU mode and firmware could not be read ({facts.error}); offering {offering} needs dpu mode",
            node=host, offering=offering,
        )  # fmt: skip
    if facts.power_cycle_pending:
        keys = ", ".join(f"{k} {c} -> {n}" for k, c, n in facts.pending)
        raise ConflictError(
            f"{host}: DPU power cycle pending ({keys}); power-cycle host and DPU, then run "
            f"`gpufabric node power-cycled {host}`",
            node=host, offering=offering, pending=keys,
        )  # fmt: skip
    if facts.mode not in DPU_MODES:
        raise ConflictError(
            f"{host}: DPU is in {facts.mode} mode; offering {offering} needs embedded or restricted (dpu) mode",
            node=host, offering=offering, mode=facts.mode,
        )  # fmt: skip
    need = min_firmware(settings, offering)
    if need is not None:
        if not facts.firmware:
            raise ConflictError(f"{host}: DPU firmware version unknown; offering {offering} needs >= "
                                f"{'.'.join(map(str, need))}", node=host, offering=offering)  # fmt: skip
        if version_key(facts.firmware) < need:
            raise ConflictError(
                f"{host}: DPU firmware {facts.firmware} is below {'.'.join(map(str, need))}, "
                f"the minimum of offering {offering}",
                node=host, offering=offering, firmware=facts.firmware,
            )  # fmt: skip

