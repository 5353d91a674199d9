//! The UI's action forms as a browser without JavaScript uses them, through the real binary:
//! the pages render the forms (CSRF field, `ids[]` checkboxes, server-function URLs), a plain
//! form POST with a session and its CSRF token acts and redirects (to the job page after a
//! replay, back with a notice after a delete or restore, back with the error when refused as
//! input), the confirmation page shows the dry run before "Confirm", a missing or wrong CSRF
//! token is 403, a viewer is 403 (and audited as denied), and a job whose Kafka is
//! unreachable shows `waiting` with the error, refreshing itself until cancelled.
//!
//! The server's Kafka is unreachable on purpose (`127.0.0.1:9`, the harness default): nothing
//! here needs a publish to succeed, and the relay's outage handling is what the job page shows.

use std::time::Duration;

use crate::support::{eventually, location, Session, TestApp};
use redrive_core::actions::JobStatus;
use redrive_core::{Convention, NewDeadLetter, Normalized, RawRecord, Status};
use redrive_testkit::unique;

/// The UI's server-function URLs (app/src/actions_api/forms.rs).
pub(crate) const ACT: &str = "/api/ui/act";
pub(crate) const ACT_ON_FILTER: &str = "/api/ui/act-on-filter";
const CANCEL: &str = "/api/ui/cancel-job";

pub(crate) const OPERATOR: (&str, &str) = ("oncall", "operator-password-1");
pub(crate) const VIEWER: (&str, &str) = ("watcher", "viewer-password-1");

/// A dead letter in `topic` at `offset`, from `source` (or from no known topic).
fn record(topic: &str, offset: i64, source: Option<&str>) -> NewDeadLetter {
    let class = "com.example.PaymentDeclined";
    let message = "Payment declined by provider";
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: topic.into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(1_796_104_800_000),
            key: Some(format!("k{offset}").into_bytes()),
            value: Some(b"{\"amount\":1}".to_vec()),
            headers: vec![],
        },
        convention: Convention::Unknown,
        fingerprint: redrive_core::fingerprint::fingerprint(Some(class), Some(message)),
        normalized: Normalized {
            source_topic: source.map(str::to_string),
            error_class: Some(class.into()),
            error_message: Some(message.into()),
            ..Normalized::default()
        },
        dead_lettered_at_ms: 1_796_104_800_000 + offset * 1000,
        ingested_at_ms: 1_796_104_800_000 + offset * 1000,
    }
}

/// The app with an operator and a viewer, and a fresh DLQ topic holding 3 dead letters from
/// `orders` and 1 without a source topic; returns the app, the topic and the ids by offset.
async fn start() -> (TestApp, String, Vec<i64>) {
    let app = TestApp::start(&[]).await;
    app.add_user(OPERATOR.0, "operator", OPERATOR.1).await;
    app.add_user(VIEWER.0, "viewer", VIEWER.1).await;
    let topic = unique("ui.DLT");
    let batch = vec![
        record(&topic, 0, Some("orders")),
        record(&topic, 1, Some("orders")),
        record(&topic, 2, Some("orders")),
        record(&topic, 3, None),
    ];
    app.store.insert_batch(&batch).await.expect("insert");
    let q = redrive_core::ListQuery::from_pairs([("dlq_topic", topic.as_str()), ("limit", "10")])
        .expect("query");
    let mut items = app.store.list(&q).await.expect("list").items;
    items.sort_by_key(|d| d.dlq_offset);
    let ids = items.iter().map(|d| d.id).collect();
    (app, topic, ids)
}

/// A browser without JavaScript: session cookie, `Accept: text/html`, the page it is on as
/// `Referer`. Redirects are not followed, so the test sees them.
pub(crate) struct Browser<'a> {
    app: &'a TestApp,
    session: Session,
    client: reqwest::Client,
}

