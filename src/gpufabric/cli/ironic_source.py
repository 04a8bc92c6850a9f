"""``gpufabric inventory import --from ironic``: Ironic's listings fetched over its REST API,
then read by the ``ironic`` import format (:mod:`gpufabric.workflow.ironic_inventory`) here or
by the server behind ``--api``, as any kind format's text.

Where Ironic is: ``--ironic-url`` or ``GPUFABRIC_IRONIC_URL`` (e.g. ``https://ironic:6385``).
How: noauth (no token), or a Keystone token sent as ``X-Auth-Token`` read from a file
(``--ironic-token-file`` or ``GPUFABRIC_IRONIC_TOKEN_FILE``) or ``GPUFABRIC_IRONIC_TOKEN``,
never from the command line (``ps`` shows it). https is verified (``--ironic-ca`` or
``GPUFABRIC_IRONIC_CA``: the CA bundle; default the system's) unless ``--ironic-insecure``."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from gpufabric.domain.errors import GpufabricError, ValidationError

NAME = SOURCES = "ironic"  # the import format its text is read in (gpufabric.workflow.ironic_inventory)
URL_ENV, TOKEN_ENV, TOKEN_FILE_ENV, CA_ENV = ("GPUFABRIC_IRONIC_URL", "GPUFABRIC_IRONIC_TOKEN",
                                              "GPUFABRIC_IRONIC_TOKEN_FILE", "GPUFABRIC_IRONIC_CA")  # fmt: skip
TIMEOUT = 60.0
PAGES = 1000  # pages of one listing at most (Ironic's default page: 1000 objects)


class IronicUnreachable(GpufabricError):
    """Ironic did not answer a listing (refused, TLS, HTTP error)."""

    code = "unreachable"


FROM_HELP = (
    "ironic: read the nodes and ports from Ironic's API (no FILE; --ironic-url) into the switched fabric "
    "instance of fabrics.yaml; a port on a switch fabrics.yaml does not have is reported, not imported."
)
URL_HELP = f"Ironic's endpoint (default: ${URL_ENV}), e.g. https://ironic:6385."
TOKEN_HELP = f"A file holding a Keystone token for Ironic (default: ${TOKEN_FILE_ENV} or ${TOKEN_ENV}; none: noauth)."
CA_HELP = f"The CA bundle Ironic's https certificate is verified with (default: ${CA_ENV}, else the system's)."
INSECURE_HELP = "Do not verify Ironic's https certificate (an explicit choice; never a fallback)."
NODE_MAP_HELP = (
    "--from ironic: write {Ironic node UUID: node} to this file (the Neutron driver's and the esi-leap "
    "sync's node_map)."
)


class Access(NamedTuple):
    """Where Ironic is and how the listings are read (options; each has its environment variable)."""

    url: str | None = None
    token_file: Path | None = None
    ca: Path | None = None
    insecure: bool = False


def import_from(source: str | None, file: Path | None, access: Access, read: tuple[str | None, bool, tuple[str, ...]],
                node_map: Path | None, done: Callable[[dict[str, Any], Path, str], None]) -> None:  # fmt: skip
    """``inventory import --from ironic [LISTING]``: Ironic's listings (fetched, or a recorded
    LISTING file) read by the ``ironic`` format here or by the server (``--api``), ``done`` prints
    the answer; ``--node-map`` written. ValidationError: no ``--from``, or another source."""
    from gpufabric.cli.backends.choose import backend
    from gpufabric.workflow.ironic_inventory import import_format

    if source != SOURCES:
        raise ValidationError("--from" if source else "file", source, f"{SOURCES} (or give a FILE)")
    if file is not None:
        if not file.is_file():
            raise ValidationError("file", str(file), "an existing, readable file (Ironic's recorded listing)")
        text, shown = file.read_text(errors="replace"), file
    else:
        text, shown = fetch(access.url, access.token_file, access.ca, access.insecure), Path(base_url(access.url))
    b = backend()
    doc = b.import_format(NAME, import_format(), text, *read)
    write_node_map(doc, node_map)
    done(doc, shown, " through the API" if b.remote else "")


def write_node_map(doc: dict[str, Any], path: Path | None) -> None:
    """The import's {Ironic node UUID: node name} written to ``path`` (``--node-map``), as JSON."""
    if path is None:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc.get("node_map") or {}, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def _token(token_file: Path | None) -> str | None:
    path = token_file or (Path(os.environ[TOKEN_FILE_ENV]) if os.environ.get(TOKEN_FILE_ENV) else None)
    if path is not None:
        try:
            tok = path.read_text().strip()
        except OSError as e:
            raise ValidationError("--ironic-token-file", str(path), f"a readable file ({e.strerror})") from None
        if not tok:
            raise ValidationError("--ironic-token-file", str(path), "a file holding the token")
        return tok
    return os.environ.get(TOKEN_ENV) or None


