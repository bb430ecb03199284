"""The classes derived from the catalog are written out (``eventlog/schema/records.py``) so a
type checker sees them; the file must be what the catalog emits now, and importing the schema
must build no pydantic model (issue 46: validators are built on first use)."""

from __future__ import annotations

import subprocess
import sys

from eventlog.schema import CATALOG, INPUT_TYPES, RECORD_TYPES, records
from eventlog.schema.emit import TARGET, emit, main
from tests.conftest import REPO


def test_the_emitted_records_are_what_the_catalog_emits_now() -> None:
    assert TARGET.read_text(encoding="utf-8") == emit(), (
        "eventlog/schema/records.py is stale: run python -m eventlog.schema.emit"
    )
    assert main(["--check"]) == 0


def test_the_registries_hold_the_emitted_classes() -> None:
    assert len(records.__all__) == 2 * len(CATALOG)
    for name in CATALOG:
        assert INPUT_TYPES[name].__module__ == RECORD_TYPES[name].__module__ == records.__name__


def test_a_type_not_yet_emitted_is_named_by_the_check(tmp_path, capsys, monkeypatch) -> None:
    stale = tmp_path / "records.py"
    stale.write_text(emit().replace("class UserEvent", "class OldUserEvent"), encoding="utf-8")
    monkeypatch.setattr("eventlog.schema.emit.TARGET", stale)
    assert main(["--check"]) == 1
    assert "run: python -m eventlog.schema.emit" in capsys.readouterr().err
    assert main([]) == 0 and stale.read_text(encoding="utf-8") == emit()


COUNT_BUILT = """
import sys
import {module}
from pydantic import BaseModel

def every(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from every(sub)

models = set(every(BaseModel))
built = sorted(m.__name__ for m in models if m.__dict__.get("__pydantic_complete__"))
emitted = [m for m in models if m.__module__ == "eventlog.schema.records"]
print(len(models), len(emitted), built)
"""


def test_importing_the_schema_builds_no_model_until_one_validates() -> None:
    out = subprocess.run(
        [sys.executable, "-c", COUNT_BUILT.format(module="eventlog.schema")],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    defined, emitted, built = out.split(" ", 2)
    assert int(defined) >= len(CATALOG), out  # the walk saw the catalog's declarations
    assert built.strip() == "[]", (
        f"the schema built at import: {built} (declare a type's fields on catalog.Fields)"
    )
    assert emitted == "0", out  # the derived classes are made on first use


NO_PYDANTIC = """
import sys
import eventlog.log, eventlog.jsonl_input, eventlog.render
from eventlog.jsonl_input import parse_event_lines
from eventlog.log import EventLog
with EventLog(sys.argv[1]) as log:
    events = parse_event_lines(b'{"type": "user", "content": "hi"}\\n', "in.jsonl")
    log.append_many("s1", [*events, {"type": "action", "tool": "t", "params": {"a": 1}}])
print(sorted(m for m in sys.modules if m.split(".")[0] == "pydantic"))
"""


def test_the_log_appends_plainly_valid_events_without_importing_pydantic(tmp_path) -> None:
    """Importing the log, its reader of JSONL input and its renderer (``printable``), and an
    append of plainly valid events (the emitted plain checks, ``eventlog.fast_input``), load
    no pydantic module (issue 46)."""
    out = subprocess.run(
        [sys.executable, "-c", NO_PYDANTIC, str(tmp_path / "log")],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    assert out.strip() == "[]"


def test_an_emitted_class_is_made_once_on_first_use_and_pickles() -> None:
    """A derived class is made when first named, by the emitted module, once: the registry,
    the package and the module give the same class, and an instance pickles by its name."""
    import pickle

    from eventlog import schema

    assert schema.UserRecord is records.UserRecord is RECORD_TYPES["user"]
    assert schema.LearningEvent is INPUT_TYPES["learning"]
    event = schema.UserEvent(content="hello")
    assert pickle.loads(pickle.dumps(event)) == event
    assert schema.UserEvent.__doc__ == "A ``user`` event as a caller appends it."


RACE = """
import sys, threading
sys.setswitchinterval(1e-6)
from eventlog.schema import RECORD_TYPES, records
first = records.UserRecord
late = records.__getattr__("UserRecord")  # a thread that missed the name before it was stored
barrier, seen = threading.Barrier(8), []
def use():
    barrier.wait()
    seen.append(RECORD_TYPES["learning"])
    seen.append(records.LearningRecord)
threads = [threading.Thread(target=use) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(late is first is records.UserRecord is RECORD_TYPES["user"], len(set(map(id, seen))))
"""


def test_threads_naming_a_class_first_at_once_get_one_class() -> None:
    """Two threads of a server naming a derived class before it is made each make one: the
    second must be given the first's (``isinstance`` against the other class fails), so a
    late maker returns the class stored, never replaces it."""
    out = subprocess.run(
        [sys.executable, "-c", RACE], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert out.split() == ["True", "1"], out
