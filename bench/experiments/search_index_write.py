#!/usr/bin/env python3
"""What the search index (migration 0024) costs a write, per index setting (issue 12 item 4).

Writes N rows of searched text (`dead_letter_text`: a 60-byte message, a 1.5 KiB Spring stack
trace, a ~560-byte JSON order payload) in transactions of 500, as ingest does, and prints
rows/s and the store's size for each variant:

- SQLite (Python's stdlib `sqlite3`, WAL, synchronous=FULL): the table alone; FTS5 with the
  trigram tokenizer as migration 0024 creates it (`detail=full`); FTS5 `automerge` 0/8/16;
  `detail=column`; `detail=none`; `columnsize=0`.
- PostgreSQL (through `psql`, when `PG_URL` names a server where databases may be created):
  the table alone; pg_trgm GIN as migration 0024 creates it; `fastupdate=off`;
  `gin_pending_list_limit` 64 MiB; GiST.

Usage: `N=30000 PG_URL=postgres://postgres@127.0.0.1:55432/postgres python3 search_index_write.py`.
Figures and conclusions: `docs/bench.md`, "where ingest's time goes".
"""
import json
import os
import random
import sqlite3
import subprocess
import tempfile
import time

N = int(os.environ.get("N", "30000"))
BATCH = 500


def rows():
    rnd = random.Random(7)
    for i in range(N):
        msg = f"Listener failed; Timeout after {1000 + i % 7} ms for order {i}"
        stack = (
            "org.springframework.kafka.listener.ListenerExecutionFailedException: Listener failed\n"
            + "\tat com.example.orders.OrderListener.handle(OrderListener.java:42)\n" * 20
            + f"Caused by: java.util.concurrent.TimeoutException: Timeout after {1000 + i % 7} ms"
            + f" for order {i}\n\t... 12 more\n"
        )
        order = {
            "orderId": f"order-{i}",
            "customer": {
                "id": rnd.randint(1, 10**6),
                "name": rnd.choice(["Ann Lee", "Bo Chen", "Carla Diaz", "Dmitri Ivanov"]),
                "email": f"user{rnd.randint(1, 10**6)}@example.com",
            },
            "items": [
                {"sku": f"SKU-{rnd.randint(1000, 99999)}", "qty": rnd.randint(1, 5),
                 "price": round(rnd.random() * 100, 2)}
                for _ in range(8)
            ],
            "currency": "EUR",
            "createdAt": f"2026-12-0{1 + i % 3}T{rnd.randint(10, 23)}:{rnd.randint(10, 59)}:00Z",
        }
        yield (i + 1, msg, stack, json.dumps(order)[:1024])


DATA = list(rows())
FTS = ("CREATE VIRTUAL TABLE f USING fts5(message, stack_trace, payload, content='t', "
       "content_rowid='id', tokenize='trigram case_sensitive 0'{})")
SQLITE = {
    "table alone": (None, []),
    "FTS5 trigram (0024)": ("", []),
    "FTS5 automerge=0": ("", ["INSERT INTO f(f, rank) VALUES ('automerge', 0)"]),
    "FTS5 automerge=8": ("", ["INSERT INTO f(f, rank) VALUES ('automerge', 8)"]),
    "FTS5 automerge=16": ("", ["INSERT INTO f(f, rank) VALUES ('automerge', 16)"]),
    "FTS5 detail=column": (", detail=column", []),
    "FTS5 detail=none": (", detail=none", []),
    "FTS5 columnsize=0": (", columnsize=0", []),
}


