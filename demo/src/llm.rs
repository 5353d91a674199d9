//! The simulated LLM the agent calls: it takes a while to answer, and sometimes it times out,
//! answers with something unusable, or rate-limits; during an outage it refuses connections.
//! Every call runs under a real `tokio::time::timeout`, as a real client's would.

use std::time::Duration;

use crate::rng::Rng;

/// Why a call failed. All of these are transient: the agent retries them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// No answer within the client timeout.
    #[error("LLM call timed out after {0} ms")]
    Timeout(u64),
    /// An answer came back but is not a usable completion.
    #[error("invalid LLM response: {0}")]
    InvalidResponse(String),
    /// The service asked us to slow down.
    #[error("LLM rate limit: HTTP 429 Too Many Requests (retry-after {0} s)")]
    RateLimited(u64),
    /// The service is down (the outage window).
    #[error("LLM unavailable: connection refused by llm.internal:443 (outage)")]
    Unavailable,
    /// The circuit breaker did not let the call out. (The message is the same every time, so
    /// these dead letters group together in redrive.)
    #[error("circuit breaker open after repeated LLM failures: call not attempted")]
    CircuitOpen,
}

impl LlmError {
    /// The `error_class` header value: one class per way of failing, so redrive groups them.
    pub fn class(&self) -> &'static str {
        match self {
            LlmError::Timeout(_) => "LlmTimeoutError",
            LlmError::InvalidResponse(_) => "InvalidLlmResponseError",
            LlmError::RateLimited(_) => "LlmRateLimitError",
            LlmError::Unavailable => "LlmUnavailableError",
            LlmError::CircuitOpen => "CircuitOpenError",
        }
    }
}

/// Simulated LLM client.
#[derive(Debug, Clone, Copy)]
pub struct SimulatedLlm {
    /// Typical answer time, ms; each call takes 0.5×–1.5× this.
    pub latency_ms: u64,
    /// Client timeout, ms.
    pub timeout_ms: u64,
    /// Fraction of calls (outside an outage) that fail, split evenly between timeouts,
    /// invalid responses and rate limits.
    pub failure_ratio: f64,
}

/// What the simulated call does, drawn before it starts.
enum Behaviour {
    Answer(u64),
    Hang,
    Garbage(u64),
    RateLimit(u64),
}

impl SimulatedLlm {
    /// Asks `question`; `outage` says whether the service is down right now.
    pub async fn ask(&self, question: &str, outage: bool, rng: &Rng) -> Result<String, LlmError> {
        if outage {
            // A refused connection fails fast.
            tokio::time::sleep(Duration::from_millis(5)).await;
            return Err(LlmError::Unavailable);
        }
        let latency = ((self.latency_ms as f64) * (0.5 + rng.unit())).round() as u64;
        let behaviour = if rng.chance(self.failure_ratio) {
            match rng.below(3) {
                0 => Behaviour::Hang,
                1 => Behaviour::Garbage(latency),
                _ => Behaviour::RateLimit(latency / 4),
            }
        } else {
            Behaviour::Answer(latency)
        };
        let call = async {
            match behaviour {
                Behaviour::Answer(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(format!(
                        "{question} A simulated answer from demo-llm-1 ({} tokens, {ms} ms).",
                        20 + question.len()
                    ))
                }
                Behaviour::Hang => {
                    // Longer than any timeout: the client gives up first.
                    tokio::time::sleep(Duration::from_millis(self.timeout_ms.saturating_mul(4)))
                        .await;
                    Err(LlmError::Timeout(self.timeout_ms))
                }
                Behaviour::Garbage(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Err(LlmError::InvalidResponse(
                        "expected a completion with one choice, got {\"choices\":[]}".into(),
                    ))
                }
                Behaviour::RateLimit(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Err(LlmError::RateLimited(2))
                }
            }
        };
        match tokio::time::timeout(Duration::from_millis(self.timeout_ms), call).await {
            Ok(result) => result,
            Err(_) => Err(LlmError::Timeout(self.timeout_ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_fail_and_time_out_as_configured() {
        let rng = Rng::new(Some(5));
        let ok = SimulatedLlm {
            latency_ms: 2,
            timeout_ms: 50,
            failure_ratio: 0.0,
        };
        assert!(ok.ask("What is X?", false, &rng).await.is_ok());
        assert_eq!(
            ok.ask("What is X?", true, &rng).await,
            Err(LlmError::Unavailable)
        );
        let bad = SimulatedLlm {
            failure_ratio: 1.0,
            ..ok
        };
        let mut classes = std::collections::BTreeSet::new();
        for _ in 0..30 {
            let e = bad.ask("What is X?", false, &rng).await.unwrap_err();
            classes.insert(e.class());
        }
        assert_eq!(
            classes.into_iter().collect::<Vec<_>>(),
            [
                "InvalidLlmResponseError",
                "LlmRateLimitError",
                "LlmTimeoutError"
            ]
        );
    }
}
