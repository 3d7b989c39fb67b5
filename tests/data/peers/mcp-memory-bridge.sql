-- mcp-memory-bridge's memory.db, as its server creates it.
-- Source: github.com/yashyegare/mcp-memory-bridge, server/memory_server.py (function _db),
-- commit cb945443d56c9cba7938d74498b95a8906c2f93b; the peer is on no package registry,
-- so its own code cannot create the file here. Read there, not changed: the tests build
-- real databases with exactly these statements.
CREATE TABLE IF NOT EXISTS facts (
    key           TEXT PRIMARY KEY,
    value         TEXT NOT NULL,
    source_client TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS events (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    client_id TEXT NOT NULL,
    action    TEXT NOT NULL,   -- 'set' | 'get' | 'delete'
    key       TEXT,
    value     TEXT
);
