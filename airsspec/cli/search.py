"""Search: ``airsspec search`` (``airsspec query`` is the same command, by its earlier name)
finds passages across the whole memory, with provenance."""

from __future__ import annotations

import argparse
import fcntl
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from airsspec.cli.common import (
    arg,
    command,
    flag,
    open_memory,
    print_json,
    progress_printer,
    whole,
)
from airsspec.errors import EXIT_OK, UsageError, validation_problem
from airsspec.memory import UNIT_KINDS, QueryMemoryInput, loads_exact, printable
from airsspec.render import hits_text


def _field(name: str, *flags: str, **options: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The option for one field of ``QueryMemoryInput``: its description is the help, and left
    out it takes the field's default (the tool, the API and this command share one
    declaration)."""
    info = QueryMemoryInput.model_fields[name]
    default = "" if info.default is None else f" (default {info.default})"
    return arg(*flags, dest=name, help=f"{info.description}{default}", **options)


def _request(args: argparse.Namespace) -> QueryMemoryInput:
    """The query the command line asks: the fields given, the model's defaults for the rest."""
    given = {name: getattr(args, name, None) for name in QueryMemoryInput.model_fields}
    given["query"] = args.text
    try:
        return QueryMemoryInput(**{name: v for name, v in given.items() if v is not None})
    except ValidationError as exc:
        raise UsageError(validation_problem(exc)) from exc


def _batch_requests(source: str) -> list[QueryMemoryInput]:
    """Every line of a ``--batch`` file, validated before any query runs."""
    try:
        if source == "-" and sys.stdin is None:
            raise UsageError("standard input is closed: give --batch FILE")
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise UsageError(f"{source}: {exc.strerror}") from exc
    requests = []
    for number, line in enumerate(data.split(b"\n"), start=1):  # JSONL lines end at \n only
        if not line.strip():
            continue
        try:  # a key given twice is refused, not one of its values chosen
            value = loads_exact(line)
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"{source}:{number}: invalid JSON: {exc}") from exc
        except ValueError as exc:
            raise UsageError(f"{source}:{number}: {exc}") from exc
        if not isinstance(value, dict):
            raise UsageError(f"{source}:{number}: a query must be a JSON object")
        try:  # strict: 2.0, "2" and true are not the count 2, nor "yes" a boolean
            requests.append(QueryMemoryInput.model_validate(value, strict=True))
        except ValidationError as exc:
            raise UsageError(f"{source}:{number}: {validation_problem(exc)}") from exc
    return requests


# Records the cold tier may lag by and still be caught up before a search answers (a few
# seconds of embedding at most); further behind, the search answers at once from what is
# indexed plus a scan of the rest, and a background worker catches up.
CATCH_UP_HERE = 1000


def _search(memory: Any, request: QueryMemoryInput, *, now: bool = False) -> dict[str, Any]:
    """The answer to ``request`` from the cold tier as it is; ``now``: plus a full-text scan of
    the records it has not indexed yet (``unindexed`` counts them)."""
    try:
        if now:
            return dict(memory.search_now(**request.model_dump(exclude={"detail"})))
        return dict(memory.query_memory(request, fresh=False))
    except ValueError as exc:  # a time that does not parse
        raise UsageError(str(exc)) from exc


def catch_up_in_background(root: Path, lock_path: Path, args: argparse.Namespace) -> bool:
    """Start ``airsspec project --tier cold`` on the workspace as a detached process, unless
    one started here still runs (it holds ``state/catch-up.lock``, inherited from this process
    and released when it exits). The worker runs as this user, with this environment (the
    same scope), and exits when the tier is up to date. Whether one was started."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = open(lock_path, "a")  # noqa: SIM115  # handed to the worker, which holds it
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a worker is at it
        where = ["-c", args.config] if args.config else ["-w", str(root)]
        subprocess.Popen(
            [sys.executable, "-m", "airsspec", *where, "project", "--tier", "cold"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(lock.fileno(),),
            start_new_session=True,  # not stopped with this terminal's process group
            close_fds=True,
        )
        return True
    finally:
        lock.close()  # the worker keeps its own copy of the locked file


@command(
    "search",
    arg("text", nargs="?", help="what to look for"),
    _field("k", "-k", type=whole),
    _field("session", "--session"),
    _field("since", "--since", metavar="TIME"),
    _field("until", "--until", metavar="TIME"),
    _field("kinds", "--kind", action="append", choices=UNIT_KINDS),
    arg(
        "--batch",
        metavar="FILE.jsonl",
        help='one {"query": ..., "k": ...} per line in (- for stdin), one JSON result per line out',
    ),
    flag("--stale", "do not bring the cold tier up to date"),
    aliases=("query",),
)
def cmd_search(args: argparse.Namespace) -> int:
    """Search the whole memory. Messages, summaries, sources: semantic and full-text, with
    provenance; brings the cold tier up to date first, or, when it is far behind (an import),
    answers at once (what is indexed plus a scan of the rest) and catches up in the
    background."""
    if (args.text is None) == (args.batch is None):
        raise UsageError("give either a query TEXT or --batch FILE.jsonl")
    requests = _batch_requests(args.batch) if args.batch is not None else []
    if args.text is not None:
        requests = [_request(args)]
    with open_memory(args) as memory:
        for request in requests:
            if request.session is not None:
                memory.check_session(request.session)
        if args.batch is not None:
            if not args.stale:
                memory.project(("cold",), progress=progress_printer())
            results = [_search(memory, request) for request in requests]
        else:
            results = [_search(memory, requests[0], now=True)]
            behind = results[0]["unindexed"]
            if behind > CATCH_UP_HERE and not args.stale:
                catch_up_in_background(memory.root, memory.workspace.layout.catch_up_lock, args)
            elif not args.stale:  # caught up here: also what repairs damaged cold files
                reports = memory.project(("cold",), progress=progress_printer())
                if any(r.applied or r.rebuilt for r in reports):  # else the answer stands
                    results = [_search(memory, requests[0], now=True)]
        for result in results:
            if args.batch is not None:
                sys.stdout.write(orjson.dumps(result).decode() + "\n")
            elif args.json:
                print_json(result)
            else:
                sys.stdout.write(hits_text(result, printable))
                for warning in result["warnings"]:
                    print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK
