//! A refused UI action called by a script (a hydrated `ActionForm`: the server function's
//! own `Accept`, not `text/html`) answers a 4xx with the message the page shows — 422 for
//! input that cannot be used, 409 for a conflict with the job's state, 404 for a job that is
//! not there, 403 for a role that may not — never a 500, and changes nothing; the same refusal
//! from a plain HTML form still comes back to its page (302 with the error in `__err`).
//! `app/src/refusal.rs`; on SQLite and PostgreSQL.

use redrive_core::Status;
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::{unique, Backend};

use crate::support::{location, Session, TestApp};
use crate::ui_actions::{ACT, ACT_ON_FILTER, OPERATOR, VIEWER};

const CANCEL: &str = "/api/ui/cancel-job";
const EDIT: &str = "/api/ui/edit";

/// POSTs `fields` (and the session's CSRF token) to the server function `action` as the
/// hydrated page does; returns the status and the body.
async fn as_script(
    app: &TestApp,
    session: &Session,
    action: &str,
    fields: &[(&str, &str)],
) -> (u16, String) {
    let mut all = fields.to_vec();
    all.push(("csrf", &session.csrf));
    let res = reqwest::Client::new()
        .post(app.url(action))
        .header("Cookie", &session.cookie)
        .header("Accept", "application/json")
        .header("Referer", app.url("/"))
        .form(&all)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {action}: {e}\n{}", app.log()));
    let status = res.status().as_u16();
    (status, res.text().await.expect("body"))
}

/// A refused call: server function, form fields, the status it answers, what it says.
/// POSTs `fields` (and the session's CSRF token) to the list's action as a browser without
/// JavaScript does (`Accept: text/html`), from page `referer` if given; redirects are not
/// followed.
async fn as_plain_form(
    app: &TestApp,
    session: &Session,
    referer: Option<&str>,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    let mut all = fields.to_vec();
    all.push(("csrf", &session.csrf));
    let mut req = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
        .post(app.url(ACT))
        .header("Cookie", &session.cookie)
        .header("Accept", "text/html,application/xhtml+xml");
    if let Some(r) = referer {
        req = req.header("Referer", r);
    }
    req.form(&all).send().await.expect("post")
}

type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, u16, &'a str);

#[tokio::test]
async fn refusals_answer_4xx_with_their_message_to_a_script() {
    for backend in Backend::ALL {
        let topic = unique("refusals.DLT");
        let mut records = vec![
            stored_dead_letter(&topic, 0, Default::default()),
            stored_dead_letter(&topic, 1, Default::default()),
        ];
        for r in &mut records {
            r.normalized.source_topic = Some("orders".into());
        }
        let app = TestApp::with_records(backend, &records, &[]).await;
        app.add_user(OPERATOR.0, "operator", OPERATOR.1).await;
        app.add_user(VIEWER.0, "viewer", VIEWER.1).await;
        let op = app.sign_in(OPERATOR.0, OPERATOR.1).await;
        let ids: Vec<i64> = app
            .store
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .iter()
            .map(|d| d.id)
            .collect();
        let filter = format!("dlq_topic={topic}");
        let first = ids[0].to_string();

        let cases: Vec<Case> = vec![
            (ACT, vec![("op", "replay")], 422, "Nothing selected"),
            (
                ACT,
                vec![
                    ("op", "replay"),
                    ("ids[]", &first),
                    ("rate_per_sec", "fast"),
                ],
                422,
                "rate limit must be a whole number",
            ),
            (
                ACT,
                vec![
                    ("op", "replay"),
                    ("ids[]", &first),
                    ("target_topic", "no spaces"),
                ],
                422,
                "Could not start the replay",
            ),
            (
                ACT,
                vec![("op", "explode"), ("ids[]", &first)],
                422,
                "Unknown action",
            ),
            (
                ACT_ON_FILTER,
                vec![("op", "delete"), ("confirm_all", "1")],
                422,
                "Nothing was changed: you typed 1, but there are 2 dead letters now.",
            ),
            (
                ACT_ON_FILTER,
                vec![
                    ("op", "replay"),
                    ("filter", &filter),
                    ("unordered", "maybe"),
                ],
                422,
                "unordered is a checkbox",
            ),
            (
                ACT_ON_FILTER,
                vec![("op", "delete"), ("filter", "no_such_field=1")],
                422,
                "This filter cannot be used",
            ),
            (CANCEL, vec![("job_id", "no-such-job")], 404, "There is no"),
            (
                ACT,
                vec![("op", "replay"), ("ids[]", &first), ("ids[]", "999999")],
                404,
                "There is no dead letter 999999.",
            ),
            (
                ACT,
                vec![("op", "delete"), ("ids[]", "999999")],
                404,
                "There is no dead letter 999999.",
            ),
            (
                ACT,
                vec![
                    ("op", "delete"),
                    ("ids[]", "999999"),
                    ("ids[]", &first),
                    ("ids[]", "999998"),
                ],
                404,
                "There are no dead letters 999998, 999999 (2 of the 3 asked).",
            ),
            // A label button with the label field empty (or blank): what to type.
            (
                ACT,
                vec![("op", "label_add"), ("ids[]", &first), ("label", "")],
                422,
                "Type a label to add: the label field is empty, so nothing was labelled",
            ),
            (
                ACT,
                vec![("op", "label_add"), ("ids[]", &first), ("label", "   ")],
                422,
                "Type a label to add",
            ),
            (
                ACT,
                vec![("op", "label_remove"), ("ids[]", &first), ("label", "")],
                422,
                "Type the label to remove: the label field is empty, so no label was removed.",
            ),
            (
                ACT_ON_FILTER,
                vec![("op", "label_add"), ("filter", &filter), ("label", "")],
                422,
                "Type a label to add",
            ),
            (
                ACT,
                vec![
                    ("op", ""),
                    ("ids[]", &first),
                    ("reason", "typed, then Enter"),
                ],
                422,
                "choose an action with its button",
            ),
            (
                EDIT,
                vec![
                    ("id", &first),
                    ("value_as", "json"),
                    ("value", "{\"n\": 1,5}"),
                    ("headers_keep", "true"),
                    ("op", "save"),
                ],
                422,
                "Nothing was saved",
            ),
        ];
        for (action, fields, want, says) in &cases {
            let (status, body) = as_script(&app, &op, action, fields).await;
            assert_eq!(
                status,
                *want,
                "{backend:?} {action} {fields:?}: {body}\n{}",
                app.log()
            );
            assert!(
                body.contains(says),
                "{backend:?} {action} {fields:?}: {body}"
            );
        }
        assert!(
            app.store.jobs(10).await.expect("jobs").is_empty(),
            "{backend:?}"
        );
        for id in &ids {
            let d = app.store.get(*id).await.expect("get").expect("exists");
            assert_eq!(d.summary.status, Status::New, "{backend:?}");
        }

        // A conflict with the job's state: cancelling a cancelled job.
        let (status, body) =
            as_script(&app, &op, ACT, &[("op", "replay"), ("ids[]", &first)]).await;
        assert_eq!(status, 200, "{backend:?}: {body}");
        let job = app.store.jobs(1).await.expect("jobs")[0].id.clone();
        let (status, body) = as_script(&app, &op, CANCEL, &[("job_id", &job)]).await;
        assert_eq!(status, 200, "{backend:?}: {body}");
        let (status, body) = as_script(&app, &op, CANCEL, &[("job_id", &job)]).await;
        assert_eq!(status, 409, "{backend:?}: {body}");
        assert!(body.contains("Could not cancel the replay job"), "{body}");

        // A viewer: 403 with the reason.
        let viewer = app.sign_in(VIEWER.0, VIEWER.1).await;
        let (status, body) =
            as_script(&app, &viewer, ACT, &[("op", "delete"), ("ids[]", &first)]).await;
        assert_eq!(status, 403, "{backend:?}: {body}");
        assert!(body.contains("Not allowed"), "{body}");

        // The same refusal from a plain form still comes back to its page.
        let res = as_plain_form(&app, &op, Some(&app.url("/")), &[("op", "replay")]).await;
        assert_eq!(res.status(), 302, "{backend:?}");
        assert!(location(&res).contains("__err="), "{backend:?}");
        // Without a Referer (a page opened directly, or a browser that sends none), Enter
        // in the Reason field gets a page with the message, not the server function's own
        // error encoding (`ServerError|...`).
        let res = as_plain_form(
            &app,
            &op,
            None,
            &[
                ("op", ""),
                ("ids[]", first.as_str()),
                ("reason", "typed, then Enter"),
            ],
        )
        .await;
        let status = res.status().as_u16();
        let html = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/html"));
        let body = res.text().await.expect("body");
        assert!(
            html && (400..500).contains(&status),
            "{backend:?}: {status} {body}"
        );
        assert!(
            body.contains("choose an action with its button") && !body.contains("ServerError"),
            "{backend:?}: {body}"
        );
    }
}

