"""Identity strings through every door they enter by: a user name is a value, never a path.

Hostile names (path separators, ``.`` and ``..``, NUL, bidi controls, case variants, 1 to 1,000
characters, non-ASCII in NFC and NFD) are given to each entry point: ``Scope(...)``,
``Scope.from_env``, the CLI's ``session start --user`` and ``forget --user`` (in process;
a few through the real command), ``AIRSSPEC_USER``, the HTTP scope header, the token file, and
a ``session_started`` record appended to the log. Each entry point either accepts a name
exactly (the recorded owner is the given string, byte for byte) or refuses it with one line and
changes nothing; every entry point accepts the same names (one rule: ``eventlog.names``); an
accepted name is safe as a path component (no separator, no control or format character, not a
dot name, NFC, lower case); and nothing outside the workspace is touched (a canary folder beside
it is hashed before and after).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airsspec.errors import AirsspecError
from airsspec.memory import Memory
from eventlog.names import SHARED, name_problem
from projections.scopes import Scope
from tests.conftest import init_workspace
from tests.support.cli import run_cli
from tests.support.tls import TLS

PARTS = [
    "/", "\\", ".", "..", "\x00", "\u202e", "\u200f", "\u2066", "\u200b", " ", "\t", "\n",
    "~", ":", "%2f", "é", "e\u0301", "İ", "ß", "Ω", "ǅ", "ﬁ", "alice", "Alice", "ALICE", "a",
    "josé", "JOSÉ", "-", "_", "@", "con", "0",
]  # fmt: skip
FIXED = [
    "../..", "../../..", ".", "..", "a/../../b", "x y", "alice", "ALICE", "Alice",
    unicodedata.normalize("NFC", "josé"), unicodedata.normalize("NFD", "josé"), "a" * 128,
    "a" * 129, "b" * 1000, "evil\u202etxt.exe", "nul", "a\x00b", "C:\\x", "~root",
]  # fmt: skip


def _normalised(text: str, form: str) -> str:
    return unicodedata.normalize(form, text)


identities = st.one_of(
    st.sampled_from(FIXED),
    st.lists(st.sampled_from(PARTS), min_size=1, max_size=12).map("".join),
    st.builds(
        _normalised,
        st.text(st.characters(categories=["Ll", "Lu", "Lt", "Mn", "Nd"]), min_size=1, max_size=40),
        st.sampled_from(["NFC", "NFD", "NFKC", "NFKD"]),
    ),
    st.text(min_size=1, max_size=1000),
)
FEW = settings(max_examples=30, suppress_health_check=list(HealthCheck), deadline=None)
SLOW_FEW = settings(max_examples=10, suppress_health_check=list(HealthCheck), deadline=None)


def valid(name: str, *, shared: bool = False) -> bool:
    """Whether the one rule accepts ``name`` (the oracle every entry point must agree with);
    ``shared``: where a recorded scope may also be ``SHARED`` (``*``, every reader's)."""
    return name_problem(name) is None or (shared and name == SHARED)


def assert_safe(name: str) -> None:
    """What an accepted name must be, whatever the rule says: a single, portable, unambiguous
    path component."""
    assert 1 <= len(name) <= 128, name
    assert name not in (".", "..") and not name.startswith("."), name
    assert not any(c in name for c in "/\\\x00:"), name
    assert all(unicodedata.category(c)[0] not in "CZ" for c in name), name
    assert unicodedata.normalize("NFC", name) == name and name.lower() == name, name


def assert_one_line(message: str) -> None:
    assert message.strip() and "\n" not in message.strip() and "Traceback" not in message, message


def digest_tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (and the folder's existence) by its SHA-256."""
    if not folder.exists():
        return {}
    found = {".": "exists"}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def log_bytes(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in root.rglob("*.jsonl")}


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(workspace, canary): a workspace nested in folders of its own, a canary folder beside
    it, so a name that climbs out lands in the canary first."""
    top = tmp_path_factory.mktemp("identity")
    canary = top / "canary"
    (canary / "sub").mkdir(parents=True)
    (canary / "keep.txt").write_text("canary\n")
    (canary / "sub" / "keep.bin").write_bytes(b"\x00canary")
    root = top / "project"
    init_workspace(root)
    with (root / "airsspec.toml").open("a") as config:
        config.write('\n[privacy]\nencrypt = "user"\n')
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
        patch.setenv("ANTHROPIC_API_KEY", "")
        yield root, canary


@pytest.fixture(scope="module")
def memory(place: tuple[Path, Path]) -> Iterator[Memory]:
    with Memory.open(place[0]) as memory:
        yield memory


_counter = iter(range(10**9))


def fresh_session() -> str:
    return f"id-{next(_counter)}"


def owner_of(memory: Memory, session: str) -> str | None:
    first = next(iter(memory.replay(session)), None)
    return getattr(first, "user", None)


# ---------------------------------------------------------------------------- in process


@FEW
@given(identities)
@example("../..")
@example(unicodedata.normalize("NFD", "josé"))
@example(unicodedata.normalize("NFC", "josé"))
@example(SHARED)
def test_a_scope_holds_a_name_exactly_or_refuses_it_in_one_line(name: str) -> None:
    for field in ("user", "agent", "project"):
        variable = f"AIRSSPEC_{field.upper()}"
        for shared, make, given_as in (
            (True, Scope, {field: name}),  # a recorded scope may be shared
            (False, Scope.from_env, {variable: name}),  # a reader never is
        ):
            try:
                scope = make(**given_as) if make is Scope else make(given_as)
            except AirsspecError as exc:
                assert not valid(name, shared=shared), (field, name)
                assert_one_line(str(exc))
                assert exc.exit_code == 2 and exc.http_status == 400
            else:
                assert valid(name, shared=shared) and getattr(scope, field) == name
                if name != SHARED:
                    assert_safe(name)


def _cli(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``airsspec ARGV`` in this process: (exit code, stdout, stderr)."""
    from airsspec.cli import main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        for key in ("AIRSSPEC_USER", "AIRSSPEC_AGENT", "AIRSSPEC_PROJECT"):
            patch.delenv(key, raising=False)
        for key, value in (env or {}).items():
            patch.setenv(key, value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse
                code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@FEW
@given(identities, st.booleans())
@example("../..", False)
@example("../..", True)
@example(unicodedata.normalize("NFD", "josé"), False)
@example(unicodedata.normalize("NFC", "josé"), True)
@example("ana.b@c-d_1", False)
@example(SHARED, False)
@example(SHARED, True)
def test_session_start_records_the_user_given_or_refuses_it(
    place, memory: Memory, name: str, by_env: bool
) -> None:
    root, canary = place
    if by_env and "\x00" in name:
        name = name.replace("\x00", "0")  # the environment cannot hold NUL
    session = fresh_session()
    before, kept = log_bytes(root), digest_tree(canary)
    argv = ["-w", str(root / ".airsspec"), "session", "start", session]
    code, _, err = _cli(
        argv if by_env else [*argv, f"--user={name}"], {"AIRSSPEC_USER": name} if by_env else {}
    )
    assert digest_tree(canary) == kept
    if code == 0:
        assert valid(name, shared=not by_env), name
        assert owner_of(memory, session) == name
        if name != SHARED:
            assert_safe(name)
    else:
        assert code == 2 and not valid(name, shared=not by_env), (name, err)
        assert_one_line(err)
        assert err.startswith("airsspec: error: ")
        assert log_bytes(root) == before


@SLOW_FEW
@given(identities)
@example("../..")
@example("../../../../canary")
@example("Alice")
def test_forget_refuses_a_name_that_is_not_one_and_removes_nothing_outside(
    place, memory: Memory, name: str
) -> None:
    root, canary = place
    with contextlib.suppress(AirsspecError):  # something to forget, where the name is taken
        memory.sessions.start(fresh_session(), user=name)
    workspace = (root / ".airsspec").resolve()
    outside: list[str] = []
    real = shutil.rmtree

    kept_whole = [workspace, workspace / "sources", workspace / "sources" / "users"]
    holding = [workspace / "contexts", workspace / "auth", *kept_whole]

    def guarded(path, *args, **kwargs):  # recorded, never done: outside, or what holds the log
        resolved = Path(path).resolve()
        if (
            workspace not in resolved.parents
            or resolved in kept_whole
            or any(resolved == h or resolved in h.parents for h in holding[:2])
        ):
            outside.append(str(resolved))
            return None
        return real(path, *args, **kwargs)

    kept = digest_tree(canary)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shutil, "rmtree", guarded)
        code, _, err = _cli(["-w", str(workspace), "forget", f"--user={name}"])
    assert digest_tree(canary) == kept
    assert not outside, f"forget --user {name!r} removed {outside}"
    if code != 0:  # a valid name with nothing recorded is refused too
        assert code == 2 and err.startswith("airsspec: error: "), err
        assert_one_line(err)
    assert code != 0 or valid(name), (name, code, err)


@FEW
@given(identities)
@example("../..")
@example("Alice")
@example(unicodedata.normalize("NFC", "josé"))
@example(SHARED)
def test_a_session_started_record_holds_its_user_exactly_or_is_refused(
    place, memory: Memory, name: str
) -> None:
    root, _ = place
    session = fresh_session()
    before = log_bytes(root)
    try:
        # as the session API writes it (a caller's append of this type is refused by type)
        memory.workspace.log.append_many(
            session, [{"type": "session_started", "user": name}], system=True
        )
    except AirsspecError as exc:
        assert not valid(name, shared=True)
        assert_one_line(str(exc))
        assert exc.exit_code == 2
        assert log_bytes(root) == before
    else:
        assert valid(name, shared=True) and owner_of(memory, session) == name
        if name != SHARED:
            assert_safe(name)


# ---------------------------------------------------------------------------- tokens


@FEW
@given(identities)
@example("Alice")
@example(unicodedata.normalize("NFC", "josé"))
def test_a_token_is_made_for_exactly_the_names_of_the_one_rule(place, name: str) -> None:
    from airsspec.serve.tokens import TokenStore

    store = TokenStore(place[0] / ".airsspec")
    try:
        entry, token = store.create(name)
    except AirsspecError as exc:
        assert_one_line(str(exc))
        assert not valid(name), name
    else:
        assert valid(name), name
        principal = store.lookup(token)
        assert principal is not None and principal.user == name == entry.user
        store.revoke(entry.id)


@pytest.mark.parametrize("name", ["../../etc", "Alice", "a/b", "x y", "evil\u202etxt"])
def test_a_token_file_entry_with_a_bad_user_is_refused_when_read(tmp_path, name: str) -> None:
    from airsspec.serve.tokens import TokenStore, digest

    store = TokenStore(tmp_path)
    store.path.parent.mkdir(parents=True)
    entry = {
        "id": "abcd1234",
        "user": name,
        "read_only": False,
        "sha256": digest("airs_abcd1234_secret"),
        "created": "2026-01-01T00:00:00Z",
    }
    store.path.write_text(json.dumps({"tokens": [entry]}))
    with pytest.raises(AirsspecError) as refused:
        store.lookup("airs_abcd1234_secret")
    assert_one_line(str(refused.value))


# ---------------------------------------------------------------------------- HTTP header


@pytest.fixture(scope="module")
def server(memory: Memory) -> Iterator[tuple[str, str]]:
    from airsspec.serve.app import serving
    from airsspec.serve.core import Served

    served = Served(memory, local_user="owner", background=False)
    with serving(served) as where:
        yield where["url"], served.local_token


def _start_with_header(url: str, token: str, value: bytes) -> tuple[str, httpx.Response]:
    session = fresh_session()
    headers = [(b"authorization", f"Bearer {token}".encode()), (b"x-airsspec-user", value)]
    with httpx.Client(base_url=url, timeout=60, verify=TLS) as http:
        answer = http.post(f"/v1/sessions/{session}/start", json={}, headers=headers)
    return session, answer


printable = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=300)


@FEW
@given(st.one_of(printable, st.sampled_from(["../..", "a/../../b", "Alice", ".", ".."])))
@example("ana.b@c-d_1")
def test_the_scope_header_names_a_user_exactly_or_is_refused(
    place, memory, server, name: str
) -> None:
    url, token = server
    kept = digest_tree(place[1])
    session, answer = _start_with_header(url, token, name.encode("ascii"))
    assert digest_tree(place[1]) == kept
    if answer.status_code == 200:
        assert valid(name) and owner_of(memory, session) == name
        assert_safe(name)
    else:
        assert answer.status_code == 400 and not valid(name), (name, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert_one_line(answer.json()["detail"])


@pytest.mark.parametrize(
    "value", [unicodedata.normalize("NFC", "josé"), "ἀθηνᾶ", "用户"], ids=["latin", "greek", "han"]
)
def test_a_non_ascii_user_in_the_header_is_recorded_exactly(memory, server, value: str) -> None:
    url, token = server
    from urllib.parse import quote

    session, answer = _start_with_header(url, token, quote(value, safe="").encode("ascii"))
    assert answer.status_code == 200, answer.text
    assert owner_of(memory, session) == value


# ---------------------------------------------------------------------------- the command


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["session", "start", "s1", "--user=../.."], {}),
        (["session", "start", "s2"], {"AIRSSPEC_USER": "../.."}),
        (["session", "start", "s3", "--user=a/../../b"], {}),
        (["forget", "--user=../.."], {"AIRSSPEC_USER": "../.."}),
    ],
    ids=["start-flag", "start-env", "start-climb", "forget-self-env"],
)
def test_the_command_refuses_a_path_for_a_user_in_one_line(
    tmp_path: Path, argv: list[str], env: dict[str, str]
) -> None:
    root, canary = _copy_of_place(tmp_path)
    before, kept = digest_tree(root), digest_tree(canary)
    done = run_cli(*argv, cwd=root, env={"AIRSSPEC_COLD_EMBEDDER": "hash", **env})
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert_one_line(err) and err.startswith("airsspec: error: ")
    assert digest_tree(root) == before and digest_tree(canary) == kept


