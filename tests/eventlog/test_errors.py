"""One declaration per error: every error airsspec raises on purpose is declared in
``eventlog.errors`` (re-exported by ``airsspec.errors``), carries its exit code and HTTP status,
and the command line exits with exactly that code; library warnings reach the command line's
stderr as ``airsspec: warning:`` lines without the library printing that prefix itself."""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

import airsspec.errors
import eventlog.errors
from eventlog.errors import AirsspecError
from tests.conftest import init_workspace
from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("eventlog", "projections", "compactor", "airsspec")


def _import_everything() -> None:
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@pytest.fixture(scope="module")
def every_error() -> list[type[AirsspecError]]:
    _import_everything()
    return sorted({AirsspecError, *_subclasses(AirsspecError)}, key=lambda c: c.__name__)


def test_every_error_is_declared_once_in_the_errors_module(
    every_error: list[type[AirsspecError]],
) -> None:
    assert len(every_error) > 40  # the walk saw the project's errors, not an empty tree
    strays = [
        f"{c.__module__}.{c.__qualname__}" for c in every_error if c.__module__ != "eventlog.errors"
    ]
    assert not strays, f"declare these in eventlog/errors.py: {strays}"
    missing = [c.__name__ for c in every_error if c.__name__ not in eventlog.errors.__all__]
    assert not missing, f"not in eventlog.errors.__all__: {missing}"


def test_the_top_layer_re_exports_every_error(every_error: list[type[AirsspecError]]) -> None:
    assert airsspec.errors.__all__ == eventlog.errors.__all__
    for cls in every_error:
        assert getattr(airsspec.errors, cls.__name__) is cls


def test_every_error_has_a_docstring_a_failing_exit_code_and_an_http_status(
    every_error: list[type[AirsspecError]],
) -> None:
    for cls in every_error:
        assert cls.__doc__ and cls.__doc__.strip(), cls
        assert isinstance(cls.exit_code, int) and cls.exit_code in (1, 2), cls
        assert isinstance(cls.http_status, int) and 400 <= cls.http_status < 600, cls


def test_a_category_decides_its_errors_codes() -> None:
    e = eventlog.errors
    assert e.CorruptLogError.exit_code == 1 and e.CorruptLogError.http_status == 500
    assert e.LogSyncError.exit_code == 1  # a write error, inherited
    assert e.DaemonBusyError.exit_code == 1 and e.NothingToCompactError.http_status == 409
    assert e.NoSuchSessionError.exit_code == 2 and e.NoSuchSessionError.http_status == 404
    assert e.ScopeError.http_status == e.ReadOnlyTokenError.http_status == 403
    assert e.InvalidInputError.exit_code == e.UsageError.exit_code == 2
    assert e.BodyTooLargeError.http_status == 413
    assert issubclass(e.ServerFilesError, PermissionError)  # still what callers catch
    assert issubclass(e.LogWriteError, OSError) and issubclass(e.InvalidEventError, ValueError)


def _example(cls: type[AirsspecError]) -> AirsspecError:
    """An instance of ``cls`` built as its raisers build it."""
    e = eventlog.errors
    if issubclass(cls, e.InvalidInputError):
        return cls("in.jsonl", [e.LineError(3, "content", "field required")])
    if issubclass(cls, e.ImportFailedError):
        return cls([e.SourceError("a.jsonl", 2, "not JSON")])
    if issubclass(cls, e.SourceError):
        return cls("a.jsonl", 2, "not JSON")
    if issubclass(cls, e.CorruptLogError):
        return cls(Path("s.jsonl"), seq=2, offset=10, reason="bad")
    if issubclass(cls, e.UnsafePathError):
        return cls(Path("link"))
    if issubclass(cls, e.SessionMovedError):
        return cls("s", 2, 3)
    return cls("the problem")


