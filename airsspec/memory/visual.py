"""The visual tier for ``Memory``: the policy that moves sessions to images, and the pages a
reader may see.

``projections.visual`` renders the pages, ``compactor.visual_policy`` decides which sessions
move, ``projections.visual_context`` lays pages out in a context; this module gives them the
workspace and the gate: the policy moves only sessions this memory may write, and a reader is
given only the pages of sessions it may read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from eventlog.layout import read_nofollow, validate_session_id

if TYPE_CHECKING:
    from airsspec.memory.core import Memory
    from eventlog.schema import Record
    from projections.scopes import Scope
    from projections.visual_context import Page


def visualize(
    memory: Memory, sessions: Iterable[str] | None = None, *, force: bool = False
) -> list[Record]:
    """See ``Memory.visualize``."""
    from compactor.visual_policy import VisualPolicy

    memory.scopes.writable()
    named = None if sessions is None else [validate_session_id(s) for s in sessions]
    for session in named or ():
        memory.scopes.guard_writes(session)
    ws = memory.workspace
    warm, visual = ws.projectors(("warm", "visual"))
    owners = {s: o for s, o in memory.scopes.owners().items() if memory.scopes.writes(o)}
    policy = VisualPolicy(
        ws.log, warm, visual, ws.layout.locks_dir, ws.settings.visual.warm_sessions
    )
    records = policy.run(owners, force=force, sessions=named)
    if records:
        memory.project(("visual",), sessions=[r.session for r in records], warn=False)
    return records


def pages(memory: Memory, reader: Scope | None = None, *, besides: str | None = None) -> list[Page]:
    """The visual tier's pages (with their bytes) of the sessions ``reader`` (default: this
    memory's scope) may read, but ``besides``."""
    from projections.visual_context import Page

    memory.project(("warm", "visual"), warn=False)
    (visual,) = memory.workspace.projectors(("visual",))
    allowed = memory.scopes.visible(reader)
    found = []
    for entry in visual.pages():
        session = entry["session"]
        if session == besides or (allowed is not None and session not in allowed):
            continue
        data = read_nofollow(visual.visual_dir / entry["file"])
        cover = f"#1-#{entry['to_seq']}"
        found.append(
            Page(
                session,
                entry["library_no"],
                entry["file"],
                data,
                entry["image_tokens"],
                cover,
                entry["ts"],
            )
        )
    return found


def load_context(
    memory: Memory, project: str | None = None, *, session: str | None = None
) -> dict[str, Any]:
    """The design's ``load_context(project)``: ``hot`` (the session's summary and newest
    messages: ``session``, default the project's latest), ``warm`` (the latest summaries of
    its other sessions not moved to images), ``cold_images`` (the pages of those moved) and
    ``archive_images`` (none yet: pages of cross-project patterns are not rendered), each
    with its tokens. Only the sessions this memory may read; ``project`` None: the
    sessions that name no project."""
    from projections.hot import summary_block
    from projections.visual_context import load_context as parts

    if session is not None:
        memory.check_session(session)  # a scoped memory's own sessions only
    memory.project(("hot", "warm", "visual"), warn=False)
    owners = memory.scopes.owners()
    members = {s for s, owner in owners.items() if owner.project == project}
    infos = [i for i in memory.sessions.list() if i.session in members and i.last_ts]
    if session is None and infos:
        session = max(infos, key=lambda i: (i.last_ts or "", i.session)).session
    cold = [p for p in pages(memory) if p.session in members and p.session != session]
    pictured = {p.session for p in cold}
    counter = memory.workspace.token_counter()
    hot = memory.workspace.format_history(session, 1 << 30) if session else ""
    warm = []
    for name in sorted(members - pictured - {session or ""}):
        window = memory.workspace.load_hot(name)
        if window is not None and window.summary is not None:
            warm.append(summary_block(window.summary, 1 << 30, counter, session=name))
    return parts(hot, warm, cold, [], counter)
