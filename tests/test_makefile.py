"""The Makefile's llama.cpp build: changing ``LLAMA_CPU`` on an existing checkout rebuilds llama-cpp-python with that
build's CMAKE_ARGS, keeping it does nothing, and a CPU without AVX2 is told what it needs before anything is built.

The real make runs the real recipes; the venv's ``python`` is a unit-test double that logs each pip command with its
CMAKE_ARGS (compiling llama.cpp takes minutes: the two real builds are in docs/install.md, with what each prints).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Logs "CMAKE_ARGS|arguments" per call; `-m pip show` answers "installed" once a pip install ran.
FAKE_PYTHON = """#!/bin/sh
echo "$CMAKE_ARGS|$*" >> "$(dirname "$0")/../pip.log"
case "$*" in
  *"pip show"*) test -e "$(dirname "$0")/../installed" ;;
  *"pip install"*) touch "$(dirname "$0")/../installed" ;;
esac
"""

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@pytest.fixture
def venv(tmp_path) -> Path:
    """A venv folder whose ``make setup`` is done (its stamp up to date) and whose python logs pip."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    stamp = venv / ".setup"
    stamp.touch()
    newest = max(os.stat(ROOT / name).st_mtime_ns for name in ("Makefile", "pyproject.toml", "constraints.txt"))
    os.utime(stamp, ns=(newest, newest))  # as new as its inputs (to the nanosecond: a float rounds): up to date
    return venv


def make_setup_test(venv: Path, *args: str, cpuinfo: Path | None = None) -> tuple[subprocess.CompletedProcess, list]:
    """``make setup-test VENV=venv args``; the pip calls it made, as (CMAKE_ARGS, arguments) pairs."""
    log = venv / "pip.log"
    log.unlink(missing_ok=True)
    extra = [f"CPUINFO={cpuinfo}"] if cpuinfo else []
    done = subprocess.run(["make", "-s", "setup-test", f"VENV={venv}", *args, *extra], cwd=ROOT,
                          capture_output=True, text=True)
    calls = [tuple(line.split("|", 1)) for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls


def installs(calls: list) -> list:
    return [(cmake, args) for cmake, args in calls if "pip install" in args]


def test_changing_llama_cpu_rebuilds_llama_cpp_and_keeping_it_does_nothing(venv):
    done, calls = make_setup_test(venv)
    assert done.returncode == 0, done.stderr
    first = installs(calls)
    assert len(first) == 1 and "-e .[all,test]" in first[0][1] and "-DGGML_AVX2=ON" in first[0][0]
    assert (venv / ".setup-test-portable").exists()

    done, calls = make_setup_test(venv)
    assert done.returncode == 0 and calls == []

    done, calls = make_setup_test(venv, "LLAMA_CPU=native")
    assert done.returncode == 0, done.stderr
    forced = [(cmake, args) for cmake, args in installs(calls) if "--force-reinstall" in args]
    assert forced == [("-DGGML_NATIVE=ON",
                       "-m pip install --no-cache-dir --force-reinstall --no-deps -c constraints.txt "
                       "llama-cpp-python")]
    assert sorted(p.name for p in venv.glob(".setup-test*")) == [".setup-test-native"]
    assert (venv / ".llama-cpu").read_text().strip() == "native"

    done, calls = make_setup_test(venv)  # and back
    forced = [cmake for cmake, args in installs(calls) if "--force-reinstall" in args]
    assert done.returncode == 0 and len(forced) == 1 and "-DGGML_NATIVE=OFF" in forced[0]
    assert "-DGGML_AVX512=OFF" in forced[0]


def test_a_checkout_stamped_before_the_build_was_named_rebuilds_once(venv):
    (venv / "installed").touch()
    (venv / ".setup-test").touch()  # the stamp of earlier Makefiles: which build it holds is unknown
    done, calls = make_setup_test(venv, "LLAMA_CPU=native")
    assert done.returncode == 0, done.stderr
    assert [cmake for cmake, args in installs(calls) if "--force-reinstall" in args] == ["-DGGML_NATIVE=ON"]
    assert not (venv / ".setup-test").exists()


def test_a_cpu_without_avx2_is_told_what_it_needs_before_anything_builds(venv, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt avx\n")
    done, calls = make_setup_test(venv, cpuinfo=cpuinfo)
    assert done.returncode == 2 and calls == []
    assert "no AVX2" in done.stdout and "LLAMA_CPU=native" in done.stdout and "LLAMA_CPU=basic" in done.stdout

    done, calls = make_setup_test(venv, "LLAMA_CPU=basic", cpuinfo=cpuinfo)
    assert done.returncode == 0, done.stderr
    (cmake, args), = installs(calls)
    assert "-DGGML_AVX=OFF" in cmake and "-DGGML_AVX2=OFF" in cmake and "-DGGML_NATIVE=OFF" in cmake


def test_an_unknown_llama_cpu_is_refused(venv):
    done, calls = make_setup_test(venv, "LLAMA_CPU=fast")
    assert done.returncode == 2 and calls == [] and "portable, native or basic" in done.stdout


def test_a_dead_server_names_the_make_command_that_rebuilds_for_this_cpu(tmp_path):
    import signal

    from ikatkit.llm.server import rebuild_fix

    no_avx2 = tmp_path / "no-avx2"
    no_avx2.write_text("flags\t\t: fpu sse4_2 avx\n")
    fix = rebuild_fix(-signal.SIGILL, no_avx2)
    assert fix.startswith("this CPU has no AVX2") and "(hence SIGILL)" in fix
    assert "make setup-test LLAMA_CPU=native" in fix and "LLAMA_CPU=basic" in fix
    avx2 = tmp_path / "avx2"
    avx2.write_text("flags\t\t: fpu sse4_2 avx avx2 avx512f\n")
    fix = rebuild_fix(-signal.SIGSEGV, avx2)
    assert "make setup-test LLAMA_CPU=native" in fix and "make setup-test LLAMA_CPU=portable" in fix
    assert "rm " not in fix  # the stamp names the build: changing LLAMA_CPU is what rebuilds