impl<'a> Browser<'a> {
    pub(crate) async fn sign_in(app: &'a TestApp, (user, password): (&str, &str)) -> Browser<'a> {
        Browser {
            app,
            session: app.sign_in(user, password).await,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client"),
        }
    }

    /// GETs a page as the browser navigates to it (redirects not followed).
    pub(crate) async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.app.url(path))
            .header("Cookie", &self.session.cookie)
            .header("Accept", "text/html")
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.app.log()))
    }

    /// GETs a page: (status, HTML).
    pub(crate) async fn page(&self, path: &str) -> (u16, String) {
        let res = self.get(path).await;
        let status = res.status().as_u16();
        (status, res.text().await.expect("body"))
    }

    /// Submits a form from page `from` to `action`, with the session's CSRF token unless
    /// `csrf` says otherwise (`Some("")` leaves it out).
    pub(crate) async fn submit(
        &self,
        from: &str,
        action: &str,
        fields: &[(&str, &str)],
        csrf: Option<&str>,
    ) -> reqwest::Response {
        let mut all: Vec<(&str, &str)> = fields.to_vec();
        match csrf {
            None => all.push(("csrf", &self.session.csrf)),
            Some("") => {}
            Some(other) => all.push(("csrf", other)),
        }
        self.client
            .post(self.app.url(action))
            .header("Cookie", &self.session.cookie)
            .header("Accept", "text/html,application/xhtml+xml")
            .header("Referer", self.app.url(from))
            .form(&all)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {action}: {e}\n{}", self.app.log()))
    }
}

async fn status_of(app: &TestApp, id: i64) -> Status {
    app.store
        .get(id)
        .await
        .expect("get")
        .expect("the dead letter")
        .summary
        .status
}

/// The job id of a `/jobs/ID` location.
pub(crate) fn job_id(location: &str) -> String {
    location
        .strip_prefix("/jobs/")
        .unwrap_or_else(|| panic!("not a job page: {location}"))
        .to_string()
}

