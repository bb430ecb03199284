"""The docs test's ``airsspec`` (``tests/support/forkserver.py``) behaves as the real command:
the same output and exit status for a good and a bad invocation, standard input read from the
shell's pipe, and a signal sent to it ends the command it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

from tests.conftest import REPO, wait_for
from tests.support.cli import run_cli
from tests.support.forkserver import airsspec_on_path


def test_the_forked_command_answers_as_the_command_does(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIRSSPEC_COLD_EMBEDDER": "hash"}
    with airsspec_on_path(tmp_path / "bin", env) as folder:
        env["PATH"] = f"{folder}{os.pathsep}{env['PATH']}"
        (tmp_path / "ws").mkdir()
        (tmp_path / "real").mkdir()
        for args in (["--version"], ["append"], ["init", "."]):
            real = run_cli(*args, cwd=tmp_path / "real")
            forked = subprocess.run(
                ["airsspec", *args], cwd=tmp_path / "ws", env=env, capture_output=True
            )
            assert (forked.returncode, forked.stdout, forked.stderr) == (
                real.returncode,
                real.stdout,
                real.stderr,
            ), args
        piped = subprocess.run(
            'echo \'{"type": "user", "content": "piped"}\' | airsspec append s1 - '
            "&& airsspec replay s1",
            shell=True,
            cwd=tmp_path / "ws",
            env=env,
            capture_output=True,
            text=True,
        )
        assert piped.returncode == 0 and "piped" in piped.stdout, piped.stderr
        serve = subprocess.Popen(
            ["airsspec", "serve", "--socket", "s.sock"],
            cwd=tmp_path / "ws",
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert wait_for(lambda: (tmp_path / "ws" / "s.sock").exists(), 60)
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=60) in (0, -signal.SIGTERM)
        assert wait_for(lambda: not _answers(tmp_path / "ws" / "s.sock"), 30)


def _answers(path: Path) -> bool:
    """Whether a server still accepts connections on the socket ``path``."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True
