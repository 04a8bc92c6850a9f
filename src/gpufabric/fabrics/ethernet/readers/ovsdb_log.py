"""Pure parser of ``ovsdb-tool show-log -m <db>``: the transactions ovsdb-server committed.

Each committed OVSDB transaction is one record in a standalone database file; the
record carries the transaction's comment (ovs-vsctl and this project's OVSDB driver set
one, ovs-vswitchd's status updates have none) and, with ``-m``, one line per row it
touched. Used to check from OVS itself how many transactions a batch took.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final

_RECORD_RE: Final = re.compile(r"^record (\d+):(.*)$")
_STAMP_RE: Final = re.compile(r'^ (\d{4}-\d\d-\d\d [0-9:.]+)(?: "(.*)")?\s*$')
_ROW_RE: Final = re.compile(r"^\s+table (\S+) (insert row|row) (.*)$")
_NAME_RE: Final = re.compile(r'^"([^"]*)"|^([0-9a-f-]+)')


@dataclass(frozen=True)
class RowChange:
    table: str
    name: str  # the row's name when shown, else its short uuid
    action: str  # "insert", "diff" or "delete"


@dataclass(frozen=True)
class LogRecord:
    index: int
    timestamp: str
    comment: str
    rows: tuple[RowChange, ...]

    def rows_of(self, table: str) -> tuple[RowChange, ...]:
        return tuple(r for r in self.rows if r.table == table)


def parse_show_log(text: str) -> tuple[LogRecord, ...]:
    """Records of ``ovsdb-tool show-log -m`` output, in file order (record 0 is the schema)."""
    records: list[LogRecord] = []
    cur: tuple[int, str, str] | None = None
    rows: list[RowChange] = []

    def flush() -> None:
        if cur is not None:
            records.append(LogRecord(cur[0], cur[1], cur[2], tuple(rows)))

    for line in text.splitlines():
        m = _RECORD_RE.match(line)
        if m:
            flush()
            st = _STAMP_RE.match(m.group(2))  # record 0 (`"Open_vSwitch" schema, ...`) has none
            stamp, comment = (st.group(1), st.group(2) or "") if st else ("", "")
            cur, rows = (int(m.group(1)), stamp, comment), []
            continue
        r = _ROW_RE.match(line)
        if r and cur is not None:
            table, kind, rest = r.groups()
            n = _NAME_RE.match(rest)
            name = (n.group(1) if n.group(1) is not None else n.group(2)) if n else rest
            rows.append(RowChange(table, name, "insert" if kind == "insert row" else "diff"))
        elif line.strip() == "delete row" and rows:  # printed under the row it deletes
            rows[-1] = replace(rows[-1], action="delete")
    flush()
    return tuple(records)


def records_with_comment(records: tuple[LogRecord, ...], prefix: str) -> tuple[LogRecord, ...]:
    return tuple(r for r in records if r.comment.startswith(prefix))
