"""A lease's terms as values (:mod:`gpufabric.domain.terms` says what they are and who declares
them): ``(name, value)`` pairs sorted by name, built, read and shown without the kinds'
declarations. Kept apart from those (dataclasses, which import ``inspect``) so that a command
through ``--api`` that sends a term (``node move --gpus``) starts without them (bench/bench_cli.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

LeaseTerms = tuple[tuple[str, int], ...]
"""A lease's terms: ``(name, value)`` pairs, sorted by name, unset ones left out."""


def terms_of(raw: Mapping[str, object] | Iterable[tuple[str, object]] | None) -> LeaseTerms:
    """``raw`` (a mapping, e.g. the stored JSON, or pairs) as :data:`LeaseTerms`: sorted, unset
    (None) values left out, integers kept as they are (checked by ``domain.terms.check_terms``)."""
    pairs = raw.items() if isinstance(raw, Mapping) else (raw or ())
    return tuple(sorted((str(k), v) for k, v in pairs if v is not None))  # type: ignore[misc]


def term(terms: LeaseTerms, name: str) -> int | None:
    """The value of term ``name`` in ``terms`` (None: unset)."""
    return next((v for k, v in terms if k == name), None)


def terms_json(terms: LeaseTerms, names: Iterable[str]) -> dict[str, int | None]:
    """``terms`` as a lease's answer shows them, beside its core fields: every declared term
    (``names``) by name, null when unset (a stored term no kind declares any more: shown too)."""
    return {**dict.fromkeys(names), **dict(terms)}
