"""What every command shares: the store and configuration it works on, and ``--json``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpufabric.cli.decl import Option

if TYPE_CHECKING:  # imported by the functions that read them: a command through --api never does
    from gpufabric.domain.quotas import Quotas
    from gpufabric.domain.segments import SegmentConfig

JSON_OPT = Option(False, "--json", help="Print machine-readable JSON.")


def home() -> Path:
    return Path(os.environ.get("GPUFABRIC_HOME", ".gpufabric")).resolve()


_OPEN: dict[tuple[str, Path], Any] = {}  # the one store of this command (migrated once)


def open_store() -> Any:
    """The store named by GPUFABRIC_DB (any SQLAlchemy URL) or SQLite under GPUFABRIC_HOME: opened
    (and migrated) once per command, then shared by everything the command does."""
    key = (os.environ.get("GPUFABRIC_DB") or "", home())
    if key not in _OPEN:
        from gpufabric.store.core import Store

        close_stores()
        _OPEN[key] = Store.open(url=key[0] or None, home=key[1])
    return _OPEN[key]


def close_stores() -> None:
    """Close the store a previous command opened (each command starts with none)."""
    while _OPEN:
        _OPEN.popitem()[1].close()


def _config_section(key: str) -> dict[str, Any] | None:
    """Section ``key`` of ``$GPUFABRIC_HOME/config.yaml`` (or GPUFABRIC_CONFIG); None without a file."""
    import yaml

    from gpufabric.domain.errors import ConfigError

    path = Path(os.environ.get("GPUFABRIC_CONFIG", home() / "config.yaml"))
    if not path.exists():
        return None
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError("config", str(path), "valid YAML", str(e).splitlines()[0]) from None
    section = raw.get(key, {}) or {}
    if not isinstance(section, dict):
        raise ConfigError(key, section, f"a mapping under {key}:")
    return section


def fabrics_yaml() -> dict[str, Any]:
    """The mapping of ``fabrics.yaml`` (``$GPUFABRIC_HOME``; GPUFABRIC_FABRICS); empty without one."""
    import yaml

    from gpufabric.domain.errors import ConfigError

    path = fabrics_path()
    if not path.exists():
        return {}
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError("fabrics", str(path), "valid YAML", str(e).splitlines()[0]) from None
    return raw if isinstance(raw, dict) else {}


def segment_config() -> SegmentConfig:
    """The segment pools of ``$GPUFABRIC_HOME/config.yaml`` (``segments:``, each registered kind's
    section parsed by the kind), else every default."""
    from gpufabric.store.registry import parse_segments

    return parse_segments(_config_section("segments"))


def quota_config() -> Quotas:
    """Per-tenant quotas from ``config.yaml`` (``quotas:``), else defaults."""
    from gpufabric.domain.quotas import Quotas

    return Quotas.from_dict(_config_section("quotas"))


def fabrics_path() -> Path:
    return Path(os.environ.get("GPUFABRIC_FABRICS", home() / "fabrics.yaml"))


def open_engine(progress: Any = None, verify_timeout: float = 30.0) -> Any:
    """The move engine over the store and the fabrics of ``fabrics.yaml``."""
    from gpufabric.engine.fabrics import Fabrics
    from gpufabric.engine.moves import MoveEngine
    from gpufabric.store.registry import Registry

    cfg = segment_config()
    fabrics = Fabrics.load(fabrics_path(), Registry.from_entry_points(), cfg)
    return MoveEngine(open_store(), fabrics, cfg, progress=progress, verify_timeout=verify_timeout)


def reader() -> Any:
    """Fast read queries over the store (the API's shapes)."""
    from gpufabric.store.queries import Reader

    return Reader(open_store())


def actions() -> Any:
    """Authorised, logged writes on the store (the CLI acts as the local operator, admin)."""
    from gpufabric.workflow.actions import Actions

    return Actions(open_store(), segment_config, quota=quota_config, network_kinds=lambda: network_kinds(fabrics_path()))


def network_kinds(fabrics_file: Path) -> list[Any] | None:
    """The fabric instances of ``fabrics_file`` a new network spans (None without one: every kind)."""
    if not fabrics_file.exists():
        return None
    import yaml

    from gpufabric.engine.fabrics import network_kinds as kinds_of
    from gpufabric.store.registry import Registry

    return kinds_of(yaml.safe_load(fabrics_file.read_text()) or {}, Registry.from_entry_points(), segment_config())
