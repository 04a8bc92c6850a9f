"""Pure parsers of NVIDIA firmware-tool outputs: ``mlxconfig -d DEV [-e] q``, ``flint -d DEV q``,
``mlxfwmanager --query`` and ``mlxprivhost -d DEV q``. Built on recorded real outputs
(``tests/fixtures/real/{mlxconfig,flint,mlxfwmanager,mlxprivhost}/``, one ``.source.yaml`` with the
provenance beside each).

``mlxconfig q`` prints a table under ``Configurations:`` whose header names its columns: older MFT
prints only ``Next Boot``; ``-e`` (and newer MFT) prints ``Default  Current  Next Boot``. A row
may start with ``*`` (its next-boot value differs from the default/current one). Values read
``NAME(n)`` (an enum), a bare number, or ``Array[a..b]``. A key whose current value is not printed
is ``None`` in :attr:`MlxConfig.current` (unknown, never guessed).

Firmware: what the device **runs** is what a gate decides on. After a burn that is not yet active
(a power cycle or ``mlxfwreset`` away), ``flint q`` prints ``FW Version:`` (the image on flash) and
``FW Version(Running):``, and ``mlxfwmanager --query`` an ``FW`` row (flash) and an
``FW (Running)`` row, not always right after it (a ConnectX-3 Pro prints it after ``CLP``);
either tool prints the running row only when the two differ. :class:`Firmware` keeps both:
``version`` the running one, ``flashed`` the image on flash, ``pending`` when they differ."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from gpufabric.domain.errors import ValidationError

_ROW_RE: Final = re.compile(r"^\s*(\*)?\s*([A-Z_][A-Z0-9_\[\].]*)\s+(.*?)\s*$")
_ENUM_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\(\d+\)")
_VERSION_RE: Final = re.compile(r"^\d+(\.\d+){1,3}$")


@dataclass(frozen=True)
class MlxConfig:
    """One device's ``mlxconfig q`` table: per key, its current and next-boot value."""

    device_type: str = ""
    device: str = ""
    current: dict[str, str | None] = field(default_factory=dict)
    next_boot: dict[str, str] = field(default_factory=dict)
    has_current: bool = False  # the output had a Current column

    def pending(self, keys: frozenset[str] | None = None) -> dict[str, tuple[str, str]]:
        """key -> (current, next boot) for keys whose next-boot value differs from the current
        one (``keys``: only those). Keys without a known current value are not listed."""
        out: dict[str, tuple[str, str]] = {}
        for k, nxt in self.next_boot.items():
            cur = self.current.get(k)
            if (keys is None or k in keys) and cur is not None and cur != nxt:
                out[k] = (cur, nxt)
        return out


def _columns(header: str) -> list[str]:
    """Column names of a ``Configurations:`` header line, in order."""
    rest = header.split("Configurations:", 1)[1]
    return [c for c in ("Default", "Current", "Next Boot") if c in rest]


def parse_mlxconfig(text: str) -> MlxConfig:
    """The first device's table of an ``mlxconfig q`` output. ValidationError if there is none."""
    device_type = device = ""
    cols: list[str] | None = None
    current: dict[str, str | None] = {}
    nxt: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("Device #") and cols is not None:
            break  # only the first device
        if line.startswith("Device type:"):
            device_type = line.split(":", 1)[1].strip()
            continue
        if line.startswith("Device:"):
            device = line.split(":", 1)[1].strip()
            continue
        if "Configurations:" in line:
            cols = _columns(line)
            continue
        if cols is None or not line.strip() or line.lstrip().startswith(("The '*'", "#")):
            continue
        m = _ROW_RE.match(line)
        if m is None:
            continue
        values = m.group(3).split()
        if len(values) < len(cols):  # enum values wider than their column run together
            glued = _ENUM_RE.findall(m.group(3))
            values = glued if "".join(glued) == "".join(values) else values
        if len(values) != len(cols):
            if m.group(2).startswith("INTERNAL_CPU"):
                raise ValidationError(f"mlxconfig.{m.group(2)}", m.group(3), f"one value per column ({', '.join(cols)})")
            continue  # a wrapped description or a value with spaces: not a mode key
        row = dict(zip(cols, values, strict=True))
        key = m.group(2)
        nxt[key] = row["Next Boot"] if "Next Boot" in row else values[-1]
        current[key] = row.get("Current")
    if cols is None:
        raise ValidationError("mlxconfig", text[:80], "an `mlxconfig -d DEV q` output with a Configurations: table")
    return MlxConfig(device_type, device, current, nxt, "Current" in cols)


