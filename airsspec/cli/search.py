"""Search: ``airsspec search`` (``airsspec query`` is the same command, by its earlier name)
finds passages across the whole memory, with provenance."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from airsspec.cli.common import (
    EXIT_OK,
    UsageError,
    arg,
    command,
    open_memory,
    print_json,
    progress_printer,
    validation_problem,
)
from airsspec.cli.render import hits_text
from airsspec.memory import UNIT_KINDS, QueryMemoryInput, printable


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
        try:
            requests.append(QueryMemoryInput.model_validate(orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"{source}:{number}: invalid JSON: {exc}") from exc
        except ValidationError as exc:
            raise UsageError(f"{source}:{number}: {validation_problem(exc)}") from exc
    return requests


@command(
    "search",
    arg("text", nargs="?", help="what to look for"),
    _field("k", "-k", type=int),
    _field("session", "--session"),
    _field("since", "--since", metavar="TIME"),
    _field("until", "--until", metavar="TIME"),
    _field("kinds", "--kind", action="append", choices=UNIT_KINDS),
    arg(
        "--batch",
        metavar="FILE.jsonl",
        help='one {"query": ..., "k": ...} per line in (- for stdin), one JSON result per line out',
    ),
    arg("--stale", action="store_true", help="do not bring the cold tier up to date"),
    aliases=("query",),
)
def cmd_search(args: argparse.Namespace) -> int:
    """Search the whole memory. Messages, summaries, sources: semantic and full-text, with
    provenance; brings the cold tier up to date first."""
    if (args.text is None) == (args.batch is None):
        raise UsageError("give either a query TEXT or --batch FILE.jsonl")
    requests = _batch_requests(args.batch) if args.batch else []
    if args.text is not None:
        requests = [_request(args)]
    with open_memory(args) as memory:
        for request in requests:
            if request.session is not None:
                memory.check_session(request.session)
        if not args.stale:
            memory.project(("cold",), progress=progress_printer())
        for request in requests:
            try:
                result = memory.query_memory(request, fresh=False)
            except ValueError as exc:  # a time that does not parse
                raise UsageError(str(exc)) from exc
            if args.batch:
                sys.stdout.write(orjson.dumps(result).decode() + "\n")
            elif args.json:
                print_json(result)
            else:
                sys.stdout.write(hits_text(result, printable))
                for warning in result["warnings"]:
                    print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK
