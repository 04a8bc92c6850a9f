"""``gpufabric nvlink``, the NVLink kind's own command group (through :meth:`NvlinkKind.cli_group`;
output and the configured fabrics come from the CLI's :class:`~gpufabric.domain.views.CliHost`):
``domains`` reads each node's NVLink domain now from its ``nvidia-smi -q``, through a backend
declaring the ``domains`` capability (the fmpm driver's ``smi`` commands); ``--pdsh`` prints the
``nvidia-smi -q`` text ``inventory import --format nvidia-smi`` records on the nodes, which
``node show`` and ``GET /api/v1/nodes/{name}`` then show."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, cast

import typer

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.views import CliGroup, CliHost
from gpufabric.fabrics.nvlink.drivers.base import DOMAINS
from gpufabric.fabrics.nvlink.state import FABRIC

if TYPE_CHECKING:  # the backend (and its drivers) load only when a command runs
    from gpufabric.fabrics.nvlink.backend import FmBackend


def cli_group() -> CliGroup:
    return CliGroup("nvlink", "NVLink domains of the nodes, read now from nvidia-smi -q.", build)


def build(host: CliHost) -> typer.Typer:
    """The ``nvlink`` typer app over ``host``."""
    app = typer.Typer(no_args_is_help=True, add_completion=False)

    @app.command("domains")
    def domains(
        fabric: str = typer.Option(FABRIC, "--fabric", help="The NVLink instance of fabrics.yaml."),
        pdsh: bool = typer.Option(False, "--pdsh", help="Print nvidia-smi -q of every node as pdsh does, for "
                                  "`inventory import --format nvidia-smi`."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Each node's NVLink domain (ClusterUUID/CliqueId, or its own board), read now."""
        with host.fabrics() as f:
            backend = f.backend(fabric)
            b = cast("FmBackend", backend)
            if backend is None or DOMAINS not in backend.capabilities or not b.domain_nodes:
                raise ConfigError(f"fabrics.{fabric}.options.smi", None, "an fmpm driver with an smi command per node")
            if pdsh:
                sys.stdout.write(b.domains_text())
                return
            found = b.domains()
        if json_out:
            host.emit_json({n: d.to_dict() for n, d in sorted(found.items())})
            return
        host.table("NVLink domains", ["node", "domain", "source"], [(n, d.id, d.source) for n, d in sorted(found.items())])

    return app
