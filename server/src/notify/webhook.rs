//! The generic webhook: POST of the `redrive.alert.v1` document exactly as stored, signed.
//!
//! Headers (`docs/alerts.md`, "Verifying a webhook"):
//! - `X-Redrive-Signature-256: sha256=<hex>`: HMAC-SHA256 (RFC 2104) keyed with the notifier's
//!   `secret`, over the exact body bytes, lower-case hex — the format GitHub webhooks use, so
//!   existing verifiers work;
//! - `X-Redrive-Event: fired|resolved|test`, `X-Redrive-Event-Id`, `X-Redrive-Delivery`
//!   (the delivery id: the same on every retry of one delivery).

use hmac::{Hmac, Mac};
use redrive_core::alerts::payload::AlertPayload;
use redrive_core::alerts::NotifierConfig;
use sha2::Sha256;

use super::{post, SendError};

/// Name of the signature header.
pub const SIGNATURE_HEADER: &str = "X-Redrive-Signature-256";

/// `sha256=` and the lower-case hex HMAC-SHA256 of `body` keyed with `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    // HMAC accepts keys of any length (RFC 2104 §2); `new_from_slice` cannot fail for it.
    let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Sends `body` (the stored document) to the webhook.
pub async fn send(
    client: &reqwest::Client,
    notifier: &NotifierConfig,
    body: &str,
    payload: &AlertPayload,
    delivery_id: i64,
) -> Result<(), SendError> {
    let headers = [
        (
            SIGNATURE_HEADER,
            signature(notifier.secret.as_bytes(), body.as_bytes()),
        ),
        ("X-Redrive-Event", payload.event.as_str().to_string()),
        ("X-Redrive-Event-Id", payload.event_id.to_string()),
        ("X-Redrive-Delivery", delivery_id.to_string()),
    ];
    post(client, &notifier.url, body.as_bytes().to_vec(), &headers).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_rfc_4231_test_case_2() {
        // RFC 4231 §4.3: key "Jefe", data "what do ya want for nothing?".
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