def test_the_command_line_exits_with_each_errors_own_code(
    every_error: list[type[AirsspecError]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import airsspec.cli as cli

    for cls in every_error:
        error = _example(cls)

        def fail(args: argparse.Namespace, error: AirsspecError = error) -> int:
            raise error

        parser = argparse.ArgumentParser()
        parser.set_defaults(func=fail)
        monkeypatch.setattr(cli, "build_parser", lambda command=None, parser=parser: parser)
        assert cli.main([]) == cls.exit_code, cls
        assert capsys.readouterr().err.splitlines() == error.report(), cls


def test_an_invalid_input_file_reports_every_line_then_the_count() -> None:
    e = eventlog.errors
    error = e.InvalidInputError("in.jsonl", [e.LineError(1, None, "bad"), e.LineError(4, "x", "y")])
    assert error.report() == [
        "airsspec: error: in.jsonl:1: bad",
        "airsspec: error: in.jsonl:4: field 'x': y",
        "nothing appended: 2 invalid line(s)",
    ]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("errors")
    init_workspace(root)
    good = b'{"type": "user", "content": "a"}\n' * 3
    assert run_cli("append", "s", cwd=root, stdin=good).returncode == 0
    return root


@pytest.mark.parametrize(
    ("args", "stdin", "error"),
    [
        (["-w", "{tmp}/typo", "sessions"], None, eventlog.errors.NotAWorkspaceError),
        (["append", "t"], b"not json\n", eventlog.errors.InvalidInputError),
        (["replay", "missing"], None, eventlog.errors.NoSuchSessionError),
        (
            ["rebuild", "--as-of", "3", "--out", "{tmp}/.airsspec/in"],
            None,
            eventlog.errors.UsageError,
        ),
        (["sql", "DELETE FROM events"], None, eventlog.errors.AnalyticsError),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_a_real_command_exits_with_its_errors_code(
    project: Path, args: list[str], stdin: bytes | None, error: type[AirsspecError]
) -> None:
    argv = [a.format(tmp=project) for a in args]
    result = run_cli(*argv, cwd=project, stdin=stdin)
    assert result.returncode == error.exit_code, result.stderr
    assert b"Traceback" not in result.stderr


def test_a_damaged_log_exits_with_the_corrupt_log_code(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    good = b'{"type": "user", "content": "a"}\n' * 3
    assert run_cli("append", "s", cwd=tmp_path, stdin=good).returncode == 0
    path = tmp_path / ".airsspec" / "contexts" / "agent" / "s.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[1] = b"{not json".ljust(len(lines[1]))
    path.write_bytes(b"\n".join(lines))
    result = run_cli("replay", "s", cwd=tmp_path)
    assert result.returncode == eventlog.errors.CorruptLogError.exit_code == 1
    assert result.stderr.startswith(b"airsspec: error: ") and b"seq 2" in result.stderr


def test_a_library_warning_is_one_prefixed_line_on_the_command_lines_stderr(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from airsspec.cli import _show_warnings

    monkeypatch.setattr(logging.root, "handlers", [])  # as in a command: nothing configured
    _show_warnings()
    _show_warnings()  # installed once, however often main runs
    logging.getLogger("projections.engine").warning("%s: damaged; rebuilding", "hot")
    assert capsys.readouterr().err == "airsspec: warning: hot: damaged; rebuilding\n"
    logging.root.handlers.append(logging.NullHandler())  # a server configured its own logging
    logging.getLogger("airsspec.memory").warning("quiet here")
    assert capsys.readouterr().err == ""


def test_library_code_never_prints_the_command_lines_warning_prefix() -> None:
    offenders = [
        str(path.relative_to(REPO))
        for name in PACKAGES
        for path in (REPO / name).rglob("*.py")
        if "airsspec: warning" in path.read_text(encoding="utf-8") and path.parent.name != "cli"
    ]
    assert not offenders


class _Model(BaseModel):
    outer: dict[str, int]


def test_a_validation_error_names_its_field_the_same_way_everywhere() -> None:
    with pytest.raises(ValidationError) as caught:
        _Model.model_validate({"outer": {"n": "x"}})
    assert eventlog.errors.field_of(caught.value.errors()[0]) == "outer.n"
    assert eventlog.errors.validation_problem(caught.value).startswith("field 'outer.n': ")
    with pytest.raises(ValidationError) as whole:
        _Model.model_validate(3)
    assert eventlog.errors.field_of(whole.value.errors()[0], "line") == "line"
