"""OpenSM hardening: render the opensm.conf settings that guard tenant isolation, parse a
real opensm.conf, and check its settings against the policy. Pure: no I/O.

Written against OpenSM 3.3.23 (``opensm -c FILE`` dump recorded in
tests/fixtures/opensm/opensm.conf.default). Settings checked, and why:

- ``sm_priority`` 15 — the highest; the trusted SM wins master election against every
  SM of lower priority. An SM also at 15 with a lower port GUID still wins the tie-break,
  which is why rogue-SM detection and ``sm_key`` exist as well.
- ``sm_key`` — non-zero 64-bit secret, not the default 1: SMInfo control (handover,
  disable, standby) between SMs is only honoured with the matching key.
- ``sa_key`` — not 1 (the default) and not 0: OpenSM treats an SA query whose SM_Key
  equals ``sa_key`` as *trusted*; with 0 every ordinary query (key 0) would be trusted.
- ``m_key`` non-zero, ``m_key_protection_level`` >= 2, ``m_key_lease_period`` 1-65535 s —
  without an M_Key any host can rewrite its own (or, by directed route, any other)
  port's PortInfo/PKey table with SubnSet SMPs. Level 2 hides the key from SubnGet and
  refuses SubnSet without it. A lease of 0 means "never expires": a lost key then
  leaves ports unmanageable until reset, so a finite lease is required.
- ``part_enforce both`` and ``no_partition_enforcement FALSE`` — switches filter
  partition keys inbound and outbound; anything else lets a host inject packets with a
  PKey it is not a member of.
- ``allow_both_pkeys FALSE`` — a port holds one entry per partition (full *or* limited);
  with TRUE a port can hold both and a limited member behaves as full.
- ``sm_inactive FALSE`` — an inactive trusted SM leaves mastership to whatever else runs.
- ``console off`` (or ``local``) — ``socket``/``loopback`` open the unauthenticated
  OpenSM console on TCP ``console_port``, from which the SM can be reconfigured.
- keys pairwise distinct — a host given ``sa_key`` must not thereby learn ``sm_key``/``m_key``.
- every key NCP SDN04-05 names (:func:`check_keys`, :mod:`~gpufabric.fabrics.infiniband.audit.keys`): ``cc_key`` set (LOW when not: the CC_Key
  OpenSM uses on Congestion Control MADs), each key fabrics.yaml gives equal to the running
  SM's (HIGH when not; neither value shown). The keys OpenSM 3.3.23 does not take (AM_Key,
  VS_Key, N2N_Key, M2N_Key) are ``not supported`` in the key report (:func:`~gpufabric.fabrics.infiniband.audit.keys.key_states`).

Not checked: ``qos`` (service levels give performance, not security, isolation),
``congestion_control`` (off by default), routing and timing options. ibsim does not implement M_Key (see
shared/notes/ibsim-opensm.md): the M_Key settings are accepted by OpenSM there but their
protection cannot be exercised in the lab.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.severity import Severity
from gpufabric.fabrics.infiniband.audit.keys import key_findings, key_states

_U64: Final = 0xFFFF_FFFF_FFFF_FFFF
_KEY_ALLOWED: Final = "64-bit value other than 0x0 and 0x1"

# OpenSM 3.3.23 defaults (``opensm -c``) for every setting checked: a missing setting
# takes its default, exactly as OpenSM does.
OPENSM_DEFAULTS: Final[Mapping[str, str]] = {
    "sm_priority": "0",
    "sm_key": "0x0000000000000001",
    "sa_key": "0x0000000000000001",
    "m_key": "0x0000000000000000",
    "m_key_protection_level": "0",
    "m_key_lease_period": "0",
    "cc_key": "0x0000000000000000",
    "part_enforce": "both",
    "no_partition_enforcement": "FALSE",
    "allow_both_pkeys": "FALSE",
    "sm_inactive": "FALSE",
    "console": "off",
}


@dataclass(frozen=True)
class HardeningFinding:
    """One weak OpenSM setting."""

    id: str  # e.g. IB-HARD-SM-KEY
    setting: str
    observed: str
    expected: str
    severity: Severity
    description: str


@dataclass(frozen=True)
class HardeningPolicy:
    """The secrets and levels rendered into opensm.conf. Keys are validated on construction."""

    sm_key: int
    sa_key: int
    m_key: int
    sm_priority: int = 15
    m_key_protection_level: int = 2
    m_key_lease_period: int = 300  # seconds: outlives many 10 s sweeps, lapses within minutes if the SM is gone
    cc_key: int | None = None  # the CC_Key OpenSM uses on Congestion Control MADs (None: not rendered)

    def __post_init__(self) -> None:
        for name in ("sm_key", "sa_key", "m_key", *(("cc_key",) if self.cc_key is not None else ())):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= _U64:
                raise ValidationError(name, v, _KEY_ALLOWED)
        if len({self.sm_key, self.sa_key, self.m_key}) != 3:
            raise ValidationError("sm_key/sa_key/m_key", "reused", "three different keys")
        if not 0 <= self.sm_priority <= 15:
            raise ValidationError("sm_priority", self.sm_priority, "0-15")
        if not 2 <= self.m_key_protection_level <= 3:
            raise ValidationError("m_key_protection_level", self.m_key_protection_level, "2-3")
        if not 1 <= self.m_key_lease_period <= 0xFFFF:
            raise ValidationError("m_key_lease_period", self.m_key_lease_period, "1-65535 seconds")

    @classmethod
    def generate(cls, randbits: Callable[[int], int] = secrets.randbits) -> HardeningPolicy:
        """Fresh random keys (``secrets``); ``randbits`` is injectable for tests."""
        keys: list[int] = []
        while len(keys) < 4:
            k = randbits(64)
            if k > 1 and k not in keys:
                keys.append(k)
        return cls(sm_key=keys[0], sa_key=keys[1], m_key=keys[2], cc_key=keys[3])


def _hex64(v: int) -> str:
    return f"0x{v:016x}"


def render_opensm_conf_overrides(policy: HardeningPolicy) -> str:
    """The opensm.conf lines that harden the trusted SM. OpenSM takes defaults for the rest,
    so the text is a complete config for ``opensm -F``; keep it mode 0600 (it holds secrets)."""
    lines = [
        "# gpufabric: hardened OpenSM settings (secrets: keep this file 0600)",
        f"sm_priority {policy.sm_priority}",
        f"sm_key {_hex64(policy.sm_key)}",
        f"sa_key {_hex64(policy.sa_key)}",
        f"m_key {_hex64(policy.m_key)}",
        f"m_key_protection_level {policy.m_key_protection_level}",
        f"m_key_lease_period {policy.m_key_lease_period}",
        *([f"cc_key {_hex64(policy.cc_key)}"] if policy.cc_key is not None else []),
        "part_enforce both",
        "no_partition_enforcement FALSE",
        "allow_both_pkeys FALSE",
        "sm_inactive FALSE",
        "console off",
    ]
    return "\n".join(lines) + "\n"


def parse_opensm_conf(text: str) -> dict[str, str]:
    """Parse opensm.conf text as OpenSM does: ``key value`` per line, ``#`` lines are
    comments, the value is the rest of the line (may hold spaces), the last one wins."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        out[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return out


