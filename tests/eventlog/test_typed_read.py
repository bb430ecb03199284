"""A short read validates each stored line by its own type's model (the union of the whole
catalog is built only for long reads): the records are the union's, line for line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from eventlog.log import EventLog
from eventlog.schema import validation
from tests.conftest import REPO

EVENTS = [
    {"type": "user", "content": 'quoted "type":"assistant" in the text'},
    {"type": "action", "tool": "grep", "params": {"type": "observation", "q": "x"}},
    {"type": "observation", "result": {"type": "user", "rows": [1, 2]}, "is_error": False},
    {"type": "assistant", "content": "done", "meta": {"type": "note"}},
]


def test_each_line_read_by_its_type_is_the_record_the_union_reads(tmp_path: Path) -> None:
    log = EventLog(tmp_path, durability="off")
    log.append_many("s", EVENTS)
    typed = validation._typed_validator(validation.SCHEMA)
    union = validation._record_adapter(validation.SCHEMA).validator.validate_json
    lines = [located.raw for located in log.read("s")]
    assert [typed(line) for line in lines] == [union(line) for line in lines]
    assert [type(typed(line)).__name__ for line in lines] == [
        "UserRecord",
        "ActionRecord",
        "ObservationRecord",
        "AssistantRecord",
    ]
    unknown = lines[0].replace(b'"type":"user"', b'"type":"from_the_future"')
    with pytest.raises(ValueError):  # the reader then keeps it as an UnknownRecord
        typed(unknown)
    assert type(validation.parse_record(unknown)).__name__ == "UnknownRecord"


def test_a_short_read_builds_no_union_of_the_catalog(tmp_path: Path) -> None:
    EventLog(tmp_path, durability="off").append_many("s", EVENTS)
    code = (
        "import sys; from eventlog.log import EventLog; from eventlog.schema import validation\n"
        "read = [r.record.type for r in EventLog(sys.argv[1]).read('s')]\n"
        "print(read, validation._record_adapter.cache_info().currsize)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO)},
        check=True,
    )
    assert done.stdout.split() == ["['user',", "'action',", "'observation',", "'assistant']", "0"]
