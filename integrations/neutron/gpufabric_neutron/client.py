"""A small client for gpufabric's REST API v1 (stdlib only: it runs in Neutron's venv).

Every call carries ``Authorization: Bearer <token>``; the token is read from a file that
must not be readable by group or others. Errors come back as :class:`ApiError` with the
HTTP status and gpufabric's error body (``{"error": {"code", "field", "value",
"allowed", "message"}}``). Connection failures (gpufabric restarting) are retried until
the call's deadline; every caller treats 409 "already exists" / 404 "already gone" as
success, so retries are idempotent. Transport: ``https://`` (verified against ``ca_file`` or
the system CAs); ``http://`` or an unverified certificate only with ``insecure=True``, each
logged as a ``TRANSPORT-INSECURE`` warning; anything else is refused at construction
(:func:`transport`, which the esi-leap sync shares). A redirect is never followed
(:class:`RedirectRefused`): urllib would re-send every header, the token included, to
whatever origin the answer names, over whatever scheme.
"""

from __future__ import annotations

import json
import logging
import os
import re
import ssl
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

TERMINAL = ("done", "failed")
LOG = logging.getLogger(__name__)


class InsecureTransport(ValueError):
    """A plain-HTTP (or unknown-scheme) gpufabric url without the explicit ``insecure`` option."""


class RedirectRefused(Exception):
    """A server answered a request carrying a token with a redirect: not followed."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:  # fmt: skip
        u = urllib.parse.urlsplit(newurl)
        raise RedirectRefused(f"{req.get_method()} {req.full_url}: answered {code} to {u.scheme}://{u.netloc}: "
                              "redirects are not followed (the token would be re-sent)")  # fmt: skip


def opener(ctx: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    """urllib with ``ctx`` for https, following no redirect (:class:`RedirectRefused`)."""
    return urllib.request.build_opener(_NoRedirect(), urllib.request.HTTPSHandler(context=ctx))


def transport(url: str, what: str, secret: str, ca_file: str | None = None,
              insecure: bool = False) -> ssl.SSLContext | None:  # fmt: skip
    """The TLS context for ``url``: ``https://`` verified against ``ca_file`` or the system
    CAs; ``http://`` (None) or an unverified certificate only with ``insecure``, each logged as
    a ``TRANSPORT-INSECURE`` warning; else :class:`InsecureTransport` naming ``what``."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    ctx: ssl.SSLContext | None = None
    if scheme == "https":
        ctx = ssl.create_default_context(cafile=ca_file)
        if insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            LOG.warning("TRANSPORT-INSECURE: %s url %s: TLS certificate not verified (insecure = true)", what, url)
    elif scheme == "http" and insecure:
        LOG.warning("TRANSPORT-INSECURE: %s url %s is plain HTTP: the %s travels in clear (insecure = true)",
                    what, url, secret)  # fmt: skip
    else:
        raise InsecureTransport(
            f"{what} url {url!r}: scheme {scheme or 'none'!r} refused; allowed: https://, "
            "or http:// with the explicit insecure option (testing only)"
        )
    return ctx


class ApiError(Exception):
    """gpufabric answered with an error status."""

    def __init__(self, status: int, body: Any, method: str = "", path: str = "") -> None:
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            detail = err
        elif isinstance(body, dict):  # flat form: {"error": code, "message": ..., field...}
            detail = {**body, "code": err}
        else:
            detail = {"message": str(body)}
        self.status = status
        self.code = detail.get("code")
        self.field = detail.get("field")
        self.value = detail.get("value")
        self.allowed = detail.get("allowed")
        self.message = detail.get("message") or str(body)
        where = f"{method} {path}: " if method else ""
        extra = ""
        if self.field is not None:
            extra = f" (field {self.field}={self.value!r}, allowed: {self.allowed})"
        super().__init__(f"{where}gpufabric {status} {self.code}: {self.message}{extra}")


class Unreachable(Exception):
    """gpufabric could not be reached before the deadline."""


class MoveFailed(Exception):
    """A move ended failed, or did not end before the deadline."""

    def __init__(self, move: dict[str, Any], reason: str) -> None:
        self.move = move
        super().__init__(reason)


def read_token(path: str) -> str:
    """The bearer token from ``path``; refuses a file readable by group or others."""
    st = os.stat(path)
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PermissionError(f"token_file {path} has mode {stat.S_IMODE(st.st_mode):04o}; allowed: 0600 or 0400")
    with open(path, encoding="utf-8") as f:
        token = f.read().strip()
    if not token:
        raise ValueError(f"token_file {path} is empty")
    return token


