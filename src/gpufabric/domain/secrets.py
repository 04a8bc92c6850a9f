"""Secrets of the drivers (UFM password/token, SSH key passphrase) and transport notes.

A secret comes from a file (``<name>_file:``, which must be owner-only: mode 0600 or
stricter) or from the environment (``<name>_env:``, the variable's name), never inline in
fabrics.yaml: an inline string is refused. Code that already holds the value (tests, the
lab) passes a :class:`Secret`. A :class:`Secret` never prints its value (``repr``/``str``
say ``***`` and where it came from); :meth:`Secret.reveal` is the one way to read it.

:class:`TransportNote` is what a driver reports about its own transport when it was
configured below the secure default (``insecure: true``, plain http, TLS not verified):
the audit turns each note into a ``TRANSPORT-INSECURE`` finding.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from gpufabric.domain.errors import ConfigError


@dataclass(frozen=True)
class Secret:
    """A secret value that never shows itself in a repr, a log line or an error."""

    value: str = field(repr=False)
    source: str = "code"

    def reveal(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"Secret(***, from {self.source})"

    __str__ = __repr__


def secret_file(field_name: str, path: str | os.PathLike[str]) -> Secret:
    """Read a secret file; refuse it unless it is a regular file with no group/other access."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise ConfigError(f"{field_name}_file", str(p), "a readable file", e.strerror or str(e)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{field_name}_file", str(p), "a regular file")
    if st.st_mode & 0o077:
        raise ConfigError(
            f"{field_name}_file", str(p), "mode 0600 or stricter (chmod 600)", f"mode {stat.S_IMODE(st.st_mode):04o}"
        )
    try:
        value = p.read_text().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{field_name}_file", str(p), "a readable UTF-8 file", str(e)) from None
    if not value:
        raise ConfigError(f"{field_name}_file", str(p), "a non-empty secret")
    return Secret(value, f"file {p}")


def secret_env(field_name: str, var: str) -> Secret:
    value = os.environ.get(var, "")
    if not value:
        raise ConfigError(f"{field_name}_env", var, "the name of a set, non-empty environment variable")
    return Secret(value, f"${var}")


def load_secret(
    field_name: str, inline: object = None, file: str | None = None, env: str | None = None
) -> Secret | None:
    """The secret ``field_name`` from exactly one of: a :class:`Secret` given by code,
    ``file``, ``env``. An inline string (a password written into fabrics.yaml) is refused."""
    given = [x for x in (inline, file, env) if x]
    if len(given) > 1:
        raise ConfigError(field_name, "given more than once", f"one of {field_name}_file or {field_name}_env")
    if inline:
        if not isinstance(inline, Secret):
            raise ConfigError(
                field_name, "*** (inline)", f"{field_name}_file: (mode 0600) or {field_name}_env:", "inline secrets are refused"
            )
        return inline
    if file:
        return secret_file(field_name, file)
    if env:
        return secret_env(field_name, env)
    return None


@dataclass(frozen=True, order=True)
class TransportNote:
    """A transport running below the secure default, as its driver was told to."""

    device: str  # e.g. "leaf1" or "ufm"
    setting: str  # e.g. "insecure", "allow_http", "verify"
    message: str
