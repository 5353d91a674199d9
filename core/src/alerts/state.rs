//! The state machine of one rule × scope, as a pure function: `ok → pending → firing → ok`,
//! with the rule's for-duration, de-duplication (a firing alert stays firing, notified once)
//! and cooldown (after a resolve, no new fire for `cooldown_ms`).

use super::model::{AlertState, ScopeState};

/// What [`step`] decided to tell the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Fired,
    Resolved,
}

/// One evaluation's reading for a rule × scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// The condition holds now.
    pub holds: bool,
    /// The measured value (see [`ScopeState::value`]).
    pub value: i64,
    /// Event kinds: epoch ms of the latest event.
    pub last_event_ms: Option<i64>,
}

/// The next state of `rule` × `scope` given the previous row (`None`: never seen) and this
/// evaluation's `reading` at `now_ms`. Returns the row to write (`None` = nothing changed
/// worth writing) and the transition to notify, if any.
pub fn step(
    rule: &str,
    scope: &str,
    prev: Option<&ScopeState>,
    reading: Reading,
    now_ms: i64,
    for_ms: u64,
    cooldown_ms: u64,
) -> (Option<ScopeState>, Option<Transition>) {
    let for_ms = i64::try_from(for_ms).unwrap_or(i64::MAX);
    let cooldown_ms = i64::try_from(cooldown_ms).unwrap_or(i64::MAX);
    let base = || ScopeState {
        rule: rule.to_string(),
        scope: scope.to_string(),
        state: AlertState::Ok,
        value: reading.value,
        since_ms: now_ms,
        last_event_ms: reading.last_event_ms,
        fired_at_ms: None,
        resolved_at_ms: None,
        updated_at_ms: now_ms,
    };
    let mut next = prev.cloned().unwrap_or_else(base);
    next.value = reading.value;
    next.updated_at_ms = now_ms;
    if reading.last_event_ms.is_some() {
        next.last_event_ms = reading.last_event_ms;
    }
    let prev_state = prev.map(|p| p.state);
    if reading.holds {
        if matches!(prev_state, None | Some(AlertState::Ok)) {
            next.state = AlertState::Pending;
            next.since_ms = now_ms;
        }
        if next.state == AlertState::Firing {
            // De-duplicated: already notified. Write only when the value moved.
            let changed =
                prev.is_none_or(|p| p.value != next.value || p.last_event_ms != next.last_event_ms);
            return (changed.then_some(next), None);
        }
        let held_long_enough = now_ms.saturating_sub(next.since_ms) >= for_ms;
        let cooled_down = next
            .resolved_at_ms
            .is_none_or(|r| now_ms.saturating_sub(r) >= cooldown_ms);
        if held_long_enough && cooled_down {
            next.state = AlertState::Firing;
            next.fired_at_ms = Some(now_ms);
            return (Some(next), Some(Transition::Fired));
        }
        let changed = prev.is_none_or(|p| {
            p.state != next.state || p.value != next.value || p.last_event_ms != next.last_event_ms
        });
        (changed.then_some(next), None)
    } else {
        match prev_state {
            Some(AlertState::Firing) => {
                next.state = AlertState::Ok;
                next.since_ms = now_ms;
                next.resolved_at_ms = Some(now_ms);
                (Some(next), Some(Transition::Resolved))
            }
            Some(AlertState::Pending) => {
                next.state = AlertState::Ok;
                next.since_ms = now_ms;
                (Some(next), None)
            }
            Some(AlertState::Ok) => {
                let changed = prev.is_some_and(|p| p.last_event_ms != next.last_event_ms);
                (changed.then_some(next), None)
            }
            None => (None, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds(v: i64) -> Reading {
        Reading {
            holds: true,
            value: v,
            last_event_ms: None,
        }
    }
    const CLEAR: Reading = Reading {
        holds: false,
        value: 0,
        last_event_ms: None,
    };

    #[test]
    fn fires_after_for_duration_dedups_and_resolves() {
        let (s, t) = step("r", "s", None, holds(5), 1_000, 500, 0);
        let s = s.unwrap();
        assert_eq!((s.state, t), (AlertState::Pending, None));
        let (s2, t) = step("r", "s", Some(&s), holds(6), 1_400, 500, 0);
        let s = s2.unwrap();
        assert_eq!((s.state, t), (AlertState::Pending, None));
        let (s2, t) = step("r", "s", Some(&s), holds(7), 1_500, 500, 0);
        let s = s2.unwrap();
        assert_eq!((s.state, t), (AlertState::Firing, Some(Transition::Fired)));
        assert_eq!(s.fired_at_ms, Some(1_500));
        // Still holding: no second fire, and no write when nothing moved.
        let (s2, t) = step("r", "s", Some(&s), holds(7), 1_600, 500, 0);
        assert_eq!((s2, t), (None, None));
        let (s2, t) = step("r", "s", Some(&s), CLEAR, 1_700, 500, 0);
        let s = s2.unwrap();
        assert_eq!((s.state, t), (AlertState::Ok, Some(Transition::Resolved)));
        assert_eq!(s.resolved_at_ms, Some(1_700));
        assert_eq!(s.fired_at_ms, Some(1_500));
    }

    #[test]
    fn a_blip_shorter_than_for_never_fires() {
        let (s, _) = step("r", "s", None, holds(5), 0, 1_000, 0);
        let (s, t) = step("r", "s", s.as_ref(), CLEAR, 500, 1_000, 0);
        assert_eq!((s.unwrap().state, t), (AlertState::Ok, None));
    }

    #[test]
    fn cooldown_holds_a_refire() {
        let (s, t) = step("r", "s", None, holds(1), 0, 0, 10_000);
        assert_eq!(t, Some(Transition::Fired));
        let (s, t) = step("r", "s", s.as_ref(), CLEAR, 100, 0, 10_000);
        assert_eq!(t, Some(Transition::Resolved));
        let (s, t) = step("r", "s", s.as_ref(), holds(1), 200, 0, 10_000);
        let s = s.unwrap();
        assert_eq!((s.state, t), (AlertState::Pending, None));
        let (s, t) = step("r", "s", Some(&s), holds(1), 10_100, 0, 10_000);
        assert_eq!(
            (s.unwrap().state, t),
            (AlertState::Firing, Some(Transition::Fired))
        );
    }

    #[test]
    fn clear_and_unseen_writes_nothing() {
        assert_eq!(step("r", "s", None, CLEAR, 0, 0, 0), (None, None));
    }
}
