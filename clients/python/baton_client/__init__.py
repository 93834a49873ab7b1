"""A small, typed, standard-library-only client for baton.

``Client(url, api_key).run(code, tools={...})`` starts the code, answers every
pause by calling your Python functions (plain or ``async``; the calls of one
pause run concurrently), posts the results with the continuation token, and
returns the end: output, error, files. A continuation whose reply is lost
(a dropped connection, a timeout, a restarted server) is sent again with the
same token and results: baton answers a repeated continuation with the answer
the first one led to, so a tool never runs twice for one call.

``with client.session() as s: s.run(code)`` runs cells in one durable
namespace (a Python session): names, functions, imports and files carry
over from cell to cell, across restarts of the server.
"""

from .client import (
    BatonError,
    CellTag,
    Client,
    Execution,
    Paused,
    Session,
    ToolCall,
    tool_definition,
)

__all__ = ["BatonError", "CellTag", "Client", "Execution", "Paused", "Session", "ToolCall",
           "tool_definition"]
