"""Run by .venv-neutron's python (never imported by the test venv): ``mkdb`` creates Neutron's
schema on SQLite from its models (``neutron-db-manage upgrade`` cannot ALTER constraints on
SQLite), ``serve PORT`` serves ``neutron.wsgi.api:application`` with stdlib wsgiref on loopback.
Needs NEUTRON_DIR (config dir holding neutron.conf and ml2_conf.ini)."""

import os
import sys
import time


def mkdb() -> None:
    import sqlalchemy as sa
    from neutron.db.migration.models import head  # noqa: F401  (imports every model)
    from neutron_lib.db import model_base

    eng = sa.create_engine("sqlite:///" + os.path.join(os.environ["NEUTRON_DIR"], "neutron.db"))
    model_base.BASEV2.metadata.create_all(eng)


def serve(port: int) -> None:
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    os.environ["OS_NEUTRON_CONFIG_DIR"] = os.environ["NEUTRON_DIR"]
    os.environ["OS_NEUTRON_CONFIG_FILES"] = "neutron.conf;ml2_conf.ini"
    sys.argv = [sys.argv[0]]
    t = time.time()
    from neutron.wsgi.api import application

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    srv = make_server("127.0.0.1", port, application, server_class=Server, handler_class=QuietHandler)
    print(f"neutron api ready on 127.0.0.1:{port} after {time.time() - t:.2f}s", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "mkdb":
        mkdb()
    else:
        serve(int(sys.argv[2]))
