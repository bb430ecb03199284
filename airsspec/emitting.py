"""Writing a module emitted from declarations (the settings table from the settings models),
or checking that the written one is current: the text is formatted as ``ruff`` formats the
tree, so the file on disk is exactly what the emitter gives.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def write_or_check(target: Path, text: str, argv: list[str] | None, command: str) -> int:
    """Write ``text``, formatted, to ``target``; with ``--check`` in ``argv``, exit status 1
    (saying to run ``command``) when the file differs from it, else 0."""
    for fix in (["check", "--fix", "--select", "I", "--quiet"], ["format"]):
        text = subprocess.run(
            [sys.executable, "-m", "ruff", *fix, "--stdin-filename", str(target), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    if argv and "--check" in argv:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            print(f"{target} is behind its declarations: run {command}")
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    return 0
