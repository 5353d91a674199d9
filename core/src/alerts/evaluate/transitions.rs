//! Firing and resolving: every scope of one rule stepped through [`crate::alerts::state::step`],
//! with the rule's `max_firing` cap and its summary alert for the scopes the cap holds back.

use std::collections::{BTreeMap, BTreeSet};

use super::events::event_for;
use super::scope_of;
use crate::alerts::model::{AlertState, ScopeState};
use crate::alerts::rules::{AlertsConfig, RuleConfig, OVERFLOW_LABEL};
use crate::alerts::state::{step, Reading, Transition};
use crate::store::AlertCycle;

/// Steps, at `now_ms`, every scope of `rule` read now (`readings`) or stored before (`prev`, by
/// (rule, scope)), then the rule's summary alert, and adds the changed states and the events to
/// `cycle`.
pub(super) fn step_rule(
    config: &AlertsConfig,
    rule: &RuleConfig,
    prev: &BTreeMap<(String, String), ScopeState>,
    readings: &BTreeMap<String, Reading>,
    now_ms: i64,
    cycle: &mut AlertCycle,
) {
    let label = rule.group_by.column();
    // Every scope read now, and every scope the rule had before (absent now = clear);
    // the summary scope is stepped last, from what the cap held back.
    let overflow_scope = scope_of(OVERFLOW_LABEL, Some(label));
    let mut scopes: Vec<(bool, String)> = readings
        .keys()
        .cloned()
        .chain(
            prev.range((rule.name.clone(), String::new())..)
                .take_while(|((r, _), _)| r == &rule.name)
                .map(|((_, s), _)| s.clone()),
        )
        .filter(|s| *s != overflow_scope)
        .collect::<BTreeSet<String>>()
        .into_iter()
        .map(|s| {
            let firing = prev
                .get(&(rule.name.clone(), s.clone()))
                .is_some_and(|b| b.state == AlertState::Firing);
            (!firing, s)
        })
        .collect();
    // Scopes already firing keep their place under the cap: they are stepped first.
    scopes.sort();
    let cap = usize::try_from(rule.max_firing).unwrap_or(usize::MAX);
    let mut firing = 0usize;
    let mut held_back = 0i64;
    for (_, scope) in scopes {
        let before = prev.get(&(rule.name.clone(), scope.clone()));
        let mut reading = readings.get(&scope).copied().unwrap_or(Reading {
            holds: false,
            value: 0,
            last_event_ms: None,
        });
        if rule.kind.is_event() {
            // Holds while the latest event is within the window.
            let window = i64::try_from(rule.window()).unwrap_or(i64::MAX);
            let last = reading
                .last_event_ms
                .max(before.and_then(|b| b.last_event_ms));
            reading.holds = last.is_some_and(|t| now_ms.saturating_sub(t) < window);
            if !readings.contains_key(&scope) {
                reading.value = before.map_or(0, |b| b.value);
            }
        }
        let (mut next, mut transition) = step(
            &rule.name,
            &scope,
            before,
            reading,
            now_ms,
            rule.for_ms,
            rule.cooldown_ms,
        );
        if transition == Some(Transition::Fired) && firing >= cap {
            // Over the cap: this scope stays pending (ready to fire on its own once a
            // slot frees) and counts in the rule's summary alert instead of paging.
            transition = None;
            held_back += 1;
            next = next.map(|mut n| {
                n.state = AlertState::Pending;
                n.fired_at_ms = before.and_then(|b| b.fired_at_ms);
                n
            });
            let unchanged = before.is_some_and(|b| {
                b.state == AlertState::Pending
                    && b.value == reading.value
                    && next
                        .as_ref()
                        .is_some_and(|n| n.last_event_ms == b.last_event_ms)
            });
            if unchanged {
                next = None;
            }
        }
        let state_now = next.as_ref().map(|n| n.state).or(before.map(|b| b.state));
        if state_now == Some(AlertState::Firing) {
            firing += 1;
        }
        if let Some(t) = transition {
            cycle.events.push(event_for(
                config,
                rule,
                &scope,
                t,
                reading.value,
                now_ms,
                before,
            ));
        }
        if let Some(n) = next {
            cycle.states.push(n);
        }
    }
    // The summary alert: fires when any scope is held back, resolves when none is. The
    // held-back scopes already waited `for_ms`, so it fires at once.
    let before = prev.get(&(rule.name.clone(), overflow_scope.clone()));
    let reading = Reading {
        holds: held_back > 0,
        value: held_back,
        last_event_ms: None,
    };
    let (next, transition) = step(
        &rule.name,
        &overflow_scope,
        before,
        reading,
        now_ms,
        0,
        rule.cooldown_ms,
    );
    if let Some(t) = transition {
        cycle.events.push(event_for(
            config,
            rule,
            &overflow_scope,
            t,
            held_back,
            now_ms,
            before,
        ));
    }
    if let Some(n) = next {
        cycle.states.push(n);
    }
}
