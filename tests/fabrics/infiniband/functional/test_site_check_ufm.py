"""InfiniBand site check through the UFM driver against the UFM stand-in over HTTPS: TLS
verified with the configured CA (and refused with the system CAs), a PKey of the pool already
on UFM but not gpufabric's, and the checks UFM cannot answer reported as not checked."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gpufabric.domain.site_check import CheckLevel, SiteContext
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.ufm.driver import UfmDriver
from gpufabric.fabrics.infiniband.drivers.ufm.plan import wire_guid
from gpufabric.store.registry import parse_segments
from gpufabric.transport.secrets import Secret

from support.ufm_server import UfmServer, ufm_server

SM = (Guid(0x0002C90310000001),)
CTX = SiteContext(segments=parse_segments())


@pytest.fixture
def ufm() -> Iterator[UfmServer]:
    with ufm_server() as s:
        yield s


def checks(ufm: UfmServer, **kw: object) -> dict[str, list[tuple[CheckLevel, str]]]:
    from gpufabric.fabrics.infiniband.site_check import infiniband_site_checks

    opts: dict[str, object] = {"username": "admin", "password": Secret("s3cret-test"), "managed_pkeys": "0x0a00-0x0de7"}
    d = UfmDriver(ufm.url, **{**opts, **kw})  # type: ignore[arg-type]
    out: dict[str, list[tuple[CheckLevel, str]]] = {}
    for c in infiniband_site_checks(d, SM, CTX):
        out.setdefault(c.id, []).append((c.level, c.message))
    return out


def test_tls_verified_with_the_configured_ca(ufm: UfmServer) -> None:
    got = checks(ufm, verify=str(ufm.ca_file))
    assert [lv for lv, _ in got["IB-REACH"]] == [CheckLevel.OK]
    assert [lv for lv, _ in got["IB-PKEY-POOL"]] == [CheckLevel.OK]
    assert got["IB-TRUSTED-SM"][0][0] is CheckLevel.WARNING and "not checked" in got["IB-TRUSTED-SM"][0][1]
    assert got["IB-HARDENING"][0][0] is CheckLevel.WARNING and "REST API" in got["IB-HARDENING"][0][1]


def test_tls_refused_with_the_system_cas(ufm: UfmServer) -> None:
    got = checks(ufm)
    [(lv, msg)] = got["IB-REACH"]
    assert lv is CheckLevel.ERROR and "certificate" in msg.lower() and "fabrics.yaml infiniband (ufm)" in msg
    assert ufm.requests == []


def test_pkey_of_the_pool_already_on_ufm(ufm: UfmServer) -> None:
    with httpx.Client(base_url=ufm.url, auth=("admin", "s3cret-test"), verify=str(ufm.ca_file)) as c:
        body = {"pkey": "0xa10", "guids": [wire_guid(Guid(0x0002C90300000B02))], "membership": "full"}
        assert c.post("/ufmRest/resources/pkeys", json=body).status_code == 200
    [(lv, msg)] = checks(ufm, verify=str(ufm.ca_file))["IB-PKEY-POOL"]
    assert lv is CheckLevel.ERROR and "PKey 0x0a10 (seg_id 3016)" in msg and "segments.infiniband" in msg