class GpufabricClient:
    """gpufabric's API v1 at ``url`` (e.g. ``https://gpufabric:8443``)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        ca_file: str | None = None,
        insecure: bool = False,
        timeout: float = 10.0,
        retry_for: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base = url.rstrip("/") + "/api/v1"
        self.token = token
        self.timeout = timeout
        self.retry_for = retry_for
        self.sleep = sleep
        self.clock = clock
        self._warned_worker = False
        self.ssl = transport(url, "gpufabric", "bearer token", ca_file, insecure)
        self.opener = opener(self.ssl)

    # ---- transport
    def request(self, method: str, path: str, body: Any = None, *, retry_for: float | None = None) -> Any:
        deadline = self.clock() + (self.retry_for if retry_for is None else retry_for)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        delay = 0.2
        while True:
            req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
            try:
                with self.opener.open(req, timeout=self.timeout) as r:
                    raw = r.read()
                    return json.loads(raw) if raw else None
            except urllib.error.HTTPError as e:
                raw = e.read()
                try:
                    parsed: Any = json.loads(raw)
                except ValueError:
                    parsed = raw.decode(errors="replace")
                if e.code in (502, 503, 504) and self.clock() < deadline:
                    pass  # a proxy in front of a restarting gpufabric: retry
                else:
                    raise ApiError(e.code, parsed, method, path) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                if self.clock() >= deadline:
                    raise Unreachable(f"{method} {self.base}{path}: {e}") from None
            self.sleep(delay)
            delay = min(delay * 2, 2.0)

    # ---- resources
    def ensure_tenant(self, name: str) -> None:
        try:
            self.request("POST", "/tenants", {"name": name})
        except ApiError as e:
            if e.status != 409:
                raise

    def ensure_network(self, name: str, tenant: str, segments: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Create (adopt) the network with Neutron's segments; an existing one is fine."""
        try:
            return self.request("POST", "/networks", {"name": name, "tenant": tenant, "segments": segments})  # type: ignore[no-any-return]
        except ApiError as e:
            if e.status != 409:
                raise
            existing = self.find_network(name, tenant)
            want = {(s["fabric"], s["seg_id"]) for s in segments}
            if existing is None:
                if e.field == "name":  # no list endpoint: trust the error naming the field
                    return None
                raise
            have = {(s.get("fabric"), s.get("seg_id")) for s in existing.get("segments", [])}
            if not want <= have:
                raise ApiError(409, {"error": {"code": "conflict", "field": "segments", "value": sorted(want),
                                               "allowed": sorted(have),
                                               "message": f"network {name} exists with other segments"}}) from None  # fmt: skip
            return existing

    def find_network(self, name: str, tenant: str) -> dict[str, Any] | None:
        """The tenant's network ``name`` (``GET /networks/{tenant}/{name}``), or None."""
        try:
            return self.request("GET", f"/networks/{_q(tenant)}/{_q(name)}")  # type: ignore[no-any-return]
        except ApiError as e:
            if e.status in (404, 405):
                return None
            raise

    def update_network(self, tenant: str, name: str, changes: dict[str, Any]) -> dict[str, Any] | None:
        """``PATCH /networks/{tenant}/{name}`` with ``changes`` (description, tags); None when
        gpufabric has no such network (never adopted, or gone)."""
        try:
            return self.request("PATCH", f"/networks/{_q(tenant)}/{_q(name)}", changes)  # type: ignore[no-any-return]
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def delete_network(self, tenant: str, name: str) -> None:
        try:
            self.request("DELETE", f"/networks/{_q(tenant)}/{_q(name)}")
        except ApiError as e:
            if e.status != 404:
                raise

    def node(self, name: str) -> dict[str, Any] | None:
        """``GET /nodes/{name}`` (its tenant and its ports on every fabric), or None (404)."""
        try:
            r = self.request("GET", f"/nodes/{_q(name)}")
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        return r if isinstance(r, dict) else None

    def node_by_host(self, host_id: str) -> str | None:
        """The node whose identity in the outside inventory is ``host_id`` (``GET
        /nodes?host_id=``: Ironic's node UUID, stored by ``inventory import --from ironic``), or
        None (no node has it)."""
        r = self.request("GET", f"/nodes?host_id={_q(host_id)}&limit=2")
        items = r.get("items") if isinstance(r, dict) else None
        if isinstance(items, list) and len(items) == 1 and isinstance(items[0], dict):
            name = items[0].get("name")
            return name if isinstance(name, str) else None
        return None

    def attach(self, node: str, network: str, tenant: str) -> dict[str, Any] | None:
        """Start attaching: ``{"node", "move", "lease"}`` (a move when the node changes tenant,
        else the lease's networks grow and gpufabric's worker converges the fabrics); None when
        the node is already attached (a retry)."""
        try:
            return self.request("POST", f"/nodes/{_q(node)}/attachments", {"network": network, "tenant": tenant})  # type: ignore[no-any-return]
        except ApiError as e:
            if e.status == 409 and "already attached" in (e.message or ""):
                return None
            raise

    def detach(self, node: str, network: str) -> dict[str, Any] | None:
        """Start detaching (a move to quarantine when it was the node's last network); None
        when the node is not attached (already gone)."""
        try:
            return self.request("DELETE", f"/nodes/{_q(node)}/attachments/{_q(network)}")  # type: ignore[no-any-return]
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def worker(self) -> dict[str, Any] | None:
        """gpufabric's move/converge worker loop state (``passes``, ``errors``, ``last_error``)."""
        try:
            r = self.request("GET", "/reconcile")
        except ApiError as e:
            if e.status in (403, 404):
                if not self._warned_worker:
                    self._warned_worker = True
                    LOG.warning("gpufabric: this token may not read the worker status (GET /reconcile: %s); a "
                                "same-tenant network change is reported bound without waiting for its converge", e.status)  # fmt: skip
                return None
            raise
        loops = r.get("loops", []) if isinstance(r, dict) else []
        return next((x for x in loops if isinstance(x, dict) and x.get("name") == "worker"), None)

    def wait_applied(
        self, result: dict[str, Any] | None, before: dict[str, Any] | None, timeout: float, interval: float = 1.0
    ) -> None:
        """Wait until an attach/detach is on the fabrics: its move done, or (no move: the same
        tenant's lease changed) two worker passes after ``before`` without a new error (the
        pass running when the change landed may have missed it; the next one converges)."""
        if result is None:
            return
        move = result.get("move") if "move" in result or "lease" in result else result
        if move:
            self.wait_move(move, timeout, interval)
            return
        if before is None:
            return  # no worker status visible: nothing more to wait on
        deadline = self.clock() + timeout
        while True:
            w = self.worker() or {}
            if int(w.get("errors", 0)) > int(before.get("errors", 0)):
                raise MoveFailed(w, f"gpufabric could not converge the fabrics: {w.get('last_error')}")
            if int(w.get("passes", 0)) >= int(before.get("passes", 0)) + 2:
                return
            if self.clock() >= deadline:
                raise MoveFailed(w, f"gpufabric did not converge the fabrics within {timeout:g}s")
            self.sleep(interval)

    def wait_open_move(self, error: ApiError, timeout: float, interval: float = 1.0) -> bool:
        """If ``error`` is "node ... already has open move N", wait for N to end; True if it did."""
        m = re.search(r"open move (\d+)", error.message or "")
        if error.status != 409 or m is None:
            return False
        try:
            self.wait_move(self.move(m.group(1)), timeout, interval)
        except MoveFailed:
            pass  # the caller's retry decides
        return True

    def move(self, move_id: Any) -> dict[str, Any]:
        return self.request("GET", f"/moves/{_q(str(move_id))}")  # type: ignore[no-any-return]

    def wait_move(self, move: dict[str, Any], timeout: float, interval: float = 1.0) -> dict[str, Any]:
        """Poll the move until done (returned) or failed / past ``timeout`` (MoveFailed)."""
        deadline = self.clock() + timeout
        while move.get("status") not in TERMINAL:
            left = deadline - self.clock()
            if left <= 0:
                raise MoveFailed(move, f"move {move.get('id')} still {move.get('status')} at phase "
                                       f"{move.get('phase')} after {timeout:g}s")  # fmt: skip
            self.sleep(min(interval, left))
            try:
                move = self.move(move["id"])
            except Unreachable:
                continue  # gpufabric restarting: the move is durable, poll again until the deadline
        if move["status"] != "done":
            raise MoveFailed(move, f"move {move.get('id')} failed at phase {move.get('phase')}: {move.get('error')}")
        return move


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")
