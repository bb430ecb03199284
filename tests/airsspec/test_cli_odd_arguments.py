"""Odd arguments and settings a user may give by mistake, through the real command line: each is
refused with one ``airsspec: error:`` line (never a traceback) and the workspace as it was, or
taken as given, never as some other value."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airsspec.config import NOT_SETTINGS
from airsspec.settings import SECTIONS
from tests.conftest import claude_transcript, init_workspace, snapshot
from tests.support.cli import run_cli, run_process

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    init_workspace(tmp_path)
    for session in ("one", "two", "three"):
        line = b'{"type": "user", "content": "hello from ' + session.encode() + b'"}\n'
        assert run_cli("append", session, cwd=tmp_path, stdin=line).returncode == 0
    return tmp_path


def refused(result, *needles: str) -> str:
    """The one error line of a refused command (non-zero exit, no traceback)."""
    err = result.stderr.decode()
    assert result.returncode != 0, (result.stdout, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("airsspec: error: "), err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize("command", ["project", "rebuild"])
def test_more_jobs_than_a_machine_has_folds_with_as_many_as_there_is_work_for(
    project: Path, command: str
) -> None:
    """``--jobs`` names at most that many workers: a number beyond what the machine could start
    (or a C int holds) folds as ``--jobs`` equal to the work does, not with a traceback."""
    result = run_process(command, "--projection", "warm", "--jobs", "9" * 23, cwd=project, env=HASH)
    assert result.returncode == 0, result.stderr.decode()
    assert b"Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[workspace]\npath = 5\n", "[workspace] path"),
        ('[workspace]\npath = ["a"]\n', "[workspace] path"),
        ("workspace = 5\n", "[workspace]"),
    ],
)
@pytest.mark.parametrize("command", [["sessions"], ["replay", "one"], ["search", "hello"]])
def test_a_workspace_path_that_is_not_text_is_one_error(
    project: Path, toml: str, named: str, command: list[str]
) -> None:
    """The commands a running server may answer look for it first, through the config's
    ``[workspace] path``: one that is not text is the config's error, named, as every other
    command reports it."""
    (project / "airsspec.toml").write_text(toml)
    before = snapshot(project)
    refused(run_cli(*command, cwd=project, env=HASH), "airsspec.toml", named)
    assert snapshot(project) == before


@pytest.mark.parametrize(
    "command", [["sessions"], ["append", "one"], ["status"], ["-w", ".airsspec", "sessions"]]
)
def test_a_workspace_path_holding_a_nul_is_one_error(project: Path, command: list[str]) -> None:
    """No folder is named with a NUL character: such a ``[workspace] path`` is the config's
    error, named, not a traceback of the first file the command opens."""
    (project / "airsspec.toml").write_text('[workspace]\npath = ".airs\\u0000spec"\n')
    before = snapshot(project)
    line = b'{"type": "user", "content": "x"}\n'
    refused(run_cli(*command, cwd=project, env=HASH, stdin=line), "[workspace] path")
    assert snapshot(project) == before


@pytest.mark.parametrize(
    "command",
    [["session", "phase", "one", ""], ["session", "start", "one", "--phase", ""]],
)
def test_an_empty_phase_is_an_unknown_phase_not_the_default(
    project: Path, command: list[str]
) -> None:
    """A phase given is recorded as given or refused: an empty one names no configured phase
    (it was recorded as the default phase, a value other than the one given)."""
    before = snapshot(project)
    refused(run_cli(*command, cwd=project, env=HASH), "unknown phase ''")
    assert snapshot(project) == before


@pytest.mark.parametrize(
    "command",
    [
        ["learnings", "reject", ""],
        ["learnings", "confirm", ""],
        ["learnings", "edit", "", "--text", "something else"],
        ["learnings", "show", ""],
    ],
)
def test_an_empty_learning_id_names_no_learning(project: Path, command: list[str]) -> None:
    """An id prefix names a learning when it is unambiguous; an empty one names none, even
    when the memory holds a single learning (which it rejected, confirmed or edited)."""
    added = run_cli("learnings", "add", "Use named exports", cwd=project, env=HASH)
    assert added.returncode == 0, added.stderr
    run_cli("learnings", "list", cwd=project, env=HASH)  # its projection and cache written
    before = snapshot(project)
    refused(run_cli(*command, cwd=project, env=HASH), "no learning ''")
    assert snapshot(project) == before


# A command line's bytes that are not UTF-8 reach Python as lone surrogates (surrogateescape).
NOT_UTF8 = b"caf\xe9".decode("utf-8", "surrogateescape")


def test_sql_that_is_not_utf8_is_one_error(project: Path) -> None:
    before = snapshot(project)
    refused(run_cli("sql", f"SELECT '{NOT_UTF8}'", cwd=project, env=HASH), "UTF-8")
    assert snapshot(project) == before


def test_a_learning_text_that_is_not_utf8_is_one_error(project: Path) -> None:
    before = snapshot(project)
    refused(run_cli("learnings", "add", f"Use {NOT_UTF8}", cwd=project, env=HASH), "UTF-8")
    assert snapshot(project) == before


@pytest.mark.parametrize(
    ("line", "named"),
    [
        (b'{"type": "user", "content": "x", "content": "y"}', "'content' is given twice"),
        (b'{"type": "user", "content": "x", "meta": {"k": 1, "k": 2}}', "'k' is given twice"),
        (b'{"type": "user", "content": "x", "\\u003a": 1, ":": 2}', "':' is given twice"),
        (b'{"type": "observation", "result": "ok", "is_error": "yes"}', "is_error"),
        (b'{"type": "observation", "result": "ok", "is_error": 1}', "is_error"),
    ],
)
def test_an_event_a_parser_would_store_otherwise_is_refused(
    project: Path, line: bytes, named: str
) -> None:
    """A key given twice (a parser keeps one of its values, silently) and a flag given as a
    word or a number (coerced to a bool) are refused, naming the line and the key or field;
    the log is as it was. The same text without the repetition is stored as given."""
    before = snapshot(project)
    result = run_cli(
        "append", "one", cwd=project, stdin=b'{"type": "user", "content": "ok"}\n' + line
    )
    err = result.stderr.decode()
    assert result.returncode != 0 and "Traceback" not in err, err
    assert err.startswith("airsspec: error: <stdin>:2: ") and named in err, err
    assert snapshot(project) == before
    kept = b'{"type": "user", "content": "x", "meta": {"k": 1, "\\u003a": 2, ":k": 3}}'
    assert run_cli("append", "one", cwd=project, stdin=kept).returncode == 0
    stored = run_cli("replay", "one", "--json", cwd=project).stdout.decode().splitlines()[-1]
    assert json.loads(stored)["meta"] == {"k": 1, ":": 2, ":k": 3}


@pytest.mark.parametrize("prefix", ["../", "a/b-", "a" * 65, ".hidden-", "x y"])
def test_a_session_prefix_is_taken_as_given_or_refused(
    project: Path, tmp_path: Path, prefix: str
) -> None:
    """``--session-prefix`` begins every imported session's id: one an id cannot begin with
    (a path, a space, too long to leave room for the file's name) is refused, naming it; it was
    cleaned or cut silently (``../`` vanished; a long one cut the file's name off)."""
    transcript = claude_transcript(tmp_path / "talk.jsonl", "hello")
    before = snapshot(project)
    result = run_cli(
        "import", "claude-code", str(transcript), f"--session-prefix={prefix}", cwd=project
    )
    refused(result, "session prefix")
    assert snapshot(project) == before
    kept = run_cli("import", "claude-code", str(transcript), "--session-prefix=cc.2-", cwd=project)
    assert kept.returncode == 0 and b"cc.2-talk" in kept.stdout, kept.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["export", "parquet", "{file}"],
        ["learnings", "reextract", "--out", "{file}"],
        ["rebuild", "--as-of", "2100-01-01T00:00:00Z", "--out", "{file}"],
    ],
)
def test_a_folder_to_write_into_that_is_a_file_is_the_users_mistake(
    project: Path, tmp_path_factory: pytest.TempPathFactory, command: list[str]
) -> None:
    """An option naming a folder to write into that is a file already is refused before any
    work, as a usage error (exit 2), the file as it was (it ended in exit 1, 'File exists')."""
    file = tmp_path_factory.mktemp("outside") / "a-file"
    file.write_bytes(b"mine")
    argv = [part.format(file=file) for part in command]
    refused(run_cli(*argv, cwd=project, env=HASH), "is a file, not a folder")
    assert run_cli(*argv, cwd=project, env=HASH).returncode == 2
    assert file.read_bytes() == b"mine"


