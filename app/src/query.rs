//! The page URL's query string, read and written by hand.
//!
//! The router's own `ParamsMap` percent-decodes values twice and keeps only the last of a
//! repeated name, while [`redrive_core::ListQuery::from_pairs`] must see exactly what the user
//! sent (a repeated parameter is an error there). So pages read the raw query string
//! (`use_location().search`) and decode it here, the same way on the server and in the browser
//! (`application/x-www-form-urlencoded`, what a GET `<form>` produces).

/// Decodes a raw query string (with or without the leading `?`) into ordered name/value pairs.
/// `+` is a space; a malformed `%` escape is kept literally rather than refused, so that the
/// filter parser, not this function, decides what is wrong with a value.
pub fn parse(raw: &str) -> Vec<(String, String)> {
    raw.trim_start_matches('?')
        .split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            (decode(name), decode(value))
        })
        .collect()
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes one component (`+` means space); invalid UTF-8 is replaced, not refused.
pub fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                match (
                    bytes.get(i + 1).copied().and_then(hex_val),
                    bytes.get(i + 2).copied().and_then(hex_val),
                ) {
                    (Some(h), Some(l)) => {
                        out.push(h * 16 + l);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes one component for a URL query (everything but unreserved characters).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Builds `path?name=value&...` from pairs, leaving out empty values (a GET form sends every
/// field, and an empty one means "not set"; only spaces count as empty: a stored topic of
/// `"\n"` is a value). Values are percent-encoded byte for byte, so a link carries exactly
/// the stored value however it is shown.
pub fn href<'a>(path: &str, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let query: Vec<String> = pairs
        .into_iter()
        .filter(|(_, v)| !v.trim_matches(' ').is_empty())
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

/// The filter parameters of `pairs` (position parameters `cursor` and `limit` dropped), for
/// links that keep the current filter: "Newest", the group links, the other page.
pub fn filter_only(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .filter(|(k, _)| redrive_core::filter::FILTER_PARAMS.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// The last value of `name` in `pairs`, or `""`.
pub fn value<'a>(pairs: &'a [(String, String)], name: &str) -> &'a str {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Links keep every part of the filter, `tier` and `came_back` included, and drop the
    /// position.
    #[test]
    fn filter_only_keeps_the_whole_filter() {
        let pairs = parse("?tier=poison&came_back=true&q=x&cursor=abc&limit=10");
        assert_eq!(
            filter_only(&pairs),
            vec![("tier", "poison"), ("came_back", "true"), ("q", "x")]
        );
    }

    #[test]
    fn decodes_what_a_get_form_sends() {
        let pairs = parse("?q=Payment+4712%20declined&status=&from=2026-12-01T06%3A00&x");
        assert_eq!(
            pairs,
            vec![
                ("q".into(), "Payment 4712 declined".into()),
                ("status".into(), "".into()),
                ("from".into(), "2026-12-01T06:00".into()),
                ("x".into(), "".into()),
            ]
        );
    }

    #[test]
    fn keeps_repeats_and_bad_escapes_for_the_filter_parser() {
        let pairs = parse("q=a&q=b&r=100%&s=%zz&t=%4");
        assert_eq!(pairs.len(), 5);
        assert_eq!(pairs[2].1, "100%");
        assert_eq!(pairs[3].1, "%zz");
        assert_eq!(pairs[4].1, "%4");
    }

    #[test]
    fn decodes_once_only() {
        assert_eq!(decode("%2541"), "%41");
        assert_eq!(decode("%C3%A9"), "é");
    }

    #[test]
    fn href_round_trips_and_skips_empty() {
        let link = href(
            "/",
            [("q", "a&b=c +"), ("status", ""), ("source_topic", "ö")],
        );
        assert_eq!(link, "/?q=a%26b%3Dc%20%2B&source_topic=%C3%B6");
        let back = parse(link.trim_start_matches('/'));
        assert_eq!(back[0].1, "a&b=c +");
        assert_eq!(back[1].1, "ö");
        assert_eq!(href("/groups", []), "/groups");
    }

    #[test]
    fn filter_only_drops_position() {
        let pairs = parse("q=x&cursor=abc&limit=10&status=new");
        assert_eq!(filter_only(&pairs), vec![("q", "x"), ("status", "new")]);
        assert_eq!(value(&pairs, "limit"), "10");
        assert_eq!(value(&pairs, "nope"), "");
    }
}
