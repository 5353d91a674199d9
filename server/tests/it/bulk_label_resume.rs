//! A label added to the dead letters of a filter is a resumable bulk action (`docs/triage.md`,
//! "Bulk"), like a delete or a replay: interrupted after two of its chunks (the state a
//! process that died there leaves: `running` in `bulk_actions`, the cursor of the last
//! commit, no audit row), the next `redrive serve` finishes it at start-up, and every dead
//! letter ends labelled once, with one `label_added` event, and the action audited once. On
//! SQLite and PostgreSQL; then the same for removing the label.

use std::time::Duration;

use redrive_core::actions::{Actor, Selection};
use redrive_core::labels::LabelOp;
use redrive_core::store::{Store, CHUNK_ROWS};
use redrive_core::{Filter, NewDeadLetter, Normalized};
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::{fresh_database, unique, Backend};

use crate::support::sql::{exec, scalar};
use crate::support::{eventually, TestApp};

#[tokio::test]
async fn an_interrupted_bulk_label_is_finished_by_the_next_start_once() {
    const LABEL: &str = "needs-fix";
    for backend in Backend::ALL {
        let topic = unique("lbulk.DLT");
        let n = (2 * CHUNK_ROWS + 300) as i64;
        let records: Vec<NewDeadLetter> = (0..n)
            .map(|i| stored_dead_letter(&topic, i, Normalized::default()))
            .collect();
        let (url, dir) = fresh_database(backend).await.expect("db");
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        store.insert_batch(&records).await.expect("insert");
        let filter = Selection::Filter(Filter {
            dlq_topic: Some(topic.clone()),
            ..Filter::default()
        });
        // Ten already carry it (by ids, audited on their own): skipped by the bulk action.
        let first_ids: Vec<i64> = (1..=10).collect();
        store
            .label_selection(
                &Actor::operator("eve"),
                &Selection::Ids(first_ids),
                LABEL,
                LabelOp::Add,
            )
            .await
            .expect("by ids");

        for op in [LabelOp::Add, LabelOp::Remove] {
            let what = format!("{backend:?} {}", op.audit_action());
            let audits_before = store
                .audit(&redrive_core::actions::AuditQuery {
                    action: Some(op.audit_action().into()),
                    limit: 100,
                    ..Default::default()
                })
                .await
                .expect("audit")
                .items
                .len();
            let half = store
                .label_selection_chunks(&Actor::operator("eve"), &filter, LABEL, op, 2)
                .await
                .expect("two chunks");
            let bulk = &store.bulk_actions(5).await.expect("bulk")[0];
            assert_eq!(
                (bulk.kind.as_str(), bulk.status.as_str(), bulk.chunks),
                (op.audit_action(), "running", 2),
                "{what}: {bulk:?}"
            );
            assert_eq!(bulk.done, half.changed, "{what}");
            assert_eq!(bulk.label.as_deref(), Some(LABEL), "{what}");
            // The process that ran it died a while ago (longer than STALE_AFTER_MS).
            exec(
                backend,
                &url,
                &format!(
                    "UPDATE bulk_actions SET updated_at_ms = updated_at_ms - 120000 WHERE id = {}",
                    bulk.id
                ),
            )
            .await;

            let app = TestApp::serve(
                url.clone(),
                store.clone(),
                redrive_testkit::TestDatabase::from(tempfile::tempdir().expect("dir")),
                &[],
            )
            .await;
            eventually(
                &format!("{what}: the next start finishes it"),
                Duration::from_secs(60),
                || async { store.bulk_actions(5).await.expect("bulk")[0].status == "done" },
            )
            .await;
            let bulk = &store.bulk_actions(5).await.expect("bulk")[0];
            let (want_done, want_skipped) = match op {
                LabelOp::Add => (n - 10, 10),
                LabelOp::Remove => (n, 0),
            };
            assert_eq!(
                (bulk.done, bulk.skipped, bulk.resumed),
                (want_done, want_skipped, 1),
                "{what}: {bulk:?}"
            );
            let labelled = scalar(
                backend,
                &url,
                &format!(
                    "SELECT CAST(COUNT(*) AS BIGINT) FROM dead_letter_labels WHERE label = '{LABEL}'"
                ),
            )
            .await;
            assert_eq!(labelled, if op == LabelOp::Add { n } else { 0 }, "{what}");
            // One event per dead letter and kind: nothing was done twice.
            let kind = op.event_kind();
            let events = scalar(
                backend,
                &url,
                &format!(
                    "SELECT CAST(COUNT(*) AS BIGINT) FROM dead_letter_events WHERE kind = '{kind}'"
                ),
            )
            .await;
            let distinct = scalar(
                backend,
                &url,
                &format!(
                    "SELECT CAST(COUNT(DISTINCT dead_letter_id) AS BIGINT) FROM dead_letter_events \
                     WHERE kind = '{kind}'"
                ),
            )
            .await;
            assert_eq!((events, distinct), (n, n), "{what}");
            let audits = app.audit_of(op.audit_action()).await;
            assert_eq!(
                audits.len(),
                audits_before + 1,
                "{what}: ONE audit row: {audits:?}"
            );
            let last = audits.last().expect("the action's audit row");
            assert_eq!(last.count, want_done, "{what}");
            assert!(
                last.outcome.contains("resumed after an interruption")
                    && last.outcome.contains("in 3 chunks")
                    && last.outcome.contains(&format!("{want_skipped} skipped")),
                "{what}: {}",
                last.outcome
            );
            let detail: serde_json::Value =
                serde_json::from_str(last.detail.as_deref().unwrap_or("null")).expect("detail");
            assert_eq!(detail["label"], LABEL, "{what}");
            assert_eq!(detail["skipped"], want_skipped, "{what}");
            // Another restart finds nothing to resume.
            let app = app.restart(&[]).await;
            assert_eq!(
                app.audit_of(op.audit_action()).await.len(),
                audits_before + 1
            );
            let (code, log) = app.terminate(Duration::from_secs(40)).await;
            assert_eq!(code, Some(0), "{log}");
        }
        store.close().await;
        drop(dir);
    }
}
