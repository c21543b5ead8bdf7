"""`python -m sut.leasekv --id N --peers ...`: runs one node until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import signal
import sys
import threading

from sut.leasekv.admin import serve_admin
from sut.leasekv.config import ConfigError, config_from_args
from sut.leasekv.dynamo_server import serve_dynamo
from sut.leasekv.node import LeaseKV
from sut.leasekv.resp_server import serve_redis


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        cfg = config_from_args(argv)
    except ConfigError as e:
        print(f"leasekv: {e}", file=sys.stderr)
        return 254
    node = LeaseKV(cfg)
    try:
        servers = [
            serve_redis(node, cfg.bind_host, cfg.me.redis_port),
            serve_dynamo(node, cfg.bind_host, cfg.me.dynamo_port),
            serve_admin(node, cfg.bind_host, cfg.me.admin_port),
        ]
    except OSError as e:
        print(f"leasekv: cannot listen: {e}", file=sys.stderr)
        node.close()
        return 1
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    logging.getLogger("leasekv").info(
        "node %s up: raft %s redis %s dynamo %s admin %s lease %d ms bug %s",
        cfg.node_id, cfg.me.raft_addr, cfg.me.redis_port, cfg.me.dynamo_port,
        cfg.me.admin_port, cfg.lease_ms(), cfg.bug or "none")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    for s in servers:
        s.shutdown()
    node.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
