"""A Kubernetes API stand-in for the lab: ``kmock``'s apiserver emulator (by kopf's author)
served on loopback by a detached process, so the DPU fabric's node labels and taints go
through the official ``kubernetes`` client as they would against a real API server.

No Kubernetes API server runs on this machine; kmock speaks the API's protocol for Nodes
(create/read/patch/list/watch). ``python -m gpufabric.lab.kube URL_FILE`` serves until killed
and writes its base URL to ``URL_FILE`` once it listens.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from gpufabric.domain.errors import LabError
from gpufabric.lab.procs import pid_alive, read_pid, stop_pid


class KubeStandin:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.url_file = self.root / "kube.url"
        self.pid_file = self.root / "kube.pid"

    def running(self) -> bool:
        return pid_alive(read_pid(self.pid_file)) and self.url_file.exists()

    def up(self, timeout: float = 20.0) -> str:
        """Start it (or reuse the running one); returns its base URL."""
        if self.running():
            return self.url_file.read_text().strip()
        self.root.mkdir(parents=True, exist_ok=True)
        self.url_file.unlink(missing_ok=True)
        log = (self.root / "kube.log").open("ab")
        p = subprocess.Popen(
            [sys.executable, "-m", "gpufabric.lab.kube", str(self.url_file)],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self.pid_file.write_text(str(p.pid))
        deadline = time.monotonic() + timeout
        while not self.url_file.exists():
            if p.poll() is not None or time.monotonic() > deadline:
                raise LabError(f"the Kubernetes stand-in (kmock) did not start; see {self.root / 'kube.log'}")
            time.sleep(0.05)
        return self.url_file.read_text().strip()

    def down(self) -> None:
        stop_pid(read_pid(self.pid_file))
        self.pid_file.unlink(missing_ok=True)
        self.url_file.unlink(missing_ok=True)


def _serve(url_file: Path) -> None:
    import kmock

    async def main() -> None:
        async with kmock.KubernetesEmulator() as em, kmock.Server(em) as srv:
            tmp = url_file.with_suffix(".tmp")
            tmp.write_text(str(srv.url).rstrip("/"))
            os.replace(tmp, url_file)
            while True:
                await asyncio.sleep(3600)

    asyncio.run(main())


if __name__ == "__main__":
    _serve(Path(sys.argv[1]))
