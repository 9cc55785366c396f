"""Ray and the JVM in one process: connecting to Ray leaves the JVM's fatal-signal handlers in place."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_ray_keeps_the_jvm_signal_handlers():
    """Without the fix, Ray's core worker replaced the JVM's SIGSEGV handler and the next Lucene search could die
    with a segmentation fault. Run in a child so this session's own Ray and JVM are not involved."""
    script = textwrap.dedent('''
        import ctypes, signal
        from ikatkit.raycluster import _Sigaction, connect
        from ikatkit.java import start_jvm
        libc = ctypes.CDLL(None)
        def handler(sig):
            action = _Sigaction()
            libc.sigaction(sig, None, ctypes.byref(action))
            return action.handler
        start_jvm()
        from jnius import autoclass
        before = {sig: handler(sig) for sig in (signal.SIGSEGV, signal.SIGBUS)}
        ray = connect(None, num_cpus=1)
        after = {sig: handler(sig) for sig in before}
        ray.shutdown()
        print("kept" if before == after and all(before.values()) else f"changed {before} {after}")
    ''')
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.stdout.strip().splitlines()[-1:] == ["kept"], done.stderr[-2000:]
