"""``gpufabric ib``, the InfiniBand kind's own command group (through
:meth:`InfinibandKind.cli_group`; output and the configured fabrics come from the CLI's
:class:`~gpufabric.domain.views.CliHost`): ``keys`` reads the running SM's opensm.conf through
the driver now and reports every key NCP SDN04-05 names (:mod:`~gpufabric.fabrics.infiniband.audit.keys`): configured, unset, or
not supported by the SM (the audit's IB-HARDENING findings are the unset ones it can act on)."""

from __future__ import annotations

import typer

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.views import CliGroup, CliHost
from gpufabric.fabrics.infiniband.audit.hardening import OPENSM_DEFAULTS, SETTINGS_UNREADABLE
from gpufabric.fabrics.infiniband.audit.keys import KEYS, KeyState, key_states
from gpufabric.fabrics.infiniband.plan import DEFAULT_INSTANCE


def cli_group() -> CliGroup:
    return CliGroup("ib", "InfiniBand keys of the running SM (P_Key, M_Key, CC_Key, ...).", build)


def build(host: CliHost) -> typer.Typer:
    """The ``ib`` typer app over ``host``."""
    app = typer.Typer(no_args_is_help=True, add_completion=False)

    @app.command("keys")
    def keys(
        fabric: str = typer.Option(DEFAULT_INSTANCE, "--fabric", help="The InfiniBand instance of fabrics.yaml."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Every key the NCP requirement names on the running SM: configured, unset or not supported."""
        with host.fabrics() as f:
            b = f.backend(fabric)
            if b is None:
                raise ConfigError(f"fabrics.{fabric}", None, "an InfiniBand instance of fabrics.yaml")
            read = getattr(getattr(b, "sm", None), "settings", None)  # the backend's SM driver (OpenSM's reads opensm.conf)
            settings = dict(read()) if callable(read) else {SETTINGS_UNREADABLE: "the driver reads no SM settings"}
        states = _states(settings)
        if json_out:
            host.emit_json({"fabric": fabric, "keys": [s.to_dict() for s in states]})
            return
        host.table(f"keys of {fabric}", ["key", "status", "setting", "detail"],
                   [(s.name, s.status, s.setting, s.detail) for s in states])  # fmt: skip

    return app


def _states(settings: dict[str, str]) -> tuple[KeyState, ...]:
    """The key report, or each key ``unverified`` when the SM's settings could not be read."""
    why = settings.get(SETTINGS_UNREADABLE)
    if why is not None:
        return tuple(KeyState(k.name, "unverified", k.option or k.name.lower(), why) for k in KEYS)
    return key_states(settings, OPENSM_DEFAULTS)
