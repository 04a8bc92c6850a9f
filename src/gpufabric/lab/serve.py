"""``gpufabric serve`` on a free loopback port, for tests, benches and the lab: started, waited
for until it answers, and stopped (``with serving(env, "--interval", "0") as srv: srv.base``)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gpufabric.domain.errors import LabError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Served:
    proc: subprocess.Popen[Any]
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def serving(
    env: Mapping[str, str],
    *args: str,
    ready: str = "/readyz",
    timeout: float = 60.0,
    output: IO[Any] | int = subprocess.DEVNULL,
) -> Iterator[Served]:
    """Run ``gpufabric serve --port P *args`` with ``env`` until the block ends; it is ready when
    ``ready`` answers 200. LabError when it exits or does not answer within ``timeout`` s."""
    port = free_port()
    exe = str(Path(sys.executable).parent / "gpufabric")
    proc = subprocess.Popen([exe, "serve", "--port", str(port), *args], env=dict(env), stdout=output,
                            stderr=subprocess.STDOUT if output is not subprocess.DEVNULL else subprocess.DEVNULL)  # fmt: skip
    srv = Served(proc, port)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(srv.base + ready, timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise LabError(f"gpufabric serve did not answer {ready} (exit {proc.poll()})") from None
                time.sleep(0.1)
        yield srv
    finally:
        proc.terminate()
        proc.wait(timeout=30)
