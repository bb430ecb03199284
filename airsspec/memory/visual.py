"""The visual tier, a service of the facade: the policy that moves sessions to images, the
pages a reader may see, and a project's context in the design's four parts.

``projections.visual`` renders the pages, ``compactor.visual_policy`` decides which sessions
move, ``projections.visual_context`` lays pages out in a context; this service gives them the
kernel: the policy moves only sessions this kernel may write (the gate), a reader is given only
the pages of sessions it may read, and freshness is what the kernel declares (``pages``,
``visualize``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from eventlog.layout import read_nofollow, validate_session_id

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from eventlog.schema import VisualizedRecord
    from projections.scopes import Scope
    from projections.visual_context import Page


class Visual:
    """The visual tier of one kernel (see the module)."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    def visualize(
        self, sessions: Iterable[str] | None = None, *, force: bool = False
    ) -> list[VisualizedRecord]:
        """Move the oldest warm sessions of each project past ``[visual] warm_sessions`` to
        the visual tier (``force``: the sessions named whatever the count; none named, the
        oldest of each project); the ``visualized`` events appended
        (``compactor.visual_policy``). Only sessions this memory may write move."""
        from compactor.visual_policy import VisualPolicy

        kernel = self._kernel
        gate = kernel.gate
        gate.writable()
        named = None if sessions is None else [validate_session_id(s) for s in sessions]
        for session in named or ():
            gate.guard_writes(session)
        owners = {s: o for s, o in gate.owners().items() if gate.writes(o)}
        policy = VisualPolicy(
            kernel.log,
            kernel.projector("warm"),
            kernel.projector("visual"),
            kernel.workspace.layout.locks_dir,
            kernel.settings.visual.warm_sessions,
        )
        from eventlog.schema import VisualizedRecord, typed

        records = [
            typed(VisualizedRecord, r) for r in policy.run(owners, force=force, sessions=named)
        ]
        for session in dict.fromkeys(r.session for r in records):
            kernel.written("visualize", session)
        return records

    def pages(self, reader: Scope | None = None, *, besides: str | None = None) -> list[Page]:
        """The pages (with their bytes) of the sessions ``reader`` (default: this kernel's
        scope) may read, but ``besides``."""
        from projections.visual_context import Page

        kernel = self._kernel
        kernel.fresh("pages")
        visual = kernel.projector("visual")
        allowed = kernel.gate.visible(reader)
        found = []
        for entry in visual.pages():
            session = entry["session"]
            if session == besides or (allowed is not None and session not in allowed):
                continue
            found.append(
                Page(
                    session,
                    entry["library_no"],
                    entry["file"],
                    read_nofollow(visual.visual_dir / entry["file"]),
                    entry["image_tokens"],
                    f"#1-#{entry['to_seq']}",
                    entry["ts"],
                )
            )
        return found

    def load_context(
        self, project: str | None = None, *, session: str | None = None
    ) -> dict[str, Any]:
        """A project's context as the design's four parts: ``hot`` (the session's summary
        and newest messages; default the project's latest session), ``warm`` (the latest
        summaries of its other sessions still read as text), ``cold_images`` (caption and
        image blocks of those moved to the visual tier), ``archive_images`` (none: pages of
        cross-project patterns are not rendered) and ``tokens`` (each part's, and the
        total). ``project`` None: the sessions that name no project. Only what this memory
        may read."""
        from projections.hot import format_history, summary_block
        from projections.visual_context import load_context as parts

        kernel = self._kernel
        with kernel.reading():
            if session is not None:
                kernel.check_session(session)  # a scoped kernel's own sessions only
            kernel.fresh("earlier")
            owners = kernel.gate.owners()
            members = {s for s, owner in owners.items() if owner.project == project}
            if session is None:
                latest = [e for e in kernel.projector("warm").entries() if e["session"] in members]
                session = latest[-1]["session"] if latest else None
            cold = [p for p in self.pages() if p.session in members and p.session != session]
            pictured = {p.session for p in cold}
            counter = kernel.token_counter()
            window = kernel.workspace.load_hot(session) if session else None
            hot = format_history(window, 1 << 30, counter) if window else ""
            warm = []
            for name in sorted(members - pictured - {session or ""}):
                other = kernel.workspace.load_hot(name)
                if other is not None and other.summary is not None:
                    warm.append(summary_block(other.summary, 1 << 30, counter, session=name))
        return parts(hot, warm, cold, [], counter)
