//! `redrive quarantine retry`: stores quarantined records again, decoded by this version of
//! redrive (an upgrade may have fixed what made the store refuse them).

use crate::quarantine::{QuarantinedRecord, RetryReport, MAX_LIST_LIMIT};
use crate::store::{Store, StoreError};

use super::record;

/// Retries the quarantined records `ids` (every quarantined record when `ids` is `None`):
/// each is decoded afresh and stored in full, else in reduced form; once stored (or found
/// already stored) its quarantine row is deleted. A record still refused stays, with the new
/// error and one more attempt. Records without a kept payload are counted and left alone.
///
/// Errors: a transient store error (`Unavailable`) stops the retry (what was done so far
/// stays done; run it again); `Corrupt` if a kept record does not parse. An unknown id is
/// skipped.
pub async fn retry_quarantined(
    store: &Store,
    ids: Option<&[i64]>,
) -> Result<RetryReport, StoreError> {
    let mut report = RetryReport::default();
    match ids {
        Some(ids) => {
            for &id in ids {
                retry_one(store, id, &mut report).await?;
            }
        }
        None => {
            // Newest first, page by page; rows deleted meanwhile do not disturb the paging.
            let mut before = None;
            loop {
                let page: Vec<QuarantinedRecord> =
                    store.list_quarantine(MAX_LIST_LIMIT, before).await?;
                let Some(last) = page.last() else { break };
                before = Some(last.id);
                for q in &page {
                    retry_one(store, q.id, &mut report).await?;
                }
            }
        }
    }
    Ok(report)
}

async fn retry_one(store: &Store, id: i64, report: &mut RetryReport) -> Result<(), StoreError> {
    let Some((q, raw)) = store.quarantined(id).await? else {
        return Ok(());
    };
    report.tried += 1;
    let Some(raw) = raw else {
        report.without_payload += 1;
        return Ok(());
    };
    let now = record::now_ms();
    let d = record::new_dead_letter(raw, Vec::new(), now);
    let full_error = match store.insert_batch(std::slice::from_ref(&d)).await {
        Ok(n) => {
            if n == 0 {
                report.already_stored += 1;
            } else {
                report.stored += 1;
            }
            store.release_quarantined(id).await?;
            return Ok(());
        }
        Err(e) if e.is_transient() => return Err(e),
        Err(e) => e,
    };
    match store.insert_reduced(&d, &full_error.to_string()).await {
        Ok(n) => {
            if n == 0 {
                report.already_stored += 1;
            } else {
                report.stored_reduced += 1;
            }
            store.release_quarantined(id).await?;
        }
        Err(e) if e.is_transient() => return Err(e),
        Err(e) => {
            tracing::warn!(
                quarantine_id = id,
                topic = %q.dlq_topic,
                partition = q.dlq_partition,
                offset = q.dlq_offset,
                error = %e,
                "a quarantined record is still refused by the store"
            );
            let why = format!("full form: {full_error}; reduced form: {e}");
            store.quarantine_attempt_failed(id, &why, now).await?;
            report.still_quarantined += 1;
        }
    }
    Ok(())
}
