//! A record's headers prepared for the header table: at most [`HEADERS_SHOWN`] rows, each
//! name, decoded value and raw hex cut at its cap, hidden characters shown as markers.

use redrive_core::Header;
use serde::{Deserialize, Serialize};

use super::caps::{HEADERS_SHOWN, HEADER_HEX_BYTES, HEADER_NAME_BYTES, HEADER_VALUE_BYTES};
use super::payload::hex_bytes;
use super::visible::{shown, Lines, Shown};

/// The header table's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderRows {
    /// The first headers, in record order (duplicates kept).
    pub rows: Vec<HeaderRow>,
    /// How many headers the record has (more than `rows.len()` when the table is cut).
    pub total: usize,
}

/// One header as the table shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderRow {
    /// The name, within [`HEADER_NAME_BYTES`]; line breaks shown as markers.
    pub name: Shown,
    pub value: HeaderValue,
    /// How it was decoded (`utf8`, `int32-be`, ..., see `redrive_core::conventions`).
    pub encoding: String,
    /// The first [`HEADER_HEX_BYTES`] bytes of the value as hex (empty for null).
    pub raw_hex: String,
    /// Size of the value in bytes (0 for null).
    pub len: usize,
}

/// A header value as the table shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HeaderValue {
    /// A null-valued header (distinct from empty).
    Null,
    /// Zero bytes.
    Empty,
    /// Text or a decoded number, within [`HEADER_VALUE_BYTES`].
    Decoded(Shown),
    /// Bytes with no reading: the raw hex is all there is.
    Binary,
}

impl HeaderRows {
    /// Prepares `headers` for display; reads no header past the first [`HEADERS_SHOWN`].
    pub fn new(headers: &[Header]) -> HeaderRows {
        HeaderRows {
            rows: headers.iter().take(HEADERS_SHOWN).map(row).collect(),
            total: headers.len(),
        }
    }

    /// True when some headers are not in `rows`.
    pub fn is_cut(&self) -> bool {
        self.total > self.rows.len()
    }
}

fn row(h: &Header) -> HeaderRow {
    let value = h.value.as_deref();
    let d = redrive_core::conventions::describe_header_within(&h.name, value, HEADER_VALUE_BYTES);
    let shown_value = match (value, d.decoded) {
        (None, _) => HeaderValue::Null,
        (Some([]), _) => HeaderValue::Empty,
        (Some(_), Some(text)) => {
            let mut s = shown(&text, HEADER_VALUE_BYTES, Lines::Keep);
            s.cut |= d.cut;
            HeaderValue::Decoded(s)
        }
        (Some(_), None) => HeaderValue::Binary,
    };
    HeaderRow {
        name: shown(&h.name, HEADER_NAME_BYTES, Lines::Mark),
        value: shown_value,
        encoding: d.encoding.to_string(),
        raw_hex: value
            .map(|v| hex_bytes(&v[..v.len().min(HEADER_HEX_BYTES)]))
            .unwrap_or_default(),
        len: value.map_or(0, <[u8]>::len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, value: Option<&[u8]>) -> Header {
        Header {
            name: name.into(),
            value: value.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn rows_in_order_with_null_empty_decoded_and_binary() {
        let rows = HeaderRows::new(&[
            header("kafka_dlt-original-partition", Some(&[0, 0, 0, 3])),
            header("nothing", None),
            header("empty", Some(b"")),
            header("trace-id", Some(&[0xc3, 0x28])),
            header("x-user\u{202E}", Some("adm\u{2066}in".as_bytes())),
        ]);
        assert_eq!(rows.total, 5);
        assert!(!rows.is_cut());
        let r = &rows.rows;
        assert_eq!(
            r[0].value,
            HeaderValue::Decoded(Shown {
                text: "3".into(),
                cut: false
            })
        );
        assert_eq!(
            (r[0].encoding.as_str(), r[0].raw_hex.as_str()),
            ("int32-be", "00 00 00 03")
        );
        assert_eq!((&r[1].value, r[1].len), (&HeaderValue::Null, 0));
        assert_eq!(r[2].value, HeaderValue::Empty);
        assert_eq!(
            (&r[3].value, r[3].raw_hex.as_str()),
            (&HeaderValue::Binary, "c3 28")
        );
        assert_eq!(r[4].name.text, "x-user⟨U+202E⟩");
        assert_eq!(
            r[4].value,
            HeaderValue::Decoded(Shown {
                text: "adm⟨U+2066⟩in".into(),
                cut: false
            })
        );
    }

    #[test]
    fn huge_counts_names_and_values_stay_within_the_caps() {
        let many: Vec<Header> = (0..10_000).map(|_| header("h", Some(b"v"))).collect();
        let rows = HeaderRows::new(&many);
        assert_eq!((rows.rows.len(), rows.total), (HEADERS_SHOWN, 10_000));
        assert!(rows.is_cut());
        let big = vec![b'v'; 64 * 1024];
        let name = "n".repeat(64 * 1024);
        let headers: Vec<Header> = (0..300).map(|_| header(&name, Some(&big))).collect();
        let rows = HeaderRows::new(&headers);
        assert_eq!(rows.rows.len(), HEADERS_SHOWN);
        for r in &rows.rows {
            assert!(r.name.cut && r.name.text.len() <= HEADER_NAME_BYTES);
            assert!(
                matches!(&r.value, HeaderValue::Decoded(s) if s.cut && s.text.len() <= HEADER_VALUE_BYTES)
            );
            assert_eq!(r.raw_hex.len(), HEADER_HEX_BYTES * 3 - 1);
            assert_eq!(r.len, 64 * 1024);
        }
        // Markers count towards the cap.
        let bidi = "\u{202E}".repeat(10_000);
        let rows = HeaderRows::new(&[header(&bidi, Some(bidi.as_bytes()))]);
        assert!(rows.rows[0].name.text.len() <= HEADER_NAME_BYTES);
        assert!(
            matches!(&rows.rows[0].value, HeaderValue::Decoded(s) if s.cut && s.text.len() <= HEADER_VALUE_BYTES)
        );
    }
}
