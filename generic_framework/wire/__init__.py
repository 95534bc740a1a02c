"""The wire layer: everything that speaks Z.AI's REST API and nothing above it.

- :mod:`~generic_framework.wire.client`: :class:`GLMClient`, the only place that sends requests
  to Z.AI's REST API (MCP servers are reached through the ``mcp`` SDK's own client, in
  :mod:`~generic_framework.mcp_tools.sdk`); :mod:`~generic_framework.wire.direct` (the senders
  it chooses from once: straight to its own transport, or a borrowed client's ``send``) and
  :mod:`~generic_framework.wire.responses` (bodies into wire models, statuses into errors).
- :mod:`~generic_framework.wire.messages`: pydantic wire types (requests, completions, chunks).
- :mod:`~generic_framework.wire.sse`: the incremental SSE decoder and the stream assembler.
- :mod:`~generic_framework.wire.retry`: the tenacity policy (what retries, for how long).
- :mod:`~generic_framework.wire.pool`: the sharded connection pool.
- :mod:`~generic_framework.wire.errors`: the error tree every failure is translated into.

Nothing here imports the persona layer, the mock or the service.
"""
