//! Sign-in throttling: GCRA limiters (`governor`), the policy of `docs/security.md`
//! ("Sign-in throttling"):
//!
//! 1. per client IP, whatever the user name (`sign_in_per_ip_per_min`): one client cannot try
//!    many names;
//! 2. per (user name, client IP) pair (`sign_in_per_user_per_min`): one client cannot try many
//!    passwords for one name — and, keyed by the pair, an attacker elsewhere who knows a
//!    user's name cannot lock that user out of their own machine;
//! 3. per user name across all clients (`sign_in_per_user_global_per_min`, much higher): a
//!    crowd of clients guessing one user's password is bounded too. Reaching it does refuse
//!    that user from everywhere for a moment, which is why it is set far above what one
//!    person ever needs.
//!
//! A quota of N per minute allows a burst of N attempts, then one more every 60/N s. The
//! limits are checked in that order and the first refusal stops: a throttled client does not
//! also use up the named user's allowances.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Keys kept before the limiters forget the ones that are back to a full allowance.
const RETAIN_ABOVE: usize = 10_000;

/// Which allowance an attempt ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    /// The user name from this client.
    UserFromClient,
    /// The user name, from all clients together.
    User,
    /// The client, whatever the user name.
    Ip,
}

impl Limited {
    /// The limit's name in messages and the audit log.
    pub fn name(self) -> &'static str {
        match self {
            Limited::UserFromClient => "user-and-client",
            Limited::User => "user (all clients)",
            Limited::Ip => "client",
        }
    }
}

/// A refused attempt: which limit, and when the next attempt would be allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttled {
    pub by: Limited,
    pub retry_after: Duration,
}

/// The quotas, attempts per minute (0 = no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    /// Per (user name, client IP).
    pub per_user_per_client: u32,
    /// Per client IP.
    pub per_ip: u32,
    /// Per user name, all clients together.
    pub per_user_global: u32,
}

/// The sign-in limiters of one process (not shared between redrive instances).
pub struct Throttle {
    per_pair: Option<DefaultKeyedRateLimiter<String>>,
    per_ip: Option<DefaultKeyedRateLimiter<String>>,
    per_user: Option<DefaultKeyedRateLimiter<String>>,
    /// One audit row per (limit, key) per minute: a client hammering the form must not be
    /// able to flood the audit log.
    audited: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
}

fn limiter(per_min: u32) -> Option<DefaultKeyedRateLimiter<String>> {
    NonZeroU32::new(per_min).map(|n| RateLimiter::keyed(Quota::per_minute(n)))
}

/// The key of a (user, client) pair; `-` for an unknown client. NUL cannot occur in either.
fn pair_key(user: &str, ip: Option<&str>) -> String {
    format!("{}\0{user}", ip.unwrap_or("-"))
}

impl Throttle {
    /// Limiters with these quotas.
    pub fn new(q: Quotas) -> Throttle {
        Throttle {
            per_pair: limiter(q.per_user_per_client),
            per_ip: limiter(q.per_ip),
            per_user: limiter(q.per_user_global),
            audited: RateLimiter::keyed(Quota::per_minute(NonZeroU32::MIN)),
            clock: DefaultClock::default(),
        }
    }

    /// Counts one sign-in attempt for `user` from `ip`; `Err` if an allowance is used up.
    /// Without a known IP, the client limit does not apply and the pair is keyed by `-`.
    pub fn attempt(&self, user: &str, ip: Option<&str>) -> Result<(), Throttled> {
        if let (Some(l), Some(ip)) = (&self.per_ip, ip) {
            self.check(l, ip, Limited::Ip)?;
        }
        if let Some(l) = &self.per_pair {
            self.check(l, &pair_key(user, ip), Limited::UserFromClient)?;
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
            Limited::UserFromClient => format!("p:{}", pair_key(user, ip)),
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

    fn quotas(pair: u32, ip: u32, user: u32) -> Quotas {
        Quotas {
            per_user_per_client: pair,
            per_ip: ip,
            per_user_global: user,
        }
    }

    #[test]
    fn user_and_ip_limits() {
        let t = Throttle::new(quotas(2, 3, 0));
        assert!(t.attempt("a", Some("1.1.1.1")).is_ok());
        assert!(t.attempt("a", Some("1.1.1.1")).is_ok());
        let e = t.attempt("a", Some("1.1.1.1")).unwrap_err();
        assert_eq!(e.by, Limited::UserFromClient);
        assert!(e.retry_after > Duration::ZERO);
        // The IP had three: the third was used by the refused attempt above.
        assert_eq!(t.attempt("b", Some("1.1.1.1")).unwrap_err().by, Limited::Ip);
        assert!(t.attempt("b", Some("2.2.2.2")).is_ok());
        assert!(t.should_audit(&e, "a", None));
        assert!(!t.should_audit(&e, "a", None));
        let unlimited = Throttle::new(quotas(0, 0, 0));
        for _ in 0..100 {
            assert!(unlimited.attempt("a", Some("1.1.1.1")).is_ok());
        }
    }

    /// Attempts against user `a` from one client do not lock `a` out from another.
    #[test]
    fn one_client_cannot_lock_a_user_out_elsewhere() {
        let t = Throttle::new(quotas(3, 100, 0));
        for _ in 0..3 {
            assert!(t.attempt("a", Some("6.6.6.6")).is_ok());
        }
        for _ in 0..10 {
            assert_eq!(
                t.attempt("a", Some("6.6.6.6")).unwrap_err().by,
                Limited::UserFromClient
            );
        }
        assert!(t.attempt("a", Some("10.0.0.7")).is_ok());
    }

    /// Many clients together reach the user's global limit.
    #[test]
    fn a_crowd_of_clients_reaches_the_global_limit() {
        let t = Throttle::new(quotas(2, 100, 5));
        for i in 0..5 {
            assert!(t.attempt("a", Some(&format!("10.0.0.{i}"))).is_ok());
        }
        assert_eq!(
            t.attempt("a", Some("10.0.0.99")).unwrap_err().by,
            Limited::User
        );
        assert!(t.attempt("b", Some("10.0.0.99")).is_ok());
    }
}
