"""Which backend a command acts through: the remote one when ``--api URL`` / ``$GPUFABRIC_API``
is set (with ``--token-file`` / ``$GPUFABRIC_TOKEN_FILE`` — a file of mode 0600 — or ``--token``
/ ``$GPUFABRIC_TOKEN``), else the local one (the store here). Only the chosen backend's module is
imported: a command through ``--api`` loads neither the store nor the fabrics (bench/bench_cli.py).
"""

from __future__ import annotations

import os

from gpufabric.cli.backends.base import Backend


def api_url() -> str:
    return os.environ.get("GPUFABRIC_API", "")


def api_token() -> str:
    """``$GPUFABRIC_TOKEN``, else the content of ``$GPUFABRIC_TOKEN_FILE`` (owner-only: mode
    0600 or stricter, like every secret file), else empty."""
    token = os.environ.get("GPUFABRIC_TOKEN", "")
    path = os.environ.get("GPUFABRIC_TOKEN_FILE", "")
    if token or not path:
        return token
    from gpufabric.transport.secrets import secret_file

    return secret_file("token", path).reveal()


def backend() -> Backend:
    """The remote backend when ``--api``/``$GPUFABRIC_API`` is set, else the local one (the store
    here, :mod:`gpufabric.cli.backends.local`, imported only then): the same methods either way."""
    url = api_url()
    if url:
        from gpufabric.cli.backends.remote import Remote

        return Remote(url, api_token())
    from gpufabric.cli.backends.local import Local

    return Local()