#[tokio::test]
async fn plain_forms_delete_restore_and_replay_and_redirect() {
    let (app, topic, ids) = start().await;
    let b = Browser::sign_in(&app, OPERATOR).await;
    let list = format!("/?dlq_topic={topic}");

    // The list renders one action form around the table, for the operator.
    let (status, html) = b.page(&list).await;
    assert_eq!(status, 200);
    assert!(html.contains(&format!("action=\"{ACT}\"")), "{html}");
    assert!(html.contains("method=\"post\""), "{html}");
    assert!(html.contains(&format!("name=\"csrf\" value=\"{}\"", b.session.csrf)));
    for id in &ids {
        assert!(
            html.contains(&format!("name=\"ids[]\" value=\"{id}\"")),
            "row {id}"
        );
    }
    assert!(html.contains("Replay selected") && html.contains("Delete selected"));
    assert!(html.contains("/confirm?op=replay&amp;dlq_topic="), "{html}");

    // Delete one: back to the list with the notice, which the page turns into a sentence.
    let res = b
        .submit(
            &list,
            ACT,
            &[
                ("op", "delete"),
                ("ids[]", &ids[0].to_string()),
                ("reason", "duplicate"),
                ("back", &list),
            ],
            None,
        )
        .await;
    assert_eq!(res.status(), 302, "{}", app.log());
    let back = location(&res);
    assert_eq!(back, format!("{list}&done=deleted-1"));
    assert_eq!(status_of(&app, ids[0]).await, Status::Deleted);
    let (status, html) = b.page(&back).await;
    assert_eq!(status, 200);
    assert!(html.contains("Deleted 1 dead letter."), "{html}");
    assert!(
        !html.contains(&format!("value=\"{}\"", ids[0])),
        "a deleted row left the list"
    );
    let audit = app.audit_of("delete").await;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].actor, OPERATOR.0);
    assert_eq!(audit[0].reason.as_deref(), Some("duplicate"));
    assert_eq!(audit[0].count, 1);

    // Under "deleted" the list offers Restore instead.
    let deleted = format!("{list}&status=deleted");
    let (_, html) = b.page(&deleted).await;
    assert!(html.contains("Restore selected") && !html.contains("Replay selected"));
    let res = b
        .submit(
            &deleted,
            ACT,
            &[
                ("op", "restore"),
                ("ids[]", &ids[0].to_string()),
                ("back", &deleted),
            ],
            None,
        )
        .await;
    assert_eq!(res.status(), 302);
    assert_eq!(location(&res), format!("{deleted}&done=restored-1"));
    assert_eq!(status_of(&app, ids[0]).await, Status::New);

    // Replay two (the checkboxes' `ids[]`, repeated): to the job page.
    let res = b
        .submit(
            &list,
            ACT,
            &[
                ("op", "replay"),
                ("ids[]", &ids[0].to_string()),
                ("ids[]", &ids[1].to_string()),
                ("reason", ""),
                ("target_topic", ""),
                ("rate_per_sec", "5"),
                ("back", &list),
            ],
            None,
        )
        .await;
    assert_eq!(res.status(), 302, "{}", app.log());
    let job = job_id(&location(&res));
    let stored = app.store.job(&job).await.expect("job").expect("a job");
    assert_eq!(stored.total, 2);
    assert_eq!(stored.rate_per_sec, Some(5));
    assert_eq!(stored.target_topic, None);
    assert_eq!(status_of(&app, ids[0]).await, Status::ReplayPending);
    let (status, html) = b.page(&format!("/jobs/{job}")).await;
    assert_eq!(status, 200);
    assert!(html.contains(&job) && html.contains("<progress"), "{html}");
    // Still running: without JavaScript the page refreshes itself, and offers Cancel.
    assert!(html.contains("http-equiv=\"refresh\""), "{html}");
    assert!(html.contains(&format!("action=\"{CANCEL}\"")), "{html}");

    // The detail page shows its history and its own buttons.
    let (_, html) = b.page(&format!("/dead-letters/{}", ids[0])).await;
    for event in ["ingested", "deleted", "restored", "replay requested"] {
        assert!(html.contains(event), "history lacks {event}: {html}");
    }
    assert!(
        html.contains("Waiting in a replay job"),
        "a pending one offers no buttons"
    );

    // Cancel: back to the job, now cancelled; the dead letters are released.
    let res = b
        .submit(&format!("/jobs/{job}"), CANCEL, &[("job_id", &job)], None)
        .await;
    assert_eq!(res.status(), 302, "{}", app.log());
    assert_eq!(location(&res), format!("/jobs/{job}"));
    let stored = app.store.job(&job).await.expect("job").expect("a job");
    assert_eq!(stored.status, JobStatus::Cancelled);
    let (_, html) = b.page(&format!("/jobs/{job}")).await;
    assert!(
        !html.contains("http-equiv=\"refresh\""),
        "a finished job stops refreshing"
    );
    assert!(!html.contains(&format!("action=\"{CANCEL}\"")));
    assert_eq!(status_of(&app, ids[0]).await, Status::New);

    // The jobs list and the audit page show it.
    let (_, html) = b.page("/jobs").await;
    assert!(html.contains(&format!("/jobs/{job}")) && html.contains("cancelled"));
    let (status, html) = b.page("/audit?actor=oncall&action=replay").await;
    assert_eq!(status, 200);
    assert!(html.contains(&format!("/jobs/{job}")), "{html}");
    assert!(html.contains("ok: 2 queued"), "{html}");
    assert!(html.contains("/api/v1/audit.csv?actor=oncall&amp;action=replay"));
    let (status, _) = b.page("/audit?nope=1").await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn input_errors_come_back_to_the_page() {
    let (app, topic, ids) = start().await;
    let b = Browser::sign_in(&app, OPERATOR).await;
    let list = format!("/?dlq_topic={topic}");
    // Nothing ticked: back to the list, with the reason on it.
    let res = b
        .submit(&list, ACT, &[("op", "replay"), ("back", &list)], None)
        .await;
    assert_eq!(res.status(), 302);
    let back = location(&res);
    assert!(back.contains("__err="), "{back}");
    let path = back.strip_prefix(&app.base).unwrap_or(&back).to_string();
    let (status, html) = b.page(&path).await;
    assert_eq!(
        status, 200,
        "the page's error parameters are not filter parameters"
    );
    assert!(html.contains("Nothing selected"), "{html}");
    // A bad rate and a bad topic name: refused, nothing changed.
    for (field, value, says) in [
        ("rate_per_sec", "fast", "rate limit"),
        ("target_topic", "no spaces allowed", "topic"),
    ] {
        let res = b
            .submit(
                &list,
                ACT,
                &[
                    ("op", "replay"),
                    ("ids[]", &ids[0].to_string()),
                    (field, value),
                ],
                None,
            )
            .await;
        assert_eq!(res.status(), 302);
        let back = location(&res);
        let path = back.strip_prefix(&app.base).unwrap_or(&back).to_string();
        let (_, html) = b.page(&path).await;
        assert!(
            html.contains("error-box") && html.contains(says),
            "{says}: {html}"
        );
    }
    assert_eq!(status_of(&app, ids[0]).await, Status::New);
    // `back` stays on this site.
    let res = b
        .submit(
            &list,
            ACT,
            &[
                ("op", "delete"),
                ("ids[]", &ids[0].to_string()),
                ("back", "//evil.example/"),
            ],
            None,
        )
        .await;
    assert_eq!(res.status(), 302);
    assert_eq!(location(&res), "/?done=deleted-1");
    assert!(app.audit_of("replay").await.is_empty());
}

