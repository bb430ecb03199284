"""Write the example workspace (``.airsspec-example/``): several sessions of an agent doing
spec-driven work, appended through the real log API with fixed timestamps.

Run ``python scripts/make_example.py [DIR]``; it refuses to touch a folder that already has logs.
"""

from __future__ import annotations

import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from eventlog.ids import format_ts
from eventlog.log import EventLog


class Session:
    """Builds one session's events with a moving clock and action/observation links."""

    def __init__(self, log: EventLog, name: str, start: datetime, seed: int) -> None:
        self.log, self.name, self.clock = log, name, start
        self.rng = random.Random(seed)

    def _ts(self, lo: int = 2, hi: int = 40) -> str:
        self.clock += timedelta(seconds=self.rng.randint(lo, hi))
        return format_ts(self.clock)

    def add(self, kind: str, meta: dict | None = None, **fields: object) -> str:
        event = {"type": kind, "ts": self._ts(), **fields}
        if meta:
            event["meta"] = meta
        return self.log.append(self.name, event).id

    def user(self, text: str, **meta: object) -> None:
        self.add("user", meta or None, content=text)

    def say(self, text: str, **meta: object) -> None:
        self.add("assistant", meta or None, content=text)

    def think(self, text: str) -> None:
        self.add("thought", content=text)

    def tool(self, tool: str, params: dict, result: object, error: bool = False) -> None:
        action_id = self.add("action", tool=tool, params=params)
        self.add("observation", result=result, action_id=action_id, is_error=error)


