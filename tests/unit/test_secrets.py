"""Secrets from 0600 files or the environment, never inline, never printed; store URLs redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.store.db import redact, store_error
from gpufabric.transport.secrets import Secret, load_secret


def test_secret_never_shows_its_value(tmp_path: Path) -> None:
    f = tmp_path / "pw"
    f.write_text("hunter2-value\n")
    f.chmod(0o600)
    s = load_secret("password", file=str(f))
    assert s is not None and s.reveal() == "hunter2-value"
    assert "hunter2" not in repr(s) + str(s) + f"{s}" + repr([s])


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660], ids=["world-readable", "group-readable", "other-read", "group-write"])
def test_secret_file_must_be_owner_only(tmp_path: Path, mode: int) -> None:
    f = tmp_path / "pw"
    f.write_text("x")
    f.chmod(mode)
    with pytest.raises(ConfigError) as ei:
        load_secret("password", file=str(f))
    assert ei.value.field == "password_file" and f"{mode:04o}" in str(ei.value)


@pytest.mark.parametrize(
    ("kw", "field"),
    [({"inline": "plain-text"}, "password"), ({"env": "GPUFABRIC_TEST_UNSET"}, "password_env"),
     ({"file": "/nonexistent/pw"}, "password_file"), ({"inline": Secret("a"), "env": "HOME"}, "password")],
    ids=["inline-refused", "env-unset", "file-missing", "two-sources"],
)  # fmt: skip
def test_secret_sources_refused(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as ei:
        load_secret("password", **kw)  # type: ignore[arg-type]
    assert ei.value.field == field
    assert "plain-text" not in str(ei.value)


def test_secret_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GF_TEST_SECRET", "v")
    s = load_secret("token", env="GF_TEST_SECRET")
    assert s is not None and s.reveal() == "v" and "$GF_TEST_SECRET" in repr(s)


@pytest.mark.parametrize(
    ("text", "shown"),
    [("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
     ("postgresql+psycopg://gf:s3cr%40t@127.0.0.1:5432/gf", "postgresql+psycopg://gf:***@127.0.0.1:5432/gf"),
     ("connect failed: host=h password=s3cret user=u", "connect failed: host=h password=*** user=u"),
     ("sqlite:////tmp/gf.db", "sqlite:////tmp/gf.db")],
    ids=["url", "url-with-driver-and-escape", "libpq-keywords", "no-password"],
)  # fmt: skip
def test_redact(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_store_error_is_one_line_without_password() -> None:
    e = store_error(OSError("could not connect\nsecond line password=pw"), "postgresql://u:pw@h/db")
    assert "\n" not in e.message and "pw@" not in e.message and e.field == "db"
