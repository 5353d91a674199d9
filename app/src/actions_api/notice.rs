//! The `done=` [`Notice`] a page shows after an action, and the same-site `back` paths a
//! plain form is redirected to (without the page's own parameters, [`PAGE_PARAMS`]).

use super::Op;

/// The notice a page shows after a delete or restore, carried in the URL as `done=CODE-N` so
/// that it survives the redirect of a plain form. Only known codes are shown: the URL cannot
/// make the page say anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice {
    pub op: Op,
    pub count: u64,
}

impl Notice {
    /// Parses a `done` value (`deleted-3`, `restored-1`).
    pub fn parse(v: &str) -> Option<Notice> {
        let (code, n) = v.split_once('-')?;
        let op = match code {
            "deleted" => Op::Delete,
            "restored" => Op::Restore,
            "labelled" => Op::LabelAdd,
            "unlabelled" => Op::LabelRemove,
            _ => return None,
        };
        Some(Notice {
            op,
            count: n.parse().ok()?,
        })
    }

    /// The `done` value for `op` having changed `count` dead letters.
    pub fn code(op: Op, count: u64) -> String {
        let word = match op {
            Op::Delete => "deleted",
            Op::Restore => "restored",
            Op::Replay => "replayed",
            Op::LabelAdd => "labelled",
            Op::LabelRemove => "unlabelled",
        };
        format!("{word}-{count}")
    }

    /// The sentence shown.
    pub fn sentence(self) -> String {
        let n = self.count;
        let things = if n == 1 {
            "dead letter"
        } else {
            "dead letters"
        };
        match (self.op, n) {
            (Op::Delete, 0) => "Nothing was deleted: the selected dead letters are already \
                                deleted or waiting in a replay job (cancel the job first)."
                .to_string(),
            (Op::Delete, _) => format!(
                "Deleted {n} {things}. They are kept under the status filter \u{201c}deleted\u{201d} \
                 and can be restored."
            ),
            (Op::Restore, 0) => "Nothing was restored: none of the selected dead letters was \
                                 deleted."
                .to_string(),
            (Op::Restore, _) => format!("Restored {n} {things} to the status they had before."),
            (Op::Replay, _) => format!("Queued {n} {things} for replay."),
            (Op::LabelAdd, 0) => "No label was added: the selected dead letters already have \
                                  it (or have the most labels allowed)."
                .to_string(),
            (Op::LabelAdd, _) => format!("Labelled {n} {things}."),
            (Op::LabelRemove, 0) => {
                "No label was removed: none of the selected dead letters had it.".to_string()
            }
            (Op::LabelRemove, _) => format!("Removed the label from {n} {things}."),
        }
    }
}

/// Query parameters that belong to the page, not to the list's filter: the notice and the
/// server-function error of a plain form's redirect (with the server's signature of it,
/// `__sig`: `docs/security.md`). They are removed before the filter is parsed (the filter
/// parser refuses names it does not know).
pub const PAGE_PARAMS: [&str; 4] = ["done", "__err", "__path", "__sig"];

/// `raw` (a query string) without [`PAGE_PARAMS`], re-encoded.
pub fn without_page_params(raw: &str) -> String {
    let pairs = crate::query::parse(raw);
    let kept: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| !PAGE_PARAMS.contains(&k.as_str()))
        .map(|(k, v)| format!("{}={}", crate::query::encode(k), crate::query::encode(v)))
        .collect();
    kept.join("&")
}

/// A same-site path to go back to, or `/`: `back` must be a path on this site (`/...`, not
/// `//host` or `/\host`, which browsers treat as another site), so a form cannot be used to
/// redirect elsewhere; and visible ASCII only (what a browser sends, and what a `Location`
/// header can hold). Page parameters of an earlier action are dropped.
pub fn safe_back(back: &str) -> String {
    let ok = back.starts_with('/')
        && !back.starts_with("//")
        && !back.starts_with("/\\")
        && back.bytes().all(|b| b.is_ascii_graphic());
    if !ok {
        return "/".to_string();
    }
    let (path, query) = back.split_once('?').unwrap_or((back, ""));
    let query = without_page_params(query);
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    }
}

/// `back` (see [`safe_back`]) with the notice `done=CODE`.
pub fn with_notice(back: &str, code: &str) -> String {
    let back = safe_back(back);
    let sep = if back.contains('?') { '&' } else { '?' };
    format!("{back}{sep}done={}", crate::query::encode(code))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_stays_on_this_site() {
        assert_eq!(safe_back("/?status=deleted"), "/?status=deleted");
        assert_eq!(safe_back("//evil.example/x"), "/");
        assert_eq!(safe_back("/\\evil.example"), "/");
        assert_eq!(safe_back("https://evil.example"), "/");
        assert_eq!(safe_back(""), "/");
        assert_eq!(safe_back("/x\n"), "/");
        assert_eq!(safe_back("/é"), "/");
        assert_eq!(
            safe_back("/?q=a%20b&done=deleted-2&__err=x&__path=y"),
            "/?q=a%20b"
        );
        assert_eq!(
            with_notice("/?q=a", &Notice::code(Op::Delete, 2)),
            "/?q=a&done=deleted-2"
        );
        assert_eq!(
            with_notice("/dead-letters/4", "restored-1"),
            "/dead-letters/4?done=restored-1"
        );
    }

    #[test]
    fn notices_are_codes_not_text() {
        let n = Notice::parse("deleted-3").expect("a notice");
        assert_eq!(n.op, Op::Delete);
        assert_eq!(n.count, 3);
        assert!(n.sentence().starts_with("Deleted 3 dead letters."));
        assert!(Notice::parse("deleted-x").is_none());
        assert!(Notice::parse("<b>hi</b>-1").is_none());
        assert!(Notice::parse("restored-0")
            .expect("a notice")
            .sentence()
            .starts_with("Nothing was restored"));
    }

    #[test]
    fn page_params_are_dropped() {
        assert_eq!(
            without_page_params("?fingerprint=ab&done=deleted-1&status=new"),
            "fingerprint=ab&status=new"
        );
        assert_eq!(without_page_params(""), "");
    }
}