def rate_limiter(s: Session) -> None:
    s.user(
        "We need rate limiting on the public API before the launch. Write a spec first, then "
        "implement it. Constraint: limits are per API key, not per IP, because customers sit "
        "behind shared NAT gateways.",
        kind="request",
    )
    s.think(
        "Spec-driven: requirements.md, design.md, tasks.md under specs/rate-limiter/. "
        "Start by reading how requests are authenticated to find where the API key is known."
    )
    s.tool(
        "read_file",
        {"path": "api/middleware.py"},
        "class AuthMiddleware:\n    def __call__(self, request):\n        key = "
        "request.headers.get('X-Api-Key')\n        request.state.api_key = lookup(key)\n",
    )
    s.tool(
        "grep",
        {"pattern": "X-Api-Key", "path": "api/"},
        "api/middleware.py:3\napi/tests/test_auth.py:12\ndocs/auth.md:40",
    )
    s.tool(
        "read_file",
        {"path": "config/settings.py"},
        "REDIS_URL = env('REDIS_URL', 'redis://localhost:6379/0')\nDEFAULT_PLAN = 'free'\n",
    )
    s.think(
        "Redis is already a dependency, so a Redis-backed limiter costs nothing new. "
        "Plans exist (free/pro/enterprise): limits should come from the plan."
    )
    s.tool(
        "write_file",
        {"path": "specs/rate-limiter/requirements.md"},
        "wrote 41 lines: R1 per-key limits from the plan; R2 HTTP 429 with Retry-After; "
        "R3 limits survive a restart of one API node; R4 admin keys are exempt",
    )
    s.say(
        "I drafted specs/rate-limiter/requirements.md with four requirements (per-key limits "
        "from the plan, 429 with Retry-After, shared state across nodes, admin exemption). "
        "Shall I go on with the design?"
    )
    s.user(
        "Good. One correction: use a sliding window, not a fixed window. Fixed windows let "
        "clients burst twice the limit at the boundary.",
        kind="correction",
    )
    s.think(
        "Sliding window log is exact but stores one entry per request; sliding window "
        "counter (two fixed buckets weighted) is O(1) memory. Choose the counter."
    )
    s.tool(
        "write_file",
        {"path": "specs/rate-limiter/design.md"},
        "wrote 63 lines: sliding window counter in Redis (INCR + EXPIRE on two buckets), "
        "Lua script for atomicity, limits resolved from plan at auth time",
    )
    s.say(
        "Decision: sliding window counter (two weighted buckets) in Redis with a Lua script "
        "for atomicity. It keeps O(1) memory per key and has no boundary burst.",
        kind="decision",
    )
    tasks = [
        ("T1", "Add RateLimit settings per plan", "config/plans.py"),
        ("T2", "Lua script for the sliding window counter", "api/ratelimit/window.lua"),
        ("T3", "Limiter class that calls the script", "api/ratelimit/limiter.py"),
        ("T4", "Middleware that returns 429 with Retry-After", "api/ratelimit/middleware.py"),
        ("T5", "Exempt admin keys", "api/ratelimit/middleware.py"),
        ("T6", "Metrics: rejected requests per plan", "api/ratelimit/metrics.py"),
        ("T7", "Load test script", "scripts/load_ratelimit.py"),
        ("T8", "Docs for API users", "docs/rate-limits.md"),
    ]
    s.tool(
        "write_file",
        {"path": "specs/rate-limiter/tasks.md"},
        "wrote tasks: " + "; ".join(f"{t} {d}" for t, d, _ in tasks),
    )
    for number, (task, description, path) in enumerate(tasks):
        s.think(f"{task}: {description}. Touches {path}.")
        s.tool(
            "read_file",
            {"path": path},
            "file does not exist yet" if number % 3 else f"# {path}\n# existing module, 40 lines\n",
        )
        s.tool("write_file", {"path": path}, f"wrote {20 + 7 * number} lines to {path}")
        if task == "T3":
            s.tool(
                "run_tests",
                {"command": "pytest api/ratelimit -q"},
                "E   redis.exceptions.ResponseError: ERR Error running script: "
                "attempt to compare nil with number\n1 failed, 6 passed",
                error=True,
            )
            s.think(
                "The script reads the previous bucket with GET, which returns nil for a new "
                "key. Default it to 0 with tonumber(...) or 0."
            )
            s.tool(
                "edit_file",
                {
                    "path": "api/ratelimit/window.lua",
                    "old": "local prev = tonumber(redis.call('GET', KEYS[2]))",
                    "new": "local prev = tonumber(redis.call('GET', KEYS[2])) or 0",
                },
                "edited 1 line",
            )
            s.tool("run_tests", {"command": "pytest api/ratelimit -q"}, "7 passed in 0.84s")
            s.say(
                "Fixed: the Lua script compared nil with a number for a key's first window; "
                "the previous bucket now defaults to 0. All 7 limiter tests pass.",
                kind="fix",
            )
        else:
            s.tool(
                "run_tests",
                {"command": "pytest api -q"},
                f"{48 + 3 * number} passed in {1.2 + number / 10:.2f}s",
            )
        s.say(f"{task} done: {description}.")
    s.user("What happens if Redis is down?")
    s.think(
        "Fail open or closed? For a public API, failing closed takes the whole API down "
        "with Redis. Fail open, log, and alert."
    )
    s.say(
        "If Redis is unreachable the middleware fails open (requests pass) and logs a "
        "warning plus a metric, so an outage of Redis never becomes an outage of the API. "
        "I recorded this in design.md under 'Failure modes'.",
        kind="decision",
    )
    s.tool(
        "edit_file",
        {"path": "specs/rate-limiter/design.md", "section": "Failure modes"},
        "edited 6 lines",
    )
    s.user("Open task for tomorrow: benchmark with 10k keys.", kind="todo")
    s.say("Noted as open task T9: benchmark the limiter with 10,000 distinct keys.", kind="todo")


