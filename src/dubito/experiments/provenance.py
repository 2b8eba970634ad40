"""Provenance of a stored cell or a written report: the package version and the git commit of the
code that produced it ("-dirty" when the checkout has changes outside docs/results)."""

from __future__ import annotations

import os
import subprocess
from functools import lru_cache
from pathlib import Path

from dubito import __version__

__all__ = ["git_commit", "package_version"]


def package_version() -> str:

    return __version__


@lru_cache(maxsize=None)
def _git_commit_of(cwd: str) -> str | None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=True
        ).stdout

    try:
        head = git("rev-parse", "HEAD").strip()
        # generated reports (docs/results) do not make the code dirty: writing one report
        # must not mark the next as made from uncommitted code
        dirty = bool(git("status", "--porcelain", "--", ":(top)", ":(top,exclude)docs/results").strip())
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head or None


def git_commit(cwd=None) -> str | None:
    """``git rev-parse HEAD`` of ``cwd`` (default: the working directory), with "-dirty" when
    ``git status --porcelain`` lists anything outside ``docs/results``; None outside a git
    checkout or without git.
    Computed once per directory and process."""
    return _git_commit_of(str(Path(cwd or os.getcwd()).resolve()))