/// The list's "Label all matching" form (a GET of the confirmation page) with the label left
/// empty or blank, or not a label: 422 with what to type and the field to type it, the filter
/// kept — not the filter's refusal — and no Confirm.
#[tokio::test]
async fn a_label_change_without_a_label_says_what_to_type() {
    let topic = unique("label-confirm.DLT");
    let records = vec![stored_dead_letter(&topic, 0, Default::default())];
    let app = TestApp::with_records(Backend::Sqlite, &records, &[]).await;
    app.add_user(OPERATOR.0, "operator", OPERATOR.1).await;
    let op = app.sign_in(OPERATOR.0, OPERATOR.1).await;
    let page = |path: String| {
        let (app, op) = (&app, &op);
        async move {
            let res = reqwest::Client::new()
                .get(app.url(&path))
                .header("Cookie", &op.cookie)
                .send()
                .await
                .expect("GET");
            let status = res.status().as_u16();
            (status, res.text().await.expect("page"))
        }
    };
    for (op_name, label, says) in [
        (
            "label_add",
            "",
            "Type a label to add: the label field is empty",
        ),
        (
            "label_add",
            "%20%20",
            "Type a label to add: the label field is empty",
        ),
        (
            "label_remove",
            "",
            "Type the label to remove: the label field is empty",
        ),
        (
            "label_add",
            "%23x",
            "This label cannot be used: a label may hold",
        ),
    ] {
        let path = format!("/confirm?op={op_name}&dlq_topic={topic}&op_label={label}");
        let (status, html) = page(path.clone()).await;
        assert_eq!(status, 422, "{path}: {html}");
        assert!(html.contains(says), "{path}: {html}");
        assert!(
            !html.contains("This filter cannot be used"),
            "{path}: {html}"
        );
        assert!(!html.contains("confirm-form"), "{path}: {html}");
        assert!(
            html.contains("name=\"op_label\"")
                && html.contains(&format!("name=\"dlq_topic\" value=\"{topic}\"")),
            "{path}: {html}"
        );
    }
    // With a label: the count and Confirm, as before.
    let (status, html) = page(format!(
        "/confirm?op=label_add&dlq_topic={topic}&op_label=needs-fix"
    ))
    .await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("confirm-form"), "{html}");
}