#[tokio::test]
async fn without_the_csrf_token_or_as_a_viewer_nothing_happens() {
    let (app, topic, ids) = start().await;
    let list = format!("/?dlq_topic={topic}");
    let id = ids[0].to_string();
    let delete = [("op", "delete"), ("ids[]", id.as_str()), ("back", "/")];

    let op = Browser::sign_in(&app, OPERATOR).await;
    for csrf in [Some(""), Some("not-the-token")] {
        let res = op.submit(&list, ACT, &delete, csrf).await;
        assert_eq!(res.status(), 403, "csrf {csrf:?}");
    }
    let res = op
        .submit(
            "/confirm",
            ACT_ON_FILTER,
            &[("op", "delete"), ("filter", &format!("dlq_topic={topic}"))],
            Some(""),
        )
        .await;
    assert_eq!(res.status(), 403);

    let viewer = Browser::sign_in(&app, VIEWER).await;
    // A viewer's pages carry no action form at all...
    let (_, html) = viewer.page(&list).await;
    assert!(
        !html.contains("name=\"ids[]\"") && !html.contains(ACT),
        "{html}"
    );
    let (_, html) = viewer.page(&format!("/dead-letters/{id}")).await;
    assert!(!html.contains(ACT), "{html}");
    let (_, html) = viewer
        .page(&format!("/confirm?op=delete&dlq_topic={topic}"))
        .await;
    assert!(
        !html.contains(ACT_ON_FILTER)
            && html.contains(
                "Your role may not delete dead letters (it needs the `delete` permission)"
            )
    );
    // ...and the server refuses the forms anyway, with the viewer's own valid CSRF token.
    let res = viewer.submit(&list, ACT, &delete, None).await;
    assert_eq!(res.status(), 403);
    let res = viewer
        .submit(
            "/confirm",
            ACT_ON_FILTER,
            &[("op", "replay"), ("filter", &format!("dlq_topic={topic}"))],
            None,
        )
        .await;
    assert_eq!(res.status(), 403);

    // Without a session at all: the API answer, 401.
    let res = reqwest::Client::new()
        .post(app.url(ACT))
        .form(&delete)
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 401);

    for id in &ids {
        assert_eq!(status_of(&app, *id).await, Status::New);
    }
    assert!(app
        .audit_of("delete")
        .await
        .iter()
        .all(|a| a.outcome == "denied"));
    let denied: Vec<_> = app
        .audit()
        .await
        .into_iter()
        .filter(|a| a.outcome == "denied")
        .collect();
    assert_eq!(
        denied.len(),
        2,
        "each refused viewer action is audited: {denied:?}"
    );
    assert!(denied.iter().all(|a| a.actor == VIEWER.0));
}

