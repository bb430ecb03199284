"""The compactor: keeps a session inside its token budget by summarising the oldest part of its
hot window and recording the result in the log as an event."""
