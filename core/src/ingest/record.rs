//! Turning a consumed Kafka message into a [`NewDeadLetter`]: the bytes exactly as received,
//! then the convention decoder and the error fingerprint.

use std::ffi::CStr;

use rdkafka::message::{BorrowedMessage, Message};

use crate::conventions;
use crate::fingerprint::fingerprint;
use crate::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord};

/// Copies a consumed message into a [`RawRecord`] byte for byte: a null key or value stays
/// `None` (distinct from empty), headers keep their order, duplicates and null values.
///
/// The second value lists problems with the record itself (today: a header name that is not
/// UTF-8), to be added to the decode warnings.
pub(crate) fn raw_record(msg: &BorrowedMessage<'_>) -> (RawRecord, Vec<String>) {
    let (headers, warnings) = headers(msg);
    let record = RawRecord {
        dlq_topic: msg.topic().to_string(),
        dlq_partition: msg.partition(),
        dlq_offset: msg.offset(),
        // Kafka uses -1 for "no timestamp"; rdkafka maps that to NotAvailable.
        timestamp_ms: msg.timestamp().to_millis(),
        key: msg.key().map(<[u8]>::to_vec),
        value: msg.payload().map(<[u8]>::to_vec),
        headers,
    };
    (record, warnings)
}

/// Reads the headers through librdkafka directly rather than `Headers::get`: rdkafka's
/// accessor `unwrap`s the header name as UTF-8 and would panic on a hostile record. Kafka's
/// protocol says names are UTF-8, so a name that is not is stored lossily (U+FFFD) and flagged.
fn headers(msg: &BorrowedMessage<'_>) -> (Vec<Header>, Vec<String>) {
    use rdkafka::bindings as rd;
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let mut hdrs: *mut rd::rd_kafka_headers_t = std::ptr::null_mut();
    // SAFETY: `msg.ptr()` is a live message owned by the consumer for the lifetime of `msg`;
    // the headers pointer it yields is owned by the message and only read here.
    let err = unsafe { rd::rd_kafka_message_headers(msg.ptr(), &mut hdrs) };
    if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || hdrs.is_null() {
        // RD_KAFKA_RESP_ERR__NOENT: the record has no headers.
        return (out, warnings);
    }
    // SAFETY: `hdrs` is non-null and valid while `msg` lives.
    let count = unsafe { rd::rd_kafka_header_cnt(hdrs) };
    out.reserve(count);
    for idx in 0..count {
        let mut name: *const std::os::raw::c_char = std::ptr::null();
        let mut value: *const std::os::raw::c_void = std::ptr::null();
        let mut size: usize = 0;
        // SAFETY: idx < count; the out-pointers are valid locals. librdkafka returns a
        // NUL-terminated name and a value pointer that is NULL for a null-valued header.
        let err =
            unsafe { rd::rd_kafka_header_get_all(hdrs, idx, &mut name, &mut value, &mut size) };
        if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
            warnings.push(format!("header #{idx} could not be read from the record"));
            continue;
        }
        // SAFETY: non-null, NUL-terminated, owned by the message.
        let name_bytes = unsafe { CStr::from_ptr(name) }.to_bytes();
        let name = match std::str::from_utf8(name_bytes) {
            Ok(s) => s.to_string(),
            Err(_) => {
                warnings.push(format!("header #{idx} has a name that is not UTF-8"));
                String::from_utf8_lossy(name_bytes).into_owned()
            }
        };
        let value = if value.is_null() {
            None
        } else {
            // SAFETY: `value` points at `size` bytes owned by the message.
            Some(unsafe { std::slice::from_raw_parts(value as *const u8, size) }.to_vec())
        };
        out.push(Header { name, value });
    }
    (out, warnings)
}

/// Decodes and fingerprints a raw record. Never fails: whatever the decoder cannot make sense
/// of stays empty (and is flagged in `decode_warnings`), and the record is stored anyway.
///
/// `dead_lettered_at_ms` is the convention's `failed_at` if any, else the record timestamp,
/// else `now_ms`; `ingested_at_ms` is `now_ms`.
pub(crate) fn new_dead_letter(
    record: RawRecord,
    extra_warnings: Vec<String>,
    now_ms: i64,
) -> NewDeadLetter {
    // The decoder is written never to panic; if a hostile record still finds a way, the record
    // is stored undecoded and flagged, rather than taking ingest down with it (a record that
    // stops ingest on every restart would block its partition for good).
    let decoded = std::panic::catch_unwind(|| {
        let (convention, normalized) = conventions::decode(&record);
        let fp = fingerprint(
            normalized.error_class.as_deref(),
            normalized.error_message.as_deref(),
        );
        (convention, normalized, fp)
    });
    let (convention, mut normalized, fp) = match decoded {
        Ok(d) => d,
        Err(_) => {
            tracing::error!(
                topic = %record.dlq_topic,
                partition = record.dlq_partition,
                offset = record.dlq_offset,
                "the convention decoder panicked; storing the record undecoded"
            );
            let normalized = Normalized {
                decode_warnings: vec!["the convention decoder failed on this record".into()],
                ..Normalized::default()
            };
            (Convention::Unknown, normalized, fingerprint(None, None))
        }
    };
    normalized.decode_warnings.extend(extra_warnings);
    let dead_lettered_at_ms = normalized
        .failed_at_ms
        .or(record.timestamp_ms.filter(|t| *t >= 0))
        .unwrap_or(now_ms);
    NewDeadLetter {
        record,
        convention,
        normalized,
        fingerprint: fp,
        dead_lettered_at_ms,
        ingested_at_ms: now_ms,
    }
}

pub(crate) use crate::clock::now_ms;

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(ts: Option<i64>) -> RawRecord {
        RawRecord {
            dlq_topic: "t".into(),
            dlq_partition: 0,
            dlq_offset: 7,
            timestamp_ms: ts,
            key: None,
            value: None,
            headers: vec![],
        }
    }

    #[test]
    fn dead_lettered_at_falls_back_to_timestamp_then_now() {
        assert_eq!(
            new_dead_letter(raw(Some(5)), vec![], 99).dead_lettered_at_ms,
            5
        );
        assert_eq!(
            new_dead_letter(raw(None), vec![], 99).dead_lettered_at_ms,
            99
        );
        assert_eq!(
            new_dead_letter(raw(Some(-1)), vec![], 99).dead_lettered_at_ms,
            99
        );
        assert_eq!(new_dead_letter(raw(None), vec![], 99).ingested_at_ms, 99);
    }

    #[test]
    fn extra_warnings_are_kept() {
        let d = new_dead_letter(raw(None), vec!["odd".into()], 1);
        assert!(d.normalized.decode_warnings.iter().any(|w| w == "odd"));
    }
}
