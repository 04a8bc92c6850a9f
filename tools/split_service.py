#!/usr/bin/env python3
"""Split ``gpufabric.service`` into the packages of issue 19 item 3 (run once, on main, by the lead).

    python tools/split_service.py            # git mv + rewrite imports + import-linter contracts + docs table
    python tools/split_service.py --check    # print what it would do (moves, unknown modules), change nothing
    python tools/split_service.py --docs     # only regenerate the module table of docs/architecture.md

Layers, inner first (read from the import graph: each imports only layers below it):

    store     tables, converters, inventory/tenants/leases/moves persistence, the store view, the
              fabric epoch and lock, queries, auth, offers/cancel status transitions, migrations,
              backup, the fabric-kind registry (the store allocates each kind's segments)
    engine    the move engine (plan -> apply -> verified read-back), fabrics, reconcile, audit run
    workflow  actions (authorised, logged writes), the tenancy workflow, quotas, inventory files
    runtime   the serve loops and telemetry

Idempotent: a module already moved is skipped, an import already rewritten matches nothing. A
module of ``service/`` the table does not know (added by a branch merged later) is printed and
left where it is (``service/`` stays a package for it); add it to :data:`MAPPING` and run again.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "gpufabric"
OLD = "service"

MAPPING: dict[str, str] = {
    # old module of gpufabric.service -> new dotted module under gpufabric
    "unit_of_work": "store.tx",
    "store": "store.core",
    "db": "store.db",
    "db_models": "store.tables",
    "convert": "store.convert",
    "store_nodes": "store.nodes",
    "store_leases": "store.leases",
    "store_moves": "store.moves",
    "move_requests": "store.move_requests",
    "move_liveness": "store.liveness",
    "store_offers": "store.offers",
    "move_cancel": "store.move_cancel",
    "store_view": "store.view",
    "fabric_lock": "store.lock",
    "queries": "store.queries",
    "auth": "store.auth",
    "backup": "store.backup",
    "tenant_admin": "store.tenants",
    "registry": "store.registry",
    "migrations": "store.migrations",  # a package (alembic env + versions)
    "store_fabric_ports": "store.fabric_ports",
    "loop_leader": "store.loop_leader",
    "columns": "engine.columns",
    "fabrics": "engine.fabrics",
    "moves": "engine.moves",
    "move_isolation": "engine.isolation",
    "reconcile": "engine.reconcile",
    "audit_run": "engine.audit_run",
    "actions": "workflow.actions",
    "tenancy": "workflow.tenancy",
    "quotas": "workflow.quotas",
    "inventory": "workflow.inventory",
    "loops": "runtime.loops",
    "telemetry": "runtime.telemetry",
    "site_check": "runtime.site_check",
}
LAYERS = ("runtime", "workflow", "engine", "store")  # outer first
PACKAGE_DOCS = {
    "store": "The store: persistence of the domain behind one unit of work (``with store.tx() as tx:``).\n\n"
    "Only the modules of this package touch a SQLAlchemy session (tests/unit/test_architecture.py).",
    "engine": "The move engine and what drives the fabrics: plan -> apply -> verified read-back, reconcile, audit.",
    "workflow": "Every write for every caller: authorised, logged, composed in one store transaction.",
    "runtime": "The serve process's background loops and telemetry.",
}
RENAMES = {"workflow.tenancy": ("Tenancy", "TenantWorkflow")}  # one name per meaning (domain.fabric.Tenancy stays)
TEXT_ROOTS = ("src", "tests", "bench", "docs", "tools")
TEXT_FILES = ("pyproject.toml", "README.md", "Makefile")
SUFFIXES = {".py", ".md", ".toml", ".ini", ".cfg", ".txt", ".yaml", ".yml", ".mako", ".html", ".js"}
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- modules:begin (tools/split_service.py --docs) -->", "<!-- modules:end -->"


def git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def service_modules() -> list[str]:
    d = SRC / OLD
    if not d.is_dir():
        return []
    out = [p.stem for p in d.glob("*.py") if p.stem != "__init__"]
    out += [p.name for p in d.iterdir() if p.is_dir() and ((p / "env.py").exists() or (p / "__init__.py").exists())]
    return sorted(set(out) - {"__pycache__"})


def new_path(target: str) -> Path:
    return SRC.joinpath(*target.split("."))


def move_modules(dry: bool) -> list[str]:
    """git mv every known module; the unknown ones (left in service/)."""
    unknown = []
    for pkg in LAYERS:
        init = SRC / pkg / "__init__.py"
        if not init.exists() and not dry:
            init.parent.mkdir(exist_ok=True)
            init.write_text(f'"""{PACKAGE_DOCS[pkg]}"""\n')
            git("add", str(init.relative_to(ROOT)))
    for name in service_modules():
        target = MAPPING.get(name)
        if target is None:
            unknown.append(name)
            continue
        src = SRC / OLD / (name if (SRC / OLD / name).is_dir() else f"{name}.py")
        dst = new_path(target) if src.is_dir() else new_path(target).with_suffix(".py")
        print(f"git mv {src.relative_to(ROOT)} {dst.relative_to(ROOT)}")
        if not dry:
            git("mv", str(src.relative_to(ROOT)), str(dst.relative_to(ROOT)))
    init = SRC / OLD / "__init__.py"
    if not unknown and init.exists() and not dry:
        git("rm", "-q", str(init.relative_to(ROOT)))
        shutil.rmtree(SRC / OLD, ignore_errors=True)  # __pycache__ only
    return unknown


def _from_service_import(m: re.Match[str]) -> str:
    """``from gpufabric.service import a, b`` -> one import per new package (local names kept)."""
    indent, names = m.group(1), [n.strip() for n in m.group(2).strip("()").split(",") if n.strip()]
    lines = []
    for item in names:
        name, _, alias = item.partition(" as ")
        target = MAPPING.get(name.strip())
        if target is None:
            lines.append(f"{indent}from gpufabric.{OLD} import {item}")
            continue
        pkg, mod = target.rsplit(".", 1)
        local = (alias or name).strip()
        lines.append(f"{indent}from gpufabric.{pkg} import {mod}" + (f" as {local}" if local != mod else ""))
    return "\n".join(lines)


def rewrite_text(text: str) -> str:
    text = re.sub(r"^([ \t]*)from gpufabric\.service import (\([^)]*\)|[^\n]+)", _from_service_import, text, flags=re.M)
    for old, target in sorted(MAPPING.items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"\bgpufabric\.{OLD}\.{old}\b", f"gpufabric.{target}", text)
        path = target.replace(".", "/")
        text = re.sub(rf"(?<![\w.-])((?:src/)?(?:gpufabric/)?){OLD}/{old}\.py\b", rf"\g<1>{path}.py", text)
        if (SRC / OLD / old).is_dir() or old == "migrations":
            text = re.sub(rf"(?<![\w.-])((?:src/)?(?:gpufabric/)?){OLD}/{old}/", rf"\g<1>{path}/", text)
    return text


def rename_classes(path: Path, text: str) -> str:
    for module, (old, new) in RENAMES.items():
        if path.suffix != ".py" or (f"gpufabric.{module}" not in text and path != new_path(module).with_suffix(".py")):
            continue
        if re.search(r"from gpufabric\.domain\.fabric import[^\n]*\bTenancy\b", text):
            if re.search(rf"from gpufabric\.{re.escape(module)} import[^\n]*\b{old}\b", text):
                print(f"  {path.relative_to(ROOT)}: imports both {old} classes; rename by hand", file=sys.stderr)
            continue
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def rewrite_contracts(text: str, unknown: list[str]) -> str:
    """pyproject.toml: the service layer becomes the four packages, inner layers get their contract."""
    keep = [f'"gpufabric.{OLD}"'] if unknown else []
    packages = ", ".join([*(f'"gpufabric.{p}"' for p in LAYERS), *keep])
    outer = "\n".join(f'  "gpufabric.{p}' + (' | gpufabric.lab",' if p == LAYERS[0] else '",') for p in LAYERS)
    text = text.replace(f'  "gpufabric.{OLD} | gpufabric.lab",\n', outer + "\n")
    text = text.replace('name = "layers: cli/api -> service -> ', 'name = "layers: cli/api -> runtime/workflow/engine/store -> ')
    text = text.replace(f'"gpufabric.{OLD}"', packages) if not unknown else text.replace(
        f'"gpufabric.{OLD}", ', packages + ", ")
    if "the store is the innermost service layer" not in text:
        text = text.replace("\n[tool.ruff.lint.isort]", f"""
