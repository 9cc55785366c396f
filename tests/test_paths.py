"""The cache folder: $IKATKIT_CACHE, else .cache/ikatkit of an ikatkit checkout, else the user's cache folder
(a wheel's user standing in any folder gets nothing written there)."""

from __future__ import annotations

from pathlib import Path

from ikatkit.paths import cache_root, checkout_root

ROOT = Path(__file__).resolve().parents[1]


def test_outside_a_checkout_the_users_cache_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("IKATKIT_CACHE", raising=False)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "pyproject.toml").write_text('[project]\nname = "other"\n')  # someone else's project
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "ikatkit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "ikatkit"
    monkeypatch.setenv("IKATKIT_CACHE", "mine")  # still wins, relative to the working folder
    assert cache_root() == tmp_path / "project" / "mine"


def test_inside_a_checkout_its_own_cache_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("IKATKIT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    (tmp_path / "ikatkit" / "tests").mkdir(parents=True)
    (tmp_path / "ikatkit" / "pyproject.toml").write_text('[project]\nname = "ikatkit"\nversion = "0"\n')
    monkeypatch.chdir(tmp_path / "ikatkit" / "tests")  # a subfolder: the checkout's root holds the cache
    assert cache_root() == tmp_path / "ikatkit" / ".cache" / "ikatkit"
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "pyproject.toml").write_text("[project\n")  # unreadable: not a checkout
    assert checkout_root(tmp_path / "broken") is None
    assert checkout_root(ROOT / "src" / "ikatkit") == ROOT  # this repository
