//! Alert configuration checks at start-up and `redrive config` redaction (`docs/alerts.md`).
