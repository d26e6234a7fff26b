"""The numbered schema migrations of plait's Postgres tables, applied by
:meth:`plait.backends.postgres_db.PostgresDatabase.setup` (which re-exports :data:`MIGRATIONS`)."""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

# Each entry is one migration; its number is its position + 1. Never edit a released entry,
# append a new one. "{s}" is the schema. No CREATE INDEX CONCURRENTLY (it cannot run in a
# transaction; the runner refuses it).
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE SEQUENCE {s}.plait_thread_writes;
    CREATE TABLE {s}.plait_threads (
        thread_id text COLLATE "C" PRIMARY KEY,
        version bigint NOT NULL,
        state text NOT NULL,
        write_token text NOT NULL,
        written bigint NOT NULL DEFAULT nextval('{s}.plait_thread_writes'),
        updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX plait_threads_by_recency ON {s}.plait_threads (written);
    CREATE TABLE {s}.plait_messages (
        thread_id text COLLATE "C" NOT NULL,
        seq integer NOT NULL,
        id text NOT NULL,
        json text NOT NULL,
        PRIMARY KEY (thread_id, seq)
    );
    CREATE TABLE {s}.plait_leases (
        thread_id text COLLATE "C" PRIMARY KEY,
        owner text NOT NULL,
        expires_at timestamptz NOT NULL
    );
    CREATE TABLE {s}.plait_blobs (
        path text COLLATE "C" PRIMARY KEY,
        content text,
        raw bytea,
        updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        CHECK ((content IS NULL) <> (raw IS NULL))
    );
    """,
    # 2: the trace store (plait.trace.postgres.PostgresTraceStore).
    """
    CREATE TABLE {s}.plait_trace_runs (
        id text COLLATE "C" PRIMARY KEY,
        thread_id text COLLATE "C" NOT NULL,
        agent text NOT NULL,
        started double precision NOT NULL,
        finished double precision,
        status text NOT NULL,
        error text,
        input text NOT NULL,
        output text
    );
    CREATE INDEX plait_trace_runs_by_start ON {s}.plait_trace_runs (started);
    CREATE TABLE {s}.plait_trace_spans (
        n bigserial,
        id text COLLATE "C" PRIMARY KEY,
        run_id text COLLATE "C" NOT NULL,
        kind text NOT NULL,
        name text NOT NULL,
        dispatch integer NOT NULL,
        started double precision NOT NULL,
        finished double precision NOT NULL,
        data text NOT NULL
    );
    CREATE INDEX plait_trace_spans_by_run ON {s}.plait_trace_spans (run_id, started, n);
    CREATE TABLE {s}.plait_trace_requests (
        span_id text COLLATE "C" PRIMARY KEY,
        thread_id text COLLATE "C" NOT NULL,
        seq integer NOT NULL,
        "full" boolean NOT NULL,
        removed text NOT NULL,
        added text NOT NULL,
        system_hash text NOT NULL,
        tools_hash text NOT NULL,
        base_prompt_hash text NOT NULL,
        UNIQUE (thread_id, seq)
    );
    CREATE TABLE {s}.plait_trace_messages (
        thread_id text COLLATE "C" NOT NULL,
        key text COLLATE "C" NOT NULL,
        role text NOT NULL,
        tokens integer NOT NULL,
        kind text NOT NULL,
        body text,
        PRIMARY KEY (thread_id, key)
    );
    CREATE TABLE {s}.plait_trace_blobs (hash text COLLATE "C" PRIMARY KEY, text text NOT NULL);
    """,
    # 3: message blobs (images, files) stored once, by address (plait.stores.postgres).
    """
    CREATE TABLE {s}.plait_message_blobs (
        sha256 text COLLATE "C" PRIMARY KEY,
        size bigint NOT NULL,
        data bytea NOT NULL
    );
    CREATE TABLE {s}.plait_thread_blobs (
        thread_id text COLLATE "C" NOT NULL,
        sha256 text COLLATE "C" NOT NULL,
        PRIMARY KEY (thread_id, sha256)
    );
    CREATE INDEX plait_thread_blobs_by_blob ON {s}.plait_thread_blobs (sha256);
    """,
    # 4: image and file bytes of the trace store, once per sha256 (plait.trace.parts).
    """
    CREATE TABLE {s}.plait_trace_binary (
        sha256 text COLLATE "C" PRIMARY KEY,
        media_type text NOT NULL,
        size bigint NOT NULL,
        data bytea
    );
    """,
)
