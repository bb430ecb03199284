"""The compactor: keeps a session inside its token budget by summarising the oldest part of its
hot window and recording the result in the log as an event."""

AIRSSPEC_LAYER = True  # lets `import airsspec` tell this package from a namesake on the index
