//! Per-key order: which records must go out one after another, and in what order
//! (`docs/replay.md`, "Per-key order"). The store keeps the rule (`store/order.rs`: only a
//! key group's head is claimable); this module says what a group and a place are.
//!
//! - **Group**: records of one job with the same target topic and the same key bytes. Two
//!   records with the same key going to different topics land in different partitions
//!   anyway, so they need no order between them. A null key is in no group.
//! - **Place**: the record's original offset in its source partition, as the convention
//!   decoded it (`source_offset`, `core/src/conventions`): a consumer read the records of a
//!   key in that order. A record without one (a convention that records no offset) comes
//!   after every record of its group that has one, in ingest order (the dead letter's id,
//!   which follows the DLQ offsets within a DLQ partition). Equal places go by outbox id.

use sha2::{Digest, Sha256};

/// Offset added to a dead letter's id to place a record without a source offset after the
/// records with one (source offsets stay far below 2^62).
pub(crate) const NO_SOURCE_OFFSET_BASE: i64 = 1 << 62;

/// The key group of a record published to `topic` with key `key`: the first 8 bytes of
/// SHA-256(topic, 0x00, key), big-endian, as an i64 (`outbox.order_key`). Stable across
/// versions and processes (a job outlives a relay). Two groups sharing a hash (about 1 in
/// 10^8 for a million keys) only wait for each other: order is never broken by it.
pub(crate) fn order_key(topic: &str, key: &[u8]) -> i64 {
    let mut h = Sha256::new();
    h.update(topic.as_bytes());
    h.update([0u8]);
    h.update(key);
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    i64::from_be_bytes(b)
}

/// A record's place in its group (`outbox.order_pos`): its source offset when the convention
/// decoded one, else [`NO_SOURCE_OFFSET_BASE`] + its dead letter's id.
pub(crate) fn order_pos(source_offset: Option<i64>, dead_letter_id: i64) -> i64 {
    match source_offset {
        Some(o) if (0..NO_SOURCE_OFFSET_BASE).contains(&o) => o,
        _ => NO_SOURCE_OFFSET_BASE.saturating_add(dead_letter_id.max(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_the_topic_and_the_key() {
        assert_eq!(order_key("orders", b"k1"), order_key("orders", b"k1"));
        assert_ne!(order_key("orders", b"k1"), order_key("orders", b"k2"));
        assert_ne!(order_key("orders", b"k1"), order_key("payments", b"k1"));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(order_key("ab", b"c"), order_key("a", b"bc"));
    }

    #[test]
    fn records_without_a_source_offset_come_after_in_ingest_order() {
        assert_eq!(order_pos(Some(7), 100), 7);
        assert!(order_pos(None, 1) > order_pos(Some(1_000_000_000), 2));
        assert!(order_pos(None, 1) < order_pos(None, 2));
        assert_eq!(order_pos(Some(-1), 5), NO_SOURCE_OFFSET_BASE + 5);
    }
}
