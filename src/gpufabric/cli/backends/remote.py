"""The remote backend: each step of a command through a running ``gpufabric serve``'s API v1
(``--api URL``, :mod:`gpufabric.cli.backends.choose`), behind the same methods as
:class:`gpufabric.cli.backends.local.Local` (:class:`gpufabric.cli.backends.base.Backend`): the
same JSON-ready dicts, so a command prints the same output and ``--json`` either way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from gpufabric.domain.errors import (
    ConflictError,
    ForbiddenError,
    GpufabricError,
    NotFoundError,
    UnauthorizedError,
    UnavailableError,
    ValidationError,
)

if TYPE_CHECKING:
    import ssl
    from datetime import datetime

    from gpufabric.audit import AuditReport
    from gpufabric.cli.backends.base import Terms
    from gpufabric.cli.wire import Answer as WireAnswer
    from gpufabric.cli.wire import Connection
    from gpufabric.domain.models import Inventory, Node

class Answer:
    """One HTTP answer: status and body (read whole)."""

    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code, self.content = status_code, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        import json

        return json.loads(self.content)


def _raise(r: Answer) -> None:
    """The API's error as the domain error it was: its ``to_json`` is the server's body again."""
    try:
        doc = r.json()
        err = doc["error"]
        details = doc.get("details") or {}
    except Exception:  # not our error shape (a proxy, a crash): one line with the status
        raise GpufabricError(f"API answered {r.status_code}: {r.text[:200]}") from None
    msg = err.get("message") or f"API answered {r.status_code}"
    e: GpufabricError
    if r.status_code == 404:
        e = NotFoundError(err.get("field") or "object", str(err.get("value")))
    elif r.status_code == 422:
        e = ValidationError(err.get("field") or "request", err.get("value"), err.get("allowed") or "")
    else:
        cls = {401: UnauthorizedError, 403: ForbiddenError, 409: ConflictError, 503: UnavailableError}.get(
            r.status_code, GpufabricError
        )
        e = cls(msg)
    e.message = msg
    e.fields = {**{k: err.get(k) for k in ("field", "value", "allowed")}, **details}
    if type(e) is GpufabricError and err.get("code"):
        e.code = str(err["code"])  # a code without its own class here (too_large, rate_limited, quota, ...)
    raise e


def tls_context() -> ssl.SSLContext:
    """Certificates verified as httpx does: ``$SSL_CERT_FILE``, else ``$SSL_CERT_DIR``, else
    certifi's bundle (the system's when certifi is absent); host names checked."""
    import ssl

    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi comes with httpx, a dependency
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


class _Stream:
    """A streamed GET (server-sent events): ``iter_lines`` until the server ends it."""

    def __init__(self, conn: Connection, resp: WireAnswer) -> None:
        self.conn, self.resp = conn, resp

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def iter_lines(self) -> Iterator[str]:
        for raw in self.resp:
            yield raw.decode("utf-8", "replace").rstrip("\r\n")


class Remote:
    """The API v1 of a running server, over :mod:`gpufabric.cli.wire` (a command through
    ``--api`` imports no HTTP library, nor ``http.client``: bench/bench_cli.py)."""

    remote = True

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        if not token:
            raise UnauthorizedError("--api needs a token: --token-file, $GPUFABRIC_TOKEN_FILE, --token or $GPUFABRIC_TOKEN")
        from urllib.parse import urlsplit

        self.base = url.rstrip("/") + "/api/v1"
        u = urlsplit(self.base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise UnavailableError(f"cannot reach the API at {self.base}: not an http(s) URL", field="api")
        self._https, self._host, self._port, self._prefix = u.scheme == "https", u.hostname, u.port, u.path
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._timeout = timeout
        self._conn: Connection | None = None

    def _connect(self, timeout: float | None) -> Connection:
        from gpufabric.cli.wire import Connection

        return Connection(self._host, self._port, timeout, tls_context() if self._https else None)

    def _send(self, conn: Connection, method: str, path: str, body: bytes | None,
              content_type: str = "application/json") -> WireAnswer:  # fmt: skip
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = content_type
        return conn.request(method, self._prefix + path, body, headers)

    def _url(self, path: str, params: dict[str, Any] | None) -> str:
        if not params:
            return path
        from urllib.parse import urlencode

        return f"{path}?{urlencode(params, doseq=True)}"

    def _do(self, method: str, path: str, json: Any = None, params: dict[str, Any] | None = None,
            text: str | None = None) -> Any:  # fmt: skip
        import json as _json

        from gpufabric.cli.wire import RemoteClosed

        body = text.encode() if text is not None else None if json is None else _json.dumps(json).encode()
        kind = "text/plain; charset=utf-8" if text is not None else "application/json"
        target = self._url(path, params)
        for attempt in (0, 1):  # a kept-alive connection the server closed: once more on a new one
            reused = self._conn is not None
            try:
                if self._conn is None:
                    self._conn = self._connect(self._timeout)
                resp = self._send(self._conn, method, target, body, kind)
                r = Answer(resp.status, resp.read())
                if resp.will_close:
                    self._conn.close()
                    self._conn = None
                break
            except OSError as e:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                if reused and attempt == 0 and isinstance(e, (RemoteClosed, BrokenPipeError, ConnectionResetError)):
                    continue
                raise UnavailableError(f"cannot reach the API at {self.base}: {e}", field="api") from None
        if r.status_code >= 400:
            _raise(r)
        return r.json() if r.content else None

    def get(self, path: str, **params: Any) -> Any:
        params = {k: v for k, v in params.items() if v is not None}
        return self._do("GET", path, params=params)

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._do("POST", path, json=body or {})

    def post_text(self, path: str, text: str, **params: Any) -> Any:
        """POST ``text`` as the body (text/plain: a kind's import format), ``params`` as the query."""
        return self._do("POST", path, params={k: v for k, v in params.items() if v is not None}, text=text)

    def delete(self, path: str) -> Any:
        return self._do("DELETE", path)

    def stream(self, path: str) -> _Stream:
        conn: Connection | None = None
        try:
            conn = self._connect(None)
            resp = self._send(conn, "GET", path, None)
            if resp.status >= 400:
                r = Answer(resp.status, resp.read())
                conn.close()
                _raise(r)
        except OSError as e:
            if conn is not None:
                conn.close()
            raise UnavailableError(f"cannot reach the API at {self.base}: {e}", field="api") from None
        return _Stream(conn, resp)


    # ---- each step of a command, as the API does it (backends/local.Local has the same methods)
    def nodes(self, tenant: str | None = None, state: str | None = None) -> list[dict[str, Any]]:
        return items(self.get("/nodes", tenant=tenant, state=state, limit=1000))

    def node(self, name: str) -> dict[str, Any]:
        n: dict[str, Any] = self.get(f"/nodes/{name}")
        return n

    def set_owner(self, name: str, tenant: str | None) -> None:
        self._do("PUT", f"/nodes/{name}/owner", json={"owner": tenant})

    def tenants(self) -> list[dict[str, Any]]:
        return items(self.get("/tenants", limit=1000))

    def create_tenant(self, name: str) -> dict[str, Any]:
        t: dict[str, Any] = self.post("/tenants", {"name": name})
        return t

    def delete_tenant(self, name: str) -> dict[str, Any]:
        t: dict[str, Any] = self.delete(f"/tenants/{name}")
        return t

    def networks(self, tenant: str | None = None) -> list[dict[str, Any]]:
        return items(self.get("/networks", tenant=tenant, limit=1000))

    def create_network(self, name: str, tenant: str, fabrics: list[str] | None,
                       options: dict[str, dict[str, int | bool]] | None, description: str = "",
                       tags: Sequence[str] = ()) -> dict[str, Any]:  # fmt: skip
        body: dict[str, Any] = {"name": name, "tenant": tenant}
        if fabrics is not None:
            body["fabrics"] = fabrics
        if options:
            body["options"] = options
        if description:
            body["description"] = description
        if tags:
            body["tags"] = list(tags)
        n: dict[str, Any] = self.post("/networks", body)
        return n

    def update_network(self, name: str, tenant: str, new_name: str | None, description: str | None,
                       tags: Sequence[str] | None) -> dict[str, Any]:  # fmt: skip
        body: dict[str, Any] = {k: v for k, v in (("name", new_name), ("description", description)) if v is not None}
        if tags is not None:
            body["tags"] = list(tags)
        n: dict[str, Any] = self._do("PATCH", f"/networks/{tenant}/{name}", json=body)
        return n

    def delete_network(self, name: str, tenant: str) -> dict[str, Any]:
        n: dict[str, Any] = self.delete(f"/networks/{tenant}/{name}")
        return n

    def offerings(self) -> list[dict[str, Any]]:
        return items(self.get("/offerings", limit=1000))

    def offering(self, name: str) -> dict[str, Any]:
        o: dict[str, Any] = self.get(f"/offerings/{name}")
        return o

    def leases(self) -> list[dict[str, Any]]:
        return items(self.get("/leases", limit=1000))

    def offers(self) -> list[dict[str, Any]]:
        return items(self.get("/offers", limit=1000))

    def decide_offer(self, move_id: int, accept: bool) -> dict[str, Any]:
        m: dict[str, Any] = self.post(f"/offers/{move_id}/{'accept' if accept else 'decline'}", {})
        return m

    def moves(self) -> list[dict[str, Any]]:
        return items(self.get("/moves", limit=1000))

    def move(self, move_id: int) -> dict[str, Any]:
        d: dict[str, Any] = self.get(f"/moves/{move_id}")
        return d

    def cancel_move(self, move_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        d: dict[str, Any] = self.post(f"/moves/{move_id}/cancel", {})
        return d, list(self.get(f"/moves/{move_id}")["events"])

    def preview(self, node: str, terms: Terms, progress: Any = None) -> dict[str, Any]:
        p: dict[str, Any] = self.post("/moves/preview", {"node": node, "to_tenant": terms.to_tenant, **terms.body()})
        return p

    def request_moves(self, nodes: Sequence[str], terms: Terms) -> list[int]:
        body = {"to_tenant": terms.to_tenant, **terms.body()}
        if len(nodes) == 1:
            return [int(self.post("/moves", {**body, "node": nodes[0]})["id"])]
        return [int(m["id"]) for m in self.post("/moves/batch", {**body, "nodes": list(nodes)})["items"]]

    def create_lease(self, node: str, terms: Terms) -> list[int]:
        when = {k: t.isoformat() if t else None for k, t in (("start", terms.start), ("end", terms.end))}
        return [int(self.post("/leases", {"tenant": terms.to_tenant, "node": node, **terms.body(), **when})["id"])]

    def end_lease(self, lease_id: int) -> tuple[dict[str, Any], list[int]]:
        ended = self.delete(f"/leases/{lease_id}")
        return ended["lease"], [int(ended["move"]["id"])] if ended.get("move") else []

    def run(self, move_ids: list[int], json_out: bool, window: float = 0.0) -> None:
        """Follow the moves the server's worker runs (their progress shown), then print them."""
        from gpufabric.cli.move_run import follow_remote

        follow_remote(self, move_ids, json_out)

    def import_inventory(self, inv: Inventory, instances: Any = None) -> dict[str, Any]:
        """An inventory parsed and checked here, imported by the server (as the token's principal)."""
        r: dict[str, Any] = self.post("/inventory", {"version": 1, "nodes": [node_doc(n) for n in inv.nodes]})
        return r

    def import_format(self, name: str, fmt: Any, text: str, fabric: str | None, strict: bool,
                      confirm: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
        """A kind format's text, read by the server against its own fabrics.yaml and store."""
        doc: dict[str, Any] = self.post_text(f"/inventory/{name}", text, fabric=fabric, strict="true" if strict else None,
                                             confirm=list(confirm) or None)  # fmt: skip
        return doc

    def audit(self, only: tuple[str, ...] = ()) -> AuditReport:
        """The server's audit of its fabrics, run now (``--only``: narrowed to those invariants here)."""
        from gpufabric.audit import AuditReport

        return AuditReport.from_dict(self.post("/audit")["report"]).only(only)

    def tokens(self) -> list[dict[str, Any]]:
        return items(self.get("/tokens"))

    def create_token(self, name: str, role: str, tenant: str | None, expires_at: datetime | None) -> dict[str, Any]:
        body = {"name": name, "role": role, "tenant": tenant}
        t: dict[str, Any] = self.post("/tokens", {**body, "expires_at": expires_at.isoformat()} if expires_at else body)
        return t

    def revoke_token(self, token_id: int) -> dict[str, Any]:
        t: dict[str, Any] = self.delete(f"/tokens/{token_id}")
        return t

    def events(self, limit: int, action: str | None) -> list[dict[str, Any]]:
        return items(self.get("/events", limit=limit, action=action))


def items(data: Any) -> list[dict[str, Any]]:
    return list(data["items"]) if isinstance(data, dict) and "items" in data else list(data)


def node_doc(n: Node) -> dict[str, object]:
    """A node as an inventory document entry (the API's import body): its ports per instance."""
    return {
        "name": n.name,
        **({"offering": n.offering} if n.offering else {}),
        **({"fabrics": {p.instance: p.entries for p in n.fabric_ports}} if n.fabric_ports else {}),
    }
