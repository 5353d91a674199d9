//! Byte decoders for header values, and [`Fields`]: a view over a record's headers that looks
//! values up by name, decodes them, and collects decode warnings instead of failing.
//!
//! Why this shape: frameworks disagree on how a number is written (Spring writes big-endian
//! binary, Connect writes decimal text), names repeat (Spring appends per hop, SmallRye prepends),
//! and nothing guarantees UTF-8. Every decoder here is total: bad bytes become a warning.

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};

use crate::model::Header;

/// Big-endian int32 from exactly 4 bytes.
pub(crate) fn int32_be(b: &[u8]) -> Option<i32> {
    <[u8; 4]>::try_from(b).ok().map(i32::from_be_bytes)
}

/// Big-endian int64 from exactly 8 bytes.
pub(crate) fn int64_be(b: &[u8]) -> Option<i64> {
    <[u8; 8]>::try_from(b).ok().map(i64::from_be_bytes)
}

/// IEEE 754 double, big-endian, from exactly 8 bytes (Camel's header serializer).
pub(crate) fn float64_be(b: &[u8]) -> Option<f64> {
    <[u8; 8]>::try_from(b).ok().map(f64::from_be_bytes)
}

/// Decimal text: optional leading `-`, ASCII digits, surrounding ASCII whitespace tolerated.
/// `None` for anything else, including numbers that overflow i64.
pub(crate) fn decimal_text(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?.trim();
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Java `BigInteger.toByteArray()`: big-endian two's complement, minimal length (1..=8 bytes
/// fit an i64). Spring `@RetryableTopic` writes `retry_topic-*-timestamp` this way (6 bytes for
/// today's epoch ms).
pub(crate) fn java_bigint(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 8 {
        return None;
    }
    // Sign-extend from the first byte, then shift the rest in.
    let init: i64 = if b[0] & 0x80 != 0 { -1 } else { 0 };
    Some(b.iter().fold(init, |acc, &x| (acc << 8) | i64::from(x)))
}

/// Spring's `retry_topic-attempts`: 4-byte big-endian int (current), 1 byte (older releases).
pub(crate) fn attempts(b: &[u8]) -> Option<i32> {
    match b {
        [one] => Some(i32::from(*one)),
        _ => int32_be(b),
    }
}

/// UTF-8 text, or — when the bytes are not UTF-8 — a lossless escaped rendering (`Err`):
/// valid runs are kept, each invalid byte becomes `\xNN` and a backslash becomes `\\`, so the
/// original bytes can be recovered from the string.
pub(crate) fn utf8_lossless(b: &[u8]) -> Result<&str, String> {
    match std::str::from_utf8(b) {
        Ok(s) => Ok(s),
        Err(_) => {
            let mut out = String::with_capacity(b.len() + 16);
            for chunk in b.utf8_chunks() {
                for c in chunk.valid().chars() {
                    if c == '\\' {
                        out.push_str("\\\\");
                    } else {
                        out.push(c);
                    }
                }
                for x in chunk.invalid() {
                    out.push_str(&format!("\\x{x:02x}"));
                }
            }
            Err(out)
        }
    }
}

/// Epoch ms as RFC 3339 UTC with milliseconds (`2024-06-10T06:13:20.123Z`), if representable.
pub(crate) fn iso_ms(ms: i64) -> Option<String> {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|d| d.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// A point in time written as text, to epoch ms. Accepts RFC 3339 (`2026-12-01T06:00:00Z`,
/// also with a space for `T`), an ISO date-time without offset (Python's `utcnow().isoformat()`,
/// read as UTC), and epoch digits (below 10^11 read as seconds, otherwise ms).
pub(crate) fn parse_time_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(n) = decimal_text(s.as_bytes()) {
        // 10^11 s is the year 5138; 10^11 ms is 1973: no real timestamp is ambiguous.
        return if n.unsigned_abs() < 100_000_000_000 {
            n.checked_mul(1000)
        } else {
            Some(n)
        };
    }
    if let Ok(d) = DateTime::parse_from_rfc3339(s) {
        return Some(d.timestamp_millis());
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(d) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(d.and_utc().timestamp_millis());
        }
    }
    None
}

/// How a convention writes a number header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumEnc {
    /// Big-endian binary (Spring, Spring Cloud Stream): 4 bytes int32, 8 bytes int64.
    Binary,
    /// Decimal text (Connect, Streams, SmallRye, Karafka, KIP-1191, seed, ...).
    Text,
}

/// Which of several same-named headers holds the newest value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Newest {
    /// Appenders (Spring, Connect, most others): the last occurrence.
    Last,
    /// SmallRye writes its DLQ headers first and copies the old ones after.
    First,
}

