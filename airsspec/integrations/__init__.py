"""Adapters that put airsspec memory behind the memory interfaces agent frameworks already use.

Each adapter is a door (it reaches the project only through ``airsspec.memory`` and
``airsspec.errors``), a module of its own imported by name, with its framework as an optional
extra: importing this package imports none of them (nor their frameworks), so ``import
airsspec`` stays light.

- ``airsspec.integrations.anthropic_memory``: Claude's memory tool (``memory_20250818``) over
  ``memory.files``, for the Anthropic SDK's tool runner (extra ``anthropic``).
- ``airsspec.integrations.messages_capture``: Messages API requests and responses, compaction
  blocks included, recorded as events and rebuilt exactly (extra ``anthropic``).
- ``airsspec.integrations.openai_agents``: ``AirsspecSession``, the OpenAI Agents SDK's
  ``Session`` (extra ``openai-agents``).
- ``airsspec.integrations.langgraph``: ``AirsspecStore`` and ``AirsspecSaver``, LangGraph's
  ``BaseStore`` and ``BaseCheckpointSaver`` (extra ``langgraph``).

Every write an adapter makes is an event of the log (``replay`` shows it, ``verify`` covers it)
and every read is a fold of those events, through the scope gate of the ``Memory`` given.
"""