[[tool.importlinter.contracts]]
name = "the lab is independent of the service packages"
type = "forbidden"
source_modules = ["gpufabric.lab"]
forbidden_modules = [{packages}]

[[tool.importlinter.contracts]]
name = "the store is the innermost service layer: runtime -> workflow -> engine -> store"
type = "layers"
layers = [{", ".join(f'"gpufabric.{p}"' for p in LAYERS)}]

[tool.ruff.lint.isort]""", 1)
    return text


def rewrite_all(unknown: list[str], dry: bool) -> int:
    files = [ROOT / f for f in TEXT_FILES if (ROOT / f).exists()]
    for r in TEXT_ROOTS:
        files += [p for p in (ROOT / r).rglob("*") if p.is_file() and p.suffix in SUFFIXES and ".venv" not in p.parts]
    changed = 0
    for path in files:
        if path == Path(__file__).resolve():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new = rename_classes(path, rewrite_text(text))
        if path.name == "pyproject.toml":
            new = rewrite_contracts(new, unknown)
        if new != text:
            changed += 1
            if not dry:
                path.write_text(new)
    return changed


def module_table() -> str:
    """The service modules, by package, with their sizes (lines): the table of docs/architecture.md."""
    rows = ["| package | module | lines | what it owns |", "|---|---|---:|---|"]
    split = (SRC / "store").is_dir()
    for pkg in LAYERS:
        for target in sorted(t for t in MAPPING.values() if t.startswith(pkg + ".")):
            old = next(k for k, v in MAPPING.items() if v == target)
            path = new_path(target) if split else SRC / OLD / old
            path = path if path.is_dir() else path.with_suffix(".py")
            if not path.exists():
                continue
            files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
            lines = sum(len(f.read_text().splitlines()) for f in files)
            doc = _first_line(files[0] if not path.is_dir() else path / "env.py")
            where = f"`{target.split('.', 1)[1]}`" + ("" if split else f" (now `service/{old}`)")
            rows.append(f"| {pkg} | {where} | {lines} | {doc} |")
    for name in [] if not (SRC / OLD).is_dir() else [m for m in service_modules() if m not in MAPPING]:
        rows.append(f"| service (unmapped) | `{name}` | {_lines(SRC / OLD / (name + '.py'))} | |")
    return "\n".join(rows)


def _lines(p: Path) -> int:
    return len(p.read_text().splitlines()) if p.exists() else 0


def _first_line(p: Path) -> str:
    m = re.search(r'"""(.*?)(?:\n\n|""")', p.read_text(), flags=re.S)
    if not m:
        return ""
    text = " ".join(m.group(1).split()).replace("|", "\\|")
    first = re.split(r"(?<=[.])\s", text, maxsplit=1)[0]
    return first if len(first) <= 100 else first[:100].rsplit(" ", 1)[0] + " …"


def write_docs() -> None:
    if not DOC.exists():
        return
    text = DOC.read_text()
    if (SRC / "store").is_dir():  # the note on the old file names goes with them
        text = re.sub(r"<!-- presplit:begin -->.*?<!-- presplit:end -->\n?", "", text, flags=re.S)
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + BEGIN + "\n" + module_table() + "\n" + END + rest.split(END, 1)[1]
        DOC.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="print the plan, change nothing")
    ap.add_argument("--docs", action="store_true", help="only regenerate docs/architecture.md's module table")
    a = ap.parse_args()
    if a.docs:
        write_docs()
        return 0
    unknown = move_modules(a.check)
    for name in unknown:
        print(f"unknown module service/{name}: left in place (add it to MAPPING in {Path(__file__).name})")
    n = rewrite_all(unknown, a.check)
    print(f"{'would rewrite' if a.check else 'rewrote'} {n} file(s)")
    if a.check:
        return 0
    write_docs()
    ruff = ROOT / ".venv" / "bin" / "ruff"
    if ruff.exists():  # imports re-sorted after the rewrite (isort order changed with the package names)
        subprocess.run([str(ruff), "check", "-q", "--fix", "--select", "I", "src", "tests", "bench", "tools"], cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
