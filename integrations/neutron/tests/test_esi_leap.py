"""The esi-leap mirror: esi-leap lease events -> gpufabric leases and quarantine moves,
against the fake gpufabric and a loopback esi-leap event feed."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fake_gpufabric import FakeGpufabric
from gpufabric_neutron import client as gf
from gpufabric_neutron import esi_leap
from gpufabric_neutron.names import tenant_name

from conftest import TOKEN

LESSEE_A = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
LESSEE_B = "aaaabbbbccccddddeeeeffff00001111"


class Feed:
    """A loopback esi-leap ``/v1/events`` answering like esi-leap's EventsController."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.seen_headers: list[dict[str, str]] = []
        self.redirect_to: str | None = None  # answer 302 to this url instead
        feed = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                feed.seen_headers.append(dict(self.headers))
                if feed.redirect_to is not None:
                    self.send_response(302)
                    self.send_header("Location", feed.redirect_to + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                q = dict(x.split("=") for x in self.path.partition("?")[2].split("&") if x)
                last = int(q.get("last_event_id", 0))
                raw = json.dumps({"events": [e for e in feed.events if e["id"] > last]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def add(self, event_type: str, node: str, lessee: str, resource_type: str = "dummy_node") -> None:
        self.events.append({"id": len(self.events) + 1, "event_type": event_type, "object_type": "lease",
                            "object_uuid": f"lease-{len(self.events)}", "resource_type": resource_type,
                            "resource_uuid": node, "lessee_id": lessee, "owner_id": "owner"})  # fmt: skip


@pytest.fixture
def feed() -> Iterator[Feed]:
    f = Feed()
    yield f
    f.httpd.shutdown()
    f.httpd.server_close()


@pytest.fixture
def mirror(fake: FakeGpufabric, feed: Feed, tmp_path: Path) -> esi_leap.Mirror:
    client = gf.GpufabricClient(fake.url, TOKEN, retry_for=0.3, insecure=True)  # the fake is plain http on loopback
    esi = esi_leap.EsiLeap(feed.url, {"X-Roles": "admin"}, insecure=True)  # the feed too
    return esi_leap.Mirror(esi, client, tmp_path / "state.json",
                           {"uuid-2": "node2"}, timeout=3, interval=0.01)  # fmt: skip


def tenant_of(fake: FakeGpufabric, node: str) -> str:
    return fake.state.node_tenant.get(node, "quarantine")


def writes(fake: FakeGpufabric) -> list[tuple[str, str, Any]]:
    return [r for r in fake.state.requests if r[0] != "GET"]


def test_fulfilled_lease_puts_the_node_in_the_lessees_tenant(mirror: esi_leap.Mirror, fake: FakeGpufabric, feed: Feed) -> None:
    feed.add(esi_leap.FULFILL, "node1", LESSEE_A)
    assert mirror.run_once() == 1
    assert tenant_of(fake, "node1") == tenant_name(LESSEE_A) == LESSEE_A
    assert [(x["tenant"], x["node"], x["networks"], x["active"]) for x in fake.state.leases] == [(LESSEE_A, "node1", [], True)]
    assert mirror.last_event_id == 1
    assert feed.seen_headers[-1]["X-Roles"] == "admin"


def test_lease_asks_for_no_networks_even_when_the_tenant_has_some(mirror: esi_leap.Mirror, fake: FakeGpufabric,
                                                                   feed: Feed) -> None:  # fmt: skip
    """An empty list means no networks (issue 18): the lessee's Neutron binds attach them."""
    fake.state.tenants.add(LESSEE_A)
    fake.handle("POST", "/api/v1/networks", {}, {"name": "a-net", "tenant": LESSEE_A, "segments": [{"fabric": "ethernet", "seg_id": 2001}]})
    fake.state.requests.clear()
    feed.add(esi_leap.FULFILL, "node1", LESSEE_A)
    mirror.run_once()
    assert ("POST", "/api/v1/leases", {"tenant": LESSEE_A, "node": "node1", "networks": []}) in writes(fake)
    assert fake.state.attachments["node1"] == set(), "the node's ports stay shut until a network attaches"


def test_expired_lease_quarantines_the_node_through_a_move(mirror: esi_leap.Mirror, fake: FakeGpufabric, feed: Feed) -> None:
    feed.add(esi_leap.FULFILL, "node1", LESSEE_A)
    assert mirror.run_once() == 1
    feed.add(esi_leap.DELETE, "node1", LESSEE_A)
    assert mirror.run_once() == 1
    assert tenant_of(fake, "node1") == "quarantine"
    assert [(m["node"], m["to_tenant"], m["status"]) for m in fake.state.moves.values()] == [
        ("node1", LESSEE_A, "done"), ("node1", "quarantine", "done")]  # fmt: skip
    assert [x["active"] for x in fake.state.leases] == [False]
    assert [(m, p) for m, p, _ in writes(fake) if p.startswith("/api/v1/leases/") or p == "/api/v1/moves"] == [
        ("DELETE", "/api/v1/leases/1")], "the service token ends the lease; it never requests moves (403)"  # fmt: skip
    assert mirror.handled == [(1, "lease", "node1"), (2, "release", "node1")]


def test_replayed_events_change_nothing(mirror: esi_leap.Mirror, fake: FakeGpufabric, feed: Feed) -> None:
    feed.add(esi_leap.FULFILL, "node1", LESSEE_A)
    mirror.run_once()
    feed.add(esi_leap.DELETE, "node1", LESSEE_A)
    feed.add(esi_leap.FULFILL, "node2", LESSEE_B)
    mirror.run_once()
    mirror.state_file.unlink()  # state lost: every event comes again
    assert mirror.run_once() == 3
    assert (tenant_of(fake, "node1"), tenant_of(fake, "node2")) == ("quarantine", LESSEE_B)
    assert [(m["node"], m["to_tenant"]) for m in fake.state.moves.values()] == [
        ("node1", LESSEE_A), ("node1", "quarantine"), ("node2", LESSEE_B)], "node1 is not handed back to A, even briefly"  # fmt: skip


def test_a_lease_shorter_than_a_poll_leaves_the_node_in_quarantine(mirror: esi_leap.Mirror, fake: FakeGpufabric, feed: Feed) -> None:
    feed.add(esi_leap.FULFILL, "node1", LESSEE_A)
    feed.add(esi_leap.DELETE, "node1", LESSEE_A)
    assert mirror.run_once() == 2
    assert tenant_of(fake, "node1") == "quarantine" and fake.state.leases == []


def test_old_lessees_expiry_leaves_the_new_lessee_alone(mirror: esi_leap.Mirror, fake: FakeGpufabric, feed: Feed) -> None:
    feed.add(esi_leap.FULFILL, "node1", LESSEE_B)
    mirror.run_once()
    feed.add(esi_leap.DELETE, "node1", LESSEE_A)  # a late event about an earlier lease
    mirror.run_once()
    assert tenant_of(fake, "node1") == LESSEE_B
    assert [m["to_tenant"] for m in fake.state.moves.values()] == [LESSEE_B]


def test_fulfil_on_a_node_held_by_another_tenant_goes_through_quarantine(mirror: esi_leap.Mirror, fake: FakeGpufabric, feed: Feed) -> None:
    feed.add(esi_leap.FULFILL, "node1", LESSEE_A)
    mirror.run_once()
    feed.add(esi_leap.FULFILL, "node1", LESSEE_B)
    mirror.run_once()
    assert tenant_of(fake, "node1") == LESSEE_B
    assert [m["to_tenant"] for m in fake.state.moves.values()] == [LESSEE_A, "quarantine", LESSEE_B]


@pytest.mark.parametrize(
    ("event_type", "node", "resource_type"),
    [("esi_leap.lease.fulfill.start", "node1", "dummy_node"), (esi_leap.FULFILL, "node1", "network"),
     (esi_leap.FULFILL, "no-such-node", "dummy_node")],
    ids=["start-event", "not-a-node", "unknown-node"],
)  # fmt: skip
def test_events_that_are_not_ours_are_skipped(mirror: esi_leap.Mirror, fake: FakeGpufabric, feed: Feed, event_type: str,
                                              node: str, resource_type: str) -> None:  # fmt: skip
    feed.add(event_type, node, LESSEE_A, resource_type)
    assert mirror.run_once() == 1
    assert mirror.last_event_id == 1
    assert fake.state.leases == [] and fake.state.node_tenant == {}


def test_node_map_names_the_gpufabric_node(mirror: esi_leap.Mirror, fake: FakeGpufabric, feed: Feed) -> None:
    feed.add(esi_leap.FULFILL, "uuid-2", LESSEE_A)
    mirror.run_once()
    assert tenant_of(fake, "node2") == LESSEE_A


def test_gpufabric_down_keeps_the_event_for_the_next_pass(mirror: esi_leap.Mirror, fake: FakeGpufabric, feed: Feed) -> None:
    feed.add(esi_leap.FULFILL, "node1", LESSEE_A)
    fake.stop()
    with pytest.raises(gf.Unreachable):
        mirror.run_once()
    assert mirror.last_event_id == 0
    fake.start()
    assert mirror.run_once() == 1
    assert tenant_of(fake, "node1") == LESSEE_A


def test_cli_once(fake: FakeGpufabric, feed: Feed, tmp_path: Path) -> None:
    token = tmp_path / "t"
    token.write_text(TOKEN)
    os.chmod(token, 0o600)
    feed.add(esi_leap.FULFILL, "node2", LESSEE_B)
    rc = esi_leap.main(["--esi-leap-url", feed.url, "--gpufabric-url", fake.url, "--token-file", str(token),
                        "--state-file", str(tmp_path / "s.json"), "--esi-leap-header", "X-Roles:admin", "--once",
                        "--insecure"])  # fmt: skip
    assert rc == 0
    assert json.loads((tmp_path / "s.json").read_text()) == {"last_event_id": 1}
    assert tenant_of(fake, "node2") == LESSEE_B


def test_cli_refuses_plain_http_without_insecure(fake: FakeGpufabric, feed: Feed, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    token = tmp_path / "t"
    token.write_text(TOKEN)
    os.chmod(token, 0o600)
    feed.add(esi_leap.FULFILL, "node2", LESSEE_B)
    with pytest.raises(SystemExit) as e:
        esi_leap.main(["--esi-leap-url", feed.url, "--gpufabric-url", fake.url, "--token-file", str(token),
                       "--state-file", str(tmp_path / "s.json"), "--once"])  # fmt: skip
    assert e.value.code == 2
    assert "scheme 'http' refused; allowed: https://" in capsys.readouterr().err
    assert fake.state.requests == [] and not (tmp_path / "s.json").exists()


def test_plain_http_esi_leap_refused_without_insecure(fake: FakeGpufabric, feed: Feed, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """The Keystone token would travel in clear: refused (exit 2, nothing read or written)."""
    with pytest.raises(gf.InsecureTransport, match="esi-leap url .* scheme 'http' refused"):
        esi_leap.EsiLeap(feed.url, {"X-Auth-Token": "keystone-secret"})
    token = tmp_path / "t"
    token.write_text(TOKEN)
    os.chmod(token, 0o600)
    feed.add(esi_leap.FULFILL, "node2", LESSEE_B)
    with pytest.raises(SystemExit) as e:
        esi_leap.main(["--esi-leap-url", feed.url, "--gpufabric-url", "https://127.0.0.1:9", "--token-file",
                       str(token), "--state-file", str(tmp_path / "s.json"), "--once"])  # fmt: skip
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "esi-leap url" in err and "scheme 'http' refused; allowed: https://" in err
    assert feed.seen_headers == [] and fake.state.requests == [] and not (tmp_path / "s.json").exists()


def test_plain_http_esi_leap_with_insecure_is_reported(feed: Feed, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"):
        esi_leap.EsiLeap(feed.url, insecure=True).events(0)
    assert any("TRANSPORT-INSECURE: esi-leap url" in r.getMessage() and "Keystone token travels in clear"
               in r.getMessage() for r in caplog.records)  # fmt: skip


def test_a_redirect_never_carries_the_keystone_token(feed: Feed) -> None:
    """esi-leap answers 302 to another origin: not followed, the token never leaves for it
    (urllib re-sends every header to any origin a redirect names, http:// included)."""
    other = Feed()
    try:
        feed.redirect_to = other.url
        esi = esi_leap.EsiLeap(feed.url, {"X-Auth-Token": "keystone-secret"}, insecure=True)
        with pytest.raises(gf.RedirectRefused, match=f"answered 302 to {other.url}: redirects are not followed"):
            esi.events(0)
        assert [h.get("X-Auth-Token") for h in feed.seen_headers] == ["keystone-secret"]
        assert other.seen_headers == []  # nothing reached the other origin
    finally:
        other.httpd.shutdown()
        other.httpd.server_close()


def test_the_gpufabric_client_follows_no_redirect_either(feed: Feed) -> None:
    other = Feed()
    try:
        feed.redirect_to = other.url
        client = gf.GpufabricClient(feed.url, TOKEN, insecure=True, retry_for=0)
        with pytest.raises(gf.RedirectRefused):
            client.request("GET", "/nodes/node1")
        assert other.seen_headers == [] and [h.get("Authorization") for h in feed.seen_headers] == [f"Bearer {TOKEN}"]
    finally:
        other.httpd.shutdown()
        other.httpd.server_close()
