"""The InfiniBand keys (NCP SDN04-05): every key the requirement names, which component here
takes it, whether the running SM has it configured, and the secrets fabrics.yaml gives for the
keys OpenSM takes. Pure but for reading the secrets (:func:`load_keys`, through
:func:`~gpufabric.transport.secrets.load_secret`).

The keys (IBA vol. 1 and NVIDIA's extensions) and where they are set here:

===========  ===========================================================  ==========================
key          guards                                                        set in
===========  ===========================================================  ==========================
P_Key        partition membership of every packet                          partitions.conf (gpufabric
                                                                           writes it), enforced by
                                                                           ``part_enforce both``
M_Key        SubnSet of a port's PortInfo / PKey table (SMPs)              opensm.conf ``m_key``
SM_Key       SM-to-SM control (handover, standby)                          opensm.conf ``sm_key``
SA_Key       trusted SA queries                                            opensm.conf ``sa_key``
CC_Key       Congestion Control MADs to switches and HCAs                  opensm.conf ``cc_key``
AM_Key       SHARP Aggregation Manager MADs to aggregation nodes           SHARP's AM, not an SM
VS_Key       vendor-specific MADs (NVIDIA/Mellanox class 0x0a)              not OpenSM 3.3.23
N2N_Key      node-to-node class MADs                                       not OpenSM 3.3.23
M2N_Key      manager-to-node class MADs                                    not OpenSM 3.3.23
===========  ===========================================================  ==========================

OpenSM 3.3.23 (``opensm -c`` on this machine, tests/fixtures/opensm/opensm.conf.default) has
``m_key``, ``sm_key``, ``sa_key`` and ``cc_key`` and nothing for the others; UFM's documented
REST API, which the UFM driver speaks, exposes none of its SM's keys (its appliance CLI has
``ufm mkey-per-port``, ``ufm mkey-global-seed`` and ``ufm randomize-sa-key``), so on UFM the
hardening stays "unverified". A key no component here takes is ``not supported`` in the key
report (:func:`key_states`: ``gpufabric ib keys``, ``site check``), not an audit violation: no
setting could clear it, and every OpenSM site would fail ``audit --fail-on low`` for good.

fabrics.yaml (the ``opensm`` driver's ``options``): ``sm_key_file``/``sm_key_env``,
``sa_key_file``/``sa_key_env``, ``cc_key_file``/``cc_key_env`` (and ``m_key_file``, the M_Key
the driver's SMPs carry): a 0600 file or an environment variable holding ``0x`` + up to 16 hex
digits; never inline, never on a command line. With one given, the audit checks the running
SM's opensm.conf holds that very key (a mismatch is HIGH; neither value is shown). A setting
for a key OpenSM does not take is refused, naming it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.severity import Severity
from gpufabric.transport.secrets import Secret, load_secret

SM_NAME: Final = "OpenSM 3.3.23"
U64: Final = 0xFFFF_FFFF_FFFF_FFFF
KEY_DIFFERS: Final = "gpufabric.key_differs"
"""Key a driver puts in ``IbFabricState.settings`` (value: the opensm.conf options, comma
separated) whose value on the running SM is not the key fabrics.yaml gives."""


@dataclass(frozen=True)
class KeySpec:
    """One key: its name, the opensm.conf option that sets it (None: OpenSM has none), its lowest
    good value, what it guards, and where else it is set."""

    name: str
    option: str | None
    low: int
    guards: str
    elsewhere: str = ""

    @property
    def allowed(self) -> str:
        return f"0x followed by up to 16 hex digits, 0x{self.low:x}-0x{U64:x}"


KEYS: Final = (
    KeySpec("P_Key", None, 0, "partition membership of every packet"),
    KeySpec("M_Key", "m_key", 1, "SubnSet of a port's PortInfo and PKey table"),
    KeySpec("SM_Key", "sm_key", 2, "SM-to-SM control (handover, standby)"),
    KeySpec("SA_Key", "sa_key", 2, "trusted SA queries"),
    KeySpec("CC_Key", "cc_key", 1, "Congestion Control MADs to switches and HCAs"),
    KeySpec("AM_Key", None, 1, "SHARP Aggregation Manager MADs to aggregation nodes", "SHARP's Aggregation Manager"),
    KeySpec("VS_Key", None, 1, "vendor-specific MADs"),
    KeySpec("N2N_Key", None, 1, "node-to-node class MADs"),
    KeySpec("M2N_Key", None, 1, "manager-to-node class MADs"),
)
BY_OPTION: Final = {k.option: k for k in KEYS if k.option}
SECRET_KEYS: Final = ("sm_key", "sa_key", "cc_key")
"""The keys OpenSM takes that fabrics.yaml may give (``<key>_file``/``<key>_env``); the M_Key is ``m_key_file``."""
UNSUPPORTED_OPTIONS: Final = frozenset(f"{k.name.lower()}{s}" for k in KEYS if k.option is None and k.name != "P_Key"
                                       for s in ("", "_file", "_env"))  # fmt: skip
_HEX_RE: Final = re.compile(r"^0x[0-9a-fA-F]{1,16}$")


@dataclass(frozen=True)
class KeyState:
    """One key on the running SM: ``configured``, ``unset`` or ``not supported``."""

    name: str
    status: str
    setting: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"key": self.name, "status": self.status, "setting": self.setting, "detail": self.detail}


def _key(text: str) -> int | None:
    t = text.strip().lower()
    if re.fullmatch(r"0x[0-9a-f]+", t):
        return int(t, 16)
    return int(t) if re.fullmatch(r"[0-9]+", t) else None


def key_states(settings: Mapping[str, str], defaults: Mapping[str, str]) -> tuple[KeyState, ...]:
    """Every key of :data:`KEYS` on the SM whose opensm.conf is ``settings`` (missing options
    take ``defaults``, OpenSM's): configured (a value in range; P_Key: partitions enforced both
    ways), unset, or not supported by OpenSM 3.3.23."""
    s = {**defaults, **settings}
    differs = set(filter(None, s.get(KEY_DIFFERS, "").split(",")))
    out = []
    for k in KEYS:
        if k.name == "P_Key":
            on = s.get("part_enforce", "both").strip().lower() == "both" and s.get("no_partition_enforcement", "FALSE").strip().upper() == "FALSE"
            out.append(KeyState(k.name, "configured" if on else "unset", "part_enforce",
                                "partitions.conf enforced inbound and outbound" if on else "partition enforcement is not both ways"))  # fmt: skip
        elif k.option is None:
            where = f"; set in {k.elsewhere}, which gpufabric does not drive" if k.elsewhere else ""
            out.append(KeyState(k.name, "not supported", k.name.lower(), f"{SM_NAME} has no {k.name.lower()} option{where}"))
        else:
            v = _key(s.get(k.option, "0"))
            good = v is not None and k.low <= v <= U64
            detail = f"{k.option} set" if good else f"{k.option} is {s.get(k.option, '0')!r} (the default or out of range)"
            if k.option in differs:
                good, detail = False, f"{k.option} is not the key fabrics.yaml gives"
            out.append(KeyState(k.name, "configured" if good else "unset", k.option, detail))
    return tuple(out)


KEY_SEVERITY: Final = {"CC_Key": Severity.LOW}
"""Severity of an unset key the SM takes that the older checks (sm_key, sa_key, m_key) do not report."""


def key_findings(states: tuple[KeyState, ...]) -> list[tuple[str, str, Severity, str, str]]:
    """(id, setting, severity, observed, description) of each key the older checks do not cover:
    an unset CC_Key (LOW) and a key that differs from fabrics.yaml's (HIGH). A key the SM does not
    take is no finding (the key report says ``not supported``)."""
    out = []
    for st in states:
        fid = f"IB-HARD-{st.name.upper().replace('_', '-')}"
        if st.status == "unset" and "fabrics.yaml" in st.detail:
            out.append((fid + "-DIFFERS", st.setting, Severity.HIGH, "differs", f"{st.name}: {st.detail}"))
        elif st.status == "unset" and st.name in KEY_SEVERITY:
            out.append((fid, st.setting, KEY_SEVERITY[st.name], "unset", f"{st.name} unset: {st.detail}"))
    return out


def load_keys(o: Mapping[str, Any]) -> dict[str, Secret]:
    """The keys fabrics.yaml's ``options`` give (option -> its secret, checked): ``<key>_file``
    (0600) or ``<key>_env`` for each of :data:`SECRET_KEYS`. ConfigError naming the field and the
    allowed range for an inline key, a bad or out-of-range value, or a key OpenSM does not take."""
    for name in sorted(UNSUPPORTED_OPTIONS & set(o)):
        raise ConfigError(f"infiniband.options.{name}", "***", f"one of {', '.join(f'{k}_file/_env' for k in SECRET_KEYS)} "
                          f"and m_key_file ({SM_NAME} takes no {name.removesuffix('_file').removesuffix('_env')})")  # fmt: skip
    out: dict[str, Secret] = {}
    for name in SECRET_KEYS:
        spec = BY_OPTION[name]
        field = f"infiniband.options.{name}"
        secret = load_secret(field, o.get(name), o.get(f"{name}_file"), o.get(f"{name}_env"))
        if secret is None:
            continue
        text = secret.reveal().strip()
        if not _HEX_RE.fullmatch(text) or not spec.low <= int(text, 16) <= U64:
            raise ConfigError(field, "***", spec.allowed, f"from {secret.source}")
        out[name] = Secret(f"0x{int(text, 16):016x}", secret.source)
    return out


def differing(keys: Mapping[str, Secret], conf: Mapping[str, str]) -> tuple[str, ...]:
    """The options of ``keys`` whose value in the SM's opensm.conf ``conf`` is another key (or none)."""
    return tuple(sorted(n for n, s in keys.items() if _key(conf.get(n, "0")) != int(s.reveal(), 16)))
