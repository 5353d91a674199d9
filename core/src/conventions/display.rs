//! How the detail page shows one header value: decoded when we know how, labelled with the
//! encoding, and never guessed beyond what the name and length support.

use serde::{Deserialize, Serialize};

use super::value::{attempts, float64_be, int32_be, int64_be, iso_ms, java_bigint};

/// One header value as shown on the detail page.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HeaderDisplay {
    /// The value as text; `None` for null values and for `binary` (the UI shows hex then).
    /// Timestamps in epoch ms render as `1718000000123 (2024-06-10T06:13:20.123Z)`.
    pub decoded: Option<String>,
    /// One of `"null"`, `"utf8"`, `"int32-be"`, `"int64-be"`, `"bigint"` (Java
    /// `BigInteger.toByteArray()`), `"int8"`, `"float64-be"`, `"binary"`.
    pub encoding: &'static str,
    /// True when `decoded` is only the beginning of the value (see [`describe_header_within`]).
    #[serde(default)]
    pub cut: bool,
}

/// What a header name is known to carry in binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binary {
    Int32,
    Int64,
    /// int64, epoch ms.
    Int64Time,
    /// Java BigInteger, epoch ms.
    BigIntTime,
    /// 4-byte int, or 1 byte in older Spring releases.
    Attempts,
    /// IEEE 754 double.
    Float64,
}

/// Header names known to carry an 8-byte IEEE double. Empty: no framework in the conventions
/// doc has a fixed name for one (Camel writes any `Double` as 8-byte IEEE under a name the user
/// chose). Add a name here only with its source; unknown 8-byte values stay `binary`.
const FLOAT64_NAMES: &[&str] = &[];

/// Binary header names, from Spring Kafka (DLPR `kafka_dlt-*`, `@RetryableTopic`
/// `kafka_original-*` and `retry_topic-*`, `kafka_deliveryAttempt`) and the Spring Cloud Stream
/// binder (`x-original-*`), plus [`FLOAT64_NAMES`].
fn binary_kind(name: &str) -> Option<Binary> {
    let original = ["kafka_dlt-original-", "kafka_original-", "x-original-"]
        .iter()
        .find_map(|p| name.strip_prefix(p));
    match original {
        Some("partition") => return Some(Binary::Int32),
        Some("offset") => return Some(Binary::Int64),
        Some("timestamp") => return Some(Binary::Int64Time),
        _ => {}
    }
    match name {
        "retry_topic-original-timestamp" | "retry_topic-backoff-timestamp" => {
            Some(Binary::BigIntTime)
        }
        "retry_topic-attempts" => Some(Binary::Attempts),
        "kafka_deliveryAttempt" => Some(Binary::Int32),
        _ if FLOAT64_NAMES.contains(&name) => Some(Binary::Float64),
        _ => None,
    }
}

fn time(ms: i64) -> String {
    match iso_ms(ms) {
        Some(iso) => format!("{ms} ({iso})"),
        None => ms.to_string(),
    }
}

/// Decodes by name when the length fits what the name carries; `None` otherwise.
fn decode_binary(kind: Binary, b: &[u8]) -> Option<HeaderDisplay> {
    let (decoded, encoding) = match (kind, b.len()) {
        (Binary::Int32, 4) => (int32_be(b)?.to_string(), "int32-be"),
        (Binary::Int64, 8) => (int64_be(b)?.to_string(), "int64-be"),
        (Binary::Int64Time, 8) => (time(int64_be(b)?), "int64-be"),
        (Binary::BigIntTime, 1..=8) => (time(java_bigint(b)?), "bigint"),
        (Binary::Attempts, 1) => (attempts(b)?.to_string(), "int8"),
        (Binary::Attempts, 4) => (attempts(b)?.to_string(), "int32-be"),
        (Binary::Float64, 8) => (float64_be(b)?.to_string(), "float64-be"),
        _ => return None,
    };
    Some(HeaderDisplay {
        decoded: Some(decoded),
        encoding,
        cut: false,
    })
}

/// Describes a header value for display. `value` is `None` for a null-valued header.
///
/// Names known to carry binary (Spring's `*-original-partition` as int32, `*-original-offset`
/// and `*-original-timestamp` as int64, `retry_topic-*-timestamp` as BigInteger, ...) are
/// decoded when the length matches. Otherwise valid UTF-8 without control characters (other
/// than `\n`, `\r`, `\t`) is `utf8`, and anything else is `binary` with `decoded: None`.
pub fn describe_header(name: &str, value: Option<&[u8]>) -> HeaderDisplay {
    describe_header_within(name, value, usize::MAX)
}

