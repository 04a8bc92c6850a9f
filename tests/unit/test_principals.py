"""Principals and roles (pure), the serve bind guard, and loops that retry instead of dying."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from gpufabric.cli.serve_cmd import check_bind
from gpufabric.domain.auth import LOCAL_ADMIN, Principal, Role, Verb, matrix
from gpufabric.domain.errors import ConfigError, ForbiddenError, ValidationError
from gpufabric.runtime.loops import Loops, loop_metrics


@pytest.mark.parametrize(
    ("role", "tenant", "ok"),
    [("admin", None, True), ("admin", "alpha", False), ("owner", "alpha", True), ("lessee", None, False),
     ("lessee", "Bad Name", False), ("root", None, False), ("service", None, True), ("service", "alpha", False)],
    ids=["admin", "admin-with-tenant", "owner", "lessee-without-tenant", "lessee-bad-tenant", "unknown-role",
         "service", "service-with-tenant"],
)
def test_principal_role_and_tenant_pairing(role: str, tenant: str | None, ok: bool) -> None:
    if ok:
        assert Principal("x", Role(role), tenant).role is Role(role)
    else:
        with pytest.raises((ValidationError, ValueError)):
            Principal("x", role, tenant)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("role", "resource", "verb", "allowed"),
    [
        ("admin", "token", Verb.CREATE, True),
        ("owner", "token", Verb.READ, False),
        ("lessee", "tenant", Verb.CREATE, False),
        ("lessee", "network", Verb.CREATE, True),
        ("owner", "lease", Verb.CREATE, True),
        ("lessee", "lease", Verb.CREATE, False),
        ("lessee", "lease", Verb.DELETE, True),
        ("lessee", "move", Verb.CREATE, False),
        ("lessee", "audit", Verb.ACT, False),
        ("service", "tenant", Verb.CREATE, True),
        ("service", "node", Verb.ACT, True),
        ("service", "lease", Verb.CREATE, True),
        ("service", "node", Verb.CREATE, False),
        ("service", "move", Verb.CREATE, False),
        ("service", "token", Verb.CREATE, False),
        ("service", "audit", Verb.ACT, False),
        ("service", "offer", Verb.ACT, False),
        ("lessee", "offer", Verb.ACT, True),
    ],
    ids=lambda v: str(v),
)
def test_role_matrix(role: str, resource: str, verb: Verb, allowed: bool) -> None:
    p = Principal("x", Role(role), None if role in ("admin", "service") else "alpha")
    assert p.may(resource, verb) is allowed
    if not allowed:
        with pytest.raises(ForbiddenError, match=f"role {role} may not {verb.value} {resource}s"):
            p.require(resource, verb)
    assert matrix()["token"]["create"] == ["admin"]


def test_visibility_is_per_tenant() -> None:
    alpha = Principal("a", Role.LESSEE, "alpha")
    assert alpha.sees_tenant("alpha") and not alpha.sees_tenant("beta") and not alpha.sees_tenant(None)
    assert LOCAL_ADMIN.sees_tenant("beta")
    assert Principal("neutron", Role.SERVICE).sees_tenant("beta") and not Principal("neutron", Role.SERVICE).is_admin


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_serve_refuses_a_tls_key_group_or_others_may_read(tmp_path: Path, mode: int) -> None:
    """--tls-key is checked like every secret file: a one-line error naming tls_key and the
    mode required, before anything is served (the cert's mode is not a secret's)."""
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("x")
    cert.chmod(0o644)
    key.write_text("x")
    key.chmod(mode)
    with pytest.raises(ConfigError) as ei:
        check_bind("127.0.0.1", cert, key, 1)
    assert ei.value.field == "tls_key" and f"(mode {mode:04o})" in str(ei.value)
    assert "mode 0600 or stricter (chmod 600): not readable by group or others" in str(ei.value)
    assert "\n" not in str(ei.value)
    key.chmod(0o600)
    check_bind("127.0.0.1", cert, key, 1)
    key.chmod(0o400)
    check_bind("10.0.0.1", cert, key, 1)


def test_serve_refuses_non_loopback_without_tls_and_tokens(tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("x")
    key.write_text("x")
    key.chmod(0o600)
    check_bind("127.0.0.1", None, None, 0)
    check_bind("::1", None, None, 0)
    check_bind("localhost", None, None, 0)
    with pytest.raises(ConfigError, match="loopback address .* unless --tls-cert"):
        check_bind("0.0.0.0", None, None, 5)
    with pytest.raises(ConfigError, match="until an API token exists"):
        check_bind("10.0.0.1", cert, key, 0)
    check_bind("10.0.0.1", cert, key, 1)
    with pytest.raises(ConfigError, match="both --tls-cert and --tls-key"):
        check_bind("127.0.0.1", cert, None, 0)
    with pytest.raises(ConfigError, match="readable PEM"):
        check_bind("10.0.0.1", cert, tmp_path / "missing.pem", 1)


def test_a_failing_loop_retries_and_reports_its_errors() -> None:
    calls: list[float] = []
    recovered = threading.Event()

    def body() -> None:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise RuntimeError("store down")
        recovered.set()

    loops = Loops()
    st = loops.start("reconcile", body, interval=0.01)
    assert recovered.wait(10)
    loops.shutdown()
    assert st.errors == 2 and st.passes >= 1 and st.last_success is not None and st.last_error == ""
    text = loop_metrics(loops)
    assert 'gpufabric_loop_errors_total{loop="reconcile"} 2' in text
    assert 'gpufabric_loop_last_success_timestamp_seconds{loop="reconcile"} 1' in text
