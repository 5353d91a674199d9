//! Triage labels and notes, and the JSON Lines export, on SQLite and PostgreSQL: changes in
//! place with their audit rows (before/after) and history events; the `label` and
//! `unlabelled` filters in the store, the list API, the error groups and a bulk action; bulk
//! label changes by ids and by filter (in chunks, one audit row); the API's refusals (4xx with
//! a message); the no-JavaScript forms; and an export whose decoded bytes equal what was
//! stored, over more rows than one export page.

use std::collections::BTreeMap;

use base64::Engine as _;
use redrive_core::actions::{Actor, AuditEntry, AuditQuery, Selection};
use redrive_core::labels::{LabelOp, Target, MAX_LABELS_PER_RECORD};
use redrive_core::store::{Store, StoreError, CHUNK_ROWS, EXPORT_PAGE_ROWS};
use redrive_core::{Filter, Header, ListQuery, NewDeadLetter, Normalized};
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::{fresh_database, Backend};
use serde_json::{json, Value};

use crate::support::{Auth, Csrf, TestApp};

fn operator(name: &str) -> Actor {
    Actor::operator(name).with_client("203.0.113.9", "labels-test")
}

/// `n` dead letters in three error groups (`A`, `B`, `C` by offset mod 3), the first two with
/// bytes that must survive an export exactly: a tombstone with a null key and null/duplicate
/// headers, and a value of every byte 0..=255 that is not UTF-8.
fn records(topic: &str, n: i64) -> Vec<NewDeadLetter> {
    (0..n)
        .map(|i| {
            let class = ["A", "B", "C"][(i % 3) as usize];
            let mut d = stored_dead_letter(
                topic,
                i,
                Normalized {
                    source_topic: Some("orders".into()),
                    error_class: Some(format!("com.example.{class}Exception")),
                    error_message: Some(format!("{class} failed")),
                    ..Normalized::default()
                },
            );
            match i {
                0 => {
                    d.record.key = None;
                    d.record.value = None;
                    d.record.headers = vec![
                        Header {
                            name: "h".into(),
                            value: None,
                        },
                        Header {
                            name: "h".into(),
                            value: Some(vec![0, 255, 1]),
                        },
                        Header {
                            name: "empty".into(),
                            value: Some(vec![]),
                        },
                    ];
                }
                1 => {
                    d.record.key = Some(vec![0xff, 0xfe, 0x00]);
                    d.record.value = Some((0..=255u8).collect());
                }
                _ => {}
            }
            d
        })
        .collect()
}

async fn store_with(backend: Backend, n: i64) -> (Store, redrive_testkit::TestDatabase) {
    let (url, dir) = fresh_database(backend).await.expect("a fresh database");
    let store = Store::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    let recs = records("orders.DLT", n);
    for chunk in recs.chunks(1000) {
        store.insert_batch(chunk).await.expect("insert");
    }
    (store, dir)
}

/// Every id matching `filter`, newest first (paging through).
async fn ids(store: &Store, filter: Filter) -> Vec<i64> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list(&ListQuery {
                filter: filter.clone(),
                limit: 500,
                cursor,
            })
            .await
            .expect("list");
        out.extend(page.items.iter().map(|s| s.id));
        match page.next_cursor {
            Some(c) => cursor = Some(redrive_core::Cursor::decode(&c).expect("cursor")),
            None => return out,
        }
    }
}

fn label(l: &str) -> Filter {
    Filter {
        label: Some(l.to_string()),
        ..Filter::default()
    }
}

async fn audit_of(store: &Store, action: &str) -> Vec<AuditEntry> {
    store
        .audit(&AuditQuery {
            action: Some(action.to_string()),
            limit: 1000,
            ..AuditQuery::default()
        })
        .await
        .expect("audit")
        .items
}

fn detail(a: &AuditEntry) -> Value {
    serde_json::from_str(a.detail.as_deref().expect("a detail")).expect("detail is JSON")
}

