//! The Schema Registry wire format: how a serializer that uses a Confluent-compatible Schema
//! Registry frames a record's key or value.
//!
//! ```text
//! byte 0      magic byte, always 0x00
//! bytes 1..5  schema id, a 32-bit big-endian integer (the registry's global id)
//! bytes 5..   the payload: Avro binary encoding of one datum, JSON text (JSON Schema), or,
//!             for Protobuf, the message indexes (below) followed by the message's bytes
//! ```
//!
//! Protobuf message indexes say which message of the schema's `.proto` file the payload is: a
//! count, then that many indexes (the first into the file's top-level messages, each next one
//! into the previous message's nested messages), every number a zig-zag varint (Avro's
//! `long` encoding). The common case, the file's first message, is the single byte `0x00`
//! (count 0, meaning `[0]`).
//!
//! Source: Confluent's documentation of the Schema Registry wire format ("Wire format",
//! Schema Registry serdes overview) and its serializers' code (`AbstractKafkaSchemaSerDe`,
//! `MessageIndexes` in the Protobuf serializer); the Apicurio Registry serdes in Confluent
//! compatibility mode write the same bytes. See `docs/payloads.md`.

/// The first byte of a record in the wire format.
pub const MAGIC_BYTE: u8 = 0;
/// Bytes before the payload: the magic byte and the 4-byte schema id.
pub const HEADER_BYTES: usize = 5;
/// Most message indexes read (nesting depth of the named message); more is malformed.
pub const MAX_MESSAGE_INDEXES: usize = 64;

/// A record's bytes split at the wire-format header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framed<'a> {
    /// The registry's schema id (bytes 1..5, big-endian).
    pub schema_id: u32,
    /// Everything after the header.
    pub payload: &'a [u8],
}

/// `bytes` as a wire-format record: the magic byte, a schema id and at least one payload byte
/// (an empty payload is not a serialized Avro or Protobuf value anyone writes with a registry;
/// a 5-byte value is more likely something else). `None` when `bytes` does not start so.
pub fn split(bytes: &[u8]) -> Option<Framed<'_>> {
    if bytes.len() <= HEADER_BYTES || bytes[0] != MAGIC_BYTE {
        return None;
    }
    let schema_id = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
    Some(Framed {
        schema_id,
        payload: &bytes[HEADER_BYTES..],
    })
}

/// Reads one zig-zag varint (at most 10 bytes) from the start of `bytes`: the value and the
/// bytes it took. `None` when `bytes` ends first or the varint is longer than 64 bits.
fn zigzag_varint(bytes: &[u8]) -> Option<(i64, usize)> {
    let mut raw: u64 = 0;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let value = ((raw >> 1) as i64) ^ -((raw & 1) as i64);
            return Some((value, i + 1));
        }
    }
    None
}

/// The Protobuf message indexes at the start of a wire-format payload, and the message bytes
/// after them. A count of 0 means `[0]` (the file's first message).
///
/// # Errors
/// A message naming why the indexes are malformed: truncated varint, negative count or index,
/// or more than [`MAX_MESSAGE_INDEXES`] of them.
pub fn message_indexes(payload: &[u8]) -> Result<(Vec<usize>, &[u8]), String> {
    let (count, mut at) =
        zigzag_varint(payload).ok_or("the message-index count is truncated".to_string())?;
    if count < 0 || count as u64 > MAX_MESSAGE_INDEXES as u64 {
        return Err(format!("message-index count {count} is out of range"));
    }
    if count == 0 {
        return Ok((vec![0], &payload[at..]));
    }
    let mut indexes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (index, len) =
            zigzag_varint(&payload[at..]).ok_or("a message index is truncated".to_string())?;
        if index < 0 || index > i64::from(i32::MAX) {
            return Err(format!("message index {index} is out of range"));
        }
        indexes.push(index as usize);
        at += len;
    }
    Ok((indexes, &payload[at..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_header() {
        let bytes = [0u8, 0, 0, 1, 0x2c, 0x02, 0x61];
        let f = split(&bytes).unwrap();
        assert_eq!(f.schema_id, 300);
        assert_eq!(f.payload, &[0x02, 0x61]);
        assert_eq!(
            split(&[0, 0x7f, 0xff, 0xff, 0xff, 9]).unwrap().schema_id,
            i32::MAX as u32
        );
    }

    #[test]
    fn other_bytes_are_not_framed() {
        assert_eq!(split(b""), None);
        assert_eq!(split(b"{\"a\":1}"), None);
        assert_eq!(split(&[1, 0, 0, 0, 1, 2]), None, "magic byte must be 0");
        assert_eq!(split(&[0, 0, 0, 0, 1]), None, "header without payload");
    }

    #[test]
    fn message_indexes_follow_confluent() {
        // A single 0: count 0, the first message.
        assert_eq!(
            message_indexes(&[0, 8, 1]).unwrap(),
            (vec![0], &[8u8, 1][..])
        );
        // Count 1 (zig-zag 2), index 1 (zig-zag 2): the second top-level message.
        assert_eq!(message_indexes(&[2, 2, 8]).unwrap(), (vec![1], &[8u8][..]));
        // Count 2 (4), indexes 0 (0) and 3 (6): the fourth message nested in the first.
        assert_eq!(message_indexes(&[4, 0, 6]).unwrap(), (vec![0, 3], &[][..]));
        // Index 64 is zig-zag 128, a two-byte varint 0x80 0x01.
        assert_eq!(message_indexes(&[2, 0x80, 0x01]).unwrap().0, vec![64]);
    }

    #[test]
    fn malformed_message_indexes_are_refused() {
        assert!(message_indexes(&[]).is_err());
        assert!(message_indexes(&[1]).is_err(), "count -1");
        assert!(message_indexes(&[2]).is_err(), "count 1 with no index");
        assert!(message_indexes(&[2, 1]).is_err(), "index -1");
        assert!(message_indexes(&[0x80, 0x80]).is_err(), "truncated varint");
        assert!(
            message_indexes(&[0xff, 0x01]).is_err(),
            "count 128 is too many"
        );
    }
}
