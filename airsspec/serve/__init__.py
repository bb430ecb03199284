"""``airsspec serve``: one warm process per workspace for agents, hooks and people.

It holds one ``Memory`` (the log writer, the tiers, the embedder) for its whole life, drives the
daemon's policies in the background (``core``), and offers the memory over HTTP: the JSON API
under ``/v1`` with its OpenAPI document (``api``, generated from ``ops``), MCP over streamable
HTTP at ``/mcp`` (``airsspec.mcp_server``, the same operations), and a web viewer at ``/``
(``viewer``). Every request but liveness carries a token (``tokens``) whose user decides what
the request may read and write. Everything goes through ``Memory``.
"""