def csv_export(s: Session) -> None:
    s.user(
        "Customers want to export their invoices as CSV. Spec it and build it. It must "
        "handle 100k invoices without timing out.",
        kind="request",
    )
    s.tool(
        "read_file",
        {"path": "billing/models.py"},
        "class Invoice(Model):\n    number: str\n    customer_id: int\n    total_cents: int\n"
        "    currency: str\n    issued_at: datetime\n",
    )
    s.tool("grep", {"pattern": "StreamingResponse", "path": "."}, "no matches")
    s.think(
        "100k rows: stream the response instead of building the file in memory. "
        "Totals are in cents: format as decimal with the currency's exponent."
    )
    s.tool(
        "write_file",
        {"path": "specs/csv-export/requirements.md"},
        "wrote: R1 export all invoices of a customer; R2 stream, constant memory; "
        "R3 amounts as decimals; R4 RFC 4180 quoting; R5 filter by date range",
    )
    s.tool(
        "write_file",
        {"path": "specs/csv-export/design.md"},
        "wrote: server-side cursor, csv.writer over a generator, StreamingResponse",
    )
    s.say(
        "Spec written. Decision: stream with a server-side cursor and csv.writer; memory "
        "stays constant regardless of invoice count.",
        kind="decision",
    )
    steps = [
        ("endpoint GET /invoices/export.csv", "billing/api.py"),
        ("generator over a server-side cursor", "billing/export.py"),
        ("decimal formatting of cents by currency", "billing/money.py"),
        ("date range filter", "billing/api.py"),
        (
            "tests for quoting of commas and quotes in customer names",
            "billing/tests/test_export.py",
        ),
    ]
    for i, (what, path) in enumerate(steps):
        s.think(f"Next: {what}.")
        s.tool("write_file", {"path": path}, f"wrote {25 + 5 * i} lines")
        if i == 2:
            s.tool(
                "run_tests",
                {"command": "pytest billing -q"},
                "FAILED billing/tests/test_money.py::test_jpy - AssertionError: "
                "'1234.00' != '1234'\n1 failed, 30 passed",
                error=True,
            )
            s.think(
                "JPY has zero decimal places. Use the ISO 4217 exponent table instead of "
                "always dividing by 100."
            )
            s.tool(
                "edit_file",
                {"path": "billing/money.py", "change": "use CURRENCY_EXPONENT"},
                "edited 4 lines",
            )
            s.tool("run_tests", {"command": "pytest billing -q"}, "31 passed in 2.10s")
            s.say(
                "Fixed currency formatting: JPY and other zero-decimal currencies now use "
                "their ISO 4217 exponent.",
                kind="fix",
            )
        else:
            s.tool("run_tests", {"command": "pytest billing -q"}, f"{26 + i} passed")
    s.user(
        "Please keep the column order exactly: number, date, customer, total, currency. "
        "Finance imports it into their spreadsheet by position.",
        kind="constraint",
    )
    s.tool("edit_file", {"path": "billing/export.py", "change": "column order"}, "edited 2 lines")
    s.tool("run_tests", {"command": "pytest billing -q"}, "32 passed in 2.31s")
    s.tool(
        "run_command",
        {
            "command": "python scripts/seed.py --invoices 100000 && "
            "curl -s localhost:8000/invoices/export.csv | wc -l"
        },
        "100001",
    )
    s.say(
        "Export streams 100,000 invoices (100,001 lines with the header) in 3.8 s with flat "
        "memory. Column order is fixed as finance asked."
    )


