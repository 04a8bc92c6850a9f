"""The ibnetdiscover parser reads each line in linear time (issue 31 item 12): on be1d2a3 the
``-p`` line pattern held two unbounded ``.*`` separated by ``'\\s-\\s'`` (the two descriptions),
so a line of many ``' - '`` without its closing ``' )`` backtracked quadratically (a 72 KB line
held the server 4.3 s). No timing here: the structural test says every pattern of the module has
at most one unbounded any-character repeat and no unbounded repeat nested in another (what makes
a backtracking engine superlinear), and the large lines are held to their readings."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.infiniband.readers import ibnetdiscover
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import OutputFormat, parse_ibnetdiscover

_p: Any = re._parser  # type: ignore[attr-defined]  # CPython's own pattern parser
_c: Any = re._constants  # type: ignore[attr-defined]
REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None))


def _walk(items: Any, under_repeat: bool, found: dict[str, int]) -> None:
    for op, av in items:
        if op in REPEATS and op is not None:
            _lo, hi, body = av
            unbounded = hi == _c.MAXREPEAT
            if unbounded and under_repeat:
                found["nested"] += 1
            if unbounded and any(o == _c.ANY for o, _ in body):
                found["any"] += 1
            _walk(body, under_repeat or unbounded, found)
        elif op == _c.SUBPATTERN:
            _walk(av[-1], under_repeat, found)
        elif op == _c.BRANCH:
            for branch in av[1]:
                _walk(branch, under_repeat, found)
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            _walk(av[1], under_repeat, found)


def _shape(pattern: re.Pattern[str]) -> dict[str, int]:
    found = {"any": 0, "nested": 0}
    _walk(_p.parse(pattern.pattern, pattern.flags), False, found)
    return found


def test_the_shape_check_sees_the_quadratic_pattern() -> None:
    assert _shape(re.compile(r"\(\s'(?P<desc>.*)'\s-\s'(?P<rdesc>.*)'\s\)")) == {"any": 2, "nested": 0}
    assert _shape(re.compile(r"(a+)+$")) == {"any": 0, "nested": 1}
    assert _shape(re.compile(r'"(?P<desc>.*)"\s+lid (?P<lid>\d+)')) == {"any": 1, "nested": 0}


def test_regression_no_pattern_of_the_parser_backtracks_superlinearly() -> None:
    """Fails on be1d2a3: _P_LINE has three unbounded .* (desc, rdesc, odesc)."""
    patterns = {n: v for n, v in vars(ibnetdiscover).items() if isinstance(v, re.Pattern)}
    assert len(patterns) >= 8
    assert {n: s for n, p in patterns.items() if (s := _shape(p))["any"] > 1 or s["nested"]} == {}


HEAD = "SW     2     19 0x0002c9000100d050 4x SDR - CA     1      1 0x0002c90200223279 ( '"
# be1d2a3's pattern, the oracle of the readings (quick on lines that close: it backtracks once)
GREEDY = re.compile(r"\(\s'(?P<desc>.*)'\s-\s'(?P<rdesc>.*)'\s\)\s*$")


@pytest.mark.parametrize("rdesc", ["HCA-1", "a' - 'b", "", "' )"])
def test_large_port_lines_are_read_as_before(rdesc: str) -> None:
    """72 KB descriptions full of the separator ``' - '``: split where the greedy pattern split
    them (the last separator the line allows), blanks after the closing ``' )`` allowed."""
    desc = "x' - 'y" * 10000
    line = f"{HEAD}{desc}' - '{rdesc}' )  "
    assert len(line) > 70000
    want = GREEDY.search(line)
    assert want is not None
    topo = parse_ibnetdiscover(line + "\n")
    assert topo.format is OutputFormat.PORTS and len(topo.links) == 1
    link = topo.links[0]
    assert (topo.nodes[0].description, link.a.description, link.b.description) == (
        want["desc"], want["desc"], want["rdesc"])  # fmt: skip
    assert link.b.port_guid is not None and link.b.port == 1


def test_a_large_line_that_never_closes_is_refused() -> None:
    """The line that made be1d2a3's pattern quadratic (many ``' - '``, no ``' )``): refused with
    the one-line error naming the line."""
    with pytest.raises(ValidationError, match="line 1"):
        parse_ibnetdiscover(HEAD + "' - '" * 4000 + "x\n")
    own = "SW     2     19 0x0002c9000100d050 4x SDR '" + "a' " * 24000 + "'  \n"
    assert parse_ibnetdiscover(own).nodes[0].description == "a' " * 24000


# be1d2a3's whole -p line pattern: the oracle of what each line reads as (short lines only)
OLD_P_LINE = re.compile(
    r"^(?P<t>SW|CA|RT)\s+(?P<lid>\d+)\s+(?P<p>\d+)\s+0x(?P<guid>[0-9a-f]{16})\s+(?P<width>\S+)\s+(?P<speed>\S+)"
    r"(?:\s+-\s+(?P<rt>SW|CA|RT)\s+(?P<rlid>\d+)\s+(?P<rp>\d+)\s+0x(?P<rguid>[0-9a-f]{16})"
    r"\s+\(\s'(?P<desc>.*)'\s-\s'(?P<rdesc>.*)'\s\)|\s+'(?P<odesc>.*)')\s*$"
)


def test_every_short_line_reads_as_the_old_pattern_read_it() -> None:
    """20000 seeded lines built from the pieces that matter (quotes, the separator, the closing,
    tabs, unconnected and connected heads): the same fields, or both refuse."""
    import random

    rnd = random.Random(31)
    heads = ["SW     2     19 0x0002c9000100d050 4x SDR", "CA 1 1 0x0002c90200223279 4x ??? "]
    rests = [" - CA     1      1 0x0002c90200223279 ( '", " - SW 3 4 0x0002c9000100d051 (\t'", " ", " '", "  '", "",
             " - CA 1 1 0x0002c90200223279 ('"]  # fmt: skip
    pieces = ["'", " ", "-", ")", "(", "a", "\t", "' - '", "' )", "'\t)"]
    for _ in range(20000):
        body = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 8)))
        line = rnd.choice(heads) + rnd.choice(rests) + body + rnd.choice(["", " ", "' )", "'", " \t"])
        old = OLD_P_LINE.match(line)
        assert ibnetdiscover._p_line(line) == (old.groupdict() if old else None), repr(line)
