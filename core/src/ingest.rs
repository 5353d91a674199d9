//! Ingest (stub).