def test_a_chart_is_never_written_into_the_workspace(project: Path) -> None:
    """``report --plot`` writes a file as ``-o`` does: a path inside the workspace folder is
    refused before any work (it wrote ``.airsspec/x.png`` beside the logs)."""
    before = snapshot(project)
    chart = ".airsspec/contexts/chart.png"
    refused(run_cli("report", "sessions", "--plot", chart, cwd=project, env=HASH), "--plot")
    assert snapshot(project) == before


@pytest.mark.parametrize(
    ("section", "key"), [("memory", "hot_window_size"), ("cold", "weight_focus")]
)
def test_a_number_setting_given_true_or_false_is_refused(
    tmp_path: Path, section: str, key: str
) -> None:
    """``true`` is an int to Python and to lax validation: a count or a weight given as a
    boolean was taken as 1 or 0. It is refused, naming the section and the key."""
    (tmp_path / "airsspec.toml").write_text(f"[{section}]\n{key} = true\n")
    refused(run_cli("status", cwd=tmp_path, env=HASH), f"[{section}] {key}", "not true")
    (tmp_path / "airsspec.toml").write_text(f"[{section}]\n{key} = 1\n")
    assert run_cli("status", cwd=tmp_path, env=HASH).returncode == 0


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ('encoding = "nope"', "[memory] encoding"),
        ('message_types = ["user", "nope"]', "[memory] message_types"),
    ],
)
def test_a_tokenizer_or_message_type_that_does_not_exist_is_refused_at_load(
    tmp_path: Path, line: str, named: str
) -> None:
    """Both loaded without error and failed (or were ignored) later, far from the setting."""
    (tmp_path / "airsspec.toml").write_text(f"[memory]\n{line}\n")
    refused(run_cli("status", cwd=tmp_path, env=HASH), named, "nope")


