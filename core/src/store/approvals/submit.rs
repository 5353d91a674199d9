//! Filing a request for approval ([`Store::submit_for_approval`], and
//! [`Store::edit_dead_letter_gated`] for an edit and replay), with what an action would
//! change ([`Store::action_breakdown`]) and the outbox rows in all ([`Store::outbox_rows`]).

use sqlx::QueryBuilder;

use crate::actions::{Actor, NewAuditEntry, ReplayOptions, ReplayRequest, Selection};
use crate::approval::{ActionKind, ApprovalPolicy, ApprovalRequest, RequestStatus};
use crate::store::actions::{
    action_audit, check_reason, clean_text, now_ms, push_deletable, push_replayable,
    push_restorable, push_selection,
};
use crate::store::dialect::{store_error, Dialect, Val};
use crate::store::replay_request::check_replay;
use crate::store::{Pool, Store, StoreError};

/// The trimmed target override of a replay (`None` if empty).
fn target_of(req: &ReplayRequest) -> Option<&str> {
    req.target_topic
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

impl Store {
    /// Outbox rows in all, every status: what "nothing was written to the outbox" is
    /// checked against (an action waiting for approval, or declined, adds none).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn outbox_rows(&self) -> Result<i64, StoreError> {
        on_pool!(self, |pool, _DB| {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM outbox")
                .fetch_one(pool)
                .await
        })
        .map_err(store_error)
    }

    /// The dead letters an action of `kind` on `req`'s selection would change now, per DLQ
    /// topic (largest first, ties by name), only those with an id at or below `max_id` when
    /// given. The same conditions the actions use.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn action_breakdown(
        &self,
        kind: ActionKind,
        req: &ReplayRequest,
        max_id: Option<i64>,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        let target = target_of(req);
        let mut rows: Vec<(String, i64)> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT dlq_topic, COUNT(*) AS n FROM dead_letters");
            push_selection(&mut qb, &req.selection);
            match kind {
                ActionKind::Replay => push_replayable(&mut qb, target),
                ActionKind::Delete => push_deletable(&mut qb),
                ActionKind::Restore => push_restorable(&mut qb),
            }
            if let Some(m) = max_id {
                qb.push(" AND id <= ");
                DB::bind(&mut qb, Val::I64(Some(m)));
            }
            qb.push(" GROUP BY dlq_topic");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(rows)
    }

    /// If `policy` says this action needs approval, stores it as a pending request (with ONE
    /// audit row, `approval_request`, and nothing else) and returns it; `None` = carry it out
    /// directly. The request is checked as the action would be (target, rate, options, reason
    /// length), so a bad one is refused now rather than at approval.
    ///
    /// Errors: `Invalid`, `Unavailable`, `Database`.
    pub async fn submit_for_approval(
        &self,
        policy: &ApprovalPolicy,
        actor: &Actor,
        kind: ActionKind,
        req: &ReplayRequest,
    ) -> Result<Option<ApprovalRequest>, StoreError> {
        if !policy.gates(kind) {
            return Ok(None);
        }
        let (target, reason) = match kind {
            ActionKind::Replay => check_replay(req)?,
            ActionKind::Delete | ActionKind::Restore => {
                (None, check_reason(req.reason.as_deref())?)
            }
        };
        let max_id = match &req.selection {
            Selection::Filter(_) => Some(self.max_dead_letter_id().await?),
            Selection::Ids(_) => None,
        };
        let per_topic = self.action_breakdown(kind, req, max_id).await?;
        let count: i64 = per_topic.iter().map(|(_, n)| n).sum();
        let Some(why) = policy.why(kind, count, &per_topic) else {
            return Ok(None);
        };
        let now = now_ms();
        let mut request = ApprovalRequest {
            id: 0,
            kind,
            request: ReplayRequest {
                selection: req.selection.clone(),
                target_topic: target,
                rate_per_sec: req.rate_per_sec,
                reason,
                options: req.options.clone(),
            },
            max_id,
            requested_by: actor.clone(),
            count,
            per_topic,
            why,
            created_at_ms: now,
            expires_at_ms: now.saturating_add(policy.expire_after_ms()),
            status: RequestStatus::Pending,
            decided_by: None,
            decided_at_ms: None,
            decision_reason: None,
            job_id: None,
        };
        let selection_json = to_json(&request.request.selection)?;
        let actor_json = to_json(&request.requested_by)?;
        let per_topic_json = to_json(&request.per_topic)?;
        let r = &request;
        let id = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "INSERT INTO approval_requests (kind, selection, max_id, target_topic, \
                 rate_per_sec, options, reason, requested_by, actor_json, record_count, \
                 per_topic, why, created_at_ms, expires_at_ms, status) VALUES (",
            );
            let values = [
                Val::Text(Some(r.kind.as_str())),
                Val::OwnedText(Some(clean_text(&selection_json))),
                Val::I64(r.max_id),
                Val::Text(r.request.target_topic.as_deref()),
                Val::I32(r.request.rate_per_sec.map(|n| n as i32)),
                Val::OwnedText(Some(clean_text(&r.request.options.to_json()))),
                Val::Text(r.request.reason.as_deref()),
                Val::OwnedText(Some(clean_text(&r.requested_by.user))),
                Val::OwnedText(Some(clean_text(&actor_json))),
                Val::I64(Some(r.count)),
                Val::OwnedText(Some(clean_text(&per_topic_json))),
                Val::OwnedText(Some(clean_text(&r.why))),
                Val::I64(Some(r.created_at_ms)),
                Val::I64(Some(r.expires_at_ms)),
                Val::Text(Some("pending")),
            ];
            for (i, v) in values.into_iter().enumerate() {
                if i > 0 {
                    qb.push(", ");
                }
                DB::bind(&mut qb, v);
            }
            qb.push(") RETURNING id");
            let id: i64 = qb
                .build_query_scalar()
                .fetch_one(&mut *tx)
                .await
                .map_err(store_error)?;
            let base = action_audit(
                actor,
                "approval_request",
                &r.request.selection,
                r.count,
                r.request.reason.as_deref(),
                format!("pending approval: {} ({})", r.kind.as_str(), r.why),
            );
            let mut detail = base
                .detail
                .as_deref()
                .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| serde_json::json!({}));
            detail["request_id"] = serde_json::json!(id);
            detail["kind"] = serde_json::json!(r.kind.as_str());
            detail["per_topic"] = serde_json::json!(r.per_topic);
            detail["expires_at_ms"] = serde_json::json!(r.expires_at_ms);
            if let Some(t) = &r.request.target_topic {
                detail["target_topic"] = serde_json::json!(t);
            }
            let audit = NewAuditEntry {
                detail: Some(detail.to_string()),
                ..base
            };
            crate::store::audit::insert_audit::<DB>(&audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<i64, StoreError>(id)
        })?;
        request.id = id;
        tracing::info!(
            request = id,
            actor = %actor.user,
            kind = kind.as_str(),
            count,
            "action waits for approval"
        );
        Ok(Some(request))
    }

    /// Edit and replay under `policy`: when the replay of the new version needs approval
    /// (the dead letter is in a gated DLQ topic, or `min_records` is 1), the edit is saved
    /// WITHOUT its replay and the replay becomes a pending request (returned); otherwise
    /// exactly [`Store::edit_dead_letter`]. An approved request publishes the dead letter's
    /// latest version at approval time (the one saved here, unless edited again since).
    ///
    /// Errors: those of [`Store::edit_dead_letter`] and [`Store::submit_for_approval`].
    pub async fn edit_dead_letter_gated(
        &self,
        policy: &ApprovalPolicy,
        actor: &Actor,
        id: i64,
        req: &crate::edit::EditRequest,
    ) -> Result<(crate::edit::EditOutcome, Option<ApprovalRequest>), StoreError> {
        if let (Some(replay), true) = (&req.replay, policy.gates(ActionKind::Replay)) {
            let replay = ReplayRequest {
                selection: Selection::Ids(vec![id]),
                target_topic: replay.target_topic.clone(),
                rate_per_sec: None,
                reason: req.reason.clone(),
                options: ReplayOptions::default(),
            };
            let per_topic = self
                .action_breakdown(ActionKind::Replay, &replay, None)
                .await?;
            let count = per_topic.iter().map(|(_, n)| n).sum();
            if policy.why(ActionKind::Replay, count, &per_topic).is_some() {
                check_replay(&replay)?;
                let saved = crate::edit::EditRequest {
                    replay: None,
                    ..req.clone()
                };
                let out = self.edit_dead_letter(actor, id, &saved).await?;
                let request = self
                    .submit_for_approval(policy, actor, ActionKind::Replay, &replay)
                    .await?;
                return Ok((out, request));
            }
        }
        Ok((self.edit_dead_letter(actor, id, req).await?, None))
    }
}

/// A part of the request as stored (JSON text).
fn to_json<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Invalid(e.to_string()))
}
