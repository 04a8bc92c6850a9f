"""The web dashboard: one server-rendered page plus small vanilla JS files (app.js; draw.js, the
hosts' boards and the fabric drawn in SVG) and a style sheet, all shipped in the package (no CDN;
works offline). The page signs in with a token (kept in sessionStorage, sent as Bearer) and reads
the v1 API, so a lessee sees only its nodes."""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, Response

_TYPES = {"app.js": "text/javascript", "draw.js": "text/javascript", "app.css": "text/css"}


def _static(name: str) -> str:
    return (resources.files("gpufabric.api") / "static" / name).read_text()


def mount(app: FastAPI) -> None:
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(_static("index.html"), headers={"Content-Security-Policy": "default-src 'self'"})

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        if name not in _TYPES:
            return Response(status_code=404)
        return Response(_static(name), media_type=_TYPES[name], headers={"Cache-Control": "no-cache"})
