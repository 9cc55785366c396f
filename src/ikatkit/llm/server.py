"""A local llama.cpp server (llama-cpp-python) for a GGUF file: an OpenAI-compatible endpoint on loopback.

Before it is handed out the server must answer one tiny chat completion (a llama.cpp built for another CPU answers
``/v1/models``, then dies on the first completion); while it runs, :func:`exit_report` tells a client whose
connection failed whether the server died, with its exit code and the end of its log.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import IO

from ikatkit.errors import IkatError
from ikatkit.models import resolve_model
from ikatkit.stopping import dies_with_us


_STARTED: dict[str, tuple[subprocess.Popen, IO[str]]] = {}  # /v1 URL -> a server started here and its log


def exit_report(url: str | None) -> str | None:
    """For the server started here at ``url`` when it has exited: its exit code and the last lines of its log."""
    started = _STARTED.get((url or "").rstrip("/"))
    if started is None or started[0].poll() is None:
        return None
    process, log = started
    code = process.returncode
    name = f" ({signal.Signals(-code).name})" if code < 0 and -code in signal.valid_signals() else ""
    log.seek(0)
    tail = " / ".join(line.strip() for line in log.read().splitlines()[-4:] if line.strip())
    return f"the llama.cpp server ikatkit started at {url} exited with code {code}{name}; its log ends: {tail}"


def rebuild_fix(code: int | None, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """What rebuilds llama.cpp for this CPU after its server exited with ``code``: on an x86-64 CPU without AVX2
    (``flags`` in ``cpuinfo``) the default build dies with SIGILL, and only a native or basic build runs."""
    try:
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo.read_text().splitlines()
                      if line.startswith("flags")), None)
    except OSError:
        flags = None
    if flags is not None and "avx2" not in flags:
        lead = ("this CPU has no AVX2, which the default llama.cpp build (LLAMA_CPU=portable) runs"
                + (" (hence SIGILL)" if code == -signal.SIGILL else ""))
        return (f"{lead}: in a checkout `make setup-test LLAMA_CPU=native` (this CPU only) or `LLAMA_CPU=basic` "
                "(no AVX); docs/install.md, llama.cpp")
    return ("rebuild llama.cpp for this CPU: in a checkout `make setup-test LLAMA_CPU=native`, or for any x86-64 "
            "CPU with AVX2 `make setup-test LLAMA_CPU=portable` (the Makefile rebuilds when LLAMA_CPU changes; "
            "docs/install.md, llama.cpp)")


def completion_problem(url: str, model: str = "local", timeout: float = 60.0) -> str | None:
    """Why the OpenAI-compatible server at ``url`` cannot answer one tiny chat completion (None when it can;
    an HTTP error under 500, e.g. an unknown model name, is the server's answer and counts as working)."""
    body = {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]}
    request = urllib.request.Request(f"{url.rstrip('/')}/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json", "Authorization": "Bearer local"})
    try:
        urllib.request.urlopen(request, timeout=timeout).close()
    except urllib.error.HTTPError as err:
        return None if err.code < 500 else f"HTTP {err.code}"
    except OSError as err:
        return str(getattr(err, "reason", None) or err) or type(err).__name__
    return None


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
                    code = process.returncode
                    crashed = code < 0 and -code in (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS)
                    raise IkatError(f"llama.cpp server exited ({code}): {log.read()[-500:]}", path=model,
                                    fix=rebuild_fix(code) if crashed else "check that the file is a GGUF model",
                                    ) from None
                if time.monotonic() > deadline:
                    raise IkatError(f"llama.cpp server did not answer within {ready_timeout:.0f} s", where=url,
                                    fix="raise ready_timeout on a busy machine") from None
                time.sleep(0.5)
        _STARTED[url] = (process, log)
        problem = completion_problem(url, timeout=ready_timeout)
        if problem:
            raise IkatError(f"the llama.cpp server answers /v1/models but not one tiny completion ({problem}); "
                            + (exit_report(url) or "it still runs"), path=model,
                            fix=rebuild_fix(process.poll()))
        yield url
    finally:
        _STARTED.pop(url, None)
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
