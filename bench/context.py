"""What the agent gets back: the prompt after compaction, and ``context`` with a query.

1. Identifier recall against Claude Code's own /compact summary. The real session in
   ``claude-code/compact/`` was compacted by Claude Code at its ``compact_boundary``; the
   records before it are imported here and compacted, and the prompt (``context`` at the
   reference's token count) is scored by the share of the reference's identifiers (paths,
   backticked code, issue ids, dotted modules, name/arity) that occur in it, counting those that
   occur in the source span. Rows: the prompt after one compaction of the import, the prompt
   when the same records arrive live and are compacted whenever due (as the daemon does), the
   newest messages only (no compaction), and the summarizer of an older revision in the same
   compactor (``--old-rev``, read with ``git show``), imported and live. The last column is the
   share of the master summary's ``#seq`` citations that lie in the newer half of its range:
   whether recent work survives the merges.
2. LoCoMo dev: each conversation arrives live (compacted whenever due), then every category 1-4
   question is asked at its end with ``context(session, budget, query=question)`` at 1k, 2k and
   4k tokens; the score is the share of evidence turns whose text is in the context, next to
   the newest turns only and the BM25 top turns packed into the same budget.
3. Compaction cost: compactions per 1,000 messages, library tokens, and seconds of compaction
   per 10,000 messages, for the live runs above and the other real Claude Code transcripts.

    python bench/context.py [--old-rev REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from airsspec.memory import Memory  # noqa: E402
from bench.common import print_table  # noqa: E402
from bench.locomo_data import DATA as LOCOMO  # noqa: E402
from bench.locomo_data import load  # noqa: E402
from eventlog.errors import NothingToCompactError  # noqa: E402
from eventlog.importers import import_paths  # noqa: E402
from eventlog.importers.sources import jsonl_units  # noqa: E402
from eventlog.render import record_text  # noqa: E402
from projections.bm25 import BM25  # noqa: E402
from projections.fitting import pack  # noqa: E402

CLAUDE = ROOT.parent / "shared" / "data" / "claude-code"
COMPACTED = CLAUDE / "compact" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
OLD_REV = "3260ebca465ca6dbb896cbc552a293dcbab948af"
CONFIG = """
[log]
durability = "off"
[compactor]
summarizer = "extractive"
[cold]
embedder = "minilm"
"""
IDENTIFIER = re.compile(
    r"`([^`\n]{2,80})`"  # backticked code
    r"|((?:[\w.-]+/)+[\w.-]+\.\w+)"  # paths
    r"|\b([\w-]+\.(?:ex|exs|js|ts|py|md|json|toml|heex|css|rs|go))\b"  # file names
    r"|\b([a-z][a-z0-9]*-[a-z0-9]{2,}\.\d+|[A-Z][A-Z0-9]+-\d+)\b"  # spotter-gqc.2, PROJ-12
    r"|\b([A-Z]\w*(?:\.[A-Z]\w*)+)\b"  # dotted module names
    r"|\b([a-z_]\w*[?!]?/\d)\b"  # name/arity
)


def identifiers(text: str) -> set[str]:
    """The identifiers of ``text``, as the scoring method names them."""
    return {next(g for g in m.groups() if g).strip() for m in IDENTIFIER.finditer(text)}


def memory_at(root: Path, summarizer: Any = None) -> Memory:
    """A new workspace at ``root`` on the bench's settings (``summarizer``: over them)."""
    memory = Memory.open(root, create=True)
    (root / "airsspec.toml").write_text(CONFIG)
    memory.close()
    return Memory.open(root, summarizer=summarizer)


def compact_while_due(memory: Memory, session: str) -> tuple[int, float]:
    """Compact ``session`` until it is within its threshold, as the daemon does; the number of
    compactions and the seconds they took (checking that none is due is not counted)."""
    count, spent = 0, 0.0
    while True:
        start = time.perf_counter()
        try:
            record = memory.compact(session)
        except NothingToCompactError:
            return count, spent
        if record is None:
            return count, spent
        count, spent = count + 1, spent + time.perf_counter() - start


