//! When a dead letter's status changed (`status_changed_at_ms`, what retention measures a
//! delete's age from), on SQLite: written by the statements that change many statuses (a
//! replay's request, a delete, a restore) in their own write, and by the trigger
//! `dead_letters_status_changed` (migration 0032) for any other status change; a change that
//! leaves the status as it was leaves the time alone.

use super::test_file::{sqlite_pool, sqlite_store};
use crate::actions::{Actor, ReplayRequest, Selection};
use crate::clock::now_ms;

fn dead_letter(offset: i64) -> crate::model::NewDeadLetter {
    super::test_records::dead_letter(offset, None)
}

#[tokio::test]
async fn a_status_change_records_its_time_once_whoever_writes_it() {
    let (store, _dir) = sqlite_store("status-time.db").await;
    store
        .insert_batch(&(0..3).map(dead_letter).collect::<Vec<_>>())
        .await
        .unwrap();
    let pool = sqlite_pool(&store);
    let changed_at = |id: i64| {
        sqlx::query_scalar::<_, Option<i64>>(
            "SELECT status_changed_at_ms FROM dead_letters WHERE id = ?",
        )
        .bind(id)
        .fetch_one(pool)
    };
    let eve = Actor::operator("eve");
    assert_eq!(changed_at(1).await.unwrap(), None, "never changed");

    let before = now_ms();
    store
        .request_replay(
            &eve,
            &ReplayRequest {
                selection: Selection::Ids(vec![1]),
                target_topic: None,
                rate_per_sec: None,
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .unwrap();
    store
        .delete(&eve, &Selection::Ids(vec![2]), None)
        .await
        .unwrap();
    let after = now_ms();
    for id in [1, 2] {
        let at = changed_at(id).await.unwrap().expect("set by the statement");
        assert!((before..=after).contains(&at), "dead letter {id}: {at}");
    }
    assert_eq!(changed_at(3).await.unwrap(), None, "not selected");

    // Any other status change: the trigger fills the time the statement did not write.
    sqlx::query("UPDATE dead_letters SET status_changed_at_ms = 5 WHERE id = 2")
        .execute(pool)
        .await
        .unwrap();
    let before = now_ms();
    sqlx::query("UPDATE dead_letters SET status = 'new' WHERE id IN (2, 3)")
        .execute(pool)
        .await
        .unwrap();
    let after = now_ms();
    let at = changed_at(2).await.unwrap().expect("set by the trigger");
    assert!((before..=after).contains(&at), "{at}");
    assert_eq!(
        changed_at(3).await.unwrap(),
        None,
        "status unchanged: no time"
    );
    // A statement that writes the time itself keeps it.
    sqlx::query(
        "UPDATE dead_letters SET status = 'deleted', status_changed_at_ms = 7 WHERE id = 3",
    )
    .execute(pool)
    .await
    .unwrap();
    assert_eq!(changed_at(3).await.unwrap(), Some(7));
    // A restore writes it, from the status the row gets back.
    store
        .restore(&eve, &Selection::Ids(vec![3]), None)
        .await
        .unwrap();
    let at = changed_at(3).await.unwrap().unwrap();
    assert!(at >= after, "{at}");
}