def _opener(url: str, ca: Path | None, insecure: bool) -> urllib.request.OpenerDirector:
    if not url.startswith("https://"):
        return urllib.request.build_opener()
    import ssl

    ca = ca or (Path(os.environ[CA_ENV]) if os.environ.get(CA_ENV) else None)
    ctx = ssl.create_default_context(cafile=str(ca) if ca else None)
    if insecure:  # the operator's explicit choice, never a fallback
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))


def base_url(url: str | None) -> str:
    """Ironic's endpoint (option, else env), without a trailing ``/`` or ``/v1``."""
    raw = url or os.environ.get(URL_ENV)
    if not raw:
        raise ValidationError("--ironic-url", None, f"Ironic's endpoint (or {URL_ENV}), e.g. http://ironic:6385")
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValidationError("--ironic-url", raw, "an http(s) URL, e.g. https://ironic:6385")
    raw = raw.rstrip("/")
    return raw[: -len("/v1")] if raw.endswith("/v1") else raw


def fetch(url: str | None, token_file: Path | None = None, ca: Path | None = None, insecure: bool = False) -> str:
    """Ironic's node, port and port group listings (every page) as the ``ironic`` format's
    text: ``{"nodes": [...], "ports": [...], "portgroups": [...], "source": ...}``."""
    from gpufabric.workflow.ironic_inventory import API_VERSION, LISTINGS

    base = base_url(url)
    opener = _opener(base, ca, insecure)
    headers = {"X-OpenStack-Ironic-API-Version": API_VERSION, "Accept": "application/json"}
    if (tok := _token(token_file)) is not None:
        headers["X-Auth-Token"] = tok
    doc: dict[str, Any] = {"source": {"url": base, "api_version": API_VERSION}}
    for key in LISTINGS:
        items: list[Any] = []
        nxt: str | None = f"{base}/v1/{key}?detail=True"
        for _ in range(PAGES):
            if nxt is None:
                break
            body = _get(opener, nxt, headers)
            items += body.get(key) or []
            nxt = _same_origin(base, body.get("next"))
        doc[key] = items
    return json.dumps(doc)


def _same_origin(base: str, nxt: Any) -> str | None:
    """The next page's URL, only on Ironic's own endpoint (a listing never sends the token elsewhere)."""
    if not isinstance(nxt, str) or not nxt:
        return None
    a, b = urllib.parse.urlsplit(base), urllib.parse.urlsplit(nxt)
    return urllib.parse.urlunsplit((a.scheme, a.netloc, b.path, b.query, ""))


def _get(opener: urllib.request.OpenerDirector, url: str, headers: dict[str, str]) -> dict[str, Any]:
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=TIMEOUT) as r:
            body = json.loads(r.read())
    except urllib.error.HTTPError as e:
        detail = e.read()[:300].decode(errors="replace")
        raise IronicUnreachable(f"Ironic GET {url}: HTTP {e.code} {detail}") from None
    except (OSError, ValueError) as e:
        raise IronicUnreachable(f"Ironic GET {url}: {e}") from None
    if not isinstance(body, dict):
        raise IronicUnreachable(f"Ironic GET {url}: not a JSON object")
    return body
