"""The API's edge (issue 18, findings 4-5-6): a request without a valid token is refused
before a byte of its body is read; bodies are capped (by Content-Length and as they stream);
writes are rate-limited per principal; ``/metrics`` and the detailed ``/readyz`` need an admin
token (or the probe listener), and nothing open tells a tenant the loops' errors."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app
from gpufabric.api.limits import MIB, ApiLimits
from gpufabric.domain.errors import ConfigError
from gpufabric.runtime.loops import Loops

from support.api_world import World, build_world, inventory
from support.asgi_call import asgi_call


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = build_world(tmp_path_factory.mktemp("edge"), nodes=4, leased=2)
    yield w
    w.store.close()


@pytest.fixture
def client(world: World) -> Iterator[TestClient]:
    world.ctx.configure(ApiLimits())
    with TestClient(create_app(world.ctx)) as c:
        yield c
    world.ctx.configure(ApiLimits())


# ---------------------------------------------------------------- auth before body
def test_a_malformed_body_without_a_token_is_401_not_422(client: TestClient, world: World) -> None:
    for headers in ({}, {"Authorization": "Bearer gf_not-a-token"}, {"Authorization": "Basic YWRtaW46eA=="}):
        r = client.post("/api/v1/tenants", content=b"{not json", headers={**headers, "Content-Type": "application/json"})
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"] == "Bearer"
        assert r.json()["error"]["code"] == "unauthorized"
    assert client.get("/api/v1/tenants/gamma", headers=world.headers("admin")).status_code == 404


def test_without_a_token_not_a_byte_of_the_body_is_read(world: World) -> None:
    app = create_app(world.ctx)
    body = json.dumps({"name": "gamma"}).encode()
    status, answer, read = asgi_call(app, "POST", "/api/v1/tenants",
                                 {"content-type": "application/json", "content-length": str(len(body))}, [body])
    assert (status, read) == (401, 0), answer
    assert b"missing bearer token" in answer


# ---------------------------------------------------------------- body cap
def test_a_body_over_the_cap_by_content_length_is_413_naming_the_limit(client: TestClient, world: World) -> None:
    big = json.dumps({"name": "x" * (MIB + 10)}).encode()
    r = client.post("/api/v1/tenants", content=big, headers={**world.headers("admin"), "Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    err = r.json()["error"]
    assert err["code"] == "too_large" and err["field"] == "max_body" and err["value"] == len(big)
    assert err["message"] == f"request body too large: at most 1 MiB ({MIB} bytes, max_body)"
    assert "\n" not in err["message"]
    assert client.get("/api/v1/events?limit=1", headers=world.headers("admin")).json()["items"][0]["action"] != (
        "tenant.create"
    )


def test_a_streamed_body_is_refused_as_soon_as_it_passes_the_cap(world: World) -> None:
    world.ctx.configure(ApiLimits(max_body=256 * 1024))
    try:
        app = create_app(world.ctx)
        chunks = [b"x" * 65536] * 64  # 4 MiB, chunked, no Content-Length
        headers = {**world.headers("admin"), "content-type": "application/json", "transfer-encoding": "chunked"}
        status, answer, read = asgi_call(app, "POST", "/api/v1/tenants", headers, chunks)
    finally:
        world.ctx.configure(ApiLimits())
    assert status == 413, answer
    assert read == 5  # 4 x 64 KiB = the cap; the 5th chunk passes it and reading stops there
    assert json.loads(answer)["error"]["message"].startswith("request body too large: at most 262144 bytes")


def test_inventory_import_has_its_own_larger_cap(client: TestClient, world: World) -> None:
    inv = json.dumps(inventory(60), indent=64).encode()  # ~1.6 MiB: more than any other body may be
    assert 1.2 * MIB < len(inv) < 2 * MIB
    admin = {**world.headers("admin"), "Content-Type": "application/json"}
    r = client.post("/api/v1/inventory", content=inv, headers=admin)
    assert r.status_code == 200 and r.json()["added"] == 56, r.text
    small = client.post("/api/v1/tenants", content=inv, headers=admin)
    assert small.status_code == 413 and small.json()["error"]["field"] == "max_body"
    world.ctx.configure(ApiLimits(max_inventory_body=MIB))
    r = client.post("/api/v1/inventory", content=inv, headers=admin)
    assert r.status_code == 413 and r.json()["error"]["field"] == "max_inventory_body", r.text


# ---------------------------------------------------------------- write rate
def test_writes_past_the_rate_are_429_with_retry_after_and_nothing_recorded(client: TestClient, world: World) -> None:
    world.ctx.configure(ApiLimits(write_rate=0.5, write_burst=3))
    beta = world.headers("lessee-beta")
    made = [client.post("/api/v1/networks", json={"name": f"rl-{i}", "tenant": "beta"}, headers=beta).status_code
            for i in range(4)]  # fmt: skip
    assert made == [201, 201, 201, 429]
    r = client.post("/api/v1/networks", json={"name": "rl-x", "tenant": "beta"}, headers=beta)
    assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= 2
    err = r.json()["error"]
    assert err["code"] == "rate_limited" and err["field"] == "write_rate" and err["value"] == "beta-user"
    assert err["message"].startswith("rate limit: at most 0.5 writes/s per principal (burst 3); retry after ")
    names = {n["name"] for n in client.get("/api/v1/networks?tenant=beta", headers=beta).json()["items"]}
    assert {"rl-0", "rl-1", "rl-2"} <= names and not {"rl-3", "rl-x"} & names
    assert client.get("/api/v1/networks", headers=beta).status_code == 200  # reads are not limited
    alpha = client.post("/api/v1/networks", json={"name": "rl-a", "tenant": "alpha"}, headers=world.headers("lessee-alpha"))
    assert alpha.status_code == 201  # per principal: beta's bucket is not alpha's
    admin = [client.post("/api/v1/tenants", json={"name": f"rl-t{i}"}, headers=world.headers("admin")).status_code
             for i in range(5)]  # fmt: skip
    assert admin == [201] * 5  # admins are exempt unless --limit-admin-writes
    world.ctx.configure(ApiLimits(write_rate=0.5, write_burst=1, limit_admin=True))
    assert client.delete("/api/v1/tenants/rl-t0", headers=world.headers("admin")).status_code == 200
    assert client.delete("/api/v1/tenants/rl-t1", headers=world.headers("admin")).status_code == 429


def test_a_bucket_refills_at_its_rate() -> None:
    from gpufabric.api.limits import WriteBuckets

    b = WriteBuckets(rate=2.0, burst=2)
    assert [b.take("p", now=0.0), b.take("p", now=0.0)] == [0.0, 0.0]
    assert b.take("p", now=0.0) == pytest.approx(0.5)
    assert b.take("p", now=0.25) == pytest.approx(0.25)
    assert b.take("p", now=0.5) == 0.0
    assert b.take("q", now=0.5) == 0.0


def test_limits_out_of_range_are_one_line_config_errors() -> None:
    with pytest.raises(ConfigError) as e:
        ApiLimits(max_body=10).check()
    assert "max_body" in str(e.value) and "1024" in str(e.value)
    with pytest.raises(ConfigError, match="stream_poll_max"):
        ApiLimits(stream_poll_min=5.0, stream_poll_max=1.0).check()


# ---------------------------------------------------------------- /metrics, /readyz, /healthz
@pytest.fixture
def failing_loop(world: World) -> Iterator[None]:
    def body() -> None:
        raise RuntimeError("ssh admin@10.9.8.7: authentication failed (UFM answered 'token abc123')")

    world.ctx.loops = Loops()
    st = world.ctx.loops.start("reconcile", body, 0.05)
    deadline = time.monotonic() + 10
    while not st.errors and time.monotonic() < deadline:
        time.sleep(0.02)
    yield
    world.ctx.loops.shutdown()
    world.ctx.loops = Loops()


def test_metrics_need_an_admin_token(client: TestClient, world: World) -> None:
    world.ctx.metrics = lambda: 'gpufabric_audit_violations{invariant="IB-ROGUE-SM"} 0.0\n'
    assert client.get("/metrics").status_code == 401
    lessee = client.get("/metrics", headers=world.headers("lessee-alpha"))
    assert lessee.status_code == 403 and lessee.json()["error"]["allowed"] == "admin"
    assert client.get("/metrics", headers=world.headers("owner-alpha")).status_code == 403
    ok = client.get("/metrics", headers=world.headers("admin"))
    assert ok.status_code == 200 and "IB-ROGUE-SM" in ok.text


def test_readyz_tells_no_errors_without_an_admin_token(client: TestClient, world: World, failing_loop: None) -> None:
    for headers in ({}, world.headers("lessee-beta"), world.headers("owner-alpha")):
        r = client.get("/readyz", headers=headers)
        assert r.status_code in (200, 503)
        assert r.json()["checks"] == {"store": "ok", "reconcile": "ok" if r.status_code == 200 else "unavailable"}
        assert "10.9.8.7" not in r.text and "abc123" not in r.text and "admin@" not in r.text
    detailed = client.get("/readyz", headers=world.headers("admin")).json()
    assert "10.9.8.7" in detailed["checks"]["reconcile"]["last_error"]
    assert detailed["checks"]["store"]["ok"] is True
    assert client.get("/readyz", headers={"Authorization": "Bearer gf_wrong"}).status_code == 401
    assert client.get("/healthz").json() == {"status": "ok", "checks": {}}


def test_the_probe_listener_serves_metrics_without_a_token_and_only_on_loopback(
    world: World, failing_loop: None
) -> None:
    from gpufabric.api.app import create_probe_app
    from gpufabric.cli.serve_cmd import parse_probe_bind

    world.ctx.metrics = lambda: "gpufabric_loop_alive 1\n"
    with TestClient(create_probe_app(world.ctx)) as probe:
        assert probe.get("/metrics").text == "gpufabric_loop_alive 1\n"
        assert "10.9.8.7" in probe.get("/readyz").json()["checks"]["reconcile"]["last_error"]
        assert probe.get("/api/v1/nodes").status_code == 404  # nothing else
    assert parse_probe_bind("127.0.0.1:9480") == ("127.0.0.1", 9480)
    assert parse_probe_bind("[::1]:9480") == ("::1", 9480)
    for bad in ("0.0.0.0:9480", "10.0.0.1:9480", "127.0.0.1", "127.0.0.1:0", "localhost:x"):
        with pytest.raises(ConfigError, match="probe_bind"):
            parse_probe_bind(bad)


def test_the_schema_documents_413_on_every_call_and_429_on_writes(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "413" in paths["/api/v1/nodes"]["get"]["responses"]
    post = paths["/api/v1/networks"]["post"]["responses"]
    assert "413" in post and "Retry-After" in post["429"]["headers"]
    assert "429" in paths["/api/v1/moves/{move_id}/events"]["get"]["responses"]
    assert "429" not in paths["/api/v1/nodes"]["get"]["responses"]


def test_concurrent_writes_of_one_principal_share_one_bucket(client: TestClient, world: World) -> None:
    world.ctx.configure(ApiLimits(write_rate=0.1, write_burst=5))
    beta = world.headers("lessee-beta")
    codes: list[int] = []
    lock = threading.Lock()

    def write(i: int) -> None:
        r = client.post("/api/v1/networks", json={"name": f"cc-{i}", "tenant": "beta"}, headers=beta)
        with lock:
            codes.append(r.status_code)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [201] * 5 + [429] * 7


def test_a_store_url_in_the_world_is_not_leaked(tmp_path: Path) -> None:
    """/readyz with the store down says 'unavailable' to a probe, and why only to an admin."""
    w = build_world(tmp_path, nodes=1, leased=0)
    admin = w.headers("admin")
    with TestClient(create_app(w.ctx)) as c:
        w.ctx.reader.revision = lambda: (_ for _ in ()).throw(OSError(f"cannot open {w.store.url}"))  # type: ignore[method-assign]
        r = c.get("/readyz")
        assert (r.status_code, r.json()) == (503, {"status": "unavailable", "checks": {"store": "unavailable"}})
        assert "cannot open" in c.get("/readyz", headers=admin).json()["checks"]["store"]["error"]
    w.store.close()
