"""UfmDriver against a local server implementing UFM's documented PKey REST subset
(tests/support/ufm_server.py): real HTTPS on 127.0.0.1 (a CA made for the test, passed
to the driver as ``verify``), in-memory UFM state."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError, ValidationError, VerifyError
from gpufabric.domain.values import Guid, Membership, PKey
from gpufabric.fabrics.infiniband.audit.hardening import SETTINGS_UNREADABLE
from gpufabric.fabrics.infiniband.drivers.ufm.driver import UfmDriver
from gpufabric.fabrics.infiniband.drivers.ufm.plan import wire_guid
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember, PkeyTable
from gpufabric.transport.secrets import Secret, TransportNote

from support import drivers
from support.ufm_server import UfmServer, ufm_server

F, L = Membership.FULL, Membership.LIMITED
A = [Guid(0x0002C90300000A00 + i) for i in range(3)]  # tenant A's ports
B = [Guid(0x0002C90300000B00 + i) for i in range(3)]  # tenant B's ports
RANGE = "0x0a00-0x0aff"


def tenant(pk: int, members: list[tuple[Guid, Membership]], ipoib: bool = False) -> Partition:
    return Partition(f"t{pk:x}", PKey(pk), tuple(sorted(PartitionMember(g, m) for g, m in members)), ipoib)


TWO_TENANTS = PartitionLayout(
    partitions=(
        tenant(0xA01, [(A[0], F), (A[1], F), (A[2], L)], ipoib=True),
        tenant(0xA02, [(B[0], F), (B[1], F)]),
    )
)


@pytest.fixture
def ufm() -> Iterator[UfmServer]:
    with ufm_server() as s:
        yield s


def driver(s: UfmServer, **kw: object) -> UfmDriver:
    opts: dict[str, object] = {
        "username": "admin",
        "password": Secret("s3cret-test"),
        "managed_pkeys": RANGE,
        "verify": str(s.ca_file),
        **kw,
    }
    return UfmDriver(s.url, **opts)  # type: ignore[arg-type]


def expected_tables(layout: PartitionLayout) -> tuple[PkeyTable, ...]:
    entries: dict[Guid, set[int]] = {}
    for p in layout.partitions:
        for m in p.members:
            entries.setdefault(m.guid, set()).add(p.pkey.with_membership(m.membership).table_entry)
    return tuple(PkeyTable(g, tuple(sorted(e))) for g, e in sorted(entries.items()))


def test_apply_two_tenants_and_observe(ufm: UfmServer) -> None:
    d = driver(ufm)
    d.apply(TWO_TENANTS)
    assert ufm.members() == {
        0xA01: {wire_guid(A[0]): "full", wire_guid(A[1]): "full", wire_guid(A[2]): "limited"},
        0xA02: {wire_guid(B[0]): "full", wire_guid(B[1]): "full"},
    }
    assert ufm.state.pkeys[0xA01].ip_over_ib is True
    assert ufm.state.pkeys[0xA02].ip_over_ib is False
    assert [(p.pkey, p.members, p.ipoib) for p in d.partitions()] == [
        (p.pkey, p.members, p.ipoib) for p in TWO_TENANTS.partitions
    ]
    state = d.observe()
    assert state.tables == expected_tables(TWO_TENANTS)
    assert state.table(A[2]) == PkeyTable(A[2], (0x0A01,))  # limited: top bit clear
    assert state.sms == () and dict(state.settings) == {SETTINGS_UNREADABLE: "UFM's documented REST API does not expose its SM's settings"}
    assert d.calls == 3  # 0xa01 full, 0xa01 limited, 0xa02 full


def test_second_apply_changes_nothing(ufm: UfmServer) -> None:
    d = driver(ufm)
    d.apply(TWO_TENANTS)
    n = len(ufm.writes())
    d.apply(TWO_TENANTS)
    assert len(ufm.writes()) == n
    assert d.plan(TWO_TENANTS) == ()


def test_a_partitions_own_sl_and_rate_reach_ufm_and_are_kept(ufm: UfmServer) -> None:
    """A network's options (issue 20 item 4) on a UFM subnet: the PKey is created with its
    service_level and rate_limit (Gb/s of the rate code) before its GUIDs, read back, left
    alone on the next apply, and re-created when the network asks another rate."""
    tuned = dataclasses.replace(tenant(0xA03, [(A[0], F)], ipoib=True), qos=(("rate", 16), ("sl", 3)))
    d = driver(ufm)
    d.apply(PartitionLayout((tuned,)))
    assert [(m, path) for m, path, _ in ufm.writes()] == [("POST", "/resources/pkeys/add"), ("POST", "/resources/pkeys")]
    rec = ufm.state.pkeys[0xA03]
    assert (rec.qos["service_level"], rec.qos["rate_limit"], rec.ip_over_ib) == (3, 100.0, True)
    assert ufm.members()[0xA03] == {wire_guid(A[0]): "full"}
    assert [p.qos for p in d.partitions()] == [(("rate", 16), ("sl", 3))]
    n = len(ufm.writes())
    d.apply(PartitionLayout((tuned,)))
    assert len(ufm.writes()) == n  # as asked: no call
    slower = dataclasses.replace(tuned, qos=(("rate", 7), ("sl", 3)))
    d.apply(PartitionLayout((slower,)))
    assert [path for _, path, _ in ufm.writes()[n:]] == ["/resources/pkeys/0xa03", "/resources/pkeys/add", "/resources/pkeys"]
    assert ufm.state.pkeys[0xA03].qos["rate_limit"] == 40.0


def test_move_guid_between_pkeys_removes_before_adding(ufm: UfmServer) -> None:
    d = driver(ufm)
    d.apply(TWO_TENANTS)
    ufm.requests.clear()
    moved = PartitionLayout(
        partitions=(
            tenant(0xA01, [(A[0], F), (A[2], L)], ipoib=True),
            tenant(0xA02, [(B[0], F), (B[1], F), (A[1], F)]),
        )
    )
    d.apply(moved)
    assert ufm.writes() == [
        ("DELETE", f"/resources/pkeys/0xa01/guids/{wire_guid(A[1])}", None),
        (
            "POST",
            "/resources/pkeys",
            {"pkey": "0xa02", "guids": [wire_guid(A[1])], "membership": "full", "index0": False, "ip_over_ib": False},
        ),
    ]
    assert wire_guid(A[1]) not in ufm.members()[0xA01]
    assert d.observe().tables == expected_tables(moved)


def test_release_tenant_deletes_its_pkey_and_leaves_others(ufm: UfmServer) -> None:
    with httpx.Client(base_url=ufm.url, auth=("admin", "s3cret-test"), verify=str(ufm.ca_file)) as c:  # someone else's PKey
        body = {"pkey": "0xb00", "guids": [wire_guid(B[2])], "membership": "full"}
        assert c.post("/ufmRest/resources/pkeys", json=body).status_code == 200
    d = driver(ufm)
    d.apply(TWO_TENANTS)
    d.apply(PartitionLayout(partitions=(TWO_TENANTS.partitions[1],)))
    assert ("DELETE", "/resources/pkeys/0xa01", None) in ufm.writes()
    assert set(ufm.members()) == {0xA02, 0xB00}
    assert d.observe().table(B[2]) == PkeyTable(B[2], (0x8B00,))  # observe shows every PKey UFM has


@pytest.mark.parametrize(
    ("missing_status", "drop_empty"), [(200, False), (404, True)], ids=["empty-object", "drop-empty"]
)
def test_ufm_variants_converge(missing_status: int, drop_empty: bool) -> None:
    with ufm_server(missing_status=missing_status, drop_empty=drop_empty) as s:
        d = driver(s)
        d.apply(TWO_TENANTS)
        only_a0 = PartitionLayout(partitions=(tenant(0xA02, [(A[0], F)]),))
        d.apply(only_a0)
        assert s.members() == {0xA02: {wire_guid(A[0]): "full"}}


def test_membership_and_ipoib_changes(ufm: UfmServer) -> None:
    d = driver(ufm)
    d.apply(TWO_TENANTS)
    changed = PartitionLayout(
        partitions=(
            tenant(0xA01, [(A[0], F), (A[1], L), (A[2], L)], ipoib=True),
            tenant(0xA02, [(B[0], F), (B[1], F)], ipoib=True),
        )
    )
    ufm.requests.clear()
    d.apply(changed)
    assert [(m, p) for m, p, _ in ufm.writes()] == [
        ("DELETE", f"/resources/pkeys/0xa01/guids/{wire_guid(A[1])}"),
        ("DELETE", "/resources/pkeys/0xa02"),
        ("POST", "/resources/pkeys"),
        ("POST", "/resources/pkeys"),
    ]
    assert ufm.state.pkeys[0xA02].ip_over_ib is True
    assert d.observe().tables == expected_tables(changed)


def test_server_error_mid_apply_rolls_back(ufm: UfmServer) -> None:
    d = driver(ufm)
    d.apply(TWO_TENANTS)
    before = ufm.members()
    ufm.fail("POST", "/resources/pkeys", status=500, body="UFM internal error: opensm restart failed")
    moved = PartitionLayout(partitions=(tenant(0xA01, [(A[0], F)], ipoib=True), tenant(0xA02, [(A[1], F), (B[0], F)])))
    with pytest.raises(ApplyError) as ei:
        d.apply(moved)
    err = ei.value
    assert err.fields["status"] == 500
    assert "opensm restart failed" in err.fields["response"]
    assert err.fields["failed_call"] == "POST /resources/pkeys full x1"
    assert len(err.fields["done"]) == 2  # removal of both from 0xa01 (one call), one from 0xa02
    assert err.fields["rolled_back"] is True
    assert "rolled back" in err.message and "call 3 of 3" in err.message
    assert ufm.members() == before  # not half-applied


def test_error_on_first_call_changes_nothing(ufm: UfmServer) -> None:
    d = driver(ufm)
    ufm.fail("POST", "/resources/pkeys", status=400, body="Invalid GUIDs")
    with pytest.raises(ApplyError) as ei:
        d.apply(TWO_TENANTS)
    assert "nothing was changed" in ei.value.message
    assert ei.value.fields["done"] == [] and ei.value.fields["rolled_back"] is False
    assert ufm.members() == {}


def test_rollback_failure_is_reported(ufm: UfmServer) -> None:
    d = driver(ufm)
    d.apply(TWO_TENANTS)
    ufm.fail("POST", "/resources/pkeys", status=503, body="busy", count=5)
    with pytest.raises(ApplyError) as ei:
        d.apply(PartitionLayout(partitions=(tenant(0xA02, [(A[0], F)]),)))
    assert ei.value.fields["rolled_back"] is False
    assert "503" in ei.value.fields["rollback_error"]
    assert "rollback failed" in ei.value.message


def test_write_acknowledged_but_not_done_is_a_verify_error(ufm: UfmServer) -> None:
    d = driver(ufm)
    ufm.fail("POST", "/resources/pkeys", status=200, body="accepted", count=10)  # 200, state untouched
    with pytest.raises(VerifyError) as ei:
        d.apply(TWO_TENANTS)
    assert len(ei.value.fields["remaining"]) == 3


def test_token_auth_uses_v3_prefix(ufm: UfmServer) -> None:
    d = UfmDriver(ufm.url, token=Secret("tok-test-0123456789"), managed_pkeys=RANGE, verify=str(ufm.ca_file))
    d.apply(TWO_TENANTS)
    assert d.observe().tables == expected_tables(TWO_TENANTS)


@pytest.mark.parametrize(
    "kw", [{"password": Secret("wrong")}, {"username": "nobody"}], ids=["bad-password", "bad-user"]
)
def test_bad_credentials_fail_with_401(ufm: UfmServer, kw: dict[str, str]) -> None:
    with pytest.raises(FabricError) as ei:
        driver(ufm, **kw).observe()
    assert ei.value.fields["status"] == 401
    assert ufm.requests == []  # nothing reached the API


def test_unreachable_ufm_is_a_fabric_error() -> None:
    with ufm_server(tls=False) as s:
        url = s.url
    with pytest.raises(FabricError) as ei:
        UfmDriver(url, username="admin", password=Secret("x"), timeout=2, allow_http=True).observe()
    assert "ConnectError" in ei.value.message


def test_bad_layout_refused_before_any_request(ufm: UfmServer) -> None:
    with pytest.raises(ValidationError):
        driver(ufm).apply(PartitionLayout(partitions=(tenant(0xB01, [(A[0], F)]),)))
    assert ufm.requests == []


@pytest.mark.parametrize(
    "kw",
    [
        {"username": "admin"},
        {"token": Secret("t"), "username": "admin", "password": Secret("p")},
        {"password": Secret("p"), "password_file": "/nonexistent"},
        {"username": "admin", "password_file": "/nonexistent/pw"},
        {"username": "admin", "password": "inline-in-fabrics-yaml"},
        {"token": "inline-token"},
        {"username": "admin", "password_env": "GPUFABRIC_TEST_UNSET_VAR"},
    ],
    ids=["no-password", "token-and-password", "password-twice", "unreadable-file", "inline-password",
         "inline-token", "unset-env"],
)
def test_config_errors(kw: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        UfmDriver("https://ufm.example", **kw)  # type: ignore[arg-type]


def test_secret_files(tmp_path: object, ufm: UfmServer) -> None:
    from pathlib import Path

    pw = Path(str(tmp_path)) / "pw"
    pw.write_text("s3cret-test\n")
    pw.chmod(0o600)
    d = UfmDriver(ufm.url, username="admin", password_file=str(pw), managed_pkeys=RANGE, verify=str(ufm.ca_file))
    assert d.observe().tables == ()
    assert "s3cret-test" not in repr(d)
    pw.chmod(0o640)  # group-readable: refused, naming the file and the mode
    with pytest.raises(ConfigError) as ei:
        UfmDriver(ufm.url, username="admin", password_file=str(pw), verify=str(ufm.ca_file))
    assert ei.value.field == "password_file" and "0600" in str(ei.value) and "0640" in str(ei.value)


def test_secret_from_environment(ufm: UfmServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GF_TEST_UFM_PW", "s3cret-test")
    d = UfmDriver(ufm.url, username="admin", password_env="GF_TEST_UFM_PW", managed_pkeys=RANGE, verify=str(ufm.ca_file))
    assert d.observe().tables == ()


def test_tls_verified_by_default_against_system_cas(ufm: UfmServer) -> None:
    """The test CA is not a system CA: the default (verify: true) refuses the server."""
    with pytest.raises(FabricError) as ei:
        UfmDriver(ufm.url, username="admin", password=Secret("s3cret-test")).observe()
    assert "certificate" in ei.value.message.lower()
    assert ufm.requests == []


@pytest.mark.parametrize(
    ("kw", "field"),
    [({"url": "http://127.0.0.1:1"}, "url"), ({"verify": False}, "verify"), ({"verify": "/nonexistent/ca.pem"}, "verify"),
     ({"url": "https://admin:pw@ufm.example"}, "url")],
    ids=["plain-http", "verify-off", "missing-ca-bundle", "credentials-in-url"],
)  # fmt: skip
def test_insecure_transport_refused_unless_explicit(kw: dict[str, object], field: str) -> None:
    opts: dict[str, object] = {"url": "https://ufm.example", "username": "admin", "password": Secret("p"), **kw}
    with pytest.raises(ConfigError) as ei:
        UfmDriver(**opts)  # type: ignore[arg-type]
    assert ei.value.field == field and ":pw@" not in str(ei.value)


def test_explicit_insecure_transport_is_reported() -> None:
    with ufm_server(tls=False) as s:
        d = UfmDriver(s.url, username="admin", password=Secret("s3cret-test"), allow_http=True, managed_pkeys=RANGE)
        assert d.observe().tables == ()
        assert [n.setting for n in d.transport_notes()] == ["allow_http"]
    v = UfmDriver("https://ufm.example", token=Secret("t"), verify=False, insecure=True)
    assert v.transport_notes() == (
        TransportNote("ufm", "verify", "UFM at https://ufm.example: TLS certificate not verified"),
    )
    assert UfmDriver("https://ufm.example", token=Secret("t")).transport_notes() == ()


# ----------------------------------------------------------------- the server's own validation
@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"pkey": "0x7fff", "guids": ["0002c90300000001"]}, 400),
        ({"pkey": "0x0", "guids": ["0002c90300000001"]}, 400),
        ({"pkey": "12", "guids": ["0002c90300000001"]}, 400),
        ({"pkey": "0x12", "guids": ["2c90300000001"]}, 400),
        ({"pkey": "0x12", "guids": ["zz02c90300000001"]}, 400),
        ({"pkey": "0x12", "guids": []}, 400),
        ({"pkey": "0x12", "guids": ["0002c90300000001"], "membership": "both"}, 400),
        ({"pkey": "0x12", "guids": ["0x0002c90300000001"], "membership": "limited"}, 200),
    ],
    ids=["mgmt-key", "zero", "no-0x", "short-guid", "bad-hex", "no-guids", "bad-membership", "ok-0x-guid"],
)
def test_server_validates_like_the_docs(ufm: UfmServer, body: dict[str, object], status: int) -> None:
    with httpx.Client(base_url=ufm.url, auth=("admin", "s3cret-test"), verify=str(ufm.ca_file)) as c:
        assert c.post("/ufmRest/resources/pkeys", json=body).status_code == status


def test_server_delete_unknown_and_management(ufm: UfmServer) -> None:
    with httpx.Client(base_url=ufm.url, auth=("admin", "s3cret-test"), verify=str(ufm.ca_file)) as c:
        assert c.delete("/ufmRest/resources/pkeys/0xa05").status_code == 404
        assert c.delete("/ufmRest/resources/pkeys/0x7fff").status_code == 400
        assert c.get("/ufmRest/resources/pkeys/0xa05").status_code == 404
        assert c.get("/ufmRest/resources/pkeys").json() == {"0x7fff": {
            "partition": "management", "ip_over_ib": True, "mtu_limit": 2, "service_level": 0, "rate_limit": 2.5}}  # fmt: skip


def test_built_from_fabrics_yaml_options(ufm: UfmServer) -> None:
    """The service builds drivers as ``cls(**options)`` from fabrics.yaml (entry point ``ufm``)."""
    from gpufabric.engine.fabrics import Fabrics
    from gpufabric.fabrics.infiniband.kind import InfinibandKind
    from gpufabric.store.registry import Registry

    reg = Registry()
    reg.register("ufm", UfmDriver)
    reg.register_kind(InfinibandKind())
    options = {
        "url": ufm.url,
        "username": "admin",
        "password_env": "GF_TEST_UFM_PW",
        "verify": str(ufm.ca_file),
        "managed_pkeys": [0xA00, 0xAFF],
    }
    os.environ["GF_TEST_UFM_PW"] = "s3cret-test"
    fabrics = Fabrics.from_config(
        {"infiniband": {"driver": "ufm", "options": options}, "trusted_sm_guids": ["0x0002c90300000001"]}, reg
    )
    assert isinstance(drivers.sm(fabrics), UfmDriver)
    drivers.sm(fabrics).apply(TWO_TENANTS)
    assert fabrics.observe().get("infiniband").tables == expected_tables(TWO_TENANTS)


class _Recording(httpx.BaseTransport):
    """An HTTPS transport that records (path, Authorization header) of every request it sends."""

    def __init__(self, ca_file: str) -> None:
        import ssl

        self.inner = httpx.HTTPTransport(verify=ssl.create_default_context(cafile=ca_file))
        self.sent: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.url.path, request.headers.get("authorization", "")))
        return self.inner.handle_request(request)


@pytest.mark.parametrize("source", ["token_file", "token_env"])
def test_token_from_file_or_env_uses_the_token_path_and_header(
    ufm: UfmServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """Regression (issue 18, 8): a token loaded from token_file/token_env went to the basic-auth
    path /ufmRest (the prefix tested the ``token`` argument, None here) and UFM answered 401."""
    tok = "tok-test-0123456789"
    if source == "token_file":
        f = tmp_path / "ufm.token"
        f.write_text(tok + "\n")
        f.chmod(0o600)
        kw = {"token_file": str(f)}
    else:
        monkeypatch.setenv("GF_TEST_UFM_TOKEN", tok)
        kw = {"token_env": "GF_TEST_UFM_TOKEN"}
    rec = _Recording(str(ufm.ca_file))
    d = UfmDriver(ufm.url, managed_pkeys=RANGE, verify=str(ufm.ca_file), transport=rec, **kw)  # type: ignore[arg-type]
    d.apply(TWO_TENANTS)
    assert d.observe().tables == expected_tables(TWO_TENANTS)
    assert rec.sent and all(p.startswith("/ufmRestV3/") and a == f"Basic {tok}" for p, a in rec.sent), rec.sent[:3]
    assert len(ufm.writes()) == 3  # UFM (which accepts the token only under /ufmRestV3) took every write
