//! A tiny shared pseudo-random source (SplitMix64). The demo only needs coin flips and jitter;
//! a dependency on `rand` would buy nothing here, and a `--seed` makes a run repeatable.

use std::sync::Mutex;

/// Thread-safe SplitMix64 generator. Not cryptographic.
#[derive(Debug)]
pub struct Rng {
    state: Mutex<u64>,
}

impl Rng {
    /// A generator seeded with `seed`, or with fresh entropy (a v4 UUID's bits) when `None`.
    pub fn new(seed: Option<u64>) -> Rng {
        let seed = seed.unwrap_or_else(|| {
            let bits = uuid::Uuid::new_v4().as_u128();
            (bits as u64) ^ ((bits >> 64) as u64)
        });
        Rng {
            state: Mutex::new(seed),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&self) -> u64 {
        // A poisoned lock only means another thread panicked mid-update of a plain integer;
        // the value is still a valid state.
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[-1, 1)`.
    pub fn signed_unit(&self) -> f64 {
        self.unit() * 2.0 - 1.0
    }

    /// `true` with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&self, p: f64) -> bool {
        self.unit() < p.clamp(0.0, 1.0)
    }

    /// Uniform in `0..n` (`0` when `n == 0`).
    pub fn below(&self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.next_u64() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_runs_repeat_and_stay_in_range() {
        let a = Rng::new(Some(7));
        let b = Rng::new(Some(7));
        for _ in 0..1000 {
            let (x, y) = (a.unit(), b.unit());
            assert_eq!(x, y);
            assert!((0.0..1.0).contains(&x));
            assert!(a.below(5) < 5);
            let _ = b.below(5);
        }
    }

    #[test]
    fn chance_is_roughly_fair() {
        let r = Rng::new(Some(1));
        let hits = (0..10_000).filter(|_| r.chance(0.2)).count();
        assert!((1_700..2_300).contains(&hits), "{hits}");
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
    }
}
