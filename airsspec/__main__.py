"""``python -m airsspec`` (and the ``airsspec`` command) runs the CLI.

When ``airsspec serve`` runs for the workspace, the hot commands (hooks, append, context,
query --json) go to it through the light client first, before anything heavy is imported.
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
