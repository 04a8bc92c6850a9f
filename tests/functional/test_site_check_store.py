"""Site check of the store on real SQLite and PostgreSQL: migrations current (an empty store
and one behind are errors, never migrated by the check), the PostgreSQL clock against this
host's within the bound, an unreachable store critical with its password redacted."""

from __future__ import annotations

from sqlalchemy import text

from gpufabric.domain.site_check import CheckLevel
from gpufabric.runtime.site_check import store_checks
from gpufabric.store import db
from gpufabric.store.core import Store


def levels(url: str, bound: float = 60.0) -> dict[str, CheckLevel]:
    return {c.id: c.level for c in store_checks(url, bound)[0]}


def test_migrations_and_clock(store_url: str) -> None:
    assert levels(store_url)["STORE-MIGRATIONS"] is CheckLevel.ERROR  # empty: and left empty
    assert db.current_revision(db.make_engine(store_url)) is None
    Store.open(store_url).close()
    got = levels(store_url)
    assert got == {"STORE-REACH": CheckLevel.OK, "STORE-MIGRATIONS": CheckLevel.OK, "STORE-CLOCK": CheckLevel.OK}
    engine = db.make_engine(store_url)
    with engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = '0005'"))
    engine.dispose()
    checks, nodes, _ = store_checks(store_url, 60.0)
    [m] = [c for c in checks if c.id == "STORE-MIGRATIONS"]
    assert m.level is CheckLevel.ERROR and "at migration 0005" in m.message and nodes == ()
    assert db.current_revision(db.make_engine(store_url)) == "0005"  # the check migrated nothing


def test_clock_bound(store_url: str) -> None:
    Store.open(store_url).close()
    [clock] = [c for c in store_checks(store_url, 0.0)[0] if c.id == "STORE-CLOCK"]
    if store_url.startswith("sqlite"):
        assert clock.level is CheckLevel.OK and "runs on this host's clock" in clock.message
        return
    assert clock.level is CheckLevel.ERROR and "bound 0s" in clock.message and "NTP" in clock.message
    assert levels(store_url, 5.0)["STORE-CLOCK"] is CheckLevel.OK


def test_unreachable_store_is_critical_without_its_password() -> None:
    url = "postgresql+psycopg://gpf:s3cret@/gpufabric?host=/nonexistent-dir&port=5432"
    [c] = store_checks(url, 2.0)[0]
    assert (c.id, c.level) == ("STORE-REACH", CheckLevel.CRITICAL)
    assert "s3cret" not in c.message and "***" in c.message
