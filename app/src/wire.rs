//! How page data travels inside the server-rendered HTML for hydration.
//!
//! Leptos embeds each resolved resource in an inline `<script>` as JSON (with `<` escaped).
//! That is inert, but it still puts stored text — possibly hostile markup from a dead letter —
//! verbatim into script source. Encoding it as base64 of the JSON keeps every byte of stored
//! data out of script text altogether, at a size cost that gzip mostly absorbs.

use base64::Engine;
use leptos::prelude::*;
use leptos::server::codee::{Decoder, Encoder};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Resource codec: JSON, then URL-safe base64 (no padding).
pub struct Base64Json;

impl<T: Serialize> Encoder<T> for Base64Json {
    type Error = serde_json::Error;
    type Encoded = String;

    fn encode(val: &T) -> Result<String, Self::Error> {
        let json = serde_json::to_vec(val)?;
        Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json))
    }
}

impl<T: DeserializeOwned> Decoder<T> for Base64Json {
    type Error = String;
    type Encoded = str;

    fn decode(val: &str) -> Result<T, Self::Error> {
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(val.trim_matches('"'))
            .map_err(|e| e.to_string())?;
        serde_json::from_slice(&json).map_err(|e| e.to_string())
    }
}

/// A resource (see [`Resource::new`]) whose hydration data is [`Base64Json`].
pub fn resource<S, T, Fut>(
    source: impl Fn() -> S + Send + Sync + 'static,
    fetcher: impl Fn(S) -> Fut + Send + Sync + 'static,
) -> Resource<T, Base64Json>
where
    S: PartialEq + Clone + Send + Sync + 'static,
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    Resource::new_with_options(source, fetcher, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_without_markup() {
        let v = vec!["<script>alert(1)</script>".to_string()];
        let enc = <Base64Json as Encoder<Vec<String>>>::encode(&v).expect("encode");
        assert!(!enc.contains('<') && !enc.contains("script"));
        let back: Vec<String> = <Base64Json as Decoder<Vec<String>>>::decode(&enc).expect("decode");
        assert_eq!(back, v);
    }
}
