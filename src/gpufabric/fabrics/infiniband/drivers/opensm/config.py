"""The OpenSM driver's settings (fabrics.yaml ``infiniband.options`` of the ``opensm`` driver):
where the SM's files are, how it is reloaded, who the trusted SMs are, how tables are read back,
IPoIB options, the M_Key file and the SM's other keys (``sm_key``/``sa_key``/``cc_key`` as
``<key>_file`` or ``<key>_env``, :mod:`~gpufabric.fabrics.infiniband.audit.keys`: read and checked here). Validated when
fabrics.yaml loads. Pure but for reading those secrets.

The SM's files are either local (``partitions_conf`` + ``log_path`` + a reload option: the
co-located SM, the default) or on SM hosts of their own (``sm_hosts``, :mod:`~gpufabric.fabrics.infiniband.drivers.opensm.hosts`: a
master/standby pair or more, reached over SSH); ``lock_file`` is the local lock serialising
applies of several gpufabric processes (default: next to ``partitions_conf``, or in the
temp directory with ``sm_hosts``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.audit.keys import SECRET_KEYS, UNSUPPORTED_OPTIONS, load_keys
from gpufabric.fabrics.infiniband.drivers.opensm.checks import count_option
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import SmHostConfig, parse_sm_hosts
from gpufabric.fabrics.infiniband.state.ipoib import IpoibOptions
from gpufabric.fabrics.infiniband.state.partitions import DEFAULT_CAPACITY
from gpufabric.transport.secrets import Secret


@dataclass(frozen=True)
class OpenSMConfig:
    partitions_conf: Path | None = None
    log_path: Path | None = None
    pid_file: Path | None = None
    systemd_unit: str | None = None
    reload_command: tuple[str, ...] = ()
    restart_command: tuple[str, ...] = ()
    trusted_sm_guids: tuple[Guid, ...] = ()
    diag_env: tuple[tuple[str, str], ...] = ()
    diag_prefix: tuple[str, ...] = ()
    diag_cwd: Path | None = None
    sweep_timeout: float = 60.0
    verify_timeout: float = 20.0
    default_capacity: int = DEFAULT_CAPACITY
    require_present: bool = True
    workers: int = 8
    reader: str = "batch"  # "batch" | "smpquery"
    reader_command: tuple[str, ...] = ()  # batch reader argv (default: this python -m ...smpbatch)
    reader_idle: float = 5.0  # the batch reader process exits after this many idle seconds
    opensm_conf: Path | None = None  # the SM's options file (-F), read by observe for the hardening audit
    ipoib: IpoibOptions = field(default_factory=IpoibOptions)
    sa_dump: Path | None = None  # OpenSM's opensm-sa.dump (sa_db_dump TRUE): broadcast groups verified from it
    mcast_fdb_cap: int = 0  # 0: read MulticastFDBCap from the switches by SMP
    m_key_file: Path | None = None  # the M_Key every SMP carries (secret file, mode 0600)
    sm_hosts: tuple[SmHostConfig, ...] = ()  # SM hosts over SSH; () = the local SM of partitions_conf
    lock_file: Path | None = None
    insecure: bool = False  # accept an opensm_conf holding keys that group/others may read (reported)
    keys: tuple[tuple[str, Secret], ...] = field(default=(), metadata={"options": tuple(
        (f"{k}{s}", t) for k in SECRET_KEYS for s, t in (("_file", "Path (mode 0600) \\| None"), ("_env", "str \\| None"))
    )})  # option -> the key the running SM must hold (sm_key, sa_key, cc_key), read from <key>_file / <key>_env  # fmt: skip

    @classmethod
    def from_options(cls, o: Mapping[str, Any]) -> OpenSMConfig:
        """From fabrics.yaml ``options`` (strings, lists, a mapping for ``diag_env``)."""
        keys = load_keys(o)  # first: an inline or unsupported key is named as such, never echoed
        if "m_key" in o:
            raise ConfigError("infiniband.options.m_key", "*** (inline)", "m_key_file: (mode 0600)", "inline secrets are refused")
        taken = {f"{k}{s}" for k in SECRET_KEYS for s in ("", "_file", "_env")} | UNSUPPORTED_OPTIONS
        known = set(cls.__dataclass_fields__) - {"keys"}
        unknown = set(o) - known - taken
        if unknown:
            raise ConfigError("infiniband.options", sorted(unknown), f"options of opensm: {', '.join(sorted(known))}")
        sm_hosts = parse_sm_hosts(o["sm_hosts"]) if o.get("sm_hosts") is not None else ()
        if not sm_hosts and ("partitions_conf" not in o or "log_path" not in o):
            raise ConfigError(
                "infiniband.options", sorted(o), "partitions_conf and log_path (or sm_hosts) are required"
            )

        def path(k: str) -> Path | None:
            return Path(o[k]) if o.get(k) else None

        insecure = o.get("insecure", False)
        if not isinstance(insecure, bool):
            raise ConfigError("infiniband.options.insecure", insecure, "true or false (true: reported by the audit)")

        return cls(
            partitions_conf=path("partitions_conf"),
            log_path=path("log_path"),
            pid_file=path("pid_file"),
            systemd_unit=o.get("systemd_unit") or None,
            reload_command=tuple(o.get("reload_command") or ()),
            restart_command=tuple(o.get("restart_command") or ()),
            trusted_sm_guids=tuple(Guid.parse(g, "trusted_sm_guids") for g in o.get("trusted_sm_guids") or ()),
            diag_env=tuple(sorted((str(k), str(v)) for k, v in dict(o.get("diag_env") or {}).items())),
            diag_prefix=tuple(o.get("diag_prefix") or ()),
            diag_cwd=path("diag_cwd"),
            sweep_timeout=float(o.get("sweep_timeout", 60.0)),
            verify_timeout=float(o.get("verify_timeout", 20.0)),
            default_capacity=int(o.get("default_capacity", DEFAULT_CAPACITY)),
            require_present=bool(o.get("require_present", True)),
            workers=int(o.get("workers", 8)),
            reader=str(o.get("reader", "batch")),
            reader_command=tuple(o.get("reader_command") or ()),
            reader_idle=float(o.get("reader_idle", 5.0)),
            opensm_conf=path("opensm_conf"),
            ipoib=IpoibOptions.parse(o.get("ipoib")),
            sa_dump=path("sa_dump"),
            mcast_fdb_cap=count_option("mcast_fdb_cap", o.get("mcast_fdb_cap", 0)),
            m_key_file=path("m_key_file"),
            sm_hosts=sm_hosts,
            lock_file=path("lock_file"),
            insecure=insecure,
            keys=tuple(sorted(keys.items())),
        )

    @property
    def last_good(self) -> Path | None:
        p = self.partitions_conf
        return p.with_name(p.name + ".last-good") if p is not None else None
