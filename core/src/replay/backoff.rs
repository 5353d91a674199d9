//! Exponential backoff with full jitter ("Exponential Backoff And Jitter", AWS Architecture
//! Blog, 2015): the delay before attempt n+1 is uniform in [0, min(cap, base · 2^n)], so
//! relays retrying after one shared outage spread out instead of arriving together.

/// Delay before the next attempt after `attempt` failures (1 = the first failed), ms:
/// uniform in `[0, min(cap_ms, base_ms · 2^(attempt-1))]`. `unit` is a random number in
/// `[0, 1)`.
pub fn full_jitter_ms(attempt: u32, base_ms: u64, cap_ms: u64, unit: f64) -> u64 {
    let exp = attempt.saturating_sub(1).min(62);
    let ceiling = base_ms.saturating_mul(1u64 << exp).min(cap_ms);
    (ceiling as f64 * unit.clamp(0.0, 1.0)) as u64
}

/// A random number in `[0, 1)` from the OS generator (via a v4 UUID's random bytes: 48
/// bits are plenty for jitter, and this needs no generator of our own).
pub fn random_unit() -> f64 {
    let b = uuid::Uuid::new_v4().into_bytes();
    let bits = b[..6]
        .iter()
        .fold(0u64, |acc, byte| (acc << 8) | u64::from(*byte));
    bits as f64 / (1u64 << 48) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap() {
        assert_eq!(full_jitter_ms(1, 500, 60_000, 0.999_999), 499);
        assert_eq!(full_jitter_ms(3, 500, 60_000, 0.999_999), 1_999);
        assert_eq!(full_jitter_ms(30, 500, 60_000, 0.999_999), 59_999);
        assert_eq!(full_jitter_ms(u32::MAX, 500, 60_000, 0.5), 30_000);
        assert_eq!(full_jitter_ms(5, 500, 60_000, 0.0), 0);
    }

    #[test]
    fn random_units_are_in_range_and_vary() {
        let xs: Vec<f64> = (0..100).map(|_| random_unit()).collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        assert!(xs.windows(2).any(|w| w[0] != w[1]));
    }
}
