"""Segmenter processes: worker ``w`` of ``W`` reads the input files ``files[w::W]`` and writes their passages
as Anserini JSONL, chunk by chunk in turn, to its own shards ``part-{s:03d}.jsonl`` for ``s`` in
``range(w, shards, W)`` (named pipes that Anserini reads while they are written, or regular files), and the
hashes of their ids to bucket files for the duplicate check. A shard has one writer, so its lines never
interleave; Anserini must read all pipes at once (a thread each), else a worker waits forever on one.

Workers are spawned (safe beside threads or a running JVM), ignore Ctrl-C (the parent stops them) and die
with the parent, even one killed outright. Each sends one message when it ends: its per-file counts, sizes
and SHA-256, or its error. The parent shows progress from a shared array of per-worker passage counts.
"""

from __future__ import annotations

import ctypes
import fcntl
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from json.encoder import encode_basestring, encode_basestring_ascii
from multiprocessing.connection import Connection, wait
from pathlib import Path
from types import TracebackType
from typing import IO, Any, cast

from ikatkit.collection.readers import ReadStats, read_passages
from ikatkit.collection.segment import splitter as make_splitter
from ikatkit.digest import file_digest
from ikatkit.errors import IkatError
from ikatkit.index.dupes import IdHashes

CHUNK = 256  # passages per write (a few hundred KB: joined in cache)
PIPE_BYTES = 1 << 20  # asked for as a named pipe's capacity (Linux allows 1 MiB unprivileged by default)
GRACE_S = 30.0  # how long to wait for segmenters once the reader of their pipes has gone


@dataclass(frozen=True)
class Task:
    """What every worker needs: all input files (each takes its share), their format, where to write."""

    files: tuple[Path, ...]
    fmt: str
    splitter: str
    folder: Path
    shards: int
    hashes: Path


@dataclass(frozen=True)
class FileReport:
    """One input file's counts, size and SHA-256."""

    index: int
    stats: ReadStats
    bytes: int
    sha256: str


def shard_path(folder: Path, worker: int) -> Path:
    return folder / f"part-{worker:03d}.jsonl"


_CONTROL = bytes(range(0x20))


def json_string(text: str) -> bytes:
    """The inside of ``json.dumps(text, ensure_ascii=False)`` in UTF-8 (a lone surrogate is escaped instead).

    Without control characters only backslashes and quotes are escaped, which bytes.replace does faster.
    """
    try:
        data = text.encode()
    except UnicodeEncodeError:
        return encode_basestring_ascii(text)[1:-1].encode()
    if len(data.translate(None, _CONTROL)) != len(data):
        return encode_basestring(text)[1:-1].encode()
    return data.replace(b"\\", b"\\\\").replace(b'"', b'\\"')


def passage_line(pid: str, contents: str) -> bytes:
    """A passage's JSONL line: ``json.dumps({"id": pid, "contents": contents}, ensure_ascii=False)`` in UTF-8."""
    return b'{"id": "%s", "contents": "%s"}\n' % (json_string(pid), json_string(contents))


def file_sha256(path: Path) -> tuple[int, str]:
    """A file's size and sha256."""
    return path.stat().st_size, file_digest(path)


