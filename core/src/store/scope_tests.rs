//! `Store::check_ids_exist_in_scope` (`scope.rs`): an action on dead letters picked by id
//! refuses ids that are not there (404, nothing changed, no audit row) and ids outside the
//! actor's DLQ-topic scope (read the same), while the by-id reads keep leaving a missing id
//! to their caller.

use std::collections::BTreeMap;

use super::test_file::sqlite_store;
use super::test_records::dead_letter;
use super::StoreError;
use crate::actions::{Actor, AuditQuery, ReplayRequest, Selection};
use crate::permission::{RoleConfig, Roles};

/// An operator limited to DLQ topic `payments.DLT`.
fn payments_operator() -> Actor {
    let roles = Roles::from_config(&BTreeMap::from([(
        "operator".to_string(),
        RoleConfig {
            permissions: None,
            dlq_topics: Some(vec!["payments.DLT".to_string()]),
        },
    )]))
    .expect("roles");
    Actor::new("pat", roles.get("operator").expect("operator").clone())
}

fn not_found(r: Result<impl std::fmt::Debug, StoreError>) -> String {
    match r {
        Err(StoreError::NotFound(m)) => m,
        other => panic!("expected NotFound, got {other:?}"),
    }
}

#[tokio::test]
async fn actions_by_id_refuse_ids_that_are_not_there_or_outside_the_scope() {
    let (store, _dir) = sqlite_store("scope.db").await;
    // Ids 1..=3 on orders.DLT, 4 on payments.DLT.
    let mut batch: Vec<_> = (0..3).map(|o| dead_letter(o, None)).collect();
    let mut payment = dead_letter(0, None);
    payment.record.dlq_topic = "payments.DLT".into();
    batch.push(payment);
    store.insert_batch(&batch).await.expect("insert");
    let op = Actor::operator("olga");

    // Every id there (duplicates and order do not matter); deleted ones count as there.
    store
        .check_ids_exist_in_scope(&op, &[3, 1, 3, 2])
        .await
        .expect("all there");
    store
        .delete(&op, &Selection::Ids(vec![2]), None)
        .await
        .expect("delete");
    store
        .check_ids_exist_in_scope(&op, &[2])
        .await
        .expect("a deleted one is there");

    // One missing id: named alone.
    assert_eq!(
        not_found(store.check_ids_exist_in_scope(&op, &[1, 7, 7, 2]).await),
        "dead letter 7"
    );
    assert_eq!(
        super::there_is_no("dead letter 7"),
        "there is no dead letter 7"
    );
    // Several: each named, and how many of the distinct ids asked are missing.
    let m = not_found(
        store
            .check_ids_exist_in_scope(&op, &[12, 1, 9, 7, 3, 9])
            .await,
    );
    assert_eq!(m, "dead letters 7, 9, 12 (3 of the 5 asked)");
    assert_eq!(
        super::there_is_no(&m),
        "there are no dead letters 7, 9, 12 (3 of the 5 asked)"
    );
    // The lowest five are named and all counted, across chunks of the `IN (...)` too.
    let many: Vec<i64> = (1..=1_200).rev().collect();
    assert_eq!(
        not_found(store.check_ids_exist_in_scope(&op, &many).await),
        "dead letters 5, 6, 7, 8, 9 and 1191 more (1196 of the 1200 asked)"
    );
    let far: Vec<i64> = (1..=4).chain([600, 1_100]).collect();
    assert_eq!(
        not_found(store.check_ids_exist_in_scope(&op, &far).await),
        "dead letters 600, 1100 (2 of the 6 asked)"
    );
    // The by-id reads leave a missing id to their caller.
    store
        .check_ids_in_scope(&op, &[999])
        .await
        .expect("reads: left to the caller");

    // An action on a missing id changes nothing and writes no audit row.
    let audited = || async {
        store
            .audit(&AuditQuery::default())
            .await
            .expect("audit")
            .items
            .len()
    };
    let before = audited().await;
    let req = |ids: Vec<i64>| ReplayRequest {
        selection: Selection::Ids(ids),
        target_topic: None,
        rate_per_sec: None,
        reason: None,
        options: Default::default(),
    };
    assert_eq!(
        not_found(store.request_replay(&op, &req(vec![1, 999])).await),
        "dead letter 999"
    );
    assert_eq!(
        not_found(store.delete(&op, &Selection::Ids(vec![3, 998]), None).await),
        "dead letter 998"
    );
    assert_eq!(
        not_found(store.restore(&op, &Selection::Ids(vec![997]), None).await),
        "dead letter 997"
    );
    assert_eq!(
        not_found(
            store
                .delete(&op, &Selection::Ids(vec![3, 996, 995]), None)
                .await
        ),
        "dead letters 995, 996 (2 of the 3 asked)"
    );
    assert_eq!(audited().await, before);
    let one = store.get(1).await.expect("get").expect("1");
    assert_eq!(
        one.summary.status,
        crate::Status::New,
        "nothing was replayed"
    );

    // A scoped operator: a record of another team's topic reads as absent, existing or not.
    let pat = payments_operator();
    store
        .check_ids_exist_in_scope(&pat, &[4])
        .await
        .expect("in scope");
    assert_eq!(
        not_found(store.check_ids_exist_in_scope(&pat, &[4, 1]).await),
        "dead letter 1"
    );
    assert_eq!(
        not_found(store.check_ids_in_scope(&pat, &[1, 4]).await),
        "dead letter 1"
    );
    store
        .check_ids_in_scope(&pat, &[4, 999])
        .await
        .expect("reads: a missing id is left to the caller");
    assert_eq!(
        not_found(store.check_ids_exist_in_scope(&pat, &[4, 999]).await),
        "dead letter 999"
    );
    // Missing and outside the scope read the same, and are counted together.
    assert_eq!(
        not_found(store.check_ids_exist_in_scope(&pat, &[4, 999, 1, 2]).await),
        "dead letters 1, 2, 999 (3 of the 4 asked)"
    );
}
