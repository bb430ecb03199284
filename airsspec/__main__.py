"""``python -m airsspec`` (and the ``airsspec`` command) runs the CLI.

When ``airsspec serve`` runs for the workspace, the commands it can answer (hooks, append,
context, search, sessions) go to it through the light client first, before anything heavy
is imported.

Nothing is ever imported from the working directory, where a hook or a command runs inside
whatever repository the user cloned: ``python -m`` put it first on ``sys.path``, and the package
took it off while it was being imported (``airsspec._drop_working_directory``), before this
module and anything a configuration can name.
"""

import sys


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
