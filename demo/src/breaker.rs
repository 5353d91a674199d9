//! A circuit breaker around the (simulated) LLM: after `failure_threshold` consecutive failed
//! calls it opens and rejects calls at once, so an outage costs the agent nothing but fast
//! failures (which go the retry route) instead of a timeout per message. After `cooldown_ms` it
//! lets exactly one probe through (half-open); the probe's outcome closes or re-opens it.
//!
//! The clock is passed in (`Instant`), so the state machine is tested without sleeping.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The breaker's state, as `/status` and the logs show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Calls go through; consecutive failures are counted.
    Closed,
    /// Calls are rejected until the cool-down has passed.
    Open,
    /// One probe call is allowed; the others are rejected until it reports.
    HalfOpen,
}

/// Why a call was not allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejected {
    /// How long until the breaker will let a probe through, ms (0 while a probe is in flight).
    pub retry_in_ms: u64,
}

#[derive(Debug)]
struct Inner {
    state: BreakerState,
    consecutive_failures: u32,
    opened_at: Option<Instant>,
    probe_in_flight: bool,
    times_opened: u64,
}

/// Thread-safe circuit breaker. Callers ask [`CircuitBreaker::acquire`] before a call and
/// report its outcome with [`CircuitBreaker::record`].
#[derive(Debug)]
pub struct CircuitBreaker {
    failure_threshold: u32,
    cooldown: Duration,
    inner: Mutex<Inner>,
}

/// Permission for one call; report its outcome with [`CircuitBreaker::record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Permit {
    probe: bool,
}

impl CircuitBreaker {
    /// A closed breaker that opens after `failure_threshold` (at least 1) consecutive failures
    /// and probes again after `cooldown_ms`.
    pub fn new(failure_threshold: u32, cooldown_ms: u64) -> CircuitBreaker {
        CircuitBreaker {
            failure_threshold: failure_threshold.max(1),
            cooldown: Duration::from_millis(cooldown_ms),
            inner: Mutex::new(Inner {
                state: BreakerState::Closed,
                consecutive_failures: 0,
                opened_at: None,
                probe_in_flight: false,
                times_opened: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The state is plain data and every update leaves it consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// May a call go out now? Open turns half-open here once the cool-down has passed.
    pub fn acquire(&self, now: Instant) -> Result<Permit, Rejected> {
        let mut s = self.lock();
        match s.state {
            BreakerState::Closed => Ok(Permit { probe: false }),
            BreakerState::Open => {
                let opened = s.opened_at.unwrap_or(now);
                let ready = opened + self.cooldown;
                if now >= ready {
                    s.state = BreakerState::HalfOpen;
                    s.probe_in_flight = true;
                    Ok(Permit { probe: true })
                } else {
                    Err(Rejected {
                        retry_in_ms: (ready - now).as_millis() as u64,
                    })
                }
            }
            BreakerState::HalfOpen if !s.probe_in_flight => {
                s.probe_in_flight = true;
                Ok(Permit { probe: true })
            }
            BreakerState::HalfOpen => Err(Rejected { retry_in_ms: 0 }),
        }
    }

    /// Reports the outcome of a call made under `permit`.
    pub fn record(&self, permit: Permit, success: bool, now: Instant) {
        let mut s = self.lock();
        if permit.probe {
            s.probe_in_flight = false;
        }
        if success {
            // Any success proves the service answers: a probe closes the breaker, and a call
            // that started before the breaker opened is no reason to keep it open either.
            s.state = BreakerState::Closed;
            s.consecutive_failures = 0;
            s.opened_at = None;
            return;
        }
        s.consecutive_failures = s.consecutive_failures.saturating_add(1);
        let trip = match s.state {
            BreakerState::Closed => s.consecutive_failures >= self.failure_threshold,
            BreakerState::HalfOpen => permit.probe,
            // Already open (a slow call that began before the trip): restarting the cool-down
            // would only delay the probe.
            BreakerState::Open => false,
        };
        if trip {
            s.state = BreakerState::Open;
            s.opened_at = Some(now);
            s.times_opened += 1;
        }
    }

    /// The current state (open is reported as such even when a probe would now be allowed).
    pub fn state(&self) -> BreakerState {
        self.lock().state
    }

    /// How many times the breaker has opened since start.
    pub fn times_opened(&self) -> u64 {
        self.lock().times_opened
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_threshold_probes_after_cooldown_and_closes_on_success() {
        let b = CircuitBreaker::new(3, 1000);
        let t0 = Instant::now();
        for i in 0..3 {
            let p = b.acquire(t0).expect("closed lets calls through");
            assert_eq!(b.state(), BreakerState::Closed, "before failure {i}");
            b.record(p, false, t0);
        }
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.times_opened(), 1);
        let r = b.acquire(t0 + Duration::from_millis(400)).unwrap_err();
        assert_eq!(r.retry_in_ms, 600);

        let probe = b.acquire(t0 + Duration::from_millis(1000)).expect("probe");
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert!(
            b.acquire(t0 + Duration::from_millis(1001)).is_err(),
            "only one probe at a time"
        );
        b.record(probe, true, t0 + Duration::from_millis(1100));
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.acquire(t0 + Duration::from_millis(1101)).is_ok());
    }

    #[test]
    fn failed_probe_reopens_for_another_cooldown() {
        let b = CircuitBreaker::new(1, 500);
        let t0 = Instant::now();
        let p = b.acquire(t0).unwrap();
        b.record(p, false, t0);
        let probe = b.acquire(t0 + Duration::from_millis(500)).unwrap();
        b.record(probe, false, t0 + Duration::from_millis(550));
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.times_opened(), 2);
        assert_eq!(
            b.acquire(t0 + Duration::from_millis(600))
                .unwrap_err()
                .retry_in_ms,
            450
        );
    }

    #[test]
    fn a_success_resets_the_failure_count() {
        let b = CircuitBreaker::new(2, 500);
        let t0 = Instant::now();
        for ok in [false, true, false, true, false] {
            let p = b.acquire(t0).unwrap();
            b.record(p, ok, t0);
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }
}
