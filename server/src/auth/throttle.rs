//! Sign-in throttling: GCRA limiters (`governor`) keyed by user name and by client IP.
//!
//! A quota of N per minute allows a burst of N attempts, then one more every 60/N s. The IP
//! is checked first, so a throttled client does not also use up the named user's allowance.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Keys kept before the limiters forget the ones that are back to a full allowance.
const RETAIN_ABOVE: usize = 10_000;

/// Which allowance an attempt ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    User,
    Ip,
}

/// A refused attempt: which limit, and when the next attempt would be allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttled {
    pub by: Limited,
    pub retry_after: Duration,
}

/// The sign-in limiters of one process (not shared between redrive instances).
pub struct Throttle {
    per_user: Option<DefaultKeyedRateLimiter<String>>,
    per_ip: Option<DefaultKeyedRateLimiter<String>>,
    /// One audit row per (limit, key) per minute: a client hammering the form must not be
    /// able to flood the audit log.
    audited: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
}

fn limiter(per_min: u32) -> Option<DefaultKeyedRateLimiter<String>> {
    NonZeroU32::new(per_min).map(|n| RateLimiter::keyed(Quota::per_minute(n)))
}

impl Throttle {
    /// Limiters allowing `per_user_per_min` attempts per user name and `per_ip_per_min` per
    /// client IP (0 = unlimited).
    pub fn new(per_user_per_min: u32, per_ip_per_min: u32) -> Throttle {
        Throttle {
            per_user: limiter(per_user_per_min),
            per_ip: limiter(per_ip_per_min),
            audited: RateLimiter::keyed(Quota::per_minute(NonZeroU32::MIN)),
            clock: DefaultClock::default(),
        }
    }

    /// Counts one sign-in attempt for `user` from `ip`; `Err` if either allowance is used up.
    /// Without a known IP only the user limit applies.
    pub fn attempt(&self, user: &str, ip: Option<&str>) -> Result<(), Throttled> {
        if let (Some(l), Some(ip)) = (&self.per_ip, ip) {
            self.check(l, ip, Limited::Ip)?;
        }
        if let Some(l) = &self.per_user {
            self.check(l, user, Limited::User)?;
        }
        Ok(())
    }

    fn check(
        &self,
        l: &DefaultKeyedRateLimiter<String>,
        key: &str,
        by: Limited,
    ) -> Result<(), Throttled> {
        if l.len() > RETAIN_ABOVE {
            l.retain_recent();
            l.shrink_to_fit();
        }
        l.check_key(&key.to_string())
            .map_err(|not_until| Throttled {
                by,
                retry_after: not_until.wait_time_from(self.clock.now()),
            })
    }

    /// True for the first throttled attempt of `key` in a minute (audit it), false after.
    pub fn should_audit(&self, t: &Throttled, user: &str, ip: Option<&str>) -> bool {
        let key = match t.by {
            Limited::User => format!("u:{user}"),
            Limited::Ip => format!("i:{}", ip.unwrap_or("-")),
        };
        if self.audited.len() > RETAIN_ABOVE {
            self.audited.retain_recent();
        }
        self.audited.check_key(&key).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_ip_limits() {
        let t = Throttle::new(2, 3);
        assert!(t.attempt("a", Some("1.1.1.1")).is_ok());
        assert!(t.attempt("a", Some("1.1.1.1")).is_ok());
        let e = t.attempt("a", Some("1.1.1.1")).unwrap_err();
        assert_eq!(e.by, Limited::User);
        assert!(e.retry_after > Duration::ZERO);
        // The IP had three: the third was used by the refused attempt above.
        assert_eq!(t.attempt("b", Some("1.1.1.1")).unwrap_err().by, Limited::Ip);
        assert!(t.attempt("b", Some("2.2.2.2")).is_ok());
        assert!(t.should_audit(&e, "a", None));
        assert!(!t.should_audit(&e, "a", None));
        let unlimited = Throttle::new(0, 0);
        for _ in 0..100 {
            assert!(unlimited.attempt("a", Some("1.1.1.1")).is_ok());
        }
    }
}
