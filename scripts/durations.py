"""Normalises tests/durations.json after ``pytest --store-durations`` (``make test-durations``).

pytest-split stores one duration per test id, summed over every item with that id; a
schemathesis test is one id collected once per API operation (43 items), so each of its items
would count the whole test's time and skew the halves of scripts/test.sh. This divides such a
duration by the number of items that share the id (the ids counted from ``--collect-only``).
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parents[1] / "tests" / "durations.json"


def main() -> int:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"], capture_output=True, text=True,
                         check=True, cwd=PATH.parents[1]).stdout  # fmt: skip
    count = collections.Counter(line.strip() for line in out.splitlines() if "::" in line)
    durations = json.loads(PATH.read_text())
    fixed = {k: round(v / count.get(k, 1), 3) for k, v in sorted(durations.items())}
    PATH.write_text(json.dumps(fixed, indent=0) + "\n")
    shared = {k: n for k, n in count.items() if n > 1}
    print(
        f"durations: {len(fixed)} tests, {sum(fixed.values()):.0f} s; {len(shared)} ids shared by several items divided"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
