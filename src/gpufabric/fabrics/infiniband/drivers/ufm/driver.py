"""UFM driver: InfiniBand partitions through NVIDIA UFM Enterprise's REST API (httpx).

Written against the documented UFM "PKey GUIDs REST API" (``/ufmRest/resources/pkeys``:
list, get with ``guids_data=true``, add GUIDs, remove GUIDs, delete PKey); no UFM runs
here, so it is tested against a local HTTP server implementing that documented subset
(tests/support/ufm_server.py). The plan and the response parsers are pure (``ufm_plan``).

Authentication: user + password (HTTP basic auth, base path ``/ufmRest``) or an access
token (``Authorization: Basic <token>``, base path ``/ufmRestV3``). Secrets come from
``password_file``/``token_file`` (mode 0600 or stricter) or ``password_env``/``token_env``;
an inline password or token in fabrics.yaml is refused (code may pass a ``Secret``).

Transport is secure by default: TLS verified against the system CAs, or ``verify: <CA
bundle path>``. ``http://`` is refused unless ``allow_http: true``; ``verify: false``
is refused unless ``insecure: true``. Either exception is reported by
:meth:`UfmDriver.transport_notes`, which the audit turns into ``TRANSPORT-INSECURE``.

``apply`` reads UFM's PKeys, plans remove-before-add, sends the calls, then reads back and
raises :class:`VerifyError` unless UFM shows exactly the layout. If a call fails it puts
back the PKeys read before (best effort, reported) and raises :class:`ApplyError` with the
failed call, HTTP status, response text, calls done/pending and the rollback outcome.

``observe`` returns *UFM's view*: PKey tables derived from UFM's PKey membership, not read
from the ports with SMPs; ports UFM lists in no PKey do not appear, ``sms`` is empty and
``settings`` says it could not be read (UFM's opensm.conf is not visible through the
documented REST API), so the audit reports the hardening as unverified. The default
partition (0x7fff, "management" in UFM) is read-only in this API: its membership policy
(``PartitionLayout.default_full`` / ``default_limited_all``) is UFM configuration, not
something this driver sets; its members are reported when UFM lists them.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import httpx

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError, GpufabricError, ValidationError, VerifyError
from gpufabric.domain.values import Guid, Membership
from gpufabric.fabrics.infiniband.audit.hardening import unreadable_settings
from gpufabric.fabrics.infiniband.drivers.base import SubnetManagerDriver
from gpufabric.fabrics.infiniband.drivers.ufm.plan import (
    FABRIC,
    MANAGEMENT_PKEY,
    UFM_QOS,
    PKeyRange,
    UfmCall,
    UfmOp,
    desired_partitions,
    parse_ufm_members,
    parse_ufm_pkey,
    parse_ufm_pkey_list,
    plan_ufm,
    wire_pkey,
)
from gpufabric.fabrics.infiniband.state import IbFabricState, Partition, PartitionLayout, PartitionMember, PkeyTable
from gpufabric.fabrics.infiniband.state.ipoib import RANGES, IpoibOptions
from gpufabric.transport.secrets import Secret, TransportNote, load_secret

__all__ = ["PKeyRange", "UfmCall", "UfmDriver", "UfmOp", "plan_ufm"]

# UFM's documented REST API (PKey GUIDs, ports, systems) has no read of its SM's
# opensm.conf (sm_key, m_key, part_enforce): the audit says the hardening is unverified.
UFM_SETTINGS: Final = unreadable_settings("UFM's documented REST API does not expose its SM's settings")
BASIC_PREFIX: Final = "/ufmRest"
TOKEN_PREFIX: Final = "/ufmRestV3"
_BODY_MAX: Final = 500
_GUIDS: Final = {"guids_data": "true"}


class UfmDriver(SubnetManagerDriver):
    """A subnet whose partitions NVIDIA UFM manages. ``calls`` counts REST calls that changed UFM."""

    def __init__(
        self,
        url: str,
        username: str | None = None,
        password: Secret | None = None,
        token: Secret | None = None,
        *,
        password_file: str | None = None,
        password_env: str | None = None,
        token_file: str | None = None,
        token_env: str | None = None,
        verify: bool | str = True,
        allow_http: bool = False,
        insecure: bool = False,
        timeout: float = 30.0,
        managed_pkeys: str | Sequence[int | str] | None = None,
        index0: bool = False,
        ipoib: object = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise ValidationError("url", url, "http(s)://host[:port] of the UFM server")
        if "@" in url.split("://", 1)[1].split("/", 1)[0]:
            raise ConfigError(
                "url", url.split("://", 1)[0] + "://***@...", "a URL without credentials (use password_file:)"
            )
        if url.startswith("http://") and allow_http is not True:
            raise ConfigError("url", url, "an https:// URL (or allow_http: true, reported by the audit)")
        if verify is False and insecure is not True:
            raise ConfigError("verify", False, "true or a CA bundle path (or insecure: true, reported by the audit)")
        if isinstance(verify, str) and not Path(verify).is_file():
            raise ConfigError("verify", verify, "a readable CA bundle file, or true for the system CAs")
        if timeout <= 0:
            raise ValidationError("timeout", timeout, "> 0 seconds")
        pw = load_secret("password", password, password_file, password_env)
        tok = load_secret("token", token, token_file, token_env)
        if tok and (username or pw):
            raise ConfigError("token", "with username/password", "either a token or username + password")
        if not tok and not (username and pw):
            raise ConfigError("username/password", "missing", "username + password, or a token")
        self.url = url.rstrip("/")
        self.allow_http = allow_http is True
        self.insecure = insecure is True
        self._auth: httpx.Auth | None = None if tok else httpx.BasicAuth(str(username), pw.reveal() if pw else "")
        self._headers = {"Authorization": f"Basic {tok.reveal()}"} if tok else {}
        self._prefix = TOKEN_PREFIX if tok else BASIC_PREFIX  # the loaded token (token_file/token_env too)
        self.verify = verify
        self.timeout = timeout
        self.managed = PKeyRange.parse(managed_pkeys)
        self.index0 = index0
        self.ipoib = IpoibOptions.parse(ipoib)
        if any(getattr(self.ipoib, k) is not None for k in RANGES):
            raise ConfigError(
                "infiniband.options.ipoib",
                self.ipoib.to_options(),
                "enabled only: UFM's PKey API takes ip_over_ib, not mtu/rate/sl/scope",
            )
        self._transport = transport
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()
        self.calls = 0

    def __repr__(self) -> str:
        return f"UfmDriver(url={self.url!r}, verify={self.verify!r})"  # never the credentials

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """What runs below the secure default, as configured (for the audit)."""
        notes = []
        if self.url.startswith("http://"):
            notes.append(TransportNote("ufm", "allow_http", f"UFM at {self.url} over plain http: credentials in clear"))
        if self.verify is False:
            notes.append(TransportNote("ufm", "verify", f"UFM at {self.url}: TLS certificate not verified"))
        return tuple(notes)

    # ------------------------------------------------------------------ HTTP
    def _client(self) -> httpx.Client:
        """One keep-alive client per driver, made on first use (building one costs ~0.2 s of TLS setup)."""
        with self._lock:
            if self._http is None:
                self._http = httpx.Client(
                    base_url=self.url + self._prefix,
                    auth=self._auth,
                    headers={**self._headers, "Accept": "application/json"},
                    verify=self._tls() if self.url.startswith("https:") else False,  # no CA load for plain http
                    timeout=self.timeout,
                    transport=self._transport,
                )
            return self._http

    def _tls(self) -> ssl.SSLContext | bool:
        if isinstance(self.verify, str):
            return ssl.create_default_context(cafile=self.verify)
        return self.verify

    def close(self) -> None:
        with self._lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    def _send(
        self,
        c: httpx.Client,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        params: dict[str, str] | None = None,
        missing_ok: bool = False,
    ) -> Any:
        try:
            r = c.request(method, path, json=body, params=params)
        except httpx.HTTPError as e:
            raise FabricError(
                f"UFM {method} {path}: {e.__class__.__name__}: {e}",
                fabric=FABRIC,
                device=self.url,
                call=f"{method} {path}",
            ) from e
        if missing_ok and r.status_code == 404:
            return None
        if r.status_code >= 400:
            raise FabricError(
                f"UFM {method} {path} answered {r.status_code}: {r.text[:_BODY_MAX]}",
                fabric=FABRIC,
                device=self.url,
                call=f"{method} {path}",
                status=r.status_code,
                response=r.text[:_BODY_MAX],
            )
        if not r.content.strip():
            return None
        try:
            return r.json()
        except ValueError:
            if method == "GET":
                raise FabricError(
                    f"UFM {method} {path} answered non-JSON: {r.text[:_BODY_MAX]}", fabric=FABRIC, device=self.url
                ) from None
            return None  # writes are judged by status; the read-back verifies them

    def _read(self, c: httpx.Client, only_managed: bool) -> tuple[list[Partition], tuple[PartitionMember, ...]]:
        """UFM's tenant PKeys (all, or the managed range) and the members of 0x7fff."""
        partitions: list[Partition] = []
        management: tuple[PartitionMember, ...] = ()
        for pk in parse_ufm_pkey_list(self._send(c, "GET", "/resources/pkeys")):
            if pk == MANAGEMENT_PKEY:
                if not only_managed:
                    raw = self._send(c, "GET", f"/resources/pkeys/{wire_pkey(pk)}", params=_GUIDS, missing_ok=True)
                    management = parse_ufm_members(pk, raw) or ()
                continue
            if pk == 0 or (only_managed and pk not in self.managed):
                continue
            raw = self._send(c, "GET", f"/resources/pkeys/{wire_pkey(pk)}", params=_GUIDS, missing_ok=True)
            p = parse_ufm_pkey(pk, raw)
            if p is not None:
                partitions.append(p)
        return partitions, management

    def _execute(self, c: httpx.Client, call: UfmCall) -> None:
        method, path, body = call.request()
        self._send(c, method, path, body)
        self.calls += 1

    # ------------------------------------------------------------------ driver API
    def partitions(self) -> tuple[Partition, ...]:
        """UFM's managed tenant PKeys with their members, as UFM reports them."""
        return tuple(self._read(self._client(), only_managed=True)[0])

    def _wanted(self, layout: PartitionLayout) -> PartitionLayout:
        """``layout`` as UFM gets it: ``ip_over_ib`` as the layout says, unless IPoIB is off; a
        partition's own sl and rate go to UFM (``service_level``, ``rate_limit``), its own mtu
        or scope is refused before any call (UFM's PKey API documents no encoding of the MTU
        and has no scope)."""
        if own := next((p for p in layout.partitions if {k for k, _ in p.qos} - set(UFM_QOS)), None):
            raise ConfigError(
                f"network options of partition {own.name}", dict(own.qos),
                "ipoib, sl and rate on a UFM subnet (its PKey API documents no MTU encoding and has no scope)",
            )  # fmt: skip
        if self.ipoib.enabled:
            return layout
        return replace(layout, partitions=tuple(replace(p, ipoib=False) for p in layout.partitions))

    def plan(self, layout: PartitionLayout) -> tuple[UfmCall, ...]:
        """The calls :meth:`apply` would send now (reads UFM, changes nothing)."""
        return plan_ufm(self._wanted(layout), self.partitions(), self.managed, index0=self.index0)

    def apply(self, layout: PartitionLayout) -> tuple[PkeyTable, ...]:
        """Apply ``layout`` through UFM's REST API; returns UFM's read-back of every port,
        including an empty table for each port that left every managed PKey (UFM lists it in
        none, so its read-back would otherwise not say that it changed)."""
        layout = self._wanted(layout)
        desired_partitions(layout, self.managed)  # refuse a bad layout before any I/O
        c = self._client()
        before = self._read(c, only_managed=True)[0]
        calls = plan_ufm(layout, before, self.managed, index0=self.index0)
        for i, call in enumerate(calls):
            try:
                self._execute(c, call)
            except FabricError as e:
                raise self._failed(c, e, calls, i, before) from e
        after = self._read(c, only_managed=True)[0]
        remaining = plan_ufm(layout, after, self.managed, index0=self.index0)
        if remaining:
            raise VerifyError(
                f"UFM does not show the desired partitions after {len(calls)} calls: {len(remaining)} differences",
                fabric=FABRIC,
                device=self.url,
                remaining=[str(r) for r in remaining],
            )
        return _with_departed(self.observe().tables, before)

    def _failed(
        self, c: httpx.Client, err: FabricError, calls: tuple[UfmCall, ...], i: int, before: list[Partition]
    ) -> ApplyError:
        """Put back the PKeys read before the apply (best effort) and describe everything."""
        rollback_error = ""
        rollback_calls: tuple[UfmCall, ...] = ()
        if i > 0:
            try:
                now = self._read(c, only_managed=True)[0]
                rollback_calls = plan_ufm(
                    PartitionLayout(partitions=tuple(before)), now, self.managed, index0=self.index0
                )
                for call in rollback_calls:
                    self._execute(c, call)
            except GpufabricError as rb:
                rollback_error = rb.message
        state = (
            "nothing was changed"
            if i == 0
            else f"rollback failed: {rollback_error}"
            if rollback_error
            else f"the {i} earlier calls were rolled back"
        )
        return ApplyError(
            f"{err.message} (call {i + 1} of {len(calls)}; {state})",
            fabric=FABRIC,
            device=self.url,
            failed_call=str(calls[i]),
            status=err.fields.get("status"),
            response=err.fields.get("response", ""),
            done=[str(x) for x in calls[:i]],
            pending=[str(x) for x in calls[i:]],
            rolled_back=i > 0 and not rollback_error,
            rollback_calls=[str(x) for x in rollback_calls],
            rollback_error=rollback_error,
        )

    def observe(self) -> IbFabricState:
        partitions, management = self._read(self._client(), only_managed=False)
        entries: dict[Guid, set[int]] = {}
        for p in partitions:
            for m in p.members:
                entries.setdefault(m.guid, set()).add(p.pkey.with_membership(m.membership).table_entry)
        for m in management:
            entries.setdefault(m.guid, set()).add(MANAGEMENT_PKEY | (0x8000 if m.membership is Membership.FULL else 0))
        tables = tuple(PkeyTable(port_guid=g, entries=tuple(sorted(e))) for g, e in sorted(entries.items()))
        return IbFabricState(tables=tables, settings=UFM_SETTINGS)


def _with_departed(tables: tuple[PkeyTable, ...], before: Sequence[Partition]) -> tuple[PkeyTable, ...]:
    """``tables`` plus an empty table for every member of ``before`` that none of them shows."""
    shown = {t.port_guid for t in tables}
    gone = {m.guid for p in before for m in p.members} - shown
    return tuple(sorted((*tables, *(PkeyTable(g, ()) for g in gone)), key=lambda t: t.port_guid.value))
