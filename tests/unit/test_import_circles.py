"""Zero import circles in gpufabric (issue 32): no two modules import each other, directly or
through others.

The module graph is grimp's (the one import-linter checks contracts on). An import under
``if TYPE_CHECKING:`` counts like any other (``exclude_type_checking_imports=False``): a module
that needs another's types only to type-check still sits above it, and a circle through such an
import is still a circle a reader follows. So do imports inside functions. A circle is a strongly
connected component of two or more gpufabric modules; each one found is printed with the edges
that close it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import grimp

PACKAGE = "gpufabric"


def module_graph() -> dict[str, set[str]]:
    """gpufabric module -> the gpufabric modules it imports (any import, TYPE_CHECKING included)."""
    graph = grimp.build_graph(PACKAGE, exclude_type_checking_imports=False, cache_dir=None)
    modules = graph.modules
    return {m: set(graph.find_modules_directly_imported_by(m)) & modules for m in sorted(modules)}


def circles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of two or more modules, each sorted (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for t in targets:
                if t not in index:
                    index[t] = low[t] = len(index)
                    stack.append(t)
                    on_stack.add(t)
                    work.append((t, iter(sorted(edges[t]))))
                    break
                if t in on_stack:
                    low[node] = min(low[node], index[t])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def describe(component: list[str], edges: Mapping[str, Iterable[str]]) -> str:
    inside = set(component)
    lines = [f"circle of {len(component)} modules:"]
    lines += [f"  {m} -> {', '.join(sorted(set(edges[m]) & inside))}" for m in component]
    return "\n".join(lines)


def test_circles_finds_a_circle_and_only_it() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(edges) == [["a", "b", "c"]]


def test_gpufabric_has_no_import_circle() -> None:
    edges = module_graph()
    found = circles(edges)
    assert not found, "\n".join(describe(c, edges) for c in found)