/// A record's headers as one convention reads them: by name, newest occurrence, decoded,
/// with every problem written to `warnings`.
pub(crate) struct Fields<'a> {
    headers: &'a [Header],
    newest: Newest,
    pub(crate) warnings: Vec<String>,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(headers: &'a [Header], newest: Newest) -> Self {
        Fields {
            headers,
            newest,
            warnings: Vec::new(),
        }
    }

    /// True if any header has this name (whatever its value, null included).
    pub(crate) fn has(&self, name: &str) -> bool {
        has(self.headers, name)
    }

    /// The newest occurrence's value: `None` if absent or null-valued.
    pub(crate) fn raw(&self, name: &str) -> Option<&'a [u8]> {
        let mut it = self.headers.iter().filter(|h| h.name == name);
        let h = match self.newest {
            Newest::Last => it.next_back(),
            Newest::First => it.next(),
        }?;
        h.value.as_deref()
    }

    /// Text value; empty or all-whitespace counts as absent. Non-UTF-8 is kept in escaped form
    /// and warned about.
    pub(crate) fn text(&mut self, name: &str) -> Option<String> {
        let b = self.raw(name)?;
        let s = match utf8_lossless(b) {
            Ok(s) => s.to_string(),
            Err(escaped) => {
                self.warnings.push(format!(
                    "header `{name}` is not valid UTF-8; invalid bytes shown as \\xNN"
                ));
                escaped
            }
        };
        if s.trim().is_empty() {
            None
        } else {
            Some(s)
        }
    }

    /// The first of `names` that has a text value.
    pub(crate) fn text_any(&mut self, names: &[&str]) -> Option<String> {
        names.iter().find_map(|n| self.text(n))
    }

    /// A number, decoded by name (the convention's `enc`), then by length: for `Binary`, 4 or 8
    /// bytes are big-endian and decimal text is accepted as a fallback; for `Text`, decimal text
    /// comes first and 4 or 8 non-printable bytes are read as big-endian. Anything else is a
    /// warning.
    pub(crate) fn int(&mut self, name: &str, enc: NumEnc) -> Option<i64> {
        let b = self.raw(name)?;
        let binary = || match b.len() {
            4 => int32_be(b).map(i64::from),
            8 => int64_be(b),
            _ => None,
        };
        let v = match enc {
            NumEnc::Binary => binary().or_else(|| decimal_text(b)),
            // Printable ASCII that is not a number ("five") is bad text, not an int32.
            NumEnc::Text if b.iter().all(|c| c.is_ascii_graphic() || *c == b' ') => decimal_text(b),
            NumEnc::Text => decimal_text(b).or_else(binary),
        };
        if v.is_none() {
            self.warnings.push(format!(
                "header `{name}`: {} bytes are neither a 4/8-byte big-endian integer nor decimal text",
                b.len()
            ));
        }
        v
    }

    /// Like [`Fields::int`], narrowed to i32 (partitions, counts); out of range is a warning.
    pub(crate) fn int32(&mut self, name: &str, enc: NumEnc) -> Option<i32> {
        let v = self.int(name, enc)?;
        let n = i32::try_from(v).ok();
        if n.is_none() {
            self.warnings.push(format!(
                "header `{name}`: {v} does not fit a 32-bit integer"
            ));
        }
        n
    }

    /// Spring attempts: 1 or 4 bytes binary, or decimal text.
    pub(crate) fn attempts(&mut self, name: &str) -> Option<i32> {
        let b = self.raw(name)?;
        let v = attempts(b).or_else(|| decimal_text(b).and_then(|n| i32::try_from(n).ok()));
        if v.is_none() {
            self.warnings.push(format!(
                "header `{name}`: {} bytes are not a 1- or 4-byte attempt count",
                b.len()
            ));
        }
        v
    }

    /// Java BigInteger (1..=8 bytes); longer ASCII decimal text is accepted too.
    pub(crate) fn bigint(&mut self, name: &str) -> Option<i64> {
        let b = self.raw(name)?;
        let v = java_bigint(b).or_else(|| decimal_text(b));
        if v.is_none() {
            self.warnings.push(format!(
                "header `{name}`: {} bytes are not a Java BigInteger that fits 64 bits",
                b.len()
            ));
        }
        v
    }

    /// A point in time as text (see [`parse_time_ms`]), to epoch ms.
    pub(crate) fn time_ms(&mut self, name: &str) -> Option<i64> {
        let s = self.text(name)?;
        let v = parse_time_ms(&s);
        if v.is_none() {
            self.warnings.push(format!(
                "header `{name}`: `{}` is not an RFC 3339 time or epoch number",
                s.chars().take(64).collect::<String>()
            ));
        }
        v
    }
}

/// True if any header has this name.
pub(crate) fn has(headers: &[Header], name: &str) -> bool {
    headers.iter().any(|h| h.name == name)
}

