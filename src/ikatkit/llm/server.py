"""A local llama.cpp server (llama-cpp-python) for a GGUF file: an OpenAI-compatible endpoint on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec

from ikatkit.errors import IkatError
from ikatkit.models import resolve_model
from ikatkit.stopping import dies_with_us


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def llama_cpp_server(model: str, *, port: int | None = None, n_ctx: int = 2048, n_threads: int = 2,
                     ready_timeout: float = 120.0) -> Iterator[str]:
    """Start ``python -m llama_cpp.server`` for ``model`` (a .gguf path or ``bundled:*``); yield its /v1 URL.

    Waits (bounded) until ``/v1/models`` answers; stops the server on exit (and it dies with this process).
    """
    if find_spec("llama_cpp") is None:
        raise IkatError("llama-cpp-python is not installed", fix="pip install 'llama-cpp-python[server]'")
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/v1"
    log = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: the server's chatty log never blocks it
    process = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", resolve_model(model),
                                "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
                                "--n_threads", str(n_threads)],
                               stdout=subprocess.DEVNULL, stderr=log, preexec_fn=dies_with_us())
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            try:
                urllib.request.urlopen(f"{url}/models", timeout=1)
                break
            except OSError:
                if process.poll() is not None:
                    log.seek(0)
                    raise IkatError(f"llama.cpp server exited ({process.returncode}): "
                                    f"{log.read()[-500:]}",
                                    path=model, fix="check that the file is a GGUF model") from None
                if time.monotonic() > deadline:
                    raise IkatError(f"llama.cpp server did not answer within {ready_timeout:.0f} s", where=url,
                                    fix="raise ready_timeout on a busy machine") from None
                time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