def old_summarizer(rev: str):
    """The extractive summarizer of revision ``rev``, loaded from git (None if unavailable)."""
    try:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:compactor/summarizers.py"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp(prefix="airsspec-old-")) / "old_summarizers.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("old_summarizers", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["old_summarizers"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.ExtractiveSummarizer


class _Adapter:
    """An old summarizer behind today's protocol (it knows only seq, type and text)."""

    def __init__(self, cls, counter) -> None:
        self.inner = cls(counter)
        self.info = self.inner.info

    def summarize(self, messages, budget):
        from dataclasses import fields

        names = {f.name for f in fields(self.inner.summarize.__globals__["Message"])}
        old = self.inner.summarize.__globals__["Message"]
        return self.inner.summarize(
            [old(**{k: getattr(m, k) for k in names}) for m in messages], budget
        )

    def merge(self, summaries, budget):
        return self.inner.merge(summaries, budget)


def bench_identifiers(old_rev: str) -> list[list[object]]:
    lines = COMPACTED.read_text(encoding="utf-8").splitlines()
    boundary = next(i for i, line in enumerate(lines) if '"compact_boundary"' in line)
    reference = json.loads(lines[boundary + 1])["message"]["content"]
    work = Path(tempfile.mkdtemp(prefix="airsspec-ctx-"))
    rows: list[list[object]] = []
    try:
        source = work / "in" / "session.jsonl"
        source.parent.mkdir()
        source.write_text("\n".join(lines[:boundary]) + "\n", encoding="utf-8")

        def fresh(name: str, summarizer: Any = None) -> tuple[Memory, str]:
            memory = memory_at(work / name, summarizer)
            (result,) = import_paths(memory.workspace.log, "claude-code", [source])
            return memory, result.session

        memory, session = fresh("newest")
        counter = memory.workspace.token_counter()
        budget = counter.count(reference)
        span = "\n".join(record_text(r) for r in memory.replay(session))
        wanted = sorted(i for i in identifiers(reference) if i in span)

        def score(label: str, memory: Memory, session: str, compactions: int) -> None:
            text = memory.context(session, budget)
            found = sum(1 for i in wanted if i in text)
            summary = memory.hot(session).summary
            newer = "-"
            if summary:  # how much of what the master cites is in the newer half of its range
                cited = [int(n) for n in re.findall(r"#(\d+)", summary["text"])]
                newer = sum(1 for n in cited if n > summary["to_seq"] / 2) / max(len(cited), 1)
            rows.append(
                [
                    label,
                    found / len(wanted),
                    found,
                    len(wanted),
                    counter.count(text),
                    compactions,
                    newer,
                ]
            )

        def live(name: str, summarizer=None) -> tuple[Memory, int]:
            memory = memory_at(work / name, summarizer)
            count = 0
            for event in _events(source):
                memory.append(session, event)
                count += compact_while_due(memory, session)[0]
            return memory, count

        score("newest messages only (no compaction)", memory, session, 0)
        memory.close()

        memory, session = fresh("imported")
        count, _ = compact_while_due(memory, session)
        score("prompt after compaction (import, then compact)", memory, session, count)
        memory.close()

        memory, count = live("live")
        score("prompt after compaction (live, compacted when due)", memory, session, count)
        memory.close()

        old = old_summarizer(old_rev)
        if old is not None:
            memory, session = fresh("old", _Adapter(old, counter))
            count, _ = compact_while_due(memory, session)
            score(f"old summarizer ({old_rev[:7]}), import then compact", memory, session, count)
            memory.close()
            memory, count = live("old-live", _Adapter(old, counter))
            score(f"old summarizer ({old_rev[:7]}), live", memory, session, count)
            memory.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows, budget


def _events(source: Path) -> list[dict]:
    from eventlog.importers import claude_code

    units = jsonl_units(source.read_bytes(), str(source))
    return claude_code.to_events(units, "live")


def bench_locomo(budgets: tuple[int, ...]) -> tuple[list[list[object]], list[list[object]]]:
    found: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    cost_rows = []
    for conv in load():
        work = Path(tempfile.mkdtemp(prefix="airsspec-locomo-ctx-"))
        try:
            memory = memory_at(work)
            session = conv.sample_id
            compactions, seconds = 0, 0.0
            for event in conv.turns:
                memory.append(session, event)
                count, spent = compact_while_due(memory, session)
                compactions, seconds = compactions + count, seconds + spent
            cost_rows.append(
                _cost_row(memory, f"LoCoMo {session} (live)", len(conv.turns), compactions, seconds)
            )
            memory.project()
            counter = memory.workspace.token_counter()
            turns = [e["content"] for e in conv.turns]
            bm25 = BM25(turns)
            for question in conv.questions:
                if question.category == 5:
                    continue
                evidence = [
                    next(e["content"] for e in conv.turns if e["meta"]["dia_id"] == d)
                    for d in question.evidence
                ]
                if not evidence:
                    continue
                for budget in budgets:
                    texts = {
                        "context with query": memory.context(session, budget, query=question.text),
                        "newest turns only": "\n".join(
                            pack(reversed(turns), budget, counter, skip=True)
                        ),
                        "BM25 top turns": "\n".join(
                            pack(
                                [turns[i] for i, _ in bm25.top(question.text, 200)],
                                budget,
                                counter,
                                skip=True,
                            )
                        ),
                    }
                    for name, text in texts.items():
                        share = sum(1 for e in evidence if e in text) / len(evidence)
                        found[(name, budget, question.category)].append(share)
                        found[(name, budget, 0)].append(share)
            memory.close()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    rows = []
    for name in ("context with query", "newest turns only", "BM25 top turns"):
        for budget in budgets:
            row: list[object] = [name, budget]
            for category in (0, 1, 2, 3, 4):
                values = found[(name, budget, category)]
                row.append(sum(values) / len(values) if values else "-")
            row.append(len(found[(name, budget, 0)]))
            rows.append(row)
    return rows, cost_rows


def _cost_row(
    memory: Memory, label: str, messages: int, compactions: int, seconds: float
) -> list[object]:
    library = memory.workspace.layout.library_dir
    counter = memory.workspace.token_counter()
    tokens = sum(counter.count(p.read_text()) for p in library.glob("history-*.md"))
    return [
        label,
        messages,
        compactions,
        1000 * compactions / max(messages, 1),
        tokens,
        10_000 * seconds / max(messages, 1),
    ]


def bench_claude_costs() -> list[list[object]]:
    rows = []
    for path in [*sorted(CLAUDE.glob("*.jsonl")), COMPACTED]:
        work = Path(tempfile.mkdtemp(prefix="airsspec-cc-"))
        try:
            memory = memory_at(work)
            events = _events(path)
            compactions, seconds = 0, 0.0
            for event in events:
                memory.append("cc", event)
                count, spent = compact_while_due(memory, "cc")
                compactions, seconds = compactions + count, seconds + spent
            messages = sum(
                1 for e in events if e["type"] in memory.workspace.settings.memory.message_types
            )
            rows.append(
                _cost_row(
                    memory, f"Claude Code {path.stem[:12]} (live)", messages, compactions, seconds
                )
            )
            window = memory.hot("cc")
            rows[-1].append(window.tokens + (window.summary or {}).get("tokens", 0))
            memory.close()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old-rev", default=OLD_REV, help="revision of the old summarizer")
    args = parser.parse_args()
    if COMPACTED.exists():
        rows, budget = bench_identifiers(args.old_rev)
        print_table(
            f"Identifier recall against Claude Code's own summary, at its size ({budget:,} tokens)",
            [
                "prompt",
                "recall",
                "found",
                "identifiers",
                "prompt tokens",
                "compactions",
                "master's citations in the newer half of its range",
            ],
            rows,
        )
        print_table(
            "Compaction of real Claude Code transcripts, arriving live (budget 8,000 tokens)",
            [
                "session",
                "messages",
                "compactions",
                "per 1,000 messages",
                "library tokens",
                "s per 10,000 messages",
                "window tokens at the end",
            ],
            bench_claude_costs(),
        )
    else:
        print(f"identifier recall: skipped, {COMPACTED} is absent")
    if LOCOMO.exists():
        rows, costs = bench_locomo((1000, 2000, 4000))
        print_table(
            "LoCoMo dev: share of evidence turns in the context (questions asked at the end)",
            [
                "context",
                "budget",
                "all",
                "cat 1 multi-hop",
                "cat 2 temporal",
                "cat 3 open",
                "cat 4 single-hop",
                "questions",
            ],
            rows,
        )
        print_table(
            "Compaction of LoCoMo dev conversations, arriving live",
            [
                "conversation",
                "messages",
                "compactions",
                "per 1,000 messages",
                "library tokens",
                "s per 10,000 messages",
            ],
            costs,
        )
    else:
        print(f"LoCoMo: skipped, {LOCOMO} is absent")


if __name__ == "__main__":
    main()
