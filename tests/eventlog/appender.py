"""Child process for crash and concurrency tests: appends in a loop and reports each
acknowledgement on stdout (``seq id``) only after ``append`` returned."""

from __future__ import annotations

import sys

from eventlog.log import EventLog


def main() -> None:
    log_dir, session, durability, writer, count, big_every = sys.argv[1:7]
    padding = "x" * 8_000_000  # big records make a SIGKILL mid-write (a torn tail) likely
    with EventLog(log_dir, durability=durability) as log:
        for i in range(int(count)):
            big = int(big_every) and i % int(big_every) == 0
            events = [
                {
                    "type": "user",
                    "content": padding if big else f"{writer}:{i}",
                    "meta": {"writer": writer, "i": i},
                }
            ]
            if i % 3 == 2:  # some atomic batches too
                events.append(
                    {
                        "type": "thought",
                        "content": f"{writer}:{i}:b",
                        "meta": {"writer": writer, "i": i},
                    }
                )
            records = log.append_many(session, events)
            for record in records:
                sys.stdout.write(f"{record.seq} {record.id}\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
