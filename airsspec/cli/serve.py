"""Serving: ``serve`` (the warm HTTP server) and ``token create|list|revoke`` (who may call it)."""

from __future__ import annotations

import argparse
import getpass

from airsspec.arguments import whole_number
from airsspec.cli.common import arg, command, command_group, flag, open_memory, print_json
from airsspec.errors import EXIT_OK


def port(value: str) -> int:
    """A TCP port, 0 to 65535 in the digits 0-9 (argparse names the option if not)."""
    try:
        number = whole_number(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{number} is not a port (0-65535)")
    return number


@command(
    "serve",
    arg("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"),
    arg("--port", type=port, default=8750, help="TCP port (default 8750; 0: any free port)"),
    arg("--socket", metavar="PATH", help="listen on this Unix socket instead of TCP"),
    arg("--user", help="the user of local clients (hooks, the CLI; default: your login name)"),
    json_flag=False,
)
def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the memory from one warm process. The HTTP API (/v1), MCP over
    streamable HTTP (/mcp) and the web viewer (/); hooks and the CLI use it when it runs."""
    import logging
    import sys

    from airsspec.memory import check_name
    from airsspec.serve.app import serve
    from airsspec.serve.core import Served

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    for noisy in ("mcp", "watchfiles"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    user = check_name(args.user or getpass.getuser(), "--user")
    with open_memory(args) as memory:
        served = Served(memory, local_user=user)

        def ready(where: dict) -> None:
            print(banner(memory.root, where), flush=True)

        serve(served, host=args.host, port=args.port, path=args.socket, ready=ready)
    return EXIT_OK


def banner(root: object, where: dict) -> str:
    """The line ``serve`` prints once it listens: where, and how to reach it (a Unix socket
    has no url a browser opens: the line says how curl reaches it)."""
    if where.get("socket"):
        sock = where["socket"]
        return (
            f"airsspec serve: {root} on the Unix socket {sock} "
            f"(try: curl --unix-socket {sock} http://localhost/v1/health)"
        )
    return f"airsspec serve: {root} at {where['url']} (viewer: {where['url']}/)"


command_group(
    "token",
    "Bearer tokens for 'airsspec serve'. Create one (printed once, stored hashed), list them "
    "(ids, users, admin or user, never the tokens), or revoke one by id.",
)


@command(
    "token create",
    arg("--user", required=True, help="the user the token acts for"),
    flag("--read-only", "the token may only read"),
    flag("--admin", "an admin's token: the whole workspace, sessions of every user and of none"),
)
def cmd_token_create(args: argparse.Namespace) -> int:
    """Create a bearer token. It is printed once and stored hashed."""
    from airsspec.serve.tokens import TokenStore

    with open_memory(args) as memory:
        entry, token = TokenStore(memory.root).create(
            args.user, read_only=args.read_only, admin=args.admin
        )
    if args.json:
        print_json(
            {
                "id": entry.id,
                "user": entry.user,
                "read_only": entry.read_only,
                "admin": entry.admin,
                "token": token,
            }
        )
    else:
        print(token)
    return EXIT_OK


@command("token list")
def cmd_token_list(args: argparse.Namespace) -> int:
    """List the tokens: ids, users and modes, never the tokens."""
    from airsspec.serve.tokens import TokenStore

    with open_memory(args) as memory:
        entries = TokenStore(memory.root).entries()
    if args.json:
        print_json([{k: v for k, v in vars(e).items() if k != "sha256"} for e in entries])
    else:
        for e in entries:
            mode = "read-only" if e.read_only else "read-write"
            kind = "admin" if e.admin else "user"
            print(f"{e.id}  {e.user}  {kind}  {mode}  {e.created}")
    return EXIT_OK


@command(
    "token revoke",
    arg("id", help="the token's id, or at least 6 of its first characters (airsspec token list)"),
)
def cmd_token_revoke(args: argparse.Namespace) -> int:
    """Revoke a token. From then on the server refuses it."""
    from airsspec.serve.tokens import TokenStore

    with open_memory(args) as memory:
        entry = TokenStore(memory.root).revoke(args.id)
    if args.json:
        print_json({"revoked": entry.id, "user": entry.user})
    else:
        print(f"revoked token {entry.id} of {entry.user}")
    return EXIT_OK