#[tokio::test]
async fn the_confirmation_page_shows_the_dry_run_and_acts_on_confirm() {
    let (app, topic, ids) = start().await;
    let b = Browser::sign_in(&app, OPERATOR).await;

    // Replay everything in the topic: 3 go to `orders`, 1 has no source topic.
    let confirm = format!("/confirm?op=replay&dlq_topic={topic}");
    let (status, html) = b.page(&confirm).await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("<strong class=\"count\">3</strong>"),
        "{html}"
    );
    assert!(
        html.contains("of the <span class=\"matched\">4 dead letters</span>"),
        "{html}"
    );
    assert!(html.contains("<td class=\"mono\">orders</td>"), "{html}");
    assert!(html.contains("has no source topic"), "{html}");
    assert!(
        html.contains("cannot be replayed to \u{201c}source\u{201d}"),
        "{html}"
    );
    assert!(html.contains("Confirm: replay 3 dead letters"), "{html}");
    assert!(
        html.contains("By status now: <span class=\"mono\">4 new</span>."),
        "{html}"
    );
    assert!(
        html.contains(&format!("action=\"{ACT_ON_FILTER}\"")),
        "{html}"
    );
    // With a target topic all 4 can go there.
    let (_, html) = b.page(&format!("{confirm}&target_topic=elsewhere")).await;
    assert!(
        html.contains("<strong class=\"count\">4</strong>"),
        "{html}"
    );
    assert!(!html.contains("has no source topic"), "{html}");
    // Looking changed nothing.
    assert!(app.store.jobs(10).await.expect("jobs").is_empty());
    assert!(app.audit_of("replay").await.is_empty());

    // Delete all matching: the count, then Confirm.
    let (_, html) = b
        .page(&format!("/confirm?op=delete&dlq_topic={topic}"))
        .await;
    assert!(
        html.contains("<strong class=\"count\">4</strong>"),
        "{html}"
    );
    let filter = format!("dlq_topic={topic}");
    let res = b
        .submit(
            "/confirm",
            ACT_ON_FILTER,
            &[("op", "delete"), ("filter", &filter), ("reason", "bulk")],
            None,
        )
        .await;
    assert_eq!(res.status(), 302, "{}", app.log());
    assert_eq!(location(&res), format!("/?{filter}&done=deleted-4"));
    for id in &ids {
        assert_eq!(status_of(&app, *id).await, Status::Deleted);
    }
    let audit = app.audit_of("delete").await;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].count, 4);
    assert!(audit[0].filter.as_deref().unwrap_or("").contains(&topic));

    // Restore all matching under `status=deleted`, then replay all matching by filter.
    let (_, html) = b
        .page(&format!(
            "/confirm?op=restore&dlq_topic={topic}&status=deleted"
        ))
        .await;
    assert!(
        html.contains("<strong class=\"count\">4</strong>"),
        "{html}"
    );
    let res = b
        .submit(
            "/confirm",
            ACT_ON_FILTER,
            &[
                ("op", "restore"),
                ("filter", &format!("{filter}&status=deleted")),
            ],
            None,
        )
        .await;
    assert_eq!(res.status(), 302);
    let res = b
        .submit(
            "/confirm",
            ACT_ON_FILTER,
            &[("op", "replay"), ("filter", &filter), ("target_topic", "")],
            None,
        )
        .await;
    assert_eq!(res.status(), 302, "{}", app.log());
    let job = job_id(&location(&res));
    let stored = app.store.job(&job).await.expect("job").expect("a job");
    assert_eq!((stored.total, stored.skipped_without_target), (3, 1));
}

#[tokio::test]
async fn a_job_whose_kafka_is_unreachable_shows_waiting_and_its_error() {
    let (app, _topic, ids) = start().await;
    let b = Browser::sign_in(&app, OPERATOR).await;
    let res = b
        .submit(
            "/",
            ACT,
            &[("op", "replay"), ("ids[]", &ids[0].to_string())],
            None,
        )
        .await;
    assert_eq!(res.status(), 302, "{}", app.log());
    let job = job_id(&location(&res));
    // The relay gives up on a delivery after its timeout (10 s) and backs off.
    eventually(
        "the job to wait for Kafka",
        Duration::from_secs(60),
        || async {
            matches!(
                app.store.job(&job).await,
                Ok(Some(j)) if j.status == JobStatus::Waiting
            )
        },
    )
    .await;
    let (status, html) = b.page(&format!("/jobs/{job}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("Waiting: Kafka is unreachable."), "{html}");
    assert!(html.contains("Last error"), "{html}");
    assert!(
        html.contains("http-equiv=\"refresh\""),
        "a waiting job still refreshes"
    );
    let res = b
        .submit(&format!("/jobs/{job}"), CANCEL, &[("job_id", &job)], None)
        .await;
    assert_eq!(res.status(), 302);
    let (status, html) = b.page("/jobs/no-such-job").await;
    assert_eq!(status, 404, "{html}");
}
