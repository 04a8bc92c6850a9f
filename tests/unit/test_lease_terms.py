"""A lease's terms and an offering's settings are the fabric kinds' (issue 19): the NVLink kind owns
the lease term ``gpus`` (its name, range and message; its reading in ``desired()``), the DPU kind
the offering setting ``dpu_mode``; the core carries both generically (``domain/terms.py``,
``Offering.settings``) and builds the API's fields from the kinds' declarations. The CLI's
``--gpus`` is the one declared exception: held here to the terms the registered kinds declare."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from gpufabric.api.v1 import schemas
from gpufabric.api.v1.kind_fields import body_terms
from gpufabric.cli.backends.base import Terms
from gpufabric.cli.main import build_app
from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import BUILTIN_OFFERINGS, Lease, Offering
from gpufabric.domain.moves import Move, MoveRequest
from gpufabric.domain.terms import TermSpec, check_terms, declared_terms, terms_json, terms_of
from gpufabric.fabrics.dpu.entries import DpuMode
from gpufabric.fabrics.dpu.kind import DpuKind
from gpufabric.fabrics.dpu.plan.profiles import offering_mode, offering_role
from gpufabric.fabrics.nvlink.kind import GPUS, NvlinkKind
from gpufabric.store.queries import offering_json
from gpufabric.store.registry import registered_offering_fields, registered_terms

from support.memfabric.kind import MemoryKind

T0 = datetime(2026, 1, 1, tzinfo=UTC)


# ---- the values: one carrier for every kind's terms
def test_terms_are_sorted_pairs_without_the_unset_ones() -> None:
    assert terms_of({"gpus": 4, "colour": None}) == (("gpus", 4),)
    assert terms_of([("z", 1), ("a", 2)]) == (("a", 2), ("z", 1)) and terms_of(None) == ()
    lease = Lease("acme", "n1", T0, terms=(("z", 1), ("gpus", 2)))
    assert lease.terms == (("gpus", 2), ("z", 1)) and lease.term("gpus") == 2 and lease.term("colour") is None
    assert MoveRequest("acme", terms=(("gpus", None),)).terms == ()  # type: ignore[arg-type]
    assert Move("n1", "acme", terms=(("gpus", 8),)).term("gpus") == 8
    assert terms_json((("gpus", 2),), ["gpus", "colour"]) == {"gpus": 2, "colour": None}


def test_a_term_is_checked_against_its_declaration_only() -> None:
    specs = (GPUS, TermSpec("colour", 1, 3, "1-3 colours"))
    assert check_terms((("colour", 3), ("gpus", 16)), specs) == (("colour", 3), ("gpus", 16))
    for bad, field, allowed in (((("gpus", 0),), "lease.gpus", "1-16 GPUs, or unset for the whole node"),
                                ((("gpus", True),), "lease.gpus", "1-16 GPUs, or unset for the whole node"),
                                ((("colour", 4),), "lease.colour", "1-3 colours"),
                                ((("size", 1),), "lease.terms", "colour, gpus")):  # fmt: skip
        with pytest.raises(ValidationError) as e:
            check_terms(bad, specs, "lease.")
        assert (e.value.field, e.value.allowed) == (field, allowed)


class _Colour(MemoryKind):
    lease_terms: ClassVar[tuple[TermSpec, ...]] = (TermSpec("colour", 1, 3, "1-3 colours"),)


class _Rival(MemoryKind):
    name: ClassVar[str] = "rival"
    lease_terms: ClassVar[tuple[TermSpec, ...]] = (TermSpec("gpus", 1, 2, "1-2"),)


def test_the_kinds_declare_the_terms_and_a_name_has_one_owner() -> None:
    assert declared_terms([NvlinkKind(), _Colour(), NvlinkKind().bind("nv2")]) == (_Colour.lease_terms[0], GPUS)
    with pytest.raises(ConfigError) as e:
        declared_terms([NvlinkKind(), _Rival()])
    assert e.value.field == "rival.lease_terms" and "nvlink does" in e.value.allowed
    assert registered_terms() == (GPUS,)  # the built-in kinds: only NVLink's count of GPUs
    assert dict(registered_offering_fields()) == {"dpu_mode": "full"} == dict(DpuKind.offering_settings)


# ---- the NVLink kind owns the term: its range, its refusal, its reading
def test_the_nvlink_kind_reads_its_term() -> None:
    from gpufabric.domain.fabric import Tenancy
    from gpufabric.domain.models import Node
    from gpufabric.domain.values import ModuleId
    from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports

    node = Node("g1", fabric_ports=gpu_ports(*(Gpu("g1", ModuleId(m)) for m in range(1, 9))))
    for terms, k in (((), 8), ((("gpus", 2),), 2)):
        want = NvlinkKind().desired(Tenancy((node,), {"g1": Lease("acme", "g1", T0, terms=terms)}, {})).nodes["g1"]
        assert want.gpus == k
    with pytest.raises(ValidationError, match=r"invalid gpus: 9; allowed: 1-8 \(the GPUs of node g1\), or unset for all"):
        NvlinkKind().check_request(node, MoveRequest("acme", terms=(("gpus", 9),)))
    NvlinkKind().check_request(node, MoveRequest("acme"))  # nothing asked, nothing refused


# ---- the API: the kinds' fields
def test_the_api_bodies_and_answers_get_each_declared_term_and_setting() -> None:
    for model in (schemas.LeaseIn, schemas.MoveIn, schemas.MovesIn, schemas.PreviewIn):
        field = model.model_json_schema()["properties"]["gpus"]
        assert (field["anyOf"][0]["minimum"], field["anyOf"][0]["maximum"]) == (GPUS.minimum, GPUS.maximum)
        assert field["description"] == GPUS.description
    body = schemas.MoveIn(node="n1", to_tenant="acme", gpus=4)  # type: ignore[call-arg]
    assert body_terms(body) == (("gpus", 4),) and body_terms(schemas.MoveIn(node="n1", to_tenant="acme")) == ()
    assert "gpus" in schemas.LeaseOut.model_json_schema()["required"]
    assert schemas.OfferingOut.model_json_schema()["properties"]["dpu_mode"]["type"] == "string"


def test_an_offerings_answer_shows_the_kinds_settings_as_fields() -> None:
    assert offering_json("ocp", "x", [["dpu_mode", "dpu"], ["k", "v"]]) == {
        "name": "ocp", "description": "x", "dpu_mode": "dpu", "settings": {"k": "v"}}  # fmt: skip
    assert offering_json("bm", "", [])["dpu_mode"] == "full"


# ---- the DPU kind owns the offering's mode
def test_the_dpu_kind_reads_the_mode_from_the_offering() -> None:
    builtin = {o.name: o for o in BUILTIN_OFFERINGS}
    assert offering_mode(builtin["openshift"]) is DpuMode.DPU_HOST and offering_role(builtin["openshift"]) == "dpu-host"
    assert offering_mode(builtin["baremetal"]) is DpuMode.FULL and offering_role(builtin["baremetal"]) == "none"
    with pytest.raises(ValidationError) as e:
        offering_mode(Offering("odd", settings=(("dpu_mode", "half"),)))
    assert (e.value.field, e.value.allowed) == ("offerings[odd].settings.dpu_mode", "full or dpu or dpu-host")


# ---- the CLI: --gpus, the declared exception, mirrors the declared terms
def _options(group: str, command: str) -> set[str]:
    import typer.main

    click_group: Any = typer.main.get_command(build_app(group))
    cmd = click_group.commands[group].commands[command]
    return {o for p in cmd.params for o in getattr(p, "opts", ()) if o.startswith("--")}


def test_the_clis_term_options_are_the_declared_terms() -> None:
    core = {"--tenant", "--node", "--network", "--no-networks", "--offering", "--start", "--end", "--dry-run", "--json",
            "--to-tenant", "--window", "--help", "--slot"}  # fmt: skip
    want = {f"--{t.name}" for t in registered_terms()}
    assert _options("lease", "create") - core == want
    assert _options("node", "move") - core == want


def test_an_option_of_a_term_becomes_that_term_of_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Terms] = []

    class Fake:
        remote = True

        def preview(self, node: str, terms: Terms, progress: Any = None) -> dict[str, Any]:
            seen.append(terms)
            return {"phases": {"join": {}}, "lines": {"join": []}}

    import gpufabric.cli.backends.choose as backend_mod

    monkeypatch.setattr(backend_mod, "backend", lambda: Fake())
    monkeypatch.setattr("gpufabric.cli.lease_cmd.backend", lambda: Fake())
    monkeypatch.setattr("gpufabric.cli.move_cmd.backend", lambda: Fake())
    for args in (["lease", "create", "--tenant", "acme", "--node", "n1", "--gpus", "4", "--dry-run", "--json"],
                 ["node", "move", "n1", "--to-tenant", "acme", "--gpus", "4", "--dry-run", "--json"]):  # fmt: skip
        r = CliRunner().invoke(build_app(args[0]), args)
        assert r.exit_code == 0, r.output
    assert [t.lease_terms for t in seen] == [(("gpus", 4),)] * 2
    assert seen[0].body() == {"networks": None, "offering": "baremetal", "gpus": 4}


def test_offering_list_shows_the_kinds_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))
    monkeypatch.setenv("GPUFABRIC_DB", "")
    monkeypatch.delenv("GPUFABRIC_API", raising=False)
    r = CliRunner().invoke(build_app("offering"), ["offering", "list", "--json"])
    assert r.exit_code == 0, r.output
    assert {o["name"]: o["dpu_mode"] for o in json.loads(r.output)} == {
        "baremetal": "full", "openshift": "dpu-host", "openstack": "full", "vm-host": "full"}  # fmt: skip
    r = CliRunner().invoke(build_app("offering"), ["offering", "list"])
    lines = [[w for w in x.split() if w.isascii() and w != "|"] for x in r.output.splitlines()]
    head, openshift = next(x for x in lines if "description" in x), next(x for x in lines if "openshift" in x)
    assert head[:2] == ["offering", "dpu_mode"] and openshift[:2] == ["openshift", "dpu-host"]
    r = CliRunner().invoke(build_app("offering"), ["offering", "show", "openshift"])
    assert "dpu_mode=dpu-host" in r.output
