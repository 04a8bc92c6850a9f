"""I/O helpers of the OpenSM driver beyond the PKey tables: the M_Key file, the mode of the
opensm.conf holding the keys, the switches' MulticastFDBCap (by SMP) and the wait for OpenSM's
SA database to show the IPoIB groups.

Kept apart from :mod:`~gpufabric.fabrics.infiniband.drivers.opensm.driver` so that the driver stays one screenful of apply/verify; the
parsing they rely on is pure, in :mod:`~gpufabric.fabrics.infiniband.state.ipoib`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gpufabric.domain.errors import ConfigError, VerifyError
from gpufabric.fabrics.infiniband.drivers.opensm.diag import Diag
from gpufabric.fabrics.infiniband.drivers.opensm.files import read_text
from gpufabric.fabrics.infiniband.state.ipoib import (
    broadcast_mgid,
    missing_groups,
    parse_mcast_fdb_cap,
    parse_sa_dump_groups,
    stale_groups,
    wrong_groups,
)
from gpufabric.transport.secrets import Secret, owner_only, secret_file

FABRIC = "infiniband"
GROUP_POLL_S = 0.05


def count_option(name: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 0x3FFF:
        raise ConfigError(f"infiniband.options.{name}", v, "an integer 0-16383 (0: read from the switches)")
    return v


def load_m_key(path: Path | None) -> Secret | None:
    """The M_Key of ``m_key_file`` (checked like every secret file: regular, mode 0600,
    non-empty); ConfigError naming ``m_key_file`` when unreadable or not a 64-bit key."""
    if path is None:
        return None
    key = secret_file("m_key", path)
    try:
        value = int(key.reveal(), 0)
    except ValueError:
        value = -1
    if not 0 < value <= 0xFFFF_FFFF_FFFF_FFFF:
        raise ConfigError("m_key_file", str(path), "a non-zero 64-bit M_Key (0x...)")
    return Secret(f"0x{value:016x}", key.source)


KEY_SETTINGS = ("sm_key", "sa_key", "m_key")
CONF_FIELD = "infiniband.options.opensm_conf"


def conf_keys(settings: Mapping[str, str]) -> list[str]:
    """The keys an opensm.conf sets to something other than 0 (OpenSM's defaults are 0/1:
    a file that sets none holds no secret)."""
    out = []
    for k in KEY_SETTINGS:
        try:
            if int(settings.get(k, "0"), 0) not in (0, 1):
                out.append(k)
        except ValueError:
            out.append(k)  # unparsable, but there: treat as a key
    return out


def conf_mode_ok(path: Path, settings: Mapping[str, str], mode: int | None, insecure: bool) -> bool:
    """Whether the opensm.conf at ``path`` (its file ``mode``; None: unknown) may be read: it
    sets no key, or group and others cannot access it. A key file they can read is a one-line
    ConfigError naming ``infiniband.options.opensm_conf`` and the mode required, unless
    ``insecure`` (then False: reported, :meth:`OpenSMDriver.transport_notes`)."""
    if mode is None or not conf_keys(settings):
        return True
    return owner_only(CONF_FIELD, path, mode, insecure)


def read_mcast_fdb_cap(diag: Diag, switch_lids: Sequence[int]) -> int:
    """The smallest McastFdbCap of ``switch_lids`` (``smpquery switchinfo``, on the diag pool);
    0 when none answered."""
    caps = [parse_mcast_fdb_cap(r) for r in diag.map(diag.switchinfo, switch_lids) if isinstance(r, str)]
    return min((c for c in caps if c), default=0)


def wait_for_groups(
    sa_dump: Path, pkeys: Sequence[int], timeout: float,
    read: Callable[[Path], str | None] = read_text, host: str | None = None,
    wanted: Mapping[int, Mapping[str, int]] | None = None,
) -> None:  # fmt: skip
    """Until ``sa_dump`` (OpenSM's opensm-sa.dump, read by ``read``: this host's file, or the
    master SM host's over SSH, named ``host``) holds an IPoIB broadcast group for every PKey of
    ``pkeys``, each with the MTU and rate ``wanted`` asks of it (PKey -> {"mtu", "rate"}), and
    none of a tenant PKey not in it; VerifyError naming the host and PKeys after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        groups = parse_sa_dump_groups(read(sa_dump) or "")
        missing, stale = missing_groups(pkeys, groups), stale_groups(pkeys, groups)
        wrong = wrong_groups(wanted or {}, groups)
        if not missing and not stale and not wrong:
            return
        if time.monotonic() > deadline:
            lost = [f"0x{(k & 0x7FFF) | 0x8000:04x}" for k in sorted(pkeys) if broadcast_mgid(k) in missing]
            what = [f"no IPoIB broadcast group {', '.join(missing[:3])} (PKey {', '.join(lost[:3])})"] * bool(missing)
            what += [f"stale group {', '.join(stale[:3])}"] if stale else []
            what += [f"group {', '.join(wrong[:3])}"] if wrong else []
            where = f"SM host {host}: " if host else ""
            raise VerifyError(
                f"{where}OpenSM's SA database ({sa_dump}) after {timeout}s: {'; '.join(what)} "
                "(sa_db_dump TRUE in opensm.conf?)",
                fabric=FABRIC,
                missing=missing,
                missing_pkeys=lost,
                stale=stale,
                wrong=wrong,
                **({"sm_host": host, "device": host} if host else {}),
            )
        time.sleep(GROUP_POLL_S)
