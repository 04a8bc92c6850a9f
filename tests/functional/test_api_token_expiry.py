"""API tokens that expire (migration 0006, SQLite and PostgreSQL) and a CLI that need not put
its token on the command line (``--token-file`` / ``$GPUFABRIC_TOKEN_FILE``, mode 0600)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from alembic import command
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import UnauthorizedError, ValidationError
from gpufabric.store import db
from gpufabric.store.auth import Tokens
from gpufabric.store.core import Store

from support.api_world import World, build_world
from support.live_api import gf, live_api


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[World, TestClient]]:
    w = build_world(tmp_path, nodes=2, leased=0)
    with TestClient(create_app(w.ctx)) as c:
        yield w, c
    w.store.close()


def test_an_expired_token_is_refused_401_with_a_clear_message_even_when_cached(
    world: tuple[World, TestClient],
) -> None:
    w, client = world
    until = datetime.now(UTC) + timedelta(seconds=5)  # room for a loaded CI machine before the first call
    made = client.post("/api/v1/tokens", headers=w.headers("admin"),
                       json={"name": "short", "role": "lessee", "tenant": "alpha", "expires_at": until.isoformat()})
    assert made.status_code == 201, made.text
    assert datetime.fromisoformat(made.json()["expires_at"]) == until.replace(microsecond=until.microsecond)
    h = {"Authorization": f"Bearer {made.json()['secret']}"}
    # Called until just before the expiry: the principal is cached for AUTH_TTL (2 s) from its last check,
    # so the last entry would outlive the expiry if the cache did not stop at it.
    calls = 0
    while calls == 0 or datetime.now(UTC) < until - timedelta(seconds=0.4):
        assert client.get("/api/v1/nodes", headers=h).status_code == 200
        calls += 1
        time.sleep(0.25)
    assert calls >= 2
    time.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()) + 0.1)
    r = client.get("/api/v1/nodes", headers=h)  # within the cache's 2 s, past the expiry
    assert r.status_code == 401, r.text
    msg = r.json()["error"]["message"]
    assert f"token {made.json()['id']} (short) expired at {until.isoformat(timespec='seconds')[:16]}" in msg
    assert "gpufabric token create" in msg and "\n" not in msg
    listed = {t["name"]: t for t in client.get("/api/v1/tokens", headers=w.headers("admin")).json()["items"]}
    assert listed["short"]["expires_at"] is not None and listed["ops"]["expires_at"] is None


@pytest.mark.parametrize("expires", ["2020-01-01T00:00:00Z", "2999-01-01T00:00:00Z", "2030-01-01T00:00:00"])
def test_an_expiry_in_the_past_too_far_or_without_timezone_is_422_and_nothing_is_made(
    world: tuple[World, TestClient], expires: str
) -> None:
    w, client = world
    before = client.get("/api/v1/tokens", headers=w.headers("admin")).json()["items"]
    r = client.post("/api/v1/tokens", headers=w.headers("admin"),
                    json={"name": "bad", "role": "admin", "expires_at": expires})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] in ("expires", "expires_at")
    assert client.get("/api/v1/tokens", headers=w.headers("admin")).json()["items"] == before


def test_tokens_check_names_the_expired_token(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path}/s.db") as s:
        t = Tokens(s)
        info, secret = t.create("soon", "admin", None, LOCAL_ADMIN, datetime.now(UTC) + timedelta(seconds=3))
        p, until = t.check(secret)
        assert p.name == "soon" and until == info.expires_at
        assert until is not None
        time.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()) + 0.1)
        with pytest.raises(UnauthorizedError, match=rf"^token {info.id} \(soon\) expired at "):
            t.check(secret)
        with pytest.raises(ValidationError, match="expires"):
            t.create("past", "admin", None, LOCAL_ADMIN, datetime.now(UTC) - timedelta(seconds=1))


def test_migration_0006_keeps_every_token_valid_and_adds_expiry(store_url: str) -> None:
    engine = db.make_engine(store_url)
    with engine.begin() as conn:
        cfg = db._config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0005")
    secret = "gf_" + "a" * 43
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO tokens (name, role, tenant, secret_sha256, created_at, created_by)"
            f" VALUES ('old', 'admin', NULL, '{hashlib.sha256(secret.encode()).hexdigest()}', '2026-01-01', 'x')"
        )
    engine.dispose()
    with Store.open(store_url) as s:
        t = Tokens(s)
        p, until = t.check(secret)
        assert (p.name, until) == ("old", None)
        info, new = t.create("new", "admin", None, LOCAL_ADMIN, datetime.now(UTC) + timedelta(days=1))
        assert t.check(new)[1] == info.expires_at
        assert [x.expires_at is None for x in t.list()] == [True, False]
    engine = db.make_engine(store_url)
    with engine.begin() as conn:
        cfg = db._config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
        assert conn.exec_driver_sql("SELECT count(*) FROM tokens").scalar() == 2
    engine.dispose()


def test_expires_takes_a_duration_or_an_iso_time() -> None:
    from gpufabric.cli.admin_cmd import parse_expires

    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert parse_expires("90m", now) == now + timedelta(minutes=90)
    assert parse_expires("30d", now) == now + timedelta(days=30)
    assert parse_expires("2w", now) == now + timedelta(weeks=2)
    assert parse_expires("2027-01-01T00:00:00Z", now) == datetime(2027, 1, 1, tzinfo=UTC)
    assert parse_expires(None, now) is None
    for bad in ("0h", "5x", "soon", "2027-01-01T00:00:00", "-1d"):
        with pytest.raises(ValidationError, match="expires"):
            parse_expires(bad, now)


# ---------------------------------------------------------------- the CLI
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, str, Path]]:
    home = tmp_path_factory.mktemp("cli")
    w = build_world(home, nodes=2, leased=0)
    with live_api(w.ctx) as base:
        yield w, base, home
    w.store.close()


def test_the_cli_reads_its_token_from_a_0600_file(served: tuple[World, str, Path], tmp_path: Path) -> None:
    w, base, home = served
    f = tmp_path / "token"
    f.write_text(w.tokens["lessee-alpha"] + "\n")
    f.chmod(0o600)
    by_env = gf(home, "--api", base, "tenant", "list", "--json", GPUFABRIC_TOKEN_FILE=str(f))
    assert by_env.returncode == 0, by_env.stderr
    assert [t["name"] for t in json.loads(by_env.stdout)] == ["alpha"]
    by_opt = gf(home, "--api", base, "--token-file", str(f), "tenant", "list", "--json")
    assert by_opt.returncode == 0 and json.loads(by_opt.stdout) == json.loads(by_env.stdout), by_opt.stderr
    f.chmod(0o644)
    loose = gf(home, "--api", base, "--token-file", str(f), "tenant", "list")
    assert loose.returncode == 2 and "token_file" in loose.stderr and "0600" in loose.stderr
    assert len(loose.stderr.strip().splitlines()) == 1
    both = gf(home, "--api", base, "--token", "x", "--token-file", str(f), "tenant", "list")
    assert both.returncode == 2 and "one of --token or --token-file" in both.stderr


def test_the_cli_makes_an_expiring_token_and_refuses_a_bad_expiry(served: tuple[World, str, Path]) -> None:
    w, base, home = served
    before = datetime.now(UTC)
    made = gf(home, "--api", base, "token", "create", "--role", "lessee", "--tenant", "beta", "--expires", "1h",
               "--json", GPUFABRIC_TOKEN=w.tokens["admin"])  # fmt: skip
    assert made.returncode == 0, made.stderr
    until = datetime.fromisoformat(json.loads(made.stdout)["expires_at"])
    assert before + timedelta(minutes=59) < until < datetime.now(UTC) + timedelta(hours=1)
    local = gf(home, "token", "create", "--role", "admin", "--name", "local", "--expires", "2030-06-01T00:00:00Z",
                "--json")  # fmt: skip
    assert local.returncode == 0 and json.loads(local.stdout)["expires_at"].startswith("2030-06-01T00:00:00"), local.stderr
    bad = gf(home, "token", "create", "--role", "admin", "--expires", "tomorrow")
    assert bad.returncode == 2 and "expires" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    past = gf(home, "token", "create", "--role", "admin", "--expires", "2020-01-01T00:00:00Z")
    assert past.returncode == 2 and "expires" in past.stderr
    names = [t["name"] for t in httpx.get(f"{base}/api/v1/tokens", headers=w.headers("admin")).json()["items"]]
    assert names.count("admin") == 0 and "local" in names