_NUM_RE: Final = re.compile(r"^(0x[0-9a-f]+|[0-9]+)$")


def _num(text: str) -> int | None:
    t = text.strip().lower()
    if not _NUM_RE.fullmatch(t):
        return None
    return int(t, 16) if t.startswith("0x") else int(t)


def _bool(text: str) -> bool | None:
    t = text.strip().upper()
    return True if t == "TRUE" else False if t == "FALSE" else None


SETTINGS_UNREADABLE: Final = "gpufabric.settings_unreadable"
"""Key a driver puts in ``IbFabricState.settings`` (value: why) when it could not read the
SM's settings: the audit then reports that hardening is unverified instead of staying silent."""


def unreadable_settings(reason: str) -> tuple[tuple[str, str], ...]:
    return ((SETTINGS_UNREADABLE, reason),)


def check_hardening(settings: Mapping[str, str]) -> list[HardeningFinding]:
    """Every weak setting of ``settings`` (parsed opensm.conf; missing keys take the
    OpenSM default), in a stable order. An empty list means hardened. Settings marked
    :data:`SETTINGS_UNREADABLE` give one finding: the hardening could not be verified."""
    if SETTINGS_UNREADABLE in settings:
        why = settings[SETTINGS_UNREADABLE]
        return [
            HardeningFinding(
                "IB-HARD-UNREADABLE", "opensm.conf", why, "readable SM settings", Severity.MEDIUM,
                "the SM's settings could not be read, so its hardening is unverified",
            )
        ]  # fmt: skip
    s = {**OPENSM_DEFAULTS, **settings}
    found: list[HardeningFinding] = []

    def add(fid: str, setting: str, expected: str, sev: Severity, desc: str, observed: str | None = None) -> None:
        found.append(HardeningFinding(fid, setting, s[setting] if observed is None else observed, expected, sev, desc))

    prio = _num(s["sm_priority"])
    if prio != 15:
        add(
            "IB-HARD-SM-PRIORITY",
            "sm_priority",
            "15",
            Severity.HIGH,
            "the trusted SM must have the highest priority to win master election",
        )

    good_keys: dict[str, int] = {}
    for name, fid, sev, desc in (
        ("sm_key", "IB-HARD-SM-KEY", Severity.HIGH, "default/zero SM_Key lets any SM take part in SM handover"),
        ("sa_key", "IB-HARD-SA-KEY", Severity.HIGH, "default/zero SA_Key lets any host make trusted SA queries"),
        ("m_key", "IB-HARD-M-KEY", Severity.HIGH, "without an M_Key any host can rewrite port PKey tables"),
    ):
        k = _num(s[name])
        if k is None or k <= 1 or k > _U64:
            add(fid, name, "secret 64-bit value, not 0x0/0x1", sev, desc)
        else:
            good_keys[name] = k
    if len(set(good_keys.values())) != len(good_keys):
        same = [n for n, v in good_keys.items() if list(good_keys.values()).count(v) > 1]  # declaration order
        add(
            "IB-HARD-KEY-REUSE",
            same[-1],
            "sm_key, sa_key and m_key all different",
            Severity.MEDIUM,
            "a key holder learns the other keys",
            observed=" == ".join(same),
        )

    level = _num(s["m_key_protection_level"])
    if level is None or not 2 <= level <= 3:
        add(
            "IB-HARD-M-KEY-PROTECT",
            "m_key_protection_level",
            "2 (or 3)",
            Severity.HIGH,
            "below 2 the M_Key is readable by SubnGet or does not guard SubnSet",
        )
    lease = _num(s["m_key_lease_period"])
    if lease is None or not 1 <= lease <= 0xFFFF:
        add(
            "IB-HARD-M-KEY-LEASE",
            "m_key_lease_period",
            "1-65535 seconds",
            Severity.LOW,
            "0 never expires: a lost M_Key leaves ports unmanageable until reset",
        )

    if s["part_enforce"].strip().lower() != "both":
        add(
            "IB-HARD-PART-ENFORCE",
            "part_enforce",
            "both",
            Severity.CRITICAL,
            "switches must filter PKeys inbound and outbound",
        )
    if _bool(s["no_partition_enforcement"]) is not False:
        add(
            "IB-HARD-NO-PART-ENFORCEMENT",
            "no_partition_enforcement",
            "FALSE",
            Severity.CRITICAL,
            "partition enforcement by switches is disabled",
        )
    if _bool(s["allow_both_pkeys"]) is not False:
        add(
            "IB-HARD-ALLOW-BOTH-PKEYS",
            "allow_both_pkeys",
            "FALSE",
            Severity.MEDIUM,
            "a port may hold full and limited keys of one partition",
        )
    if _bool(s["sm_inactive"]) is not False:
        add(
            "IB-HARD-SM-INACTIVE",
            "sm_inactive",
            "FALSE",
            Severity.HIGH,
            "an inactive trusted SM leaves mastership to any other SM",
        )
    if s["console"].strip().lower() not in ("off", "local"):
        add(
            "IB-HARD-CONSOLE",
            "console",
            "off (or local)",
            Severity.HIGH,
            "the OpenSM console on a TCP port is unauthenticated",
        )
    return found


def check_keys(settings: Mapping[str, str]) -> list[HardeningFinding]:
    """The findings of :mod:`~gpufabric.fabrics.infiniband.audit.keys` for ``settings`` (parsed opensm.conf, OpenSM's defaults for
    the rest), after :func:`check_hardening`'s: an unset CC_Key and a key that is not the one
    fabrics.yaml gives. None for unreadable settings (check_hardening reports those)."""
    if SETTINGS_UNREADABLE in settings:
        return []
    return [
        HardeningFinding(fid, setting, observed, "the key fabrics.yaml gives" if observed == "differs" else "a key set on the SM",
                         sev, desc)
        for fid, setting, sev, observed, desc in key_findings(key_states(settings, OPENSM_DEFAULTS))
    ]  # fmt: skip
