//! The dry run's sample (`crate::replay_sample`): the first dead letters a replay would queue
//! per target topic, read with the replay's own eligibility condition, and — with a
//! transform — what the script makes of each (run on a blocking thread, as in the relay).

use sqlx::QueryBuilder;

use super::codec::decode_headers;
use super::dialect::{store_error, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::actions::{ReplayOptions, Selection};
use crate::model::Convention;
use crate::replay::transform::{Outcome, RecordIn, Transform};
use crate::replay_sample::{
    ReplaySample, SampleAfter, SampleRecord, ShownRecord, TargetSample, MAX_SAMPLE_PER_TARGET,
    SAMPLE_TARGETS,
};

#[derive(Debug, sqlx::FromRow)]
struct SampleRow {
    id: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: String,
    /// The `stack_trace` column, which the headers may refer to (`codec::decode_headers`).
    stack_trace: Option<String>,
    convention: String,
}

impl Store {
    /// A sample of what a replay of `selection` (to `target_topic`, `None` = each record's
    /// source topic) would send: for each of the first [`SAMPLE_TARGETS`] of `topics` (the dry
    /// run's `per_target`, largest first) its first `per_target` (at most
    /// [`MAX_SAMPLE_PER_TARGET`]) queueable dead letters by id, with the transform of
    /// `options` applied. Reads `per_target` rows per topic.
    ///
    /// Errors: `Invalid` (a transform that does not compile), `Unavailable`, `Database`,
    /// `Corrupt` (stored headers that do not parse).
    pub async fn replay_sample(
        &self,
        selection: &Selection,
        target_topic: Option<&str>,
        topics: &[String],
        options: &ReplayOptions,
        per_target: u32,
    ) -> Result<ReplaySample, StoreError> {
        let transform = match &options.transform {
            Some(t) => Some(Transform::compile(t).map_err(|e| StoreError::Invalid(e.to_string()))?),
            None => None,
        };
        let per_target = i64::from(per_target.clamp(1, MAX_SAMPLE_PER_TARGET));
        let mut read: Vec<(String, Vec<SampleRow>)> = Vec::new();
        for topic in topics.iter().take(SAMPLE_TARGETS) {
            let rows: Vec<SampleRow> = on_pool!(self, |pool, DB| {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "SELECT id, key, value, headers, stack_trace, convention FROM dead_letters",
                );
                super::actions::push_selection(&mut qb, selection);
                super::actions::push_replayable(&mut qb, target_topic);
                qb.push(" AND COALESCE(");
                DB::bind(&mut qb, Val::Text(target_topic));
                qb.push(", source_topic) = ");
                DB::bind(&mut qb, Val::Text(Some(topic.as_str())));
                qb.push(" ORDER BY id LIMIT ");
                DB::bind(&mut qb, Val::I64(Some(per_target)));
                qb.build_query_as().fetch_all(pool).await
            })
            .map_err(store_error)?;
            read.push((topic.clone(), rows));
        }
        let sha = options.transform.as_ref().map(|t| t.script_sha256());
        let built = tokio::task::spawn_blocking(move || build(read, transform.as_ref()))
            .await
            .map_err(|e| StoreError::Database(format!("the sample's task failed: {e}")))??;
        Ok(ReplaySample {
            transform_sha256: sha,
            targets: built,
        })
    }
}

fn build(
    read: Vec<(String, Vec<SampleRow>)>,
    transform: Option<&Transform>,
) -> Result<Vec<TargetSample>, StoreError> {
    let mut out = Vec::with_capacity(read.len());
    for (topic, rows) in read {
        let mut records = Vec::with_capacity(rows.len());
        for r in rows {
            let stored = decode_headers(&r.headers, r.stack_trace.as_deref())?;
            let headers = crate::replay::application_headers(
                &stored,
                Convention::parse(&r.convention),
                false,
            );
            let before = ShownRecord::of(r.key.as_deref(), r.value.as_deref(), &headers);
            let after = match transform {
                None => SampleAfter::AsIs,
                Some(t) => match t.apply(RecordIn {
                    key: r.key.as_deref(),
                    value: r.value.as_deref(),
                    headers: &headers,
                    topic: &topic,
                }) {
                    Outcome::Publish(rec) => SampleAfter::Publish {
                        record: ShownRecord::of(
                            rec.key.as_deref(),
                            rec.value.as_deref(),
                            &rec.headers,
                        ),
                    },
                    Outcome::Skip(reason) => SampleAfter::Skip { reason },
                    Outcome::Failed(error) | Outcome::OutOfTime(error) => {
                        SampleAfter::Error { error }
                    }
                },
            };
            records.push(SampleRecord {
                dead_letter_id: r.id,
                before,
                after,
            });
        }
        out.push(TargetSample { topic, records });
    }
    Ok(out)
}
