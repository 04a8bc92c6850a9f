"""The API on a real HTTP server for a test (uvicorn on 127.0.0.1, a free port, in a thread), and
the installed ``gpufabric`` run against a home with no ``GPUFABRIC_*`` of the caller's."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from gpufabric.api.app import create_app
from gpufabric.api.deps import ApiContext

GF = str(Path(sys.executable).parent / "gpufabric")


@contextmanager
def live_api(ctx: ApiContext) -> Iterator[str]:
    """``ctx``'s app served until the block ends; yields its base URL."""
    server = uvicorn.Server(uvicorn.Config(create_app(ctx), host="127.0.0.1", port=0, log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        t.join(10)


def gf(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``gpufabric ARGS`` with ``GPUFABRIC_HOME=home`` and ``env`` (the caller's GPUFABRIC_* dropped)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUFABRIC_")}
    return subprocess.run([GF, *args], env={**base, "GPUFABRIC_HOME": str(home), **env}, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