/// True if any header name starts with `prefix`.
pub(crate) fn has_prefix(headers: &[Header], prefix: &str) -> bool {
    headers.iter().any(|h| h.name.starts_with(prefix))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Hex fixture (the "Header value examples" of `docs/conventions.md`) to bytes.
    pub(crate) fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    pub(crate) fn h(name: &str, value: &[u8]) -> Header {
        Header {
            name: name.into(),
            value: Some(value.to_vec()),
        }
    }

    pub(crate) fn record(
        headers: Vec<Header>,
        timestamp_ms: Option<i64>,
    ) -> crate::model::RawRecord {
        crate::model::RawRecord {
            dlq_topic: "dlq".into(),
            dlq_partition: 0,
            dlq_offset: 0,
            timestamp_ms,
            key: None,
            value: None,
            headers,
        }
    }

    pub(crate) fn null(name: &str) -> Header {
        Header {
            name: name.into(),
            value: None,
        }
    }

    #[test]
    fn fixtures_decode() {
        assert_eq!(int32_be(&hex("00000003")), Some(3));
        assert_eq!(int64_be(&hex("000000000000002a")), Some(42));
        assert_eq!(int64_be(&hex("0000019000c79c7b")), Some(1_718_000_000_123));
        assert_eq!(attempts(&hex("00000002")), Some(2));
        assert_eq!(attempts(&hex("02")), Some(2));
        assert_eq!(java_bigint(&hex("019000c79c7b")), Some(1_718_000_000_123));
        assert_eq!(decimal_text(&hex("33")), Some(3));
        assert_eq!(decimal_text(&hex("3432")), Some(42));
        assert_eq!(float64_be(&hex("4036000000000000")), Some(22.0));
    }

    #[test]
    fn bigint_is_twos_complement() {
        assert_eq!(java_bigint(&[0xff]), Some(-1));
        assert_eq!(java_bigint(&[0x00, 0x80]), Some(128));
        assert_eq!(java_bigint(&[0x80]), Some(-128));
        assert_eq!(java_bigint(&[]), None);
        assert_eq!(java_bigint(&[1; 9]), None);
    }

    #[test]
    fn decimal_text_is_strict() {
        assert_eq!(decimal_text(b"-17"), Some(-17));
        assert_eq!(decimal_text(b" 5\n"), Some(5));
        assert_eq!(decimal_text(b"+5"), None);
        assert_eq!(decimal_text(b"-"), None);
        assert_eq!(decimal_text(b"1e3"), None);
        assert_eq!(decimal_text(b"99999999999999999999"), None);
    }

    #[test]
    fn utf8_fallback_is_lossless_and_labelled() {
        assert_eq!(utf8_lossless(b"ok"), Ok("ok"));
        assert_eq!(
            utf8_lossless(&[b'a', 0xc3, 0x28, b'\\']),
            Err("a\\xc3(\\\\".to_string())
        );
    }

    #[test]
    fn times() {
        assert_eq!(
            parse_time_ms("2026-12-01T06:00:00Z"),
            Some(1_796_104_800_000)
        );
        assert_eq!(
            parse_time_ms("2026-12-01T07:00:00+01:00"),
            Some(1_796_104_800_000)
        );
        assert_eq!(
            parse_time_ms("2026-12-01T06:00:00.5"),
            Some(1_796_104_800_500)
        );
        assert_eq!(
            parse_time_ms("2026-12-01 06:00:00"),
            Some(1_796_104_800_000)
        );
        assert_eq!(parse_time_ms("1796104800"), Some(1_796_104_800_000));
        assert_eq!(parse_time_ms("1796104800000"), Some(1_796_104_800_000));
        assert_eq!(parse_time_ms("yesterday"), None);
        assert_eq!(parse_time_ms("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(iso_ms(i64::MIN), None);
        assert_eq!(
            iso_ms(1_718_000_000_123).as_deref(),
            Some("2024-06-10T06:13:20.123Z")
        );
    }

    #[test]
    fn numbers_by_name_then_length() {
        let hs = [
            h("bin4", &3i32.to_be_bytes()),
            h("bin8", &42i64.to_be_bytes()),
            h("text4", b"1234"),
            h("five", b"five"),
            h("odd", &[1, 2, 3]),
            null("nul"),
            h("big", &(1i64 << 40).to_be_bytes()),
        ];
        let mut f = Fields::new(&hs, Newest::Last);
        assert_eq!(f.int("bin4", NumEnc::Binary), Some(3));
        assert_eq!(f.int("bin8", NumEnc::Binary), Some(42));
        assert_eq!(f.int("bin4", NumEnc::Text), Some(3));
        // "1234" is 4 bytes: text conventions read it as text, binary ones as int32.
        assert_eq!(f.int("text4", NumEnc::Text), Some(1234));
        assert_eq!(f.int("text4", NumEnc::Binary), Some(0x3132_3334));
        assert!(f.warnings.is_empty());
        assert_eq!(f.int("nul", NumEnc::Text), None);
        assert_eq!(f.int("missing", NumEnc::Text), None);
        assert!(f.warnings.is_empty(), "null and absent are not problems");
        assert_eq!(f.int("odd", NumEnc::Binary), None);
        assert_eq!(f.int("five", NumEnc::Text), None);
        f.warnings.pop();
        assert_eq!(f.int32("big", NumEnc::Binary), None);
        assert_eq!(f.warnings.len(), 2);
    }

    #[test]
    fn newest_occurrence() {
        let hs = [h("a", b"old"), h("a", b"new")];
        assert_eq!(
            Fields::new(&hs, Newest::Last).text("a").as_deref(),
            Some("new")
        );
        assert_eq!(
            Fields::new(&hs, Newest::First).text("a").as_deref(),
            Some("old")
        );
    }
}
