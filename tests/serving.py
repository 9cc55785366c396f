"""Simulators the tests serve on loopback: in a thread (:func:`serve`), or as a subprocess (``ikatkit simulate``)
they wait for (:func:`wait_until_serving`, :func:`simulate_process`)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


@contextmanager
def simulate_process(args: list[str], cwd: Path, token: str, timeout: float) -> Iterator[str]:
    """``ikatkit simulate ARGS --port PORT`` as a subprocess on a free port (the checkout's ``src`` on PYTHONPATH,
    ``token`` as $IKAT_API_TOKEN, no $OPENAI_API_KEY: a loopback server needs none); yields its base URL once it
    answers (within ``timeout`` s), stops it on leaving."""
    from ikatkit.llm.server import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "IKAT_API_TOKEN": token}
    env.pop("OPENAI_API_KEY", None)
    server = subprocess.Popen([sys.executable, "-m", "ikatkit.cli", "simulate", *args, "--port", str(port)], cwd=cwd,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(server, url, timeout, lambda: server.stderr.read().decode())  # type: ignore[union-attr]
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextmanager
def serve(sim: Any, port: int = 0, wrap: Callable[[Any], Any] | None = None) -> Iterator[str]:
    """A simulator's app (:class:`ikatkit.simulate.server.Simulator`; wrapped by ``wrap``, an ASGI middleware) on
    127.0.0.1 in a thread; yields its base URL."""
    import uvicorn

    from ikatkit.simulate.server import create_app

    app = create_app(sim)
    server = uvicorn.Server(uvicorn.Config(wrap(app) if wrap else app, host="127.0.0.1", port=port,
                                           log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{bound}"
    finally:
        server.should_exit = True
        thread.join()
