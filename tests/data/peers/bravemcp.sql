-- BraveMCP's storage/brave-mcp.db, as its MCP server's migrations create it (migrations
-- 1 "initial_schema" and 2 "fts5_setup", and the schema_migrations table of runMigrations).
-- Source: github.com/glatinone/BraveMCP, mcp-server/src/storage/database.ts,
-- commit 316961a5423853e136f5bd79a2d2183eae73472b (the file last changed in
-- fd131769e45b6c127b172ebd64b2593045e28be0); the peer is on no package registry, so its
-- own code cannot create the file here. Read there, not changed: the tests build real
-- databases with exactly these statements.
CREATE TABLE IF NOT EXISTS schema_migrations (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  executed_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS pages (
  id TEXT PRIMARY KEY,
  url TEXT NOT NULL,
  title TEXT,
  content TEXT,
  summary TEXT,
  domain TEXT,
  created_at INTEGER,
  last_visited INTEGER,
  visit_count INTEGER DEFAULT 1
);

CREATE TABLE IF NOT EXISTS bookmarks (
  id TEXT PRIMARY KEY,
  url TEXT NOT NULL,
  title TEXT,
  folder TEXT,
  created_at INTEGER
);

CREATE TABLE IF NOT EXISTS highlights (
  id TEXT PRIMARY KEY,
  page_id TEXT,
  text TEXT NOT NULL,
  note TEXT,
  created_at INTEGER,
  FOREIGN KEY (page_id) REFERENCES pages(id)
);

CREATE TABLE IF NOT EXISTS notes (
  id TEXT PRIMARY KEY,
  content TEXT NOT NULL,
  source_url TEXT,
  created_at INTEGER
);

CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY,
  name TEXT,
  urls TEXT,  -- JSON array
  created_at INTEGER,
  ended_at INTEGER
);

-- Create FTS5 virtual table for searching memory
CREATE VIRTUAL TABLE IF NOT EXISTS search_index USING fts5(
  source_id,
  source_type, -- 'page' or 'note' or 'highlight'
  title,
  summary,
  content
);