def test_a_count_setting_given_a_fraction_is_refused(tmp_path: Path) -> None:
    """Lax validation took ``40.0`` for a count as 40 (and refused only ``40.5``): a count is
    given whole, and a weight may be either."""
    (tmp_path / "airsspec.toml").write_text("[memory]\nhot_window_size = 40.0\n")
    refused(run_cli("status", cwd=tmp_path, env=HASH), "[memory] hot_window_size", "40.0")
    (tmp_path / "airsspec.toml").write_text("[cold]\nweight_focus = 1\n")
    assert run_cli("status", cwd=tmp_path, env=HASH).returncode == 0


# Texts Python's int reads as 1: a seq or a count is written in the digits 0-9 alone.
NOT_DIGITS = ["0_1", " 1", "1 ", "+1", "\u0661", "\uff11"]  # Arabic-Indic one, full-width one


@pytest.mark.parametrize("text", NOT_DIGITS)
def test_after_takes_a_seq_in_the_digits_0_to_9_alone(project: Path, text: str) -> None:
    """``append --after`` reads its seq as written: text Python's ``int`` takes (``0_1``,
    `` 1``, ``+1``, another script's digit) is one usage error naming ``--after`` (exit 2), the
    log as it was; it was read as 1, the session's last seq, so the record landed."""
    line = b'{"type": "user", "content": "after one"}\n'
    before = snapshot(project)
    result = run_cli("append", "one", "--after", text, cwd=project, stdin=line)
    refused(result, "--after", "digits 0-9")
    assert result.returncode == 2
    assert snapshot(project) == before
    for plain in ("1", "02"):  # digits alone, a leading zero too
        landed = run_cli("append", "one", "--after", plain, cwd=project, stdin=line)
        assert landed.returncode == 0, landed.stderr
    replayed = run_cli("replay", "one", "--json", cwd=project).stdout.splitlines()
    assert [json.loads(r)["seq"] for r in replayed] == [1, 2, 3]


