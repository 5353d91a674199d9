//! Header conventions of the frameworks that write dead letters (stub).

use crate::model::{Convention, Normalized, RawRecord};

/// Recognises the record's convention and normalises its metadata. Never fails.
pub fn decode(record: &RawRecord) -> (Convention, Normalized) {
    let _ = record;
    (Convention::Unknown, Normalized::default())
}
