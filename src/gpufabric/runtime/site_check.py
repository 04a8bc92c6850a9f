"""``gpufabric site check``: the preflight of a site before go-live and on demand. Loads
``config.yaml`` and ``fabrics.yaml`` exactly as the service does, checks the store (reachable,
migrations current, its clock within a bound of this host's), then asks every configured
fabric's backend for its own checks (:meth:`FabricBackend.site_checks`: the core never names a
fabric) against the inventory and networks the store holds.

Nothing is changed anywhere: the store is opened without migrating it, the fabrics are only read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.models import Network, Node
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.site_check import CheckLevel, SiteCheck, SiteContext, worst
from gpufabric.engine.fabrics import Fabrics
from gpufabric.store import db
from gpufabric.store.registry import Registry

Progress = Callable[[str], None]
OK, WARN, ERR, CRIT = CheckLevel.OK, CheckLevel.WARNING, CheckLevel.ERROR, CheckLevel.CRITICAL


@dataclass(frozen=True)
class SiteReport:
    checks: tuple[SiteCheck, ...]
    seconds: float

    @property
    def worst(self) -> CheckLevel:
        return worst(self.checks)

    @property
    def exit_code(self) -> int:
        return self.worst.exit_code

    def to_dict(self) -> dict[str, Any]:
        counts = {lv.value: sum(1 for c in self.checks if c.level is lv) for lv in CheckLevel}
        return {"worst": self.worst.value, "exit_code": self.exit_code, "counts": counts,
                "seconds": round(self.seconds, 3), "checks": [c.to_dict() for c in self.checks]}  # fmt: skip


def _msg(e: BaseException) -> str:
    return e.message if isinstance(e, GpufabricError) else (str(e).splitlines() or [type(e).__name__])[0]


def store_checks(url: str, clock_bound: float) -> tuple[list[SiteCheck], tuple[Node, ...], tuple[Network, ...]]:
    """Reachable, migrations at head, DB clock within ``clock_bound`` s; the inventory and
    networks when the store is current (read without migrating it)."""
    where = db.redact(url)
    try:
        engine = db.make_engine(url)
    except GpufabricError as e:
        return [SiteCheck("STORE-REACH", CRIT, f"store {where}: {_msg(e)}", where)], (), ()
    try:
        try:
            rev = db.current_revision(engine)
            head = db.head_revision()
        except Exception as e:
            return [SiteCheck("STORE-REACH", CRIT, f"store {where}: {_msg(db.store_error(e, where))}", where)], (), ()
        out = [SiteCheck("STORE-REACH", OK, f"store {where} answers ({engine.dialect.name})", where)]
        if rev == head:
            out.append(SiteCheck("STORE-MIGRATIONS", OK, f"store at migration {head} (head)", where))
        elif rev is None:
            out.append(SiteCheck("STORE-MIGRATIONS", ERR, f"store {where} is empty (no migration): the first command "
                                 "that opens it creates the schema", where))  # fmt: skip
        else:
            newer = rev > head
            out.append(SiteCheck("STORE-MIGRATIONS", ERR, f"store {where} at migration {rev}, this gpufabric's head is "
                                 f"{head}: " + ("the store is newer than this gpufabric (upgrade it)" if newer else
                                 "back it up (`gpufabric store backup`), then any command that opens it migrates it"),
                                 where))  # fmt: skip
        out.append(_clock(engine, where, clock_bound))
        if rev != head:
            return out, (), ()
        from gpufabric.store.core import Store

        store = Store(engine, url)
        try:
            return out, tuple(store.nodes()), tuple(store.networks())
        except Exception as e:
            out.append(SiteCheck("STORE-INVENTORY", ERR, f"store {where}: inventory not readable: {_msg(e)}", where))
            return out, (), ()
    finally:
        engine.dispose()


def _clock(engine: Any, where: str, bound: float) -> SiteCheck:
    """This host's clock against the store's (PostgreSQL ``now()``); SQLite is this host's clock."""
    if engine.dialect.name != "postgresql":
        return SiteCheck("STORE-CLOCK", OK, f"store {where} ({engine.dialect.name}) runs on this host's clock", where)
    with engine.connect() as conn:
        t0 = time.time()
        dbnow = conn.execute(text("SELECT now()")).scalar_one()
        t1 = time.time()
    skew = dbnow.timestamp() - (t0 + t1) / 2
    msg = f"store clock {skew:+.3f}s from this host's (bound {bound:g}s, round trip {t1 - t0:.3f}s)"
    return SiteCheck("STORE-CLOCK", OK if abs(skew) <= bound else ERR, msg if abs(skew) <= bound else
                     f"{msg}: leases, heartbeats and tokens use the store's time; run NTP on both hosts", where)  # fmt: skip


def run_site_check(
    url: str,
    config: Callable[[], SegmentConfig],
    fabrics_path: Path,
    clock_bound: float = 2.0,
    progress: Progress | None = None,
    registry: Registry | None = None,
) -> SiteReport:
    """Every check, in order: configuration, store, then each configured fabric's own."""
    say = progress or (lambda _m: None)
    t0 = time.monotonic()
    checks: list[SiteCheck] = []
    try:
        cfg = config()
    except GpufabricError as e:
        checks.append(SiteCheck("CONFIG", CRIT, f"config.yaml: {_msg(e)}", "config.yaml"))
        return SiteReport(tuple(checks), time.monotonic() - t0)
    checks.append(SiteCheck("CONFIG", OK, "config.yaml valid (segments, quotas)", "config.yaml"))
    say("store: reachable, migrations, clock")
    found, nodes, networks = store_checks(url, clock_bound)
    checks += found
    try:
        fabrics = Fabrics.load(fabrics_path, registry or Registry.from_entry_points(), cfg)
    except GpufabricError as e:
        checks.append(SiteCheck("FABRICS-CONFIG", CRIT, f"{fabrics_path}: {_msg(e)}", str(fabrics_path)))
        return SiteReport(tuple(checks), time.monotonic() - t0)
    checks.append(SiteCheck("FABRICS-CONFIG", OK, f"{fabrics_path}: {', '.join(fabrics.backends) or 'no fabric'}",
                            str(fabrics_path)))  # fmt: skip
    ctx = SiteContext(nodes=nodes, networks=networks, segments=cfg, settings=fabrics.settings)
    try:
        for name, backend in fabrics.backends.items():
            say(f"{name}: checking its devices")
            t = time.monotonic()
            try:
                got = list(backend.site_checks(ctx))
            except Exception as e:  # a fabric's check itself broke: a finding, the others still run
                got = [SiteCheck(f"{name.upper()}-CHECK", ERR, f"fabrics.yaml {name}: check failed: {_msg(e)}", name)]
            checks += got
            say(f"{name}: {len(got)} check(s), worst {worst(got).value}, {time.monotonic() - t:.1f}s")
    finally:
        fabrics.close()
    return SiteReport(tuple(checks), time.monotonic() - t0)
