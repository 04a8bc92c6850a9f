"""Run one ``gpufabric`` command line in a fresh interpreter and read back its exit code, its
output and every module it imported (what a command costs to start: bench/bench_cli.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, sys
sys.argv = ["gpufabric", *json.loads(sys.argv[1])]
from gpufabric.cli.main import main
try:
    main()
except SystemExit as e:
    code = e.code
else:
    code = 0
sys.stderr.write("\\nMODULES " + json.dumps({"code": code, "modules": sorted(sys.modules)}) + "\\n")
"""


def probe(*args: str, home: str = "/nonexistent") -> tuple[int, list[str], str]:
    """(exit code, imported modules, stdout + stderr) of ``gpufabric ARGS`` under ``home``."""
    env = {"PATH": "/usr/bin:/bin", "GPUFABRIC_HOME": home}
    if os.environ.get("PYTHONPATH"):  # a checkout's src put first (a worktree): its code, not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(args))], capture_output=True, text=True,
                       timeout=60, env=env)  # fmt: skip
    head, _, tail = p.stderr.rpartition("\nMODULES ")
    doc = json.loads(tail)
    return doc["code"], doc["modules"], p.stdout + head