/// [`describe_header`], with a `utf8` value's text cut to at most `max_bytes` bytes (on a
/// character boundary, `cut` set), so that describing a large header copies no more of it
/// than a page shows. The encoding is still decided on the whole value.
pub fn describe_header_within(name: &str, value: Option<&[u8]>, max_bytes: usize) -> HeaderDisplay {
    let Some(b) = value else {
        return HeaderDisplay {
            decoded: None,
            encoding: "null",
            cut: false,
        };
    };
    if let Some(d) = binary_kind(name).and_then(|k| decode_binary(k, b)) {
        return d;
    }
    match std::str::from_utf8(b) {
        Ok(s)
            if !s
                .chars()
                .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')) =>
        {
            let mut end = s.len().min(max_bytes);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            HeaderDisplay {
                decoded: Some(s[..end].to_string()),
                encoding: "utf8",
                cut: end < s.len(),
            }
        }
        _ => HeaderDisplay {
            decoded: None,
            encoding: "binary",
            cut: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::tests::hex;
    use super::*;

    fn d(name: &str, v: &[u8]) -> (Option<String>, &'static str) {
        let x = describe_header(name, Some(v));
        (x.decoded, x.encoding)
    }

    #[test]
    fn spring_binary_by_name() {
        assert_eq!(
            d("kafka_dlt-original-partition", &hex("00000003")),
            (Some("3".into()), "int32-be")
        );
        assert_eq!(
            d("kafka_dlt-original-offset", &hex("000000000000002a")),
            (Some("42".into()), "int64-be")
        );
        assert_eq!(
            d("kafka_dlt-original-timestamp", &hex("0000019000c79c7b")),
            (
                Some("1718000000123 (2024-06-10T06:13:20.123Z)".into()),
                "int64-be"
            )
        );
        assert_eq!(
            d("x-original-partition", &hex("00000003")),
            (Some("3".into()), "int32-be")
        );
        assert_eq!(
            d("kafka_original-timestamp", &hex("0000019000c79c7b")).1,
            "int64-be"
        );
    }

    #[test]
    fn retry_topic() {
        assert_eq!(
            d("retry_topic-original-timestamp", &hex("019000c79c7b")),
            (
                Some("1718000000123 (2024-06-10T06:13:20.123Z)".into()),
                "bigint"
            )
        );
        assert_eq!(
            d("retry_topic-attempts", &hex("00000002")),
            (Some("2".into()), "int32-be")
        );
        assert_eq!(
            d("retry_topic-attempts", &hex("02")),
            (Some("2".into()), "int8")
        );
    }

    #[test]
    fn text_null_and_binary() {
        assert_eq!(
            describe_header("x", None),
            HeaderDisplay {
                decoded: None,
                encoding: "null",
                cut: false,
            }
        );
        assert_eq!(
            d("__connect.errors.partition", &hex("33")),
            (Some("3".into()), "utf8")
        );
        assert_eq!(d("trace", b"a\r\n\tb"), (Some("a\r\n\tb".into()), "utf8"));
        assert_eq!(d("empty", b""), (Some(String::new()), "utf8"));
        assert_eq!(d("trace-id", &[0xc3, 0x28]), (None, "binary"));
        assert_eq!(d("nul", b"a\0b"), (None, "binary"));
        // A known name with an unexpected length is not forced: text stays text.
        assert_eq!(
            d("kafka_dlt-original-partition", b"3"),
            (Some("3".into()), "utf8")
        );
        // Unknown 8-byte values are not guessed to be numbers or doubles.
        assert_eq!(
            d("camel-double", &hex("4036000000000000")),
            (None, "binary")
        );
        assert_eq!(
            decode_binary(Binary::Float64, &hex("4036000000000000")),
            Some(HeaderDisplay {
                decoded: Some("22".into()),
                encoding: "float64-be",
                cut: false,
            })
        );
    }

    #[test]
    fn large_text_is_cut_on_a_character_boundary() {
        let big = "é".repeat(1_000_000);
        let x = describe_header_within("x-error", Some(big.as_bytes()), 5);
        assert_eq!(
            (x.decoded.as_deref(), x.encoding, x.cut),
            (Some("éé"), "utf8", true)
        );
        let x = describe_header_within("x", Some(b"abc"), 3);
        assert_eq!((x.decoded.as_deref(), x.cut), (Some("abc"), false));
        // The encoding is decided on the whole value: a NUL past the cap still makes it binary.
        let x = describe_header_within("x", Some(b"abcdef\0"), 3);
        assert_eq!((x.decoded, x.encoding), (None, "binary"));
    }
}