def sqlite_variant(name, opts, setup, directory):
    path = os.path.join(directory, "v.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=FULL")
    c.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, message TEXT, stack_trace TEXT, payload TEXT)")
    if opts is not None:
        c.execute(FTS.format(opts))
        c.execute("CREATE TRIGGER ti AFTER INSERT ON t BEGIN INSERT INTO f (rowid, message, "
                  "stack_trace, payload) VALUES (NEW.id, NEW.message, NEW.stack_trace, NEW.payload); END")
        for s in setup:
            c.execute(s)
    t = time.time()
    for k in range(0, N, BATCH):
        c.execute("BEGIN")
        c.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", DATA[k:k + BATCH])
        c.execute("COMMIT")
    rate = N / (time.time() - t)
    size = sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))
    c.close()
    print(f"| SQLite {sqlite3.sqlite_version} | {name} | {rate:,.0f} rows/s | {size / 1e6:,.1f} MB |")


PG = {
    "table alone": None,
    "pg_trgm GIN (0024)": "CREATE INDEX ti ON t USING gin (message gin_trgm_ops, stack_trace gin_trgm_ops, payload gin_trgm_ops)",
    "GIN fastupdate=off": "CREATE INDEX ti ON t USING gin (message gin_trgm_ops, stack_trace gin_trgm_ops, payload gin_trgm_ops) WITH (fastupdate = off)",
    "GIN gin_pending_list_limit=64 MiB": "CREATE INDEX ti ON t USING gin (message gin_trgm_ops, stack_trace gin_trgm_ops, payload gin_trgm_ops) WITH (gin_pending_list_limit = 65536)",
    "pg_trgm GiST": "CREATE INDEX ti ON t USING gist (message gist_trgm_ops, stack_trace gist_trgm_ops, payload gist_trgm_ops)",
}


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def pg_variants(url, directory):
    script = os.path.join(directory, "ins.sql")
    with open(script, "w") as out:
        for k in range(0, N, BATCH):
            values = ",\n".join(f"({i}, {quote(m)}, {quote(s)}, {quote(p)})" for i, m, s, p in DATA[k:k + BATCH])
            out.write(f"BEGIN;\nINSERT INTO t VALUES {values};\nCOMMIT;\n")
    base, _, _ = url.rpartition("/")
    db = f"{base}/search_index_write"
    psql = ["psql", "-qX", "-v", "ON_ERROR_STOP=1"]
    version = subprocess.run(psql + ["-tA", url, "-c", "SHOW server_version"], capture_output=True, text=True).stdout.strip()
    fsync = subprocess.run(psql + ["-tA", url, "-c", "SHOW fsync"], capture_output=True, text=True).stdout.strip()
    for name, index in PG.items():
        subprocess.run(psql + [url, "-c", "DROP DATABASE IF EXISTS search_index_write", "-c", "CREATE DATABASE search_index_write"], check=True)
        setup = ["CREATE EXTENSION IF NOT EXISTS pg_trgm",
                 "CREATE TABLE t (id bigint PRIMARY KEY, message text, stack_trace text, payload text)"]
        if index:
            setup.append(index)
        for s in setup:
            subprocess.run(psql + [db, "-c", s], check=True)
        t = time.time()
        subprocess.run(psql + [db, "-f", script], check=True, stdout=subprocess.DEVNULL)
        rate = N / (time.time() - t)
        size = int(subprocess.run(psql + ["-tA", db, "-c", "SELECT pg_total_relation_size('t')"], capture_output=True, text=True).stdout)
        print(f"| PostgreSQL {version} (fsync={fsync}) | {name} | {rate:,.0f} rows/s | {size / 1e6:,.1f} MB |")
    subprocess.run(psql + [url, "-c", "DROP DATABASE IF EXISTS search_index_write"], check=True)


def main():
    payload = sum(len(r[3]) for r in DATA) / N
    print(f"{N} rows of searched text, {BATCH} per transaction; payload {payload:.0f} bytes on average")
    print("| database | variant | write rate | size |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as directory:
        for name, (opts, setup) in SQLITE.items():
            sqlite_variant(name, opts, setup, directory)
        if os.environ.get("PG_URL"):
            pg_variants(os.environ["PG_URL"], directory)


if __name__ == "__main__":
    main()