def login_timeout(s: Session) -> None:
    s.user(
        "Bug: users get logged out after 5 minutes even though sessions should last 8 hours."
        " Find out why.",
        kind="request",
    )
    s.tool(
        "grep",
        {"pattern": "SESSION_TTL", "path": "."},
        "auth/session.py:8:SESSION_TTL = 8 * 60 * 60\nauth/refresh.py:21:ttl=300",
    )
    s.tool(
        "read_file",
        {"path": "auth/refresh.py"},
        "def refresh(token):\n    ...\n    store.set(token, user_id, ttl=300)\n",
    )
    s.think(
        "refresh() re-sets the session with a hard-coded ttl of 300 seconds: every refresh "
        "shortens the session to 5 minutes. That matches the symptom."
    )
    s.say(
        "Found it: auth/refresh.py re-stores the session with ttl=300 (5 minutes) on every "
        "refresh, overriding SESSION_TTL (8 hours)."
    )
    s.tool(
        "edit_file",
        {"path": "auth/refresh.py", "old": "ttl=300", "new": "ttl=SESSION_TTL"},
        "edited 1 line",
    )
    s.tool(
        "run_tests",
        {"command": "pytest auth -q"},
        "FAILED auth/tests/test_refresh.py::test_refresh_ttl - assert 28800 == 300\n"
        "1 failed, 18 passed",
        error=True,
    )
    s.think("The test encoded the bug. Update the test to expect SESSION_TTL.")
    s.tool(
        "edit_file",
        {"path": "auth/tests/test_refresh.py", "old": "== 300", "new": "== SESSION_TTL"},
        "edited 1 line",
    )
    s.tool("run_tests", {"command": "pytest auth -q"}, "19 passed in 0.95s")
    s.say(
        "Fixed: refresh keeps the 8-hour TTL. The old test asserted the buggy 300 s and is "
        "updated. Added a regression test that a refreshed session still has > 7 h left.",
        kind="fix",
    )
    s.user("Thanks. Also add a changelog entry.", kind="request")
    s.tool(
        "edit_file",
        {"path": "CHANGELOG.md", "section": "Unreleased"},
        "added: 'Fix: sessions no longer expire 5 minutes after a token refresh.'",
    )
    s.say("Changelog updated.")


def review(s: Session) -> None:
    s.user(
        "Review the rate limiter and CSV export specs for consistency before the release.",
        kind="request",
    )
    for spec in ("rate-limiter", "csv-export"):
        for doc in ("requirements.md", "design.md", "tasks.md"):
            s.tool("read_file", {"path": f"specs/{spec}/{doc}"}, f"{spec}/{doc}: 40-60 lines")
        s.think(f"{spec}: every requirement should map to a task and a test.")
    s.say(
        "Both specs trace requirements to tasks. Gaps: rate-limiter T9 (benchmark with 10k "
        "keys) is still open; csv-export has no requirement for time zones of issued_at.",
        kind="review",
    )
    s.user("Time zones: export in UTC, and say so in the header comment.", kind="decision")
    s.tool(
        "edit_file",
        {"path": "specs/csv-export/requirements.md", "add": "R6 UTC timestamps"},
        "edited 3 lines",
    )
    s.say(
        "Added R6: timestamps are exported in UTC and the file says so. Release checklist is "
        "green apart from open task T9."
    )


def feature(
    request: str,
    constraint: str,
    decision: str,
    tasks: list[tuple[str, str]],
    failure: tuple[str, str, str],
) -> object:
    """A generic spec-driven feature: request, spec, tasks with tests, one failure and its fix."""
    failing_task, error, fix = failure

    def build(s: Session) -> None:
        s.user(request, kind="request")
        s.tool("list_dir", {"path": "specs/"}, "csv-export/  rate-limiter/")
        s.think("Write requirements first, then a design, then split into tasks.")
        s.tool(
            "write_file",
            {"path": f"specs/{tasks[0][1].split('/')[0]}/requirements.md"},
            f"wrote {len(tasks) + 2} requirements",
        )
        s.user(constraint, kind="constraint")
        s.say(decision, kind="decision")
        for number, (task, path) in enumerate(tasks, start=1):
            s.think(f"T{number}: {task} ({path}).")
            s.tool("read_file", {"path": path}, f"{path}: {12 * number} lines")
            s.tool("write_file", {"path": path}, f"wrote {18 + 4 * number} lines to {path}")
            if task == failing_task:
                s.tool("run_tests", {"command": "pytest -q -x"}, error, error=True)
                s.think(f"Cause found. {fix}")
                s.tool("edit_file", {"path": path, "change": fix}, "edited 3 lines")
                s.tool("run_tests", {"command": "pytest -q"}, f"{60 + number} passed")
                s.say(f"Fixed T{number}: {fix}", kind="fix")
            else:
                s.tool("run_tests", {"command": "pytest -q"}, f"{50 + 2 * number} passed")
            s.say(f"T{number} done: {task}.")
        s.user("Summarise what is left.")
        s.say(f"All {len(tasks)} tasks are done and tested; nothing is open.")

    return build


