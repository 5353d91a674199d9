//! The audit trail's vocabulary of actions: every action redrive writes (the audit page's
//! Action filter offers them) and their wording for people.

/// Every action redrive writes to the audit trail (the audit page's Action filter offers
/// these; `action` filters match exactly). A refusal is a row of the refused action with
/// outcome `denied`; `user_list`, `token_list`, `rule_set_edit` and `rule_set_dry_run` are
/// only ever that. Add a new action here.
pub const AUDIT_ACTIONS: &[&str] = &[
    // Dead letters and replay jobs.
    "replay",
    "replay_started",
    "delete",
    "restore",
    "edit",
    "cancel_job",
    "pause_job",
    "resume_job",
    "label_add",
    "label_remove",
    "note_set",
    "export",
    "quarantine_retry",
    // Retention, archive and tiers.
    "archive",
    "archive_restore",
    "retention_purge",
    "tier_move",
    // Approvals.
    "approval_request",
    "approval_approve",
    "approval_decline",
    "approval_cancel",
    "approval_expire",
    // Automation and alerting.
    "rule_set_save",
    "rule_set_edit",
    "rule_set_dry_run",
    "rule_pause",
    "rule_resume",
    "alert_fired",
    "alert_resolved",
    "alert_test_notification",
    "alert_notification_failed",
    // Signing in, users and tokens.
    "sign_in",
    "sign_in_failed",
    "sign_in_throttled",
    "sign_out",
    "user_add",
    "user_disable",
    "user_enable",
    "user_role_set",
    "user_password_reset",
    "user_list",
    "password_change",
    "session_end",
    "token_create",
    "token_revoke",
    "token_list",
];

/// An audit action in words, as the audit page shows it (its table and its filter):
/// `sign_in` is "sign in".
pub fn audit_action_label(action: &str) -> String {
    action.replace('_', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::AuditQuery;

    /// Each listed action is listed once, accepted by the audit filter and shown in words.
    #[test]
    fn every_audit_action_can_be_filtered_on_and_is_in_words() {
        let mut seen = std::collections::HashSet::new();
        for a in AUDIT_ACTIONS {
            assert!(seen.insert(*a), "{a} is listed twice");
            let q = AuditQuery::from_pairs([("action", *a)]).unwrap();
            assert_eq!(q.action.as_deref(), Some(*a));
            assert!(!audit_action_label(a).contains('_'), "{a}");
        }
        assert_eq!(audit_action_label("rule_set_save"), "rule set save");
        // An action nobody writes is refused with the list, not answered with nothing.
        let e = AuditQuery::from_pairs([("action", "nope")]).unwrap_err();
        assert!(e.contains("`nope`") && e.contains("replay_started"), "{e}");
    }

    /// The actions named by the helpers' enums are listed.
    #[test]
    fn enum_actions_are_listed() {
        use crate::alerts::EventKind;
        use crate::labels::LabelOp;
        for a in [LabelOp::Add.audit_action(), LabelOp::Remove.audit_action()]
            .into_iter()
            .chain(
                [
                    EventKind::Fired,
                    EventKind::Resolved,
                    EventKind::Test,
                    EventKind::NotificationFailed,
                ]
                .map(EventKind::audit_action),
            )
        {
            assert!(AUDIT_ACTIONS.contains(&a), "{a} is not in AUDIT_ACTIONS");
        }
    }

    /// Every action given as a literal to the code that writes audit rows (here, in the server
    /// and in the app) is in [`AUDIT_ACTIONS`]. A scan of the source: each call of a writer
    /// below whose action argument is a string literal, and every `action: "..."` field.
    #[test]
    fn every_literal_audit_action_is_listed() {
        // (call, index of its action argument)
        const WRITERS: &[(&str, usize)] = &[
            ("NewAuditEntry::by(", 1),
            ("audit_row(", 2),
            ("action_audit(", 1),
            ("audit_entry(", 1),
            ("target_audit(", 1),
            ("set_job_state(", 3),
            ("require_permission(", 3),
            ("require_not_read_only(", 2),
            ("authorize_permission(", 1),
            ("seam::permitted(", 1),
            ("seam::manager(", 0),
            ("seam::own(", 0),
            ("decider(", 1),
            ("refuse(", 2),
            ("forbidden(", 2),
            ("row(", 1),
        ];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for dir in ["core/src", "server/src", "app/src"] {
            collect_rs(&root.join(dir), &mut files);
        }
        assert!(files.len() > 50, "the sources were not found");
        let mut found = 0;
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            // Not the tests at the end of a file.
            let text = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            let mut literals = Vec::new();
            for (call, index) in WRITERS {
                for (at, _) in text.match_indices(call) {
                    let before = text[..at].chars().next_back().unwrap_or(' ');
                    if before.is_alphanumeric() || before == '_' || text[..at].ends_with("fn ") {
                        continue;
                    }
                    let args = call_args(&text[at + call.len()..]);
                    // `row(by, "user_add", ..)` in accounts.rs; other `row(`s are not audit rows.
                    if *call == "row(" && !matches!(args.first().map(String::as_str), Some("by")) {
                        continue;
                    }
                    if let Some(lit) = args.get(*index).and_then(|a| literal(a)) {
                        literals.push(lit);
                    }
                }
            }
            for (at, _) in text.match_indices("action: \"") {
                let value = text[at + "action: ".len()..].split(['.', ',']).next();
                if let Some(lit) = value.and_then(literal) {
                    literals.push(lit);
                }
            }
            for lit in literals {
                found += 1;
                assert!(
                    AUDIT_ACTIONS.contains(&lit.as_str()),
                    "{}: audit action `{lit}` is not in AUDIT_ACTIONS",
                    f.display()
                );
            }
        }
        assert!(
            found > 30,
            "only {found} audit actions found: is the scan broken?"
        );
    }

    fn collect_rs(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                collect_rs(&p, out);
            } else if name.ends_with(".rs") && !name.ends_with("tests.rs") {
                out.push(p);
            }
        }
    }

    /// The top-level arguments of a call, from just after its `(`, trimmed.
    fn call_args(rest: &str) -> Vec<String> {
        let (mut depth, mut args, mut cur, mut in_str) = (0, Vec::new(), String::new(), false);
        for c in rest.chars() {
            match c {
                '"' => in_str = !in_str,
                _ if in_str => {}
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => break,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    args.push(cur.trim().to_string());
                    cur.clear();
                    continue;
                }
                _ => {}
            }
            cur.push(c);
        }
        args.push(cur.trim().to_string());
        args
    }

    /// `"sign_in"` (a plain snake_case string literal) as `sign_in`.
    fn literal(arg: &str) -> Option<String> {
        let inner = arg.trim().strip_prefix('"')?.strip_suffix('"')?;
        (!inner.is_empty() && inner.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .then(|| inner.to_string())
    }
}