def test_after_a_negative_seq_is_the_same_usage_error(project: Path) -> None:
    before = snapshot(project)
    result = run_cli("append", "one", "--after", "-1", cwd=project, stdin=b'{"type": "user"}\n')
    refused(result, "--after", "0 or more", "'-1'")
    assert result.returncode == 2
    assert snapshot(project) == before


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["replay", "one", "--from", "+1"], "--from"),
        (["search", "hello", "-k", "\u0663"], "-k"),
        (["facts", "-k", " 2"], "-k"),
        (["context", "one", "--budget", "1_000"], "--budget"),
        (["project", "--projection", "warm", "--jobs", "+1"], "--jobs"),
        (["library", "--show", "\u0661"], "--show"),
        (["serve", "--host", "", "--port", "+0"], "--port"),  # no host: never listens
    ],
)
def test_every_number_a_user_types_is_read_as_after_is(
    project: Path, command: list[str], option: str
) -> None:
    """A seq, a count, a budget or a port is read as ``--after`` reads its seq: what only
    Python's ``int`` takes is the option's usage error (exit 2), nothing written."""
    before = snapshot(project)
    result = run_cli(*command, cwd=project, env=HASH)
    refused(result, option)
    assert result.returncode == 2
    assert snapshot(project) == before


@pytest.mark.parametrize(
    ("variable", "hint"),
    [
        ("AIRSSPEC_COLDD_EMBEDDER", "; did you mean AIRSSPEC_COLD_EMBEDDER?"),
        ("AIRSSPEC_HOT_WINDOW_SIZE", "; did you mean AIRSSPEC_MEMORY_HOT_WINDOW_SIZE?"),
        ("AIRSSPEC_MY_OWN_THING", ""),  # a user's own: nothing close
    ],
)
def test_an_airsspec_variable_that_names_no_setting_is_warned_of_once(
    project: Path, monkeypatch: pytest.MonkeyPatch, variable: str, hint: str
) -> None:
    """A misspelt ``AIRSSPEC_`` variable was ignored without a word. It is one warning line
    (however often the command loads the settings), naming it and the sections, and the
    closest variable when one is close; the command runs as it would without it."""
    for name in [n for n in os.environ if n.startswith("AIRSSPEC_")]:
        monkeypatch.delenv(name)  # this run's own variables only
    result = run_process("sessions", cwd=project, env={**HASH, variable: "40"})
    assert result.returncode == 0, result.stderr
    assert [row.split()[0] for row in result.stdout.splitlines()[1:]] == [b"one", b"three", b"two"]
    sections = ", ".join(SECTIONS)
    line = f"airsspec: warning: environment {variable} names no setting (sections: {sections})"
    assert result.stderr.decode().splitlines() == [line + hint]


def test_the_projects_own_airsspec_variables_are_not_warned_of(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("AIRSSPEC_")]:
        monkeypatch.delenv(name)
    own = {name: "0" for name in NOT_SETTINGS}  # every one set; the scope to a name
    own["AIRSSPEC_USER"] = own["AIRSSPEC_AGENT"] = own["AIRSSPEC_PROJECT"] = "ana"
    result = run_process("sessions", cwd=project, env={**HASH, **own})
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    quiet = run_process("sessions", cwd=project, env={**HASH, "AIRSSPEC_MEMORY_CHUNK_SIZE": "12"})
    assert quiet.returncode == 0 and quiet.stderr == b"", quiet.stderr


def test_a_seq_of_more_digits_than_python_converts_is_the_options_error(project: Path) -> None:
    """``--until`` takes a seq of any length of digits: one longer than Python converts
    (``sys.get_int_max_str_digits``) is refused naming the option, not a traceback."""
    result = run_cli("replay", "one", "--until", "9" * 5000, cwd=project, env=HASH)
    refused(result, "--until")


@pytest.mark.parametrize(
    "variable",
    ["AIRSSPEC_X\nAIRSSPEC_FAKE warning", "AIRSSPEC_\x1b[2JRED", "AIRSSPEC_" + "Q" * 5000],
)
def test_a_variable_with_an_odd_name_is_warned_of_in_one_short_line(
    project: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """A name with a line break or a terminal's control characters, or a very long one, is
    warned of in one line: escaped, and cut short."""
    for name in [n for n in os.environ if n.startswith("AIRSSPEC_")]:
        monkeypatch.delenv(name)
    result = run_process("sessions", cwd=project, env={**HASH, variable: "1"})
    assert result.returncode == 0, result.stderr
    (line,) = result.stderr.decode().splitlines()
    assert line.startswith("airsspec: warning: environment AIRSSPEC_") and line.isprintable()
    assert len(line) < 400
