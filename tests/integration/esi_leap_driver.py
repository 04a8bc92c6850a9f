"""Run by .venv-esi-leap's python (never imported by the test venv): drives a real esi-leap
through its own object layer and manager jobs, on the config file given first.

``lease NODE LESSEE OWNER SECONDS``  create a lease on a dummy node (what ``POST /v1/leases``
                                  does; the API's response needs Keystone, absent here)
``tick``                          run the manager's periodic jobs once (fulfil, expire),
                                  as esi-leap-manager does every 60 s
"""

import datetime
import sys

from oslo_context import context as ctx
from oslo_utils import uuidutils


def main() -> None:
    conf, cmd, *args = sys.argv[1:]
    from esi_leap.common import service

    service.prepare_service([sys.argv[0], "--config-file", conf])
    if cmd == "lease":
        from esi_leap.objects import lease as lease_obj

        node, lessee, owner, seconds = args
        now = datetime.datetime.utcnow()
        lease = lease_obj.Lease(
            uuid=uuidutils.generate_uuid(), resource_type="dummy_node", resource_uuid=node, project_id=lessee,
            owner_id=owner, start_time=now - datetime.timedelta(seconds=1),
            end_time=now + datetime.timedelta(seconds=float(seconds)), status="created", properties={},
        )  # fmt: skip
        lease.create()
        print(lease.uuid)
    elif cmd == "tick":
        from esi_leap.manager.service import ManagerService

        class Jobs:
            _context = ctx.RequestContext(auth_token=None, project_id=None, overwrite=False)

        ManagerService._fulfill_leases(Jobs())
        ManagerService._expire_leases(Jobs())
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
