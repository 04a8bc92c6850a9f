"""``gpufabric deploy unit``: print the systemd unit shipped in the package
(``gpufabric/deploy/gpufabric-serve.service``; docs/deploy.md explains every line)."""

from __future__ import annotations

import sys
from importlib import resources

from gpufabric.cli.common import JSON_OPT
from gpufabric.cli.decl import Group
from gpufabric.cli.output import emit_json

UNIT = "gpufabric-serve.service"

app = Group(no_args_is_help=True)


def unit_text() -> str:
    """The shipped unit file's text (package data, present in the wheel)."""
    return (resources.files("gpufabric") / "deploy" / UNIT).read_text(encoding="utf-8")


@app.command("unit")
def unit(json_out: bool = JSON_OPT) -> None:
    """Print the hardened systemd unit of `gpufabric serve` (redirect it to /etc/systemd/system/)."""
    text = unit_text()
    if json_out:
        emit_json({"name": UNIT, "text": text})
        return
    sys.stdout.write(text)
