"""Forgetting: ``airsspec forget --user U`` or ``--session S`` (see ``airsspec.forgetting``)."""

from __future__ import annotations

import argparse
import sys

from airsspec.cli.common import arg, command, open_memory, print_json
from airsspec.errors import EXIT_OK, UsageError
from airsspec.memory import check_name


@command(
    "forget",
    arg("--user", help="forget this user: every session it owns, and what it added"),
    arg("--session", help="forget this session"),
    arg("--by", help="who asks (recorded; default: $AIRSSPEC_USER, else the login name)"),
)
def cmd_forget(args: argparse.Namespace) -> int:
    """Forget a user or a session for good. Destroy its encryption keys (needs [privacy]
    encrypt), record a forgotten event, and purge every derived copy (hot, warm, learnings,
    cold rows and their old versions, cached embeddings). The log keeps the ciphertext."""
    if (args.user is None) == (args.session is None):
        raise UsageError("forget: name one subject: --user U or --session S")
    # names, never paths: refused before the workspace is opened (nothing is touched)
    for flag, value in (("--user", args.user), ("--by", args.by)):
        if value is not None:
            check_name(value, flag)
    with open_memory(args) as memory:
        done = memory.forget(user=args.user, session=args.session, by=args.by)
    if args.json:
        print_json(done.to_json())
        return EXIT_OK
    print(
        f"forgot {done.subject} {done.name}: {len(done.sessions)} session(s), "
        f"{done.records_forgotten} record(s) unreadable, {done.keys_destroyed} key(s) destroyed, "
        f"{done.cache_entries_removed} cached embedding(s) removed, "
        f"{len(done.documents)} document(s) deleted, tiers refolded: "
        f"{', '.join(done.tiers)} ({done.seconds:.2f}s)"
    )
    if done.records_in_clear:
        print(
            f"airsspec: warning: {done.records_in_clear} record(s) were written before "
            "encryption was on and stay readable in the log",
            file=sys.stderr,
        )
    if done.records_kept:
        print(
            f"airsspec: warning: {done.records_kept} record(s) were sealed under the key alone "
            'of a session since given to another user (encrypt = "session"); that key is '
            "theirs now, so these stay readable: 'forget --session' forgets the session whole",
            file=sys.stderr,
        )
    return EXIT_OK
