"""The checks a PostgreSQL dump passes before its rows are restored (store/restore_check.py), on
the text ``pg_restore`` renders: its table of contents may name only the migrated catalog's
objects, and its data only COPY blocks of known tables with exactly their columns."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.store import restore_check
from gpufabric.store.restore_check import Catalog, check_toc, data_blocks

CATALOG = Catalog(
    names={"table": frozenset({"tenants"}), "sequence": frozenset({"tenants_id_seq"}), "index": frozenset(),
           "constraint": frozenset({"tenants tenants_pkey"}), "trigger": frozenset({"tenants gf_rev_tenants"}),
           "function": frozenset({"gf_bump_revision()"}), "default": frozenset({"tenants id"})},
    columns={"tenants": ("id", "name", "created_at")},
)  # fmt: skip
HEAD = "SET statement_timeout = 0;\nSELECT pg_catalog.set_config('search_path', '', false);\n\\restrict abc\n\n--\n"
ROWS = "COPY public.tenants (id, name, created_at) FROM stdin;\n1\talpha\t2026-01-01 00:00:00+00\n\\.\n"


def _with(monkeypatch: pytest.MonkeyPatch, out: str) -> None:
    def run(args: list[str], env: Mapping[str, str], path: Path) -> str:
        return out

    monkeypatch.setattr(restore_check, "_run", run)


def test_a_dumps_rows_are_read_from_its_copy_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    _with(monkeypatch, HEAD + ROWS + "SELECT pg_catalog.setval('public.tenants_id_seq', 1, true);\n\\unrestrict abc\n")
    assert data_blocks("pg_restore", Path("b"), {}, CATALOG, "0016") == {
        "tenants": (("id", "name", "created_at"), ["1\talpha\t2026-01-01 00:00:00+00"])
    }


@pytest.mark.parametrize(("script", "named"), [
    (HEAD + ROWS + "DROP TABLE tenants;\n", "a statement gpufabric does not run: DROP TABLE tenants;"),
    (HEAD + "SET role = 'postgres'; CREATE FUNCTION x() RETURNS int AS 'select 1' LANGUAGE sql;\n", "SET role"),
    (HEAD + ROWS.replace("tenants (", "tokens ("), "fills table tokens, which no migration makes"),
    (HEAD + ROWS.replace("created_at)", "created_at, note)"), "differ in note"),
    (HEAD + ROWS.replace(", created_at)", ")"), "differ in created_at"),
    (HEAD + ROWS + ROWS, "fills table tenants, which no migration makes (or twice)"),
    (HEAD + ROWS.replace("\\.\n", ""), "its data of table tenants never ends"),
])  # fmt: skip
def test_a_dumps_data_holds_nothing_but_those_rows(monkeypatch: pytest.MonkeyPatch, script: str, named: str) -> None:
    _with(monkeypatch, script)
    with pytest.raises(ValidationError) as e:
        data_blocks("pg_restore", Path("b"), {}, CATALOG, "0016")
    assert named in e.value.message


TOC = """;
; Selected TOC Entries:
;
245; 1255 16635 FUNCTION public gf_bump_revision() postgres
243; 1259 16691 TABLE public tenants postgres
242; 1259 16690 SEQUENCE public tenants_id_seq postgres
3556; 0 0 SEQUENCE OWNED BY public tenants_id_seq postgres
3286; 2604 16594 DEFAULT public tenants id postgres
3520; 0 16385 TABLE DATA public tenants postgres
3570; 0 0 SEQUENCE SET public tenants_id_seq postgres
3293; 2606 16389 CONSTRAINT public tenants tenants_pkey postgres
3367; 2620 16641 TRIGGER public tenants gf_rev_tenants postgres
"""


def test_a_dumps_contents_are_the_catalogs(monkeypatch: pytest.MonkeyPatch) -> None:
    _with(monkeypatch, TOC)
    check_toc("pg_restore", Path("b"), {}, CATALOG, "0016")


@pytest.mark.parametrize(("entry", "named"), [
    ("246; 1255 16636 FUNCTION public gf_hide() postgres", "function public.gf_hide()"),
    ("3368; 2620 16642 TRIGGER public tenants gf_hide postgres", "trigger public.tenants gf_hide"),
    ("250; 1259 16700 VIEW public v postgres", "view public v"),
    ("251; 3079 16701 EXTENSION - plpython3u", "extension -"),
    ("252; 1259 16702 TABLE evil tenants postgres", "table evil.tenants"),
    ("253; 1259 16703 INDEX public ix_spy postgres", "index public.ix_spy"),
])  # fmt: skip
def test_a_dumps_own_objects_are_refused_by_name(monkeypatch: pytest.MonkeyPatch, entry: str, named: str) -> None:
    _with(monkeypatch, TOC + entry + "\n")
    with pytest.raises(ValidationError) as e:
        check_toc("pg_restore", Path("b"), {}, CATALOG, "0016")
    assert named in e.value.message and "which no migration makes" in e.value.message
