"""A fabric kind's command group (``FabricKind.cli_group``) may not take the name of a core
command or of another kind's group: one would hide the other (``gpufabric node`` never loads
the kinds, so a kind's ``node`` group would silently never run). The check runs whenever the
kinds' groups are all loaded (``gpufabric --help``, a kind's group, an unknown command)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gpufabric.cli import kinds as cli_kinds
from gpufabric.cli.kinds import unique_groups
from gpufabric.cli.main import GROUPS, build_app
from gpufabric.domain.errors import ConfigError
from gpufabric.domain.views import CliGroup


def group(name: str) -> CliGroup:
    return CliGroup(name, f"{name} help", lambda _host: None)


def test_distinct_groups_are_kept_by_name() -> None:
    got = unique_groups([("dpu", group("offload")), ("mem", group("memtags"))], GROUPS)
    assert list(got) == ["offload", "memtags"]


def test_a_group_named_like_a_core_command_is_refused_naming_the_kind() -> None:
    with pytest.raises(ConfigError) as e:
        unique_groups([("mem", group("node"))], GROUPS)
    assert e.value.field == "fabric kind mem: cli_group().name" and e.value.value == "node"
    assert "gpufabric's own commands" in str(e.value)


def test_two_kinds_with_one_group_name_are_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as e:
        unique_groups([("dpu", group("offload")), ("mem", group("offload"))])
    assert e.value.field == "fabric kind mem: cli_group().name"
    assert "fabric kind dpu" in str(e.value)


def test_every_registered_kind_passes_and_help_lists_the_kinds_groups() -> None:
    groups = cli_kinds.kind_groups(None, GROUPS)
    assert groups and not set(groups) & set(GROUPS)
    out = CliRunner().invoke(build_app(None), ["--help"])
    assert out.exit_code == 0 and all(name in out.output for name in groups)


def test_help_refuses_a_kind_that_would_hide_a_core_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wiring: ``gpufabric --help`` loads every registered kind's group and refuses a clash."""
    from gpufabric.store.registry import Registry

    class Kind:
        def __init__(self, name: str, g: str) -> None:
            self.name, self._g = name, g

        def cli_group(self) -> CliGroup:
            return group(self._g)

    class Kinds:
        def ordered_kinds(self) -> list[Kind]:
            return [Kind("dpu", "offload"), Kind("mem", "lease")]

    monkeypatch.setattr(Registry, "from_entry_points", classmethod(lambda _cls, **_kw: Kinds()))
    with pytest.raises(ConfigError) as e:
        build_app(None)
    assert (e.value.field, e.value.value) == ("fabric kind mem: cli_group().name", "lease")
