"""Waiting for a server subprocess the tests start (``ikatkit simulate``) to answer on loopback."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import httpx2 as httpx


def wait_until_serving(server: subprocess.Popen, url: str, timeout: float, log: Callable[[], str]) -> None:
    """Return once ``url/docs`` answers; fail with the server's log (``log()``) if it exits or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        assert server.poll() is None, log()
        try:
            httpx.get(f"{url}/docs", timeout=1)
            return
        except httpx.TransportError:
            assert time.monotonic() < deadline, f"{url} did not answer within {timeout:.0f} s"
            time.sleep(0.1)