webhooks = feature(
    "Add outgoing webhooks so customers get notified when an invoice is paid. Spec first.",
    "Deliveries must be signed with HMAC-SHA256 and retried with exponential backoff for 24 h.",
    "Decision: a delivery queue table polled by a worker; retries at 1m, 5m, 30m, 2h, 6h, 24h; "
    "signature in the X-Signature header over the raw body.",
    [
        ("webhook endpoint registration API", "webhooks/api.py"),
        ("secret generation and rotation", "webhooks/secrets.py"),
        ("HMAC-SHA256 signing of payloads", "webhooks/signing.py"),
        ("delivery queue table and migration", "webhooks/migrations/0001_queue.py"),
        ("worker that polls the queue", "webhooks/worker.py"),
        ("exponential backoff schedule", "webhooks/backoff.py"),
        ("dead-letter after 24 hours", "webhooks/worker.py"),
        ("emit invoice.paid events", "billing/events.py"),
        ("delivery log visible to customers", "webhooks/api.py"),
        ("replay a failed delivery by hand", "webhooks/api.py"),
        ("docs with signature verification examples", "docs/webhooks.md"),
        ("end-to-end test with a local receiver", "webhooks/tests/test_e2e.py"),
    ],
    (
        "HMAC-SHA256 signing of payloads",
        "FAILED webhooks/tests/test_signing.py::test_signature_matches_docs - signatures differ: "
        "body was re-serialised with spaces before signing",
        "Sign the exact bytes sent, never a re-serialised body.",
    ),
)

audit_log = feature(
    "Admins need an audit log of who changed which setting and when. Write the spec and build it.",
    "Audit entries must never be editable, not even by admins; retention is 400 days.",
    "Decision: append-only table with an insert-only database role; a nightly job deletes only "
    "entries older than 400 days.",
    [
        ("audit entry model", "audit/models.py"),
        ("insert-only database role", "audit/migrations/0002_role.py"),
        ("record changes from the settings service", "settings/service.py"),
        ("admin UI list with filters", "admin/audit_view.py"),
        ("CSV download of the audit log", "admin/audit_view.py"),
        ("retention job (400 days)", "audit/retention.py"),
        ("alert when the retention job fails", "audit/retention.py"),
        ("docs for admins", "docs/audit.md"),
    ],
    (
        "retention job (400 days)",
        "FAILED audit/tests/test_retention.py::test_keeps_recent - deleted entries from 399 days "
        "ago: comparison used local time",
        "Compare timestamps in UTC; the cutoff is now(UTC) - 400 days.",
    ),
)


SCENARIOS = [
    ("spec-rate-limiter", rate_limiter, datetime(2026, 10, 5, 9, 12, tzinfo=UTC)),
    ("spec-csv-export", csv_export, datetime(2026, 10, 6, 14, 3, tzinfo=UTC)),
    ("bugfix-login-timeout", login_timeout, datetime(2026, 10, 8, 8, 41, tzinfo=UTC)),
    ("review-release-specs", review, datetime(2026, 10, 9, 16, 20, tzinfo=UTC)),
    ("spec-webhooks", webhooks, datetime(2026, 10, 12, 10, 0, tzinfo=UTC)),
    ("spec-audit-log", audit_log, datetime(2026, 10, 14, 9, 30, tzinfo=UTC)),
]


def main(target: Path) -> None:
    log_dir = target / "contexts" / "agent"
    if log_dir.exists() and any(log_dir.glob("*.jsonl")):
        sys.exit(f"{log_dir} already has logs; remove them first")
    with EventLog(log_dir) as log:
        for seed, (name, build, start) in enumerate(SCENARIOS):
            build(Session(log, name, start, seed))
            print(f"{name}: {log.head(name).seq} events")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".airsspec-example"))
