//! What ingest does when the store refuses a batch for a reason that is about the data, not
//! the database's state (see [`StoreError::is_transient`]): no record may stop ingest.
//!
//! 1. **Split**: the batch is halved, and each half stored on its own (bisection: one bad
//!    record in a batch of 500 costs about 2 × log2(500) ≈ 18 small transactions).
//! 2. **Reduced form**: a single record that is still refused is stored with its raw key, value
//!    and headers whole but its decoded text fields cut to short ASCII and no stack trace
//!    ([`Store::insert_reduced`]), with a decode warning quoting the refusal.
//! 3. **Quarantine**: if even that is refused, the record goes to the quarantine table with
//!    its coordinates and both errors ([`Store::quarantine_record`]), with its raw record if
//!    the database takes it, else without.
//!
//! Only when every record of the batch is in one of these places does ingest commit the
//! offsets. A transient error on the way (the database went down meanwhile) aborts the salvage
//! and ingest retries the whole batch later; what was stored already is skipped then (the
//! insert ignores DLQ offsets it has).

use crate::model::NewDeadLetter;
use crate::store::{Store, StoreError};

/// What a salvage stored.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Salvaged {
    /// Rows that were new in `dead_letters` (full and reduced form).
    pub(crate) new: u64,
    /// Records stored in reduced form.
    pub(crate) reduced: u64,
    /// Records put in quarantine.
    pub(crate) quarantined: u64,
}

/// Stores every record of `records` that the database accepts, and the others in reduced form
/// or in quarantine. `refusal` is the non-transient error storing them together gave.
///
/// Errors: a transient error met on the way, or a failed ping before a record is blamed
/// (retry the batch later), or — for a record that cannot even be quarantined without its
/// payload — that error (ingest then pauses and retries, as for an outage: the offset never
/// moves past a record that is nowhere).
pub(crate) async fn salvage(
    store: &Store,
    records: &[NewDeadLetter],
    refusal: StoreError,
    now_ms: i64,
) -> Result<Salvaged, StoreError> {
    let mut out = Salvaged::default();
    // Slices refused as a whole, with the error they got (a work list, not recursion).
    let mut refused: Vec<(&[NewDeadLetter], StoreError)> = vec![(records, refusal)];
    while let Some((slice, error)) = refused.pop() {
        if let [one] = slice {
            store_alone(store, one, error, now_ms, &mut out).await?;
            continue;
        }
        let (a, b) = slice.split_at(slice.len() / 2);
        for half in [a, b] {
            match store.insert_batch(half).await {
                Ok(n) => out.new += n,
                Err(e) if e.is_transient() => return Err(e),
                Err(e) => refused.push((half, e)),
            }
        }
    }
    Ok(out)
}

/// One record the database refused (`error`): reduced form, else quarantine.
async fn store_alone(
    store: &Store,
    d: &NewDeadLetter,
    error: StoreError,
    now_ms: i64,
    out: &mut Salvaged,
) -> Result<(), StoreError> {
    let r = &d.record;
    // Before blaming the record: is the database there at all? An outage that answers with
    // an error not known to be transient must not degrade records (a record stored in
    // reduced form or quarantined because the database was down is a record damaged for
    // nothing); a failed ping makes the whole batch wait and be retried.
    store.ping().await?;
    let reduced_error = match store.insert_reduced(d, &error.to_string()).await {
        Ok(n) => {
            tracing::warn!(
                topic = %r.dlq_topic,
                partition = r.dlq_partition,
                offset = r.dlq_offset,
                error = %error,
                "the store refused a dead letter as decoded; stored it in reduced form"
            );
            out.new += n;
            out.reduced += 1;
            return Ok(());
        }
        Err(e) if e.is_transient() => return Err(e),
        Err(e) => e,
    };
    let why = format!("full form: {error}; reduced form: {reduced_error}");
    let kept = match store.quarantine_record(r, &why, true, now_ms).await {
        Ok(_) => true,
        Err(e) if e.is_transient() => return Err(e),
        Err(e) => {
            let why = format!("{why}; the raw record could not be kept either: {e}");
            store.quarantine_record(r, &why, false, now_ms).await?;
            false
        }
    };
    tracing::error!(
        topic = %r.dlq_topic,
        partition = r.dlq_partition,
        offset = r.dlq_offset,
        payload_kept = kept,
        error = %why,
        "the store refused a dead letter even in reduced form; it is in quarantine \
         (see /quarantine; `redrive quarantine retry` stores it after a fix)"
    );
    out.quarantined += 1;
    Ok(())
}