@pytest.mark.slow
@pytest.mark.parametrize("name", ["../..", "../../../../canary"], ids=["workspace", "canary"])
def test_forget_of_a_path_named_user_leaves_everything_as_it_was(tmp_path: Path, name) -> None:
    root, canary = _copy_of_place(tmp_path)
    with contextlib.suppress(AirsspecError), Memory.open(root) as memory:
        memory.sessions.start("planted", user=name)  # something to forget, if the name is taken
        memory.learnings.list()
    before, kept = digest_tree(root), digest_tree(canary)
    done = run_cli("forget", f"--user={name}", cwd=root, env={"AIRSSPEC_COLD_EMBEDDER": "hash"})
    assert digest_tree(canary) == kept
    assert digest_tree(root) == before
    assert done.returncode == 2 and done.stderr.decode().startswith("airsspec: error: ")


def _copy_of_place(tmp_path: Path) -> tuple[Path, Path]:
    """An encrypted workspace at ``tmp_path/project`` with a session of alice, and a canary
    folder beside it."""
    canary = tmp_path / "canary"
    (canary / "sub").mkdir(parents=True)
    (canary / "keep.txt").write_text("canary\n")
    root = tmp_path / "project"
    init_workspace(root)
    with (root / "airsspec.toml").open("a") as config:
        config.write('\n[privacy]\nencrypt = "user"\n')
    with Memory.open(root, user="alice") as memory:
        memory.append("a1", {"type": "user", "content": "alice's text"})
        memory.learnings.list()  # folded now: a refused command leaves every byte as it was
    return root, canary