#[tokio::test]
async fn labels_and_notes_change_in_place_with_audit_and_history() {
    for backend in Backend::ALL {
        let (store, _dir) = store_with(backend, 9).await;
        let all = ids(&store, Filter::default()).await;
        let id = *all.last().expect("a dead letter");
        let ann = operator("ann");
        let t = Target::DeadLetter(id);

        assert!(store
            .change_label(&ann, &t, "  needs-fix ", LabelOp::Add)
            .await
            .expect("add"));
        assert!(
            !store
                .change_label(&ann, &t, "needs-fix", LabelOp::Add)
                .await
                .expect("add again"),
            "{backend:?}: adding a label twice changes nothing"
        );
        assert!(store
            .change_label(&ann, &t, "known:  INC-1234", LabelOp::Add)
            .await
            .expect("add"));
        let a = store.annotations(&t).await.expect("annotations");
        let names: Vec<&str> = a.labels.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(names, ["known: INC-1234", "needs-fix"], "{backend:?}");
        assert!(a.labels.iter().all(|l| l.added_by == "ann"));
        let adds = audit_of(&store, "label_add").await;
        assert_eq!(
            adds.len(),
            2,
            "{backend:?}: one audit row per change, none for a no-op"
        );
        let last = detail(&adds[0]);
        assert_eq!(last["before"], json!(["needs-fix"]));
        assert_eq!(last["after"], json!(["known: INC-1234", "needs-fix"]));
        assert_eq!(last["target"], json!({ "dead_letter": id }));
        assert_eq!(adds[0].ids.as_deref(), Some(format!("[{id}]").as_str()));
        assert_eq!(adds[0].client_ip.as_deref(), Some("203.0.113.9"));

        assert!(store
            .change_label(&ann, &t, "needs-fix", LabelOp::Remove)
            .await
            .expect("remove"));
        assert!(!store
            .change_label(&ann, &t, "needs-fix", LabelOp::Remove)
            .await
            .expect("remove again"));
        let removes = audit_of(&store, "label_remove").await;
        assert_eq!(removes.len(), 1);
        assert_eq!(detail(&removes[0])["after"], json!(["known: INC-1234"]));

        // Refused before anything is written.
        for bad in ["<script>", "", "   ", &"x".repeat(65), "-x", "a\u{7}b"] {
            assert!(
                matches!(
                    store.change_label(&ann, &t, bad, LabelOp::Add).await,
                    Err(StoreError::Invalid(_))
                ),
                "{backend:?}: {bad:?}"
            );
        }
        for i in 1..MAX_LABELS_PER_RECORD {
            store
                .change_label(&ann, &t, &format!("l{i:02}"), LabelOp::Add)
                .await
                .expect("under the cap");
        }
        match store
            .change_label(&ann, &t, "one-too-many", LabelOp::Add)
            .await
        {
            Err(StoreError::Invalid(m)) => assert!(m.contains("20 labels"), "{m}"),
            other => panic!("{backend:?}: the cap must refuse, got {other:?}"),
        }
        assert!(matches!(
            store
                .change_label(&ann, &Target::DeadLetter(9_999_999), "x", LabelOp::Add)
                .await,
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store
                .change_label(&ann, &Target::Group("zz".into()), "x", LabelOp::Add)
                .await,
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(
            store
                .change_label(
                    &ann,
                    &Target::Group("0000000000000000".into()),
                    "x",
                    LabelOp::Add
                )
                .await,
            Err(StoreError::NotFound(_))
        ));

        // The note: set, unchanged, edited in place, cleared; each change audited whole.
        let first = "first line\n<b>not html</b>";
        let n = store.set_note(&ann, &t, first).await.expect("note");
        assert_eq!(n.map(|n| n.text).as_deref(), Some(first));
        store.set_note(&ann, &t, first).await.expect("same note");
        store.set_note(&ann, &t, " second ").await.expect("edit");
        assert_eq!(
            store
                .annotations(&t)
                .await
                .expect("read")
                .note
                .map(|n| n.text)
                .as_deref(),
            Some("second")
        );
        assert_eq!(store.set_note(&ann, &t, "  ").await.expect("clear"), None);
        let notes = audit_of(&store, "note_set").await;
        assert_eq!(
            notes.len(),
            3,
            "{backend:?}: set, edit, clear (not the no-op)"
        );
        assert_eq!(detail(&notes[1])["before"], json!(first));
        assert_eq!(detail(&notes[1])["after"], json!("second"));
        assert_eq!(detail(&notes[0])["after"], Value::Null);
        assert!(matches!(
            store.set_note(&ann, &t, &"é".repeat(4001)).await,
            Err(StoreError::Invalid(_))
        ));

        // The group: its labels and note show on each of its dead letters, history included.
        let d = store.get(id).await.expect("get").expect("exists");
        let fp = d.summary.fingerprint.clone();
        let g = Target::Group(fp.clone());
        assert!(store
            .change_label(&ann, &g, "hard-case", LabelOp::Add)
            .await
            .expect("group label"));
        store
            .set_note(&ann, &g, "poison: schema v2 payloads")
            .await
            .expect("group note");
        let group_audit = audit_of(&store, "label_add").await;
        assert_eq!(
            group_audit[0].filter.as_deref(),
            Some(format!("{{\"fingerprint\":\"{fp}\"}}").as_str())
        );
        let sibling = ids(
            &store,
            Filter {
                fingerprint: Some(fp.clone()),
                ..Filter::default()
            },
        )
        .await
        .into_iter()
        .find(|x| *x != id)
        .expect("another dead letter of the group");
        let tri = store
            .triage(sibling)
            .await
            .expect("triage")
            .expect("exists");
        assert_eq!(tri.group.labels[0].label, "hard-case");
        assert_eq!(
            tri.group.note.map(|n| n.text).as_deref(),
            Some("poison: schema v2 payloads")
        );
        let got = store.get(sibling).await.expect("get").expect("exists");
        assert_eq!(got.summary.group_labels, ["hard-case"]);
        let kinds = |h: Vec<redrive_core::actions::HistoryEvent>| -> Vec<String> {
            h.into_iter().map(|e| e.kind).collect()
        };
        let own = kinds(store.history(id).await.expect("history"));
        for k in [
            "label_added",
            "label_removed",
            "note_set",
            "note_cleared",
            "group_label_added",
            "group_note_set",
        ] {
            assert!(own.iter().any(|x| x == k), "{backend:?}: {k} in {own:?}");
        }
        let theirs = kinds(store.history(sibling).await.expect("history"));
        assert!(
            theirs.iter().any(|x| x == "group_label_added"),
            "{theirs:?}"
        );
        assert!(!theirs.iter().any(|x| x == "label_added"), "{theirs:?}");
    }
}

#[tokio::test]
async fn label_filters_serve_the_list_groups_and_bulk_actions() {
    for backend in Backend::ALL {
        // More than one chunk, so the bulk label change by filter runs in chunks.
        let n = CHUNK_ROWS as i64 + 101;
        let (store, _dir) = store_with(backend, n).await;
        let ann = operator("ann");
        let all = ids(&store, Filter::default()).await;
        assert_eq!(all.len() as i64, n);

        // By ids: one transaction, one audit row; already-labelled ones are skipped.
        let picked: Vec<i64> = all.iter().copied().take(5).collect();
        let o = store
            .label_selection(
                &ann,
                &Selection::Ids(picked[..2].to_vec()),
                "needs-fix",
                LabelOp::Add,
            )
            .await
            .expect("bulk by ids");
        assert_eq!((o.changed, o.skipped), (2, 0));
        let o = store
            .label_selection(
                &ann,
                &Selection::Ids(picked.clone()),
                "needs-fix",
                LabelOp::Add,
            )
            .await
            .expect("bulk by ids");
        assert_eq!((o.changed, o.skipped), (3, 2), "{backend:?}");
        let mut got = ids(&store, label("needs-fix")).await;
        got.sort_unstable();
        let mut want = picked.clone();
        want.sort_unstable();
        assert_eq!(
            got, want,
            "{backend:?}: the label filter lists exactly those"
        );
        assert_eq!(store.count(&label("needs-fix")).await.expect("count"), 5);

        // A group label makes its dead letters match too; `unlabelled` is the rest.
        let d = store.get(all[0]).await.expect("get").expect("exists");
        let fp = d.summary.fingerprint.clone();
        store
            .change_label(
                &ann,
                &Target::Group(fp.clone()),
                "known: INC-7",
                LabelOp::Add,
            )
            .await
            .expect("group label");
        let in_group = ids(
            &store,
            Filter {
                fingerprint: Some(fp.clone()),
                ..Filter::default()
            },
        )
        .await;
        assert_eq!(ids(&store, label("known: INC-7")).await, in_group);
        let unlabelled = Filter {
            unlabelled: true,
            ..Filter::default()
        };
        let rest = ids(&store, unlabelled.clone()).await;
        assert!(rest
            .iter()
            .all(|i| !in_group.contains(i) && !picked.contains(i)));
        let picked_outside = picked.iter().filter(|i| !in_group.contains(i)).count();
        assert_eq!(rest.len(), all.len() - in_group.len() - picked_outside);
        let groups = store
            .error_groups(&label("known: INC-7"), 50)
            .await
            .expect("groups");
        assert_eq!(groups.len(), 1, "{backend:?}");
        assert_eq!(groups[0].fingerprint, fp);
        assert_eq!(groups[0].labels, ["known: INC-7"]);

        // By filter, in chunks: every dead letter of the group gets `hard-case`, ONE audit row.
        let o = store
            .label_selection(
                &ann,
                &Selection::Filter(label("known: INC-7")),
                "hard-case",
                LabelOp::Add,
            )
            .await
            .expect("bulk by filter");
        assert_eq!(o.changed as usize, in_group.len(), "{backend:?}");
        let mut hard = ids(&store, label("hard-case")).await;
        hard.sort_unstable();
        let mut want = in_group.clone();
        want.sort_unstable();
        assert_eq!(hard, want);
        let rows = audit_of(&store, "label_add").await;
        assert_eq!(
            rows.len(),
            4,
            "{backend:?}: two by ids, one on the group, one by filter"
        );
        assert_eq!(rows[0].count as usize, in_group.len());
        assert!(rows[0]
            .filter
            .as_deref()
            .unwrap_or("")
            .contains("known: INC-7"));

        // Over every dead letter (more than one chunk): one audit row saying so.
        let o = store
            .label_selection(
                &ann,
                &Selection::Filter(Filter::default()),
                "triaged",
                LabelOp::Add,
            )
            .await
            .expect("bulk over all");
        assert_eq!(o.changed, n);
        let rows = audit_of(&store, "label_add").await;
        assert!(
            rows[0].outcome.contains("in 2 chunks"),
            "{}",
            rows[0].outcome
        );

        // A bulk action by label filter acts on exactly the labelled ones.
        let deleted = store
            .delete(&ann, &Selection::Filter(label("needs-fix")), None)
            .await
            .expect("delete");
        assert_eq!(deleted, 5, "{backend:?}");
        let o = store
            .label_selection(
                &ann,
                &Selection::Filter(label("hard-case")),
                "hard-case",
                LabelOp::Remove,
            )
            .await
            .expect("remove by filter");
        assert!(o.changed > 0);
        assert!(ids(&store, label("hard-case")).await.is_empty());
        assert!(matches!(
            store
                .label_selection(&ann, &Selection::Ids(vec![1]), "<b>", LabelOp::Add)
                .await,
            Err(StoreError::Invalid(_))
        ));
    }
}

/// The API, the plain forms and the export through the real binary.
#[tokio::test]
async fn api_forms_and_export_through_the_binary() {
    for backend in Backend::ALL {
        let n = EXPORT_PAGE_ROWS as i64 * 2 + 37;
        let recs = records("pay.DLT", n);
        let app = TestApp::with_records(backend, &recs, &[]).await;
        let token = app.admin_token().await;
        let bearer = Auth::Bearer(&token);
        let page: Value = app
            .get("/api/v1/dead-letters?limit=500", bearer)
            .await
            .json()
            .await
            .expect("JSON");
        let items = page["items"].as_array().expect("items").clone();
        let first = items[0]["id"].as_i64().expect("id");
        let fp = items[0]["fingerprint"].as_str().expect("fp").to_string();

        // Add, read, note; the list carries the labels and filters by them.
        let res = app
            .post_json(
                &format!("/api/v1/dead-letters/{first}/labels"),
                bearer,
                Csrf::Missing,
                &json!({ "label": "needs-fix" }),
            )
            .await;
        assert_eq!(res.status(), 200, "{backend:?}");
        let body: Value = res.json().await.expect("JSON");
        assert_eq!(body["changed"], json!(true));
        assert_eq!(body["labels"][0]["label"], json!("needs-fix"));
        let res = app
            .put_json(
                &format!("/api/v1/dead-letters/{first}/note"),
                &token,
                &json!({ "note": "looked at it" }),
            )
            .await;
        assert_eq!(res.status(), 200);
        let res = app
            .post_json(
                &format!("/api/v1/error-groups/{fp}/labels"),
                bearer,
                Csrf::Missing,
                &json!({ "label": "known: INC-9" }),
            )
            .await;
        assert_eq!(res.status(), 200);
        let t: Value = app
            .get(&format!("/api/v1/dead-letters/{first}/labels"), bearer)
            .await
            .json()
            .await
            .expect("JSON");
        assert_eq!(t["note"]["text"], json!("looked at it"));
        assert_eq!(t["group"]["labels"][0]["label"], json!("known: INC-9"));
        let listed: Value = app
            .get("/api/v1/dead-letters?label=needs-fix", bearer)
            .await
            .json()
            .await
            .expect("JSON");
        assert_eq!(
            listed["items"].as_array().map(Vec::len),
            Some(1),
            "{backend:?}"
        );
        assert_eq!(listed["items"][0]["labels"], json!(["needs-fix"]));
        assert_eq!(listed["items"][0]["group_labels"], json!(["known: INC-9"]));
        let groups: Value = app
            .get("/api/v1/error-groups?label=known%3A+INC-9", bearer)
            .await
            .json()
            .await
            .expect("JSON");
        assert_eq!(groups["items"][0]["labels"], json!(["known: INC-9"]));

        // Bulk through the API, by filter.
        let res = app
            .post_json(
                "/api/v1/dead-letters/labels",
                bearer,
                Csrf::Missing,
                &json!({ "filter": { "label": "known: INC-9" }, "add": "hard-case" }),
            )
            .await;
        assert_eq!(res.status(), 200);
        let o: Value = res.json().await.expect("JSON");
        let in_group = (0..n).filter(|i| i % 3 == (n - 1) % 3).count() as i64;
        assert_eq!(o["changed"], json!(in_group), "{backend:?}");

        // Refusals: 4xx with a message, nothing changed.
        let path = format!("/api/v1/dead-letters/{first}/labels");
        for (body, status) in [
            (json!({ "label": "<b>x</b>" }), 422),
            (json!({ "label": "x".repeat(65) }), 422),
            (json!({ "labels": "x" }), 422),
        ] {
            let res = app.post_json(&path, bearer, Csrf::Missing, &body).await;
            assert_eq!(res.status(), status, "{backend:?}: {body}");
            let e: Value = res.json().await.expect("JSON error");
            assert!(!e["error"].as_str().unwrap_or("").is_empty());
        }
        let res = app
            .post_json(
                "/api/v1/dead-letters/abc/labels",
                bearer,
                Csrf::Missing,
                &json!({ "label": "x" }),
            )
            .await;
        assert_eq!(res.status(), 400);
        let res = app
            .post_json(
                "/api/v1/dead-letters/99999999/labels",
                bearer,
                Csrf::Missing,
                &json!({ "label": "x" }),
            )
            .await;
        assert_eq!(res.status(), 404);
        let res = app
            .put_json(
                &format!("/api/v1/dead-letters/{first}/note"),
                &token,
                &json!({ "note": "x".repeat(4001) }),
            )
            .await;
        assert_eq!(res.status(), 422);
        let res = app.get("/api/v1/dead-letters?label=%3Cb%3E", bearer).await;
        assert_eq!(res.status(), 400);
        let e: Value = res.json().await.expect("JSON");
        assert!(e["error"].as_str().unwrap_or("").contains("label"), "{e}");
        let res = app
            .post_json(
                "/api/v1/dead-letters/labels",
                bearer,
                Csrf::Missing,
                &json!({ "ids": [first], "add": "a", "remove": "b" }),
            )
            .await;
        assert_eq!(res.status(), 422);

        // A viewer reads but may not change (403, audited `denied`).
        app.add_user("vic", "viewer", "viewer-passphrase").await;
        let vic = app.sign_in("vic", "viewer-passphrase").await;
        let res = app
            .post_json(
                &path,
                Auth::Session(&vic),
                Csrf::Right,
                &json!({ "label": "x" }),
            )
            .await;
        assert_eq!(res.status(), 403);
        assert!(app
            .audit_of("label_add")
            .await
            .iter()
            .any(|a| a.outcome == "denied" && a.actor == "vic"));
        assert_eq!(app.get(&path, Auth::Session(&vic)).await.status(), 200);

        // The plain forms (no JavaScript): CSRF checked, then a redirect back.
        app.add_user("opal", "operator", "operator-passphrase")
            .await;
        let opal = app.sign_in("opal", "operator-passphrase").await;
        let back = format!("/dead-letters/{first}");
        let fields = [
            ("kind", "dead_letter"),
            ("target", &first.to_string()),
            ("op", "add"),
            ("label", "from-the-form"),
            ("back", &back),
        ];
        let res = app
            .post_form(
                "/api/ui/label",
                Auth::Session(&opal),
                Csrf::Missing,
                &fields,
            )
            .await;
        assert_eq!(res.status(), 403, "{backend:?}: no CSRF token, no change");
        let res = app
            .post_form("/api/ui/label", Auth::Session(&opal), Csrf::Right, &fields)
            .await;
        assert!(res.status().is_redirection(), "{}", res.status());
        assert_eq!(crate::support::location(&res), back);
        let res = app
            .post_form(
                "/api/ui/note",
                Auth::Session(&opal),
                Csrf::Right,
                &[
                    ("kind", "group"),
                    ("target", &fp),
                    ("note", "<script>alert(1)</script>"),
                    ("back", "/groups"),
                ],
            )
            .await;
        assert!(res.status().is_redirection(), "{}", res.status());
        let html = app
            .get(&back, Auth::Session(&opal))
            .await
            .text()
            .await
            .expect("page");
        assert!(
            html.contains("from-the-form"),
            "{backend:?}: the chip is on the page"
        );
        assert!(
            html.contains("/?label=from-the-form"),
            "the chip filters the list"
        );
        assert!(
            !html.contains("<script>alert(1)"),
            "the note is text, not HTML"
        );
        assert!(html.contains("&lt;script&gt;alert(1)"));
        let group_page = app
            .get(&format!("/groups/{fp}"), Auth::Session(&vic))
            .await
            .text()
            .await
            .expect("page");
        assert!(group_page.contains("known: INC-9"));
        assert!(!group_page.contains("Save note"), "a viewer gets no form");

        // The export: every row, newest first, byte-exact, with labels and notes; audited.
        let res = app.get("/api/v1/dead-letters/export", bearer).await;
        assert_eq!(res.status(), 200);
        assert!(res.headers()["content-type"]
            .to_str()
            .unwrap_or("")
            .starts_with("application/jsonl"));
        let text = res.text().await.expect("body");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect();
        assert_eq!(
            lines.len() as i64,
            n,
            "{backend:?}: every row, over several pages"
        );
        let by_offset: BTreeMap<i64, &NewDeadLetter> =
            recs.iter().map(|r| (r.record.dlq_offset, r)).collect();
        let b64 = |v: &Value| -> Option<Vec<u8>> {
            v.as_str().map(|s| {
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .expect("base64")
            })
        };
        let mut prev = i64::MAX;
        for l in &lines {
            assert_eq!(l["schema"], json!("redrive.dead_letter.v1"));
            let at = l["dead_lettered_at_ms"].as_i64().expect("time");
            assert!(at <= prev, "newest first");
            prev = at;
            let sent = by_offset[&l["dlq_offset"].as_i64().expect("offset")];
            assert_eq!(
                b64(&l["key_b64"]),
                sent.record.key,
                "{backend:?}: key bytes"
            );
            assert_eq!(b64(&l["value_b64"]), sent.record.value, "value bytes");
            let headers: Vec<Header> = l["headers"]
                .as_array()
                .expect("headers")
                .iter()
                .map(|h| Header {
                    name: h["name"].as_str().expect("name").to_string(),
                    value: b64(&h["value_b64"]),
                })
                .collect();
            assert_eq!(
                headers, sent.record.headers,
                "headers, order and nulls kept"
            );
            assert_eq!(l["error_class"], json!(sent.normalized.error_class));
            assert_eq!(l["fingerprint"], json!(sent.fingerprint));
            let stored = app
                .store
                .get(l["id"].as_i64().expect("id"))
                .await
                .expect("get")
                .expect("exists");
            assert_eq!(stored.record.value, sent.record.value);
        }
        let mine = lines
            .iter()
            .find(|l| l["id"].as_i64() == Some(first))
            .expect("the labelled one");
        assert_eq!(
            mine["labels"],
            json!(["from-the-form", "hard-case", "needs-fix"])
        );
        assert_eq!(mine["group_labels"], json!(["known: INC-9"]));
        assert_eq!(mine["note"], json!("looked at it"));
        assert_eq!(mine["group_note"], json!("<script>alert(1)</script>"));

        // A filtered export is the filtered list; bad parameters are 400.
        let text = app
            .get(
                "/dead-letters/export.jsonl?label=hard-case",
                Auth::Session(&vic),
            )
            .await
            .text()
            .await
            .expect("body");
        assert_eq!(text.lines().count() as i64, in_group, "{backend:?}");
        assert_eq!(
            app.get("/api/v1/dead-letters/export?limit=5", bearer)
                .await
                .status(),
            400
        );
        assert_eq!(
            app.get("/api/v1/dead-letters/export?colour=red", bearer)
                .await
                .status(),
            400
        );
        let exports = app.audit_of("export").await;
        assert_eq!(exports.len(), 2, "{backend:?}: one audit row per export");
        assert_eq!(exports[0].count, n);
        assert_eq!(exports[0].outcome, "ok");
        assert_eq!(exports[1].count, in_group);
        assert_eq!(exports[1].actor, "vic");
        assert!(exports[1]
            .filter
            .as_deref()
            .unwrap_or("")
            .contains("hard-case"));
    }
}
