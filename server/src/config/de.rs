//! Lenient deserializers: the same setting arrives as TOML (typed), as an environment string
//! or as a flag.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};

use serde::Deserializer;

/// A scalar (string, number or bool) as text: TOML `group_id = 42` is the group "42".
struct Scalar;

impl<'de> Visitor<'de> for Scalar {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
    fn visit_char<E: de::Error>(self, v: char) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }
}

pub(super) fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    d.deserialize_any(Scalar)
}

struct ScalarSeed;

impl<'de> de::DeserializeSeed<'de> for ScalarSeed {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(Scalar)
    }
}

/// `"a,b"` (environment, flags) or `["a", "b"]` (TOML). Entries are trimmed; empty ones
/// dropped, so a trailing comma is harmless.
pub(super) fn topics<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct Topics;
    impl<'de> Visitor<'de> for Topics {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a comma-separated string or a list of topic names and patterns")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<String>, E> {
            Ok(v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut out = Vec::new();
            while let Some(s) = seq.next_element_seed(ScalarSeed)? {
                let s = s.trim();
                if !s.is_empty() {
                    out.push(s.to_string());
                }
            }
            Ok(out)
        }
    }
    d.deserialize_any(Topics)
}

/// A table of librdkafka properties. TOML's dotted keys (`security.protocol = "SSL"`)
/// arrive as nested tables and are flattened back into dotted names; values become text.
pub(super) fn properties<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    d.deserialize_any(Props)
}

/// One value in the property table: text, or a nested table (already flattened).
enum Node {
    Leaf(String),
    Table(BTreeMap<String, String>),
}

impl<'de> serde::Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        struct NodeVisitor;
        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, number, boolean or table")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
                Scalar.visit_str(v).map(Node::Leaf)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
                Scalar.visit_bool(v).map(Node::Leaf)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
                Scalar.visit_i64(v).map(Node::Leaf)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
                Scalar.visit_u64(v).map(Node::Leaf)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
                Scalar.visit_f64(v).map(Node::Leaf)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Node, A::Error> {
                Props.visit_map(map).map(Node::Table)
            }
        }
        d.deserialize_any(NodeVisitor)
    }
}

struct Props;
impl<'de> Visitor<'de> for Props {
    type Value = BTreeMap<String, String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a table of librdkafka properties")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            match map.next_value::<Node>()? {
                Node::Leaf(v) => {
                    out.insert(key, v);
                }
                Node::Table(inner) => {
                    for (k, v) in inner {
                        out.insert(format!("{key}.{k}"), v);
                    }
                }
            }
        }
        Ok(out)
    }
}
