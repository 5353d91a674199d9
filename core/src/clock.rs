//! Wall-clock time as redrive stores it.

/// Milliseconds since the Unix epoch (UTC), now; 0 if the system clock reads before 1970.
/// Every `*_ms` timestamp column and field of redrive is in this unit.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
