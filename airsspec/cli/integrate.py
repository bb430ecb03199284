"""Plugging into agents: hooks install/uninstall for Claude Code, and the hooks themselves."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from airsspec.cli.common import EXIT_FAILED, EXIT_OK, arg, command, open_memory, print_json


@command(
    "hooks",
    arg("action", choices=("install", "uninstall")),
    arg("--project", default=".", metavar="DIR", help="the project folder (default: .)"),
)
def cmd_hooks(args: argparse.Namespace) -> int:
    """Add airsspec's Claude Code hooks to a project's .claude/settings.json (SessionStart prints
    the session's memory; PostToolUse, Stop and PreCompact import the transcript), or remove
    them; other hooks are kept."""
    from airsspec import hooks

    if args.action == "install":
        with open_memory(args) as memory:  # the workspace must exist: hooks will write to it
            root = memory.root
        path = hooks.install(Path(args.project), root)
        result = {"settings": str(path), "installed": list(hooks.EVENTS), "workspace": str(root)}
    else:
        path, removed = hooks.uninstall(Path(args.project))
        result = {"settings": str(path), "removed": removed}
    if args.json:
        print_json(result)
    elif args.action == "install":
        print(f"installed {', '.join(hooks.EVENTS)} hooks in {path} (memory: {root})")
    else:
        print(f"removed {removed} airsspec hook(s) from {path}")
    return EXIT_OK


@command(
    "hook",
    arg("event", choices=("session-start", "import")),
    arg("--budget", type=int, default=2000, metavar="TOKENS", help="context size at start"),
)
def cmd_hook(args: argparse.Namespace) -> int:
    """Run one Claude Code hook (reads Claude Code's JSON on standard input; installed by 'airsspec
    hooks install')."""
    from airsspec import hooks
    from eventlog.errors import AirsspecError

    # A hook must never block Claude Code: every problem is one stderr line and exit 1, which
    # Claude Code shows and otherwise ignores (exit 2 would block some events).
    try:
        data = hooks.read_input(sys.stdin.buffer.read())
        with open_memory(args) as memory:
            if args.event == "import":
                appended = hooks.import_transcript(memory, data)
                if args.json:
                    print_json({"appended": appended})
            else:
                text = hooks.session_context(memory, data, args.budget)
                if args.json:
                    print_json({"context": text})
                elif text:
                    print(text)
    except (AirsspecError, OSError) as exc:
        print(f"airsspec: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


@command(
    "completion",
    arg("shell", choices=("bash", "zsh", "fish")),
    json_flag=False,
)
def cmd_completion(args: argparse.Namespace) -> int:
    """Print the shell code that completes airsspec's commands and options; add it to your shell's
    startup file, e.g. eval "$(airsspec completion bash)" in ~/.bashrc."""
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["airsspec"], shell=args.shell))
    return EXIT_OK
