"""Where a command acts: directly on the store (the local operator, admin) or through a
running ``gpufabric serve`` (``--api URL`` / ``$GPUFABRIC_API`` with ``--token-file`` /
``$GPUFABRIC_TOKEN_FILE`` — a file of mode 0600 — or ``--token`` / ``$GPUFABRIC_TOKEN``). Both give the same JSON-ready dicts (the API v1 shapes), so a
command prints the same output and ``--json`` either way.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

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
    import httpx

ALL = 100_000


class Backend(Protocol):
    remote: bool

    def get(self, path: str, **params: Any) -> Any: ...
    def post(self, path: str, body: dict[str, Any] | None = None) -> Any: ...
    def delete(self, path: str) -> Any: ...


def _raise(r: httpx.Response) -> None:
    try:
        err = r.json()["error"]
    except Exception:  # not our error shape (a proxy, a crash): one line with the status
        raise GpufabricError(f"API answered {r.status_code}: {r.text[:200]}") from None
    msg = err.get("message") or f"API answered {r.status_code}"
    if r.status_code == 404:
        e: GpufabricError = NotFoundError(err.get("field") or "object", str(err.get("value")))
        e.message = msg
        raise e
    if r.status_code == 422:
        raise ValidationError(err.get("field") or "request", err.get("value"), err.get("allowed") or "")
    cls = {401: UnauthorizedError, 403: ForbiddenError, 409: ConflictError, 503: UnavailableError}.get(
        r.status_code, GpufabricError
    )
    raise cls(msg, field=err.get("field"), value=err.get("value"))


class Remote:
    """The API v1 of a running server."""

    remote = True

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        if not token:
            raise UnauthorizedError("--api needs a token: --token-file, $GPUFABRIC_TOKEN_FILE, --token or $GPUFABRIC_TOKEN")
        import httpx  # 80 ms of imports: only a command that talks to a server pays it

        self._http_error = httpx.HTTPError
        self.base = url.rstrip("/") + "/api/v1"
        self.client = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=timeout)

    def _do(self, method: str, path: str, **kw: Any) -> Any:
        try:
            r = self.client.request(method, self.base + path, **kw)
        except self._http_error as e:
            raise UnavailableError(f"cannot reach the API at {self.base}: {e}", field="api") from None
        if r.status_code >= 400:
            _raise(r)
        return r.json() if r.content else None

    def get(self, path: str, **params: Any) -> Any:
        params = {k: v for k, v in params.items() if v is not None}
        return self._do("GET", path, params=params)

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._do("POST", path, json=body or {})

    def delete(self, path: str) -> Any:
        return self._do("DELETE", path)

    def stream(self, path: str) -> Any:
        return self.client.stream("GET", self.base + path, timeout=None)


def api_url() -> str:
    return os.environ.get("GPUFABRIC_API", "")


def api_token() -> str:
    """``$GPUFABRIC_TOKEN``, else the content of ``$GPUFABRIC_TOKEN_FILE`` (owner-only: mode
    0600 or stricter, like every secret file), else empty."""
    token = os.environ.get("GPUFABRIC_TOKEN", "")
    path = os.environ.get("GPUFABRIC_TOKEN_FILE", "")
    if token or not path:
        return token
    from gpufabric.domain.secrets import secret_file

    return secret_file("token", path).reveal()


def backend() -> Remote | None:
    """The remote backend when ``--api``/``$GPUFABRIC_API`` is set, else None (act locally)."""
    url = api_url()
    return Remote(url, api_token()) if url else None


def items(data: Any) -> list[dict[str, Any]]:
    return list(data["items"]) if isinstance(data, dict) and "items" in data else list(data)
