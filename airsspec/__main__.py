"""``python -m airsspec`` (and the ``airsspec`` command) runs the CLI.

When ``airsspec serve`` runs for the workspace, the hot commands (hooks, append, context,
query --json) go to it through the light client first, before anything heavy is imported.

Nothing is ever imported from the working directory: ``python -m`` puts it first on
``sys.path``, and a hook or a command runs inside whatever repository the user cloned, whose
``evilmod.py`` (or ``pydantic.py``) must stay inert. So the folder is taken off ``sys.path``
before anything else is imported. The installed hooks also start Python with ``-P``, which keeps
it off from the start (the ``airsspec`` package itself included).
"""

import os
import sys


def _drop_working_directory() -> None:
    """Remove the entry ``python -m`` or ``-c`` put first (``""`` or the working directory);
    an entry the user listed on purpose (``PYTHONPATH``) comes later and stays."""
    if sys.flags.safe_path or not sys.path:
        return
    first = sys.path[0]
    if first == "" or os.path.realpath(first) == os.path.realpath(os.getcwd()):
        del sys.path[0]


_drop_working_directory()  # once, at import: the console script imports this module too


def run() -> int:
    """Run one command: through a running server when it can, else the full CLI."""
    from airsspec.client import dispatch

    code = dispatch(sys.argv[1:])
    if code is None:
        from airsspec.cli import main

        code = main()
    return code


if __name__ == "__main__":
    sys.exit(run())