def enum_value(raw: str | None) -> tuple[str, int | None]:
    """``EMBEDDED_CPU(1)`` -> (``EMBEDDED_CPU``, 1); ``8`` -> (``8``, 8); None -> (``""``, None)."""
    if raw is None:
        return "", None
    m = re.match(r"^(.*)\((\d+)\)$", raw)
    if m:
        return m.group(1), int(m.group(2))
    return raw, int(raw) if raw.isdigit() else None


@dataclass(frozen=True)
class Firmware:
    """A device's firmware as its query printed it."""

    version: str  # the firmware the device runs
    psid: str = ""
    device_type: str = ""
    source: str = ""  # flint / mlxfwmanager
    flashed: str = ""  # the image on flash ("" : the running one)

    def __post_init__(self) -> None:
        if not self.flashed:
            object.__setattr__(self, "flashed", self.version)

    @property
    def pending(self) -> bool:
        """A burned image is not running yet: it takes effect at the next power cycle."""
        return self.flashed != self.version

    @property
    def key(self) -> tuple[int, ...]:
        return version_key(self.version)


def version_key(version: str, field_name: str = "firmware") -> tuple[int, ...]:
    """``24.35.1012`` -> (24, 35, 1012); ValidationError naming ``field_name`` otherwise."""
    if not _VERSION_RE.match(version):
        raise ValidationError(field_name, version, "a firmware version like 24.35.1012")
    return tuple(int(p) for p in version.split("."))


def parse_flint_query(text: str) -> Firmware:
    """``flint -d DEV q`` (or ``mstflint``): ``FW Version:`` (on flash), ``FW Version(Running):``
    (printed only when it differs) and ``PSID:``."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep and k and not k.startswith(" "):
            fields.setdefault(k.strip(), v.strip())
    flashed = fields.get("FW Version", "")
    running = fields.get("FW Version(Running)", "") or flashed
    if not running:
        raise ValidationError("flint", text[:80], "a `flint -d DEV q` output with an FW Version: line")
    version_key(running, "flint.FW Version(Running)" if running != flashed else "flint.FW Version")
    if flashed:
        version_key(flashed, "flint.FW Version")
    return Firmware(running, fields.get("PSID", ""), "", "flint", flashed)


def parse_mlxfwmanager(text: str) -> Firmware:
    """The first device of ``mlxfwmanager --query``: PSID, type and, from its Versions table (up
    to the blank line that ends it), the ``FW`` row (on flash) and the ``FW (Running)`` row."""
    psid = dtype = fw = running = ""
    in_versions = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Device #") and fw:
            break
        if s.startswith("Device Type:"):
            dtype = s.split(":", 1)[1].strip()
        elif s.startswith("PSID:"):
            psid = s.split(":", 1)[1].strip()
        elif s.startswith("Versions:"):
            in_versions = True
        elif in_versions and not s:
            in_versions = False
        elif in_versions:
            cells = s.split()
            if cells[:2] == ["FW", "(Running)"] and len(cells) >= 3:
                running = cells[2]
            elif cells[:1] == ["FW"] and len(cells) >= 2:
                fw = cells[1]
    if not fw:
        raise ValidationError("mlxfwmanager", text[:80], "an `mlxfwmanager --query` output with an FW version row")
    version_key(fw, "mlxfwmanager.FW")
    if running:
        version_key(running, "mlxfwmanager.FW (Running)")
    return Firmware(running or fw, psid, dtype, "mlxfwmanager", fw)


def parse_mlxprivhost(text: str) -> str:
    """``mlxprivhost -d DEV q``: the host's level, lower-case (``privileged`` / ``restricted``)."""
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep and k.strip() == "level":
            return v.strip().lower()
    raise ValidationError("mlxprivhost", text[:80], "an `mlxprivhost -d DEV q` output with a level line")
