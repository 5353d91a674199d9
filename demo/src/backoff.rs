//! Exponential backoff with jitter for the retry topics: retry `n` (1-based) waits
//! `min(max, base · 2^(n-1))`, scaled by a random factor in `[1 - jitter, 1 + jitter]`.
//!
//! Jitter spreads the retries of messages that failed together (an outage) so they do not come
//! back as one burst. Keeping it below 1/3 keeps consecutive delays strictly growing until the
//! cap: the largest jittered delay of step `n` (`d(1 + j)`) stays under the smallest of step
//! `n + 1` (`2d(1 - j)`).

use crate::rng::Rng;

/// Backoff settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay before the first retry, ms.
    pub base_ms: u64,
    /// Cap on any one delay (before jitter), ms.
    pub max_ms: u64,
    /// Relative jitter, `0.0..1.0`: each delay is scaled by a factor in `[1 - j, 1 + j]`.
    pub jitter: f64,
}

impl Backoff {
    /// The un-jittered delay before retry `n` (1-based), ms.
    pub fn nominal_ms(&self, n: u32) -> u64 {
        let exp = n.saturating_sub(1).min(62);
        self.base_ms
            .saturating_mul(1u64 << exp)
            .min(self.max_ms.max(self.base_ms))
    }

    /// The delay before retry `n` (1-based) with jitter drawn from `rng`, ms.
    pub fn delay_ms(&self, n: u32, rng: &Rng) -> u64 {
        let j = self.jitter.clamp(0.0, 0.99);
        let factor = 1.0 + j * rng.signed_unit();
        (self.nominal_ms(n) as f64 * factor).round().max(0.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(jitter: f64) -> Backoff {
        Backoff {
            base_ms: 1000,
            max_ms: 5000,
            jitter,
        }
    }

    #[test]
    fn doubles_then_caps() {
        let b = b(0.0);
        let got: Vec<u64> = (1..=5).map(|n| b.nominal_ms(n)).collect();
        assert_eq!(got, [1000, 2000, 4000, 5000, 5000]);
        assert_eq!(
            b.nominal_ms(200),
            5000,
            "no overflow on absurd attempt numbers"
        );
    }

    #[test]
    fn jitter_stays_in_band_and_delays_grow() {
        let b = b(0.3);
        let rng = Rng::new(Some(3));
        for _ in 0..1000 {
            let d: Vec<u64> = (1..=3).map(|n| b.delay_ms(n, &rng)).collect();
            assert!((700..=1300).contains(&d[0]), "{d:?}");
            assert!(d[0] < d[1] && d[1] < d[2], "{d:?}");
        }
    }
}
