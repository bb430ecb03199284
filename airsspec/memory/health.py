"""The learnings' health: what a person should look at, read from the log without writing.

Capacity used per level against its limit, pending promotions and demotions, conflicts (an
open one: the older learning won over a newer statement), every projection's lag and what is
degraded; ``attention`` lists, in words, what needs a person (empty when all is well).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from eventlog.ids import parse_ts

if TYPE_CHECKING:
    from airsspec.kernel import Kernel


def health(kernel: Kernel, moment: str) -> dict[str, Any]:
    """The health of ``kernel``'s learnings at ``moment`` (see the module)."""
    from projections.learning_rules import assess, content_words, gc_candidates, matches

    cfg = kernel.settings.learnings
    projector = kernel.projector("learnings")
    states = projector.states()
    assessment = assess(states, moment, settings=cfg, scope=kernel.scope)
    projections = kernel.status()
    active = [a for a in assessment.learnings if a.status == "active"]
    horizon = parse_ts(moment) - timedelta(days=max(0.0, cfg.warm_days - 7))
    demote_soon = [a.id for a in assessment.level("warm") if parse_ts(a.last_match) < horizon]
    words = {a.id: content_words(a.text) for a in active if a.level != "hot"}
    promote = set()
    for session, info in assessment.sessions.items():
        if info.get("task") and not info.get("ended"):
            cue = content_words(info["task"])
            promote |= {
                a.id
                for a in active
                if a.id in words and a.session != session and matches(words[a.id], cue)
            }
    conflicts = [c.to_json() for c in assessment.conflicts if c.resolution == "superseded"]
    open_conflicts = [c for c in conflicts if c["open"]]
    attention = [
        f"open conflict: {c['winner']} (older) overrules "
        f"{c['learning_b'] if c['winner'] == c['learning_a'] else c['learning_a']}: "
        f"{c['reason']}; confirm or reject one"
        for c in open_conflicts
    ]
    for t in projections:
        if t.lag_records:
            attention.append(f"{t.tier}: {t.lag_records} record(s) not projected yet")
        attention += [f"{t.tier}: degraded: {d}" for d in t.degraded]
    counts = {name: len(assessment.level(name)) for name in ("hot", "warm", "cold")}
    return {
        "now": moment,
        "capacity": {
            "hot": {"items": counts["hot"], "limit": cfg.hot_items},
            "warm": {"items": counts["warm"], "limit": cfg.warm_items},
            "cold": {"items": counts["cold"], "limit": None},
            "archived": sum(a.status == "archived" for a in assessment.learnings),
        },
        "pending": {
            "promotions": sorted(promote),
            "demotions": sorted(demote_soon),
            "gc": sorted(gc_candidates(assessment, cfg)),
        },
        "conflicts": conflicts,
        "open_conflicts": len(open_conflicts),
        "projections": [
            {"projection": t.tier, "lag": t.lag_records, "degraded": t.degraded}
            for t in projections
        ],
        "attention": attention,
    }
