"""Memory files, a service of the facade (``memory.files``): the ``/memories`` tree of Claude's
memory tool, kept on the log.

Every change is an event of the workspace's own log (``memory_file_written``,
``memory_file_renamed``, ``memory_file_deleted``: written by this service alone), so a file's
every version, who wrote it (the memory's agent, and an ``actor`` label) and what the tree held
at any moment are folds of the log (``projections.memory_files``): ``history(path)`` and
``as_of`` reads. Nothing is ever removed from the log: a delete is a version without text, and
``forget --user`` shreds a user's files like any record (their text, paths and actors are sealed
under the user's key: ``eventlog.crypto.USER_KEYED``).

Rules, those of the SDK's reference filesystem backend (``BetaLocalFilesystemMemoryTool``), with
its messages word for word, since Claude was trained on them:

- a path starts with ``/memories`` and, ``..`` resolved, stays under it; folders are implied by
  the files under them (a tree of events has no empty folder, and no link to escape through);
- ``create`` refuses an existing path; ``str_replace`` needs ``old_str`` exactly once;
  ``insert`` a line within ``[0, lines]``; ``/memories`` itself is neither deleted nor renamed;
- a change may name the ``content_sha256`` it was computed from (the managed memory stores'
  optimistic concurrency): if the file changed since, nothing is written
  (``MemoryFileConflictError``, HTTP 409). Each change checks and appends under one lock, so
  two writers never both win.

Each memory reads and writes its own tree only (``Gate.memory_tree``: its user's and
project's); another user's files are not there to see. Text is stored as redaction leaves it
(a secret in a file is replaced as in any record), and its SHA-256 is that of what is stored.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airsspec.errors import MemoryFileConflictError, MemoryFileError, NoSuchMemoryFileError
from eventlog.bound import Bound
from eventlog.layout import MEMORY_SESSION
from projections.memory_files import FileVersion, MemoryFilesState, under

if TYPE_CHECKING:
    from airsspec.kernel import Kernel

ROOT = "/memories"
MAX_LINES = 999_999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
# What no new file name may hold beside the C0 controls: a C1 control, a line or paragraph
# separator, or a bidirectional embedding, override or isolate, which would make the name read
# in the viewer, and in the records an admin reads, as another (``/memories/<RLO>gpj.md``).
_BIDI_CONTROLS = frozenset({"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"})


def _misleading(char: str) -> bool:
    return (
        unicodedata.category(char) in ("Cc", "Zl", "Zp")
        or unicodedata.bidirectional(char) in _BIDI_CONTROLS
    )


def _blank(char: str) -> bool:
    """A space, or a character that shows nothing (a format character: a zero-width space, a
    word joiner, a byte order mark): at either end of a name, it reads as the name without it."""
    return char.isspace() or unicodedata.category(char) == "Cf"


DIRECTORY_SIZE = 4096
"""The size a folder is listed with (``4K``): what a folder of the reference backend's has on
the usual Linux file systems (a folder of events takes no room of its own)."""


@dataclass(frozen=True)
class Change:
    """What a write did: the file's new version (None after a delete, a rename of a folder or
    a clear) and the result the memory tool answers with."""

    version: FileVersion | None
    message: str


def memory_path(path: str, *, new: bool = False) -> str:
    """``path`` as the tree names it (``/memories/a/b.md``), resolved as the reference backend
    resolves it; ``MemoryFileError`` for a path outside ``/memories`` or a name no file may
    have (a control character; with ``new``, a name being made, also a character that makes it
    read as another, ``_misleading``, a space or an invisible character at either end of a
    name, ``_blank``, or a name not in NFC, shown as its composed twin; a file made before
    keeps its name)."""
    if not path.startswith(ROOT):
        raise MemoryFileError(f"Path must start with /memories, got: {path}")
    if any(ord(c) < 32 or c == "\x7f" or (new and _misleading(c)) for c in path):
        raise MemoryFileError(f"Path {path!r} holds a control character")
    if new and any(n and (_blank(n[0]) or _blank(n[-1])) for n in path[len(ROOT) :].split("/")):
        # "notes.md " (or "notes.md" and a zero-width space) beside "notes.md": read as one
        raise MemoryFileError(
            f"Path {path!r} has a name that begins or ends with a space or an invisible character"
        )
    if new and not unicodedata.is_normalized("NFC", path):
        # "cafe" and a combining accent beside "café" (one character): shown the same
        raise MemoryFileError(
            f"Path {path!r} is not in Unicode normal form NFC: it reads as "
            f"{unicodedata.normalize('NFC', path)!r}, another name"
        )
    resolved = posixpath.normpath(f"{ROOT}/{path[len(ROOT) :].lstrip('/')}")
    if not under(resolved, ROOT):
        raise MemoryFileError(f"Path {path} would escape /memories directory")
    return resolved


def content_sha256(text: str) -> str:
    """The SHA-256 of ``text``'s UTF-8 bytes (what a version's ``content_sha256`` is)."""
    import hashlib  # here: loading OpenSSL (3 ms) is for the commands that hash

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _size(size: int) -> str:
    """A size as the reference backend lists it (``0B``, ``512B``, ``1.5K``, ``4.0K``)."""
    if size == 0:
        return "0B"
    i = min((size.bit_length() - 1) // 10, 3)
    scaled = size / (1024**i)
    unit = "BKMG"[i]
    return f"{int(scaled)}{unit}" if scaled == int(scaled) else f"{scaled:.1f}{unit}"


def _numbered(lines: list[str], start: int) -> str:
    return "\n".join(
        f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines)
    )


class MemoryFiles:
    """The ``/memories`` tree of one open workspace, as its kernel's principal sees it (see
    the module)."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    # ------------------------------------------------------------------ reads

    def _state(self) -> MemoryFilesState:
        kernel = self._kernel
        if not kernel.logged(MEMORY_SESSION):
            return MemoryFilesState(MEMORY_SESSION)
        kernel.fresh("memory_files", [MEMORY_SESSION])
        loaded = kernel.projector("memory_files").state_store.load(MEMORY_SESSION)
        return loaded[0] if loaded is not None else MemoryFilesState(MEMORY_SESSION)

    @property
    def _tree(self) -> str:
        return self._kernel.gate.memory_tree()

    def tree(self, *, as_of: int | str | datetime | None = None) -> dict[str, FileVersion]:
        """Every file of this memory's tree (at ``as_of``: a seq of the workspace's own log or
        a time): path -> its current version."""
        bound = None if as_of is None else Bound.parse(as_of, "as_of")
        return self._state().files(self._tree, bound)

    def read(self, path: str, *, as_of: int | str | datetime | None = None) -> FileVersion:
        """The current version of the file at ``path`` (at ``as_of``);
        ``NoSuchMemoryFileError`` when there is none."""
        path = memory_path(path)
        found = self.tree(as_of=as_of).get(path)
        if found is None:
            raise NoSuchMemoryFileError(f"The path {path} does not exist")
        return found

    def history(self, path: str) -> list[FileVersion]:
        """Every version of ``path``, oldest first: each with its text (None: deleted or
        renamed away), SHA-256, agent, actor and record (seq, hash, time)."""
        path = memory_path(path)
        versions = self._state().versions(self._tree, path)
        if not versions:
            raise NoSuchMemoryFileError(f"The path {path} does not exist")
        return versions

    def view(
        self,
        path: str,
        view_range: list[int] | None = None,
        *,
        as_of: int | str | datetime | None = None,
    ) -> str:
        """What the memory tool's ``view`` answers: a folder's listing two levels deep
        (hidden names left out), or a file's lines numbered (``view_range``: first and last
        line, ``-1`` for the end)."""
        where = memory_path(path)
        files = self.tree(as_of=as_of)
        if where in files:
            lines = (files[where].text or "").split("\n")
            if len(lines) > MAX_LINES:
                raise MemoryFileError(f"File {path} exceeds maximum line limit of 999,999 lines.")
            start = 1
            if view_range is not None and len(view_range) == 2:
                first = max(1, view_range[0]) - 1
                last = len(lines) if view_range[1] == -1 else view_range[1]
                lines, start = lines[first:last], first + 1
            return f"Here's the content of {path} with line numbers:\n" + _numbered(lines, start)
        if where != ROOT and not any(under(p, where) for p in files):
            raise NoSuchMemoryFileError(
                f"The path {path} does not exist. Please provide a valid path."
            )
        entries = [f"{_size(DIRECTORY_SIZE)}\t{path}"]
        entries += [f"{size}\t{path}/{name}" for size, name in self._listing(files, where)]
        header = (
            f"Here're the files and directories up to 2 levels deep in {path}, "
            "excluding hidden items:"
        )
        return header + "\n" + "\n".join(entries)

    @staticmethod
    def _listing(files: dict[str, FileVersion], folder: str) -> Iterator[tuple[str, str]]:
        """(size, name relative to ``folder``) of what lies one and two levels below it, in
        the reference backend's order (by name, a folder followed by its own entries)."""
        below: dict[str, Any] = {}  # name -> a folder's own dict, or a file's size
        for path, version in files.items():
            if path == folder or not under(path, folder):
                continue
            parts = path[len(folder) :].strip("/").split("/")
            if any(part.startswith(".") for part in parts[:2]):
                continue
            node = below
            for part in parts[:-1][:2]:
                node = node.setdefault(part, {})
            if len(parts) <= 2:
                node[parts[-1]] = len((version.text or "").encode("utf-8"))

        def walk(node: dict[str, Any], prefix: str) -> Iterator[tuple[str, str]]:
            for name in sorted(node):
                if isinstance(node[name], dict):
                    yield _size(DIRECTORY_SIZE), f"{prefix}{name}/"
                    if not prefix:
                        yield from walk(node[name], f"{name}/")
                else:
                    yield _size(node[name]), f"{prefix}{name}"

        return walk(below, "")

    # ------------------------------------------------------------------ writes

    @contextmanager
    def _locked(self) -> Iterator[dict[str, FileVersion]]:
        """The tree's files as they stand, held still until the write is appended: one change
        of the workspace's memory files at a time, across processes."""
        from compactor.compactor import file_lock

        kernel = self._kernel
        kernel.gate.writable()
        lock = kernel.workspace.layout.locks_dir / "memory_files.lock"
        with file_lock(lock, wait=True, holder="memory files writer"):
            yield self._state().files(self._tree)

    def _append(self, event: dict[str, Any], actor: str | None) -> FileVersion | None:
        scope = self._kernel.scope
        fields = {"user": scope.user, "agent": scope.agent, "project": scope.project}
        fields["actor"] = actor
        event |= {k: v for k, v in fields.items() if v is not None}
        self._kernel.system_append(MEMORY_SESSION, [event], write="memory_files")
        path = event.get("path") or event.get("new_path")
        return self.tree().get(path) if isinstance(path, str) else None

    @staticmethod
    def _check(files: dict[str, FileVersion], path: str, expected: str | None) -> FileVersion:
        """The file at ``path``, refused when it is missing, a folder, or not the version
        ``expected`` (a SHA-256; None: any)."""
        found = files.get(path)
        if found is None:
            if path == ROOT or any(under(p, path) for p in files):
                raise MemoryFileError(f"The path {path} is not a file.")
            raise NoSuchMemoryFileError(
                f"The path {path} does not exist. Please provide a valid path."
            )
        if expected is not None and found.sha256 != expected:
            raise MemoryFileConflictError(
                f"The file {path} has changed since it was read: its content_sha256 is "
                f"{found.sha256}, not {expected}. Nothing was written; view it again."
            )
        return found

    def _write(
        self, path: str, text: str, previous: FileVersion | None, command: str, actor: str | None
    ) -> FileVersion:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:  # JSON's "\ud800": no UTF-8 form to hash or store
            raise MemoryFileError(
                f"No change was made: the text for {path} holds a lone surrogate "
                f"({text[exc.start]!r}), which is not Unicode text"
            ) from exc
        redactor = self._kernel.log.redactor
        stored = redactor.redact_text(text, "text", []) if redactor is not None else text
        event = {
            "type": "memory_file_written",
            "path": path,
            "text": stored,
            "content_sha256": content_sha256(stored),
            "previous_sha256": previous.sha256 if previous is not None else None,
            "command": command,
        }
        version = self._append(event, actor)
        assert version is not None
        return version

    def _edit(
        self,
        path: str,
        content_sha256: str | None,
        command: str,
        actor: str | None,
        edit: Callable[[str], str],
    ) -> FileVersion:
        """Write to the file ``path`` what ``edit`` makes of its text (refusing what
        ``_check`` refuses), as the change ``command``: an edit's one statement."""
        where = memory_path(path)
        with self._locked() as files:
            previous = self._check(files, where, content_sha256)
            return self._write(where, edit(previous.text or ""), previous, command, actor)

    @staticmethod
    def _creatable(files: dict[str, FileVersion], where: str, path: str) -> None:
        """Refuse to create ``where`` (as ``path`` was given) when a file or folder is there,
        or a file stands where a folder of it would be."""
        if where == ROOT or any(under(p, where) for p in files):
            raise MemoryFileConflictError(f"File {path} already exists")
        MemoryFiles._not_under_a_file(files, where, path)

    @staticmethod
    def _not_under_a_file(files: dict[str, FileVersion], where: str, path: str) -> None:
        """Refuse a new file at ``where`` (``path`` as given) below a file: a file's name is
        never a folder's (a create's or a rename's destination)."""
        if any(under(where, p) for p in files):
            raise MemoryFileError(f"The path {path} is under a file, not a folder.")

    def create(self, path: str, file_text: str, *, actor: str | None = None) -> Change:
        """Create the file ``path`` holding ``file_text``; ``MemoryFileConflictError`` when
        something is there already."""
        where = memory_path(path, new=True)
        with self._locked() as files:
            self._creatable(files, where, path)
            version = self._write(where, file_text, None, "create", actor)
        return Change(version, f"File created successfully at: {path}")

    def write(
        self,
        path: str,
        text: str,
        *,
        content_sha256: str | None = None,
        actor: str | None = None,
    ) -> Change:
        """Write ``text`` to ``path`` whole, creating it when missing; ``content_sha256``
        (of the version replaced) refuses a file changed since it was read."""
        where = memory_path(path)
        with self._locked() as files:
            if where not in files and content_sha256 is None:
                memory_path(path, new=True)  # a name being made: refused as a create refuses it
                self._creatable(files, where, path)
                version = self._write(where, text, None, "create", actor)
                return Change(version, f"File created successfully at: {path}")
            previous = self._check(files, where, content_sha256)
            version = self._write(where, text, previous, "write", actor)
        return Change(version, f"The file {path} has been edited.")

    def str_replace(
        self,
        path: str,
        old_str: str,
        new_str: str,
        *,
        content_sha256: str | None = None,
        actor: str | None = None,
    ) -> Change:
        """Replace the one occurrence of ``old_str`` in ``path`` by ``new_str``."""
        changed = 0  # the line the replacement starts on, counted from 0

        def replaced(content: str) -> str:
            nonlocal changed
            count = content.count(old_str)
            if count == 0:
                raise MemoryFileError(
                    f"No replacement was performed, old_str `{old_str}` did not appear "
                    f"verbatim in {path}."
                )
            if count > 1:
                lines, start = [], 0
                while (pos := content.find(old_str, start)) != -1:
                    lines.append(content[:pos].count("\n") + 1)
                    start = pos + 1
                raise MemoryFileError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old_str}` "
                    f"in lines: {', '.join(map(str, lines))}. Please ensure it is unique"
                )
            changed = content[: content.find(old_str)].count("\n")
            return content.replace(old_str, new_str)

        version = self._edit(path, content_sha256, "str_replace", actor, replaced)
        new_lines = (version.text or "").split("\n")
        first, last = max(0, changed - 2), min(len(new_lines), changed + 3)
        snippet = _numbered(new_lines[first:last], first + 1)
        return Change(
            version,
            "The memory file has been edited. Here is the snippet showing the change (with line "
            "numbers):\n" + snippet,
        )

    def insert(
        self,
        path: str,
        insert_line: int,
        insert_text: str,
        *,
        content_sha256: str | None = None,
        actor: str | None = None,
    ) -> Change:
        """Insert ``insert_text`` after line ``insert_line`` of ``path`` (0: at the top)."""

        def inserted(content: str) -> str:
            lines = content.split("\n")
            if lines[-1] == "":
                lines.pop()
            if insert_line < 0 or insert_line > len(lines):
                raise MemoryFileError(
                    f"Invalid `insert_line` parameter: {insert_line}. "
                    f"It should be within the range [0, {len(lines)}]."
                )
            lines.insert(insert_line, insert_text.rstrip("\n"))
            text = "\n".join(lines)
            return text + ("" if text.endswith("\n") else "\n")

        version = self._edit(path, content_sha256, "insert", actor, inserted)
        return Change(version, f"The file {path} has been edited.")

    def delete(
        self, path: str, *, content_sha256: str | None = None, actor: str | None = None
    ) -> Change:
        """Delete the file or folder ``path`` (a folder with every file under it)."""
        where = memory_path(path)
        if where == ROOT:
            raise MemoryFileError("Cannot delete the /memories directory itself")
        with self._locked() as files:
            if where in files:
                self._check(files, where, content_sha256)
            elif not any(under(p, where) for p in files):
                raise NoSuchMemoryFileError(f"The path {path} does not exist")
            self._append({"type": "memory_file_deleted", "path": where}, actor)
        return Change(None, f"Successfully deleted {path}")

    def rename(self, old_path: str, new_path: str, *, actor: str | None = None) -> Change:
        """Move the file or folder ``old_path`` to ``new_path`` (which must not exist)."""
        old, new = memory_path(old_path), memory_path(new_path, new=True)
        if old == ROOT:
            raise MemoryFileError("Cannot rename the /memories directory itself")
        with self._locked() as files:
            if new == ROOT or any(under(p, new) for p in files):
                raise MemoryFileConflictError(f"The destination {new_path} already exists")
            self._not_under_a_file(files, new, new_path)
            if not any(under(p, old) for p in files):
                raise NoSuchMemoryFileError(f"The path {old_path} does not exist")
            if under(new, old):
                raise MemoryFileError(f"Cannot move {old_path} into itself ({new_path})")
            event = {"type": "memory_file_renamed", "old_path": old, "new_path": new}
            version = self._append(event, actor)
        return Change(version, f"Successfully renamed {old_path} to {new_path}")

    def clear(self, *, actor: str | None = None) -> Change:
        """Delete every file of this memory's tree (``clear_all_memory``); the log keeps
        their history."""
        with self._locked() as files:
            if files:
                event = {"type": "memory_file_deleted", "path": ROOT, "all": True}
                self._append(event, actor)
        return Change(None, "All memory cleared")