def _segment(task: Task, worker: int, workers: int, counts: ctypes.Array[ctypes.c_longlong],
             outs: Sequence[IO[bytes]]) -> list[FileReport]:
    """Write the passages of this worker's files in chunks to ``outs`` in turn, hashes aside; per-file reports."""
    split, reports, lines, written = make_splitter(task.splitter), [], [], 0
    with IdHashes(task.hashes, worker) as hashes:
        for index in range(worker, len(task.files), workers):
            path, stats = task.files[index], ReadStats()
            try:
                for pid, contents, _, line in read_passages(path, task.fmt, stats, split):
                    lines.append(passage_line(pid, contents))
                    hashes.add(pid, index, line)
                    if len(lines) == CHUNK:
                        outs[written // CHUNK % len(outs)].write(b"".join(lines))
                        lines.clear()
                        written += CHUNK
                        counts[worker] = written
                reports.append(FileReport(index, stats, *file_sha256(path)))
            except (IkatError, BrokenPipeError):
                raise
            except Exception as err:  # a truncated gzip, bytes that are not UTF-8, a full disk, ...
                raise IkatError(f"{type(err).__name__}: {err}", path=path,
                                fix="check that the file is complete and UTF-8, and that the disk has space") from err
        outs[written // CHUNK % len(outs)].write(b"".join(lines))
    counts[worker] = written + len(lines)
    return reports


def _die_with_parent(parent: int) -> None:
    """Linux: be killed when the parent dies rather than wait forever on a pipe nobody will read."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before that
        os._exit(1)


def _work(task: Task, worker: int, workers: int, counts: ctypes.Array[ctypes.c_longlong], conn: Connection,
          parent: int) -> None:
    """A worker's body: segment its files into its shards, then send ``(kind, payload)`` once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    message: tuple[str, Any]
    try:
        with ExitStack() as stack:
            outs = [stack.enter_context(open(shard_path(task.folder, shard), "wb"))
                    for shard in range(worker, task.shards, workers)]
            for out in outs:
                try:
                    fcntl.fcntl(out.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
                except OSError:
                    pass  # a regular file, or a lower limit for pipes
            message = ("done", _segment(task, worker, workers, counts, outs))
    except BrokenPipeError:
        message = ("gone", None)
    except IkatError as err:
        message = ("error", (err.message, err.path and str(err.path), err.where, err.fix))
    conn.send(message)
    conn.close()


class Segmenters:
    """``min(task.shards, files)`` segmenter processes; a context manager that stops any still running."""

    def __init__(self, task: Task) -> None:
        workers = min(task.shards, len(task.files))
        context = multiprocessing.get_context("spawn")
        self._counts = context.Array("q", workers, lock=False)
        self._processes: list[multiprocessing.process.BaseProcess] = []
        self._running: dict[Connection, multiprocessing.process.BaseProcess] = {}
        try:
            for worker in range(workers):
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(target=_work, name=f"ikatkit-segmenter-{worker}", daemon=True,
                                          args=(task, worker, workers, self._counts, sender, os.getpid()))
                process.start()
                sender.close()
                self._processes.append(process)
                self._running[receiver] = process
        except BaseException:
            self.stop()
            raise

    def wait(self, progress: Callable[[int], None],
             reader_alive: Callable[[], bool] = lambda: True) -> list[FileReport]:
        """Every file's report in input order; raises the first worker error. ``progress`` is told the passages
        segmented so far.

        ``reader_alive`` is called a few times a second: it raises if the reader of the shards failed and
        returns False once it has ended; then workers get ``GRACE_S`` seconds to finish.
        """
        reports: list[FileReport] = []
        broken, ended = False, 0.0
        while self._running or broken:
            for conn in wait(list(self._running), timeout=0.2):
                received = self._receive(cast(Connection, conn))  # wait() returns what it was given
                broken = broken or received is None
                reports.extend(received or [])
            progress(sum(self._counts))
            alive = reader_alive()
            if broken or not alive:
                ended = ended or time.monotonic()
                if (broken and not alive) or time.monotonic() - ended > GRACE_S:
                    raise IkatError("the indexer stopped reading passages before the end",
                                    fix="see the indexer's messages above")
        return sorted(reports, key=lambda report: report.index)

    def _receive(self, conn: Connection) -> list[FileReport] | None:
        """A worker's reports, None if its pipe's reader went away; raises its error."""
        process = self._running.pop(conn)
        try:
            kind, payload = conn.recv()
        except EOFError:
            process.join(5)
            raise IkatError(f"segmenter process {process.name} died (exit code {process.exitcode})",
                            fix="out of memory? see the system log") from None
        finally:
            conn.close()
        if kind == "error":
            message, path, where, fix = payload
            raise IkatError(message, path=path, where=where, fix=fix)
        return payload

    def stop(self) -> None:
        """Terminate the workers still running (one blocked opening a pipe nobody reads, for example)."""
        for process in self._processes:
            if process.is_alive():
                process.terminate()
        for process in self._processes:
            process.join(5)
            if process.exitcode is None:
                process.kill()
                process.join()
        for conn in self._running:
            conn.close()
        self._running.clear()

    def __enter__(self) -> Segmenters:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
