//! The ingest alert kinds (`ingest_stalled`, `ingest_lag`) through the real binary.
