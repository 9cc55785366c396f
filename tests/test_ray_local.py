"""A local Ray as ikatkit starts it (:func:`ikatkit.raycluster.connect`): every socket of every Ray process on
loopback (issue 69: gcs_server, the raylet, the workers and the driver listened on every interface), and none of
Ray's chatter on the console (the token-authentication notice, the driver's ``core_worker.cc`` error line about Ray
Data's actors, ray.data's INFO lines, the lines of a job stopped mid-call). Run in a child, so this session's own Ray
is not involved; the job is the shape of ``index dense``/``sparse``: a Ray Data actor pool, then a stop."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

JOB = textwrap.dedent('''
    import json, os, signal, threading, time
    import psutil
    from ikatkit.raycluster import connect
    from ikatkit.stopping import Stopped, handling_stops

    ray = connect(None, num_cpus=2)
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False

    class Double:
        def __call__(self, batch):
            return {"x": batch["id"] * 2}

    data = ray.data.from_items([{"id": i} for i in range(20)], override_num_blocks=4)
    data = data.map_batches(Double, batch_size=None, batch_format="numpy", num_cpus=1,
                            compute=ray.data.ActorPoolStrategy(size=1))
    total = sum(int(b["x"].sum()) for b in data.iter_batches(batch_format="numpy"))

    @ray.remote
    class Slow:
        def wait(self):
            time.sleep(60)

    slow = Slow.remote()
    pending = slow.wait.remote()
    sockets = []
    for process in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            name, found = process.name(), process.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        sockets += [[name, c.type == 1, c.status, c.laddr.ip, c.laddr.port] for c in found
                    if c.status == psutil.CONN_LISTEN or (c.type != 1 and not c.raddr)]
    ray.kill(slow)
    try:
        ray.get(pending)
    except ray.exceptions.RayActorError:
        pass

    class Wait:
        def __call__(self, batch):
            time.sleep(1)
            return batch

    stopped = False
    threading.Timer(3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        with handling_stops():
            slowly = ray.data.from_items([{"id": i} for i in range(40)], override_num_blocks=20)
            slowly = slowly.map_batches(Wait, batch_size=None, batch_format="numpy", num_cpus=1,
                                        compute=ray.data.ActorPoolStrategy(size=2))
            for _ in slowly.iter_batches(batch_format="numpy"):
                pass
    except Stopped:
        stopped = True
    print(json.dumps({"total": total, "sockets": sockets, "stopped": stopped}))
    ray.shutdown()
''')


@pytest.fixture(scope="module")
def local_job() -> tuple[dict, str]:
    """The job's report (its result, the Ray processes' sockets, whether it stopped) and its stderr."""
    done = subprocess.run([sys.executable, "-c", JOB], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_every_socket_of_a_local_ray_is_on_loopback(local_job):
    """The sockets of the driver, gcs_server, the raylet (two ports: node manager and object manager), the workers
    and the runtime-env agent; before the fix the GCS, raylet, workers and driver listened on ``::`` (every
    interface) and the runtime-env agent on the machine's address."""
    report, _ = local_job
    assert report["total"] == 2 * sum(range(20))
    sockets = report["sockets"]
    names = {name for name, *_ in sockets}
    assert {"gcs_server", "raylet", "ray::RuntimeEnvAgent"} <= names and any(n.startswith("python") for n in names)
    assert sum(name == "raylet" for name, *_ in sockets) == 2
    assert all(tcp and status == "LISTEN" for _, tcp, status, *_ in sockets), sockets  # no bound UDP socket
    assert [s for s in sockets if s[3] not in ("127.0.0.1", "::1", "::ffff:127.0.0.1")] == []


def test_a_local_ray_job_and_its_stop_print_nothing(local_job):
    """Ray Data over an actor pool, an actor killed mid-call, a job stopped by SIGINT: stderr stays empty."""
    report, stderr = local_job
    assert report["stopped"] is True
    assert stderr == ""


def test_a_local_ray_that_is_not_on_loopback_is_refused(monkeypatch):
    """The check after the start: a node address other than loopback shuts Ray down and is one clear error."""
    from ikatkit.errors import IkatError
    from ikatkit.raycluster import _loopback

    class Ray:
        down = False

        class util:
            @staticmethod
            def get_node_ip_address() -> str:
                return "192.0.2.2"

        def shutdown(self) -> None:
            self.down = True

    ray = Ray()
    with pytest.raises(IkatError, match="the local Ray started on 192.0.2.2, not on loopback"):
        with _loopback(ray):
            pass
    assert ray.down
