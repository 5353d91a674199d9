//! Four-eyes approval in the store (issue 10, item 4; migration 0020; `docs/replay.md`,
//! "Four-eyes approval and required reasons").
//!
//! - [`Store::submit_for_approval`] decides, with the [`ApprovalPolicy`], whether an action
//!   needs approval; if so it stores the whole request in `approval_requests` with ONE audit
//!   row (`approval_request`) and nothing else: no outbox row, no state change.
//! - [`Store::approve_request`] carries it out through the very functions a direct action
//!   uses (`actions.rs`, `bulk/`), as its requester, with an [`ApprovalLink`]: the action's
//!   first transaction also claims the request (`pending` -> `approved`, only while not
//!   expired) and writes the approver's audit row (`approval_approve`), and the action's own
//!   audit row names the approver in its `detail` (`{"approval": {"request_id",
//!   "approved_by"}}`). A request over a filter acts only on dead letters with an id at or
//!   below its `max_id` (the highest id when it was asked for).
//! - [`Store::decline_request`] and [`Store::cancel_request`] change the request and write
//!   their audit row (`approval_decline`, `approval_cancel`), in one transaction.
//! - Expiry is lazy: every read of the requests first marks the pending ones past their
//!   `expires_at_ms` as `expired` (an `approval_expire` audit row each, actor `redrive`).

use sqlx::QueryBuilder;

use super::actions::{
    action_audit, check_reason, clean_text, now_ms, push_deletable, push_replayable,
    push_restorable, push_selection,
};
use super::dialect::{store_error, Dialect, Val};
use super::replay_request::check_replay;
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, NewAuditEntry, ReplayOptions, ReplayRequest, Selection};
use crate::approval::{
    ActionKind, ApprovalOutcome, ApprovalPolicy, ApprovalRequest, RequestStatus,
    MAX_REQUESTS_LISTED,
};
use crate::permission::Permission;

/// The actor of the audit rows of expiries (no person decided them).
pub const EXPIRY_ACTOR: &str = "redrive";

const COLUMNS: &str = "id, kind, selection, max_id, target_topic, rate_per_sec, options, reason, \
     actor_json, record_count, per_topic, why, created_at_ms, expires_at_ms, status, decided_by, \
     decided_at_ms, decision_reason, job_id";

#[derive(Debug, sqlx::FromRow)]
struct RequestRow {
    id: i64,
    kind: String,
    selection: String,
    max_id: Option<i64>,
    target_topic: Option<String>,
    rate_per_sec: Option<i32>,
    options: String,
    reason: Option<String>,
    actor_json: String,
    record_count: i64,
    per_topic: String,
    why: String,
    created_at_ms: i64,
    expires_at_ms: i64,
    status: String,
    decided_by: Option<String>,
    decided_at_ms: Option<i64>,
    decision_reason: Option<String>,
    job_id: Option<String>,
}

impl TryFrom<RequestRow> for ApprovalRequest {
    type Error = StoreError;

    fn try_from(r: RequestRow) -> Result<ApprovalRequest, StoreError> {
        let bad = |what: &str, e: String| {
            StoreError::Corrupt(format!("approval request {}: {what}: {e}", r.id))
        };
        let kind = ActionKind::parse(&r.kind).ok_or_else(|| bad("kind", r.kind.clone()))?;
        let status =
            RequestStatus::parse(&r.status).ok_or_else(|| bad("status", r.status.clone()))?;
        let selection: Selection =
            serde_json::from_str(&r.selection).map_err(|e| bad("selection", e.to_string()))?;
        let options = ReplayOptions::from_json(&r.options).map_err(|e| bad("options", e))?;
        let requested_by: Actor =
            serde_json::from_str(&r.actor_json).map_err(|e| bad("actor", e.to_string()))?;
        let per_topic: Vec<(String, i64)> =
            serde_json::from_str(&r.per_topic).map_err(|e| bad("per_topic", e.to_string()))?;
        Ok(ApprovalRequest {
            id: r.id,
            kind,
            request: ReplayRequest {
                selection,
                target_topic: r.target_topic,
                rate_per_sec: r.rate_per_sec.and_then(|n| u32::try_from(n).ok()),
                reason: r.reason,
                options,
            },
            max_id: r.max_id,
            requested_by,
            count: r.record_count,
            per_topic,
            why: r.why,
            created_at_ms: r.created_at_ms,
            expires_at_ms: r.expires_at_ms,
            status,
            decided_by: r.decided_by,
            decided_at_ms: r.decided_at_ms,
            decision_reason: r.decision_reason,
            job_id: r.job_id,
        })
    }
}

/// An approved request being carried out: handed to the action functions, whose first
/// transaction claims the request ([`claim_query`]) and writes [`ApprovalLink::audit`].
#[derive(Debug, Clone)]
pub(crate) struct ApprovalLink {
    pub(crate) request_id: i64,
    pub(crate) kind: ActionKind,
    pub(crate) requested_by: String,
    pub(crate) approver: Actor,
    pub(crate) decision_reason: Option<String>,
    /// Dead letters it would have changed at request time.
    pub(crate) count: i64,
    /// The filter's bound (see [`ApprovalRequest::max_id`]).
    pub(crate) max_id: Option<i64>,
}

impl ApprovalLink {
    /// The approver's audit row (`approval_approve`), written with the claim.
    pub(crate) fn audit(&self, job_id: Option<&str>) -> NewAuditEntry {
        NewAuditEntry {
            count: self.count,
            reason: self.decision_reason.clone(),
            job_id: job_id.map(str::to_string),
            detail: Some(
                serde_json::json!({
                    "request_id": self.request_id,
                    "kind": self.kind.as_str(),
                    "requested_by": self.requested_by,
                })
                .to_string(),
            ),
            ..NewAuditEntry::by(
                &self.approver,
                "approval_approve",
                "ok: approved and carried out",
            )
        }
    }

    /// The refusal when the claim found the request no longer pending (decided or expired
    /// by someone else meanwhile): the action's transaction is rolled back.
    pub(crate) fn lost(&self) -> StoreError {
        StoreError::Conflict(format!(
            "approval request {} was decided, cancelled or expired meanwhile; nothing was done",
            self.request_id
        ))
    }
}

/// `UPDATE` claiming the request for its approval, `RETURNING id`: no row when it is no
/// longer pending or has expired.
pub(crate) fn claim_query<'a, DB: Dialect>(
    link: &'a ApprovalLink,
    job_id: Option<&'a str>,
    now: i64,
) -> QueryBuilder<'a, DB> {
    let mut qb =
        QueryBuilder::new("UPDATE approval_requests SET status = 'approved', decided_by = ");
    DB::bind(
        &mut qb,
        Val::OwnedText(Some(clean_text(&link.approver.user))),
    );
    qb.push(", decided_at_ms = ");
    DB::bind(&mut qb, Val::I64(Some(now)));
    qb.push(", decision_reason = ");
    DB::bind(
        &mut qb,
        Val::OwnedText(link.decision_reason.as_deref().map(clean_text)),
    );
    qb.push(", job_id = ");
    DB::bind(&mut qb, Val::Text(job_id));
    qb.push(" WHERE id = ");
    DB::bind(&mut qb, Val::I64(Some(link.request_id)));
    qb.push(" AND status = 'pending' AND expires_at_ms > ");
    DB::bind(&mut qb, Val::I64(Some(now)));
    qb.push(" RETURNING id");
    qb
}

/// An action's audit `detail` with `{"approval": {"request_id", "requested_by",
/// "approved_by"}}` merged in; unchanged without a link.
pub(crate) fn approval_detail(
    detail: Option<String>,
    link: Option<&ApprovalLink>,
) -> Option<String> {
    let Some(link) = link else {
        return detail;
    };
    let mut d = detail
        .as_deref()
        .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    d["approval"] = serde_json::json!({
        "request_id": link.request_id,
        "requested_by": link.requested_by,
        "approved_by": link.approver.user,
    });
    Some(d.to_string())
}

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
            super::audit::insert_audit::<DB>(&audit, now)
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

    /// Marks the pending requests past their expiry as `expired`, with an audit row each
    /// (`approval_expire`, actor [`EXPIRY_ACTOR`]), in one transaction. Returns how many.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn expire_approval_requests(&self) -> Result<u64, StoreError> {
        let now = now_ms();
        // A read first: the write transaction is taken only when something expired.
        let due: i64 = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT COUNT(*) FROM approval_requests WHERE status = 'pending' AND \
                 expires_at_ms <= ",
            );
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.build_query_scalar().fetch_one(pool).await
        })
        .map_err(store_error)?;
        if due == 0 {
            return Ok(0);
        }
        let n = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "UPDATE approval_requests SET status = 'expired', decided_at_ms = expires_at_ms \
                 WHERE status = 'pending' AND expires_at_ms <= ",
            );
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(" RETURNING id, requested_by, kind, record_count");
            let rows: Vec<(i64, String, String, i64)> = qb
                .build_query_as()
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            for (id, by, kind, count) in &rows {
                let audit = NewAuditEntry {
                    actor: EXPIRY_ACTOR.to_string(),
                    action: "approval_expire".to_string(),
                    outcome: "ok: expired without a decision".to_string(),
                    count: *count,
                    detail: Some(
                        serde_json::json!({"request_id": id, "kind": kind, "requested_by": by})
                            .to_string(),
                    ),
                    ..NewAuditEntry::default()
                };
                super::audit::insert_audit::<DB>(&audit, now)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
            }
            tx.commit().await.map_err(store_error)?;
            Ok::<u64, StoreError>(rows.len() as u64)
        })?;
        if n > 0 {
            tracing::info!(expired = n, "approval requests expired");
        }
        Ok(n)
    }

    /// Approval requests, newest first, at most `limit` (1 to [`MAX_REQUESTS_LISTED`]), only
    /// those of `status` when given. Expires the due ones first.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn approval_requests(
        &self,
        status: Option<RequestStatus>,
        limit: u32,
    ) -> Result<Vec<ApprovalRequest>, StoreError> {
        self.expire_approval_requests().await?;
        let limit = i64::from(limit.clamp(1, MAX_REQUESTS_LISTED));
        let rows: Vec<RequestRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new(format!("SELECT {COLUMNS} FROM approval_requests"));
            if let Some(s) = status {
                qb.push(" WHERE status = ");
                DB::bind(&mut qb, Val::Text(Some(s.as_str())));
            }
            qb.push(" ORDER BY id DESC LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(limit)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        rows.into_iter().map(ApprovalRequest::try_from).collect()
    }

    /// One approval request (expiring the due ones first), `None` if there is no such id.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt`.
    pub async fn approval_request(&self, id: i64) -> Result<Option<ApprovalRequest>, StoreError> {
        self.expire_approval_requests().await?;
        let row: Option<RequestRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {COLUMNS} FROM approval_requests WHERE id = "
            ));
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        row.map(ApprovalRequest::try_from).transpose()
    }

    /// The pending request `id`, or why it cannot be decided: `NotFound`, or `Conflict`
    /// naming its status (an expired one says so).
    async fn pending_request(&self, id: i64) -> Result<ApprovalRequest, StoreError> {
        let r = self
            .approval_request(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("approval request {id}")))?;
        match r.status {
            RequestStatus::Pending => Ok(r),
            RequestStatus::Expired => Err(StoreError::Conflict(format!(
                "approval request {id} expired without a decision; nothing was done (ask for \
                 the action again)"
            ))),
            s => Err(StoreError::Conflict(format!(
                "approval request {id} is already {}; only a pending request can be decided",
                s.as_str()
            ))),
        }
    }

    /// Approves request `id` as `approver` and carries the action out as its requester
    /// would have (see the module docs): for a replay the job, its outbox rows and its audit
    /// row; for a delete or restore the state change and its audit row. The approver must
    /// not be the requester ([`ApprovalRequest::check_decider`]).
    ///
    /// Errors: `NotFound`, `Conflict` (not pending, expired, decided meanwhile; nothing is
    /// done), `Invalid` (the approver is the requester, or the decision reason is too long),
    /// `Unavailable`, `Database`.
    pub async fn approve_request(
        &self,
        approver: &Actor,
        id: i64,
        decision_reason: Option<&str>,
    ) -> Result<ApprovalOutcome, StoreError> {
        let mut r = self.pending_request(id).await?;
        r.check_decider(&approver.user)
            .map_err(StoreError::Invalid)?;
        r.requested_by = self.requester_now(&r).await?;
        let link = ApprovalLink {
            request_id: r.id,
            kind: r.kind,
            requested_by: r.requested_by.user.clone(),
            approver: approver.clone(),
            decision_reason: check_reason(decision_reason)?,
            count: r.count,
            max_id: r.max_id,
        };
        let (affected, job) = match r.kind {
            ActionKind::Replay => {
                let job = self
                    .replay_as(&r.requested_by, &r.request, Some(&link))
                    .await?;
                (job.total, Some(job))
            }
            ActionKind::Delete | ActionKind::Restore => {
                let n = self
                    .change_status_as(
                        &r.requested_by,
                        &r.request.selection,
                        r.request.reason.as_deref(),
                        r.kind == ActionKind::Delete,
                        Some(&link),
                    )
                    .await?;
                (i64::try_from(n).unwrap_or(i64::MAX), None)
            }
        };
        let request = self
            .approval_request(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("approval request {id}")))?;
        tracing::info!(request = id, approver = %approver.user, affected, "approval request approved");
        Ok(ApprovalOutcome {
            request,
            affected,
            job,
        })
    }

    /// The requester of `r` as they are now: the action runs with their current role, and a
    /// request whose requester was removed, disabled or no longer holds the action's
    /// permission cannot be approved (approving would act with a power they lost).
    ///
    /// Errors: `Conflict` naming what changed (decline the request instead), `Unavailable`,
    /// `Database`.
    async fn requester_now(&self, r: &ApprovalRequest) -> Result<Actor, StoreError> {
        let name = r.requested_by.user.as_str();
        let need = match r.kind {
            ActionKind::Replay => Permission::Replay,
            ActionKind::Delete | ActionKind::Restore => Permission::Delete,
        };
        let problem = match self.user(name).await? {
            None => format!("its requester `{name}` no longer exists"),
            Some(u) if u.disabled => format!("its requester `{name}` is disabled"),
            Some(u) if !u.role.grants(need) => format!(
                "its requester `{name}` now has the role `{}`, which does not grant `{need}`",
                u.role.as_str()
            ),
            Some(u) => {
                let mut actor = r.requested_by.clone();
                actor.role = u.role;
                return Ok(actor);
            }
        };
        Err(StoreError::Conflict(format!(
            "approval request {} cannot be approved: {problem}; decline it instead",
            r.id
        )))
    }

    /// Declines request `id` (`decider` must not be its requester): nothing is written but
    /// the request's new status and ONE audit row (`approval_decline`). A reason is required.
    ///
    /// Errors: `NotFound`, `Conflict` (not pending or expired), `Invalid` (no reason, the
    /// decider is the requester), `Unavailable`, `Database`.
    pub async fn decline_request(
        &self,
        decider: &Actor,
        id: i64,
        reason: Option<&str>,
    ) -> Result<ApprovalRequest, StoreError> {
        let r = self.pending_request(id).await?;
        r.check_decider(&decider.user)
            .map_err(StoreError::Invalid)?;
        let reason = check_reason(reason)?.ok_or_else(|| {
            StoreError::Invalid("say why the request is declined (a reason is required)".into())
        })?;
        self.close_request(decider, &r, RequestStatus::Declined, Some(reason))
            .await
    }

    /// Cancels request `id` (only its requester may, [`ApprovalRequest::check_canceller`]):
    /// the status and ONE audit row (`approval_cancel`).
    ///
    /// Errors: `NotFound`, `Conflict` (not pending or expired), `Invalid` (not the
    /// requester), `Unavailable`, `Database`.
    pub async fn cancel_request(
        &self,
        actor: &Actor,
        id: i64,
        reason: Option<&str>,
    ) -> Result<ApprovalRequest, StoreError> {
        let r = self.pending_request(id).await?;
        r.check_canceller(&actor.user)
            .map_err(StoreError::Invalid)?;
        let reason = check_reason(reason)?;
        self.close_request(actor, &r, RequestStatus::Cancelled, reason)
            .await
    }

    /// `pending` -> `status` (declined or cancelled) with its audit row, in one transaction.
    async fn close_request(
        &self,
        actor: &Actor,
        r: &ApprovalRequest,
        status: RequestStatus,
        reason: Option<String>,
    ) -> Result<ApprovalRequest, StoreError> {
        let now = now_ms();
        let action = match status {
            RequestStatus::Declined => "approval_decline",
            _ => "approval_cancel",
        };
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE approval_requests SET status = ");
            DB::bind(&mut qb, Val::Text(Some(status.as_str())));
            qb.push(", decided_by = ");
            DB::bind(&mut qb, Val::OwnedText(Some(clean_text(&actor.user))));
            qb.push(", decided_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(", decision_reason = ");
            DB::bind(&mut qb, Val::Text(reason.as_deref()));
            qb.push(" WHERE id = ");
            DB::bind(&mut qb, Val::I64(Some(r.id)));
            qb.push(" AND status = 'pending' AND expires_at_ms > ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(" RETURNING id");
            let hit: Option<i64> = qb
                .build_query_scalar()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            if hit.is_none() {
                return Err(StoreError::Conflict(format!(
                    "approval request {} was decided, cancelled or expired meanwhile",
                    r.id
                )));
            }
            let audit = NewAuditEntry {
                count: r.count,
                reason: reason.clone(),
                detail: Some(
                    serde_json::json!({
                        "request_id": r.id,
                        "kind": r.kind.as_str(),
                        "requested_by": r.requested_by.user,
                    })
                    .to_string(),
                ),
                ..NewAuditEntry::by(actor, action, "ok: nothing was carried out")
            };
            super::audit::insert_audit::<DB>(&audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<(), StoreError>(())
        })?;
        tracing::info!(request = r.id, actor = %actor.user, status = status.as_str(), "approval request closed");
        self.approval_request(r.id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("approval request {}", r.id)))
    }
}

/// A part of the request as stored (JSON text).
fn to_json<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::{ApprovalConfig, ReasonsConfig};
    use crate::model::{Convention, NewDeadLetter, Normalized, RawRecord, Status};
    use crate::store::CHUNK_ROWS;
    use crate::Filter;

    fn record(topic: &str, offset: i64) -> NewDeadLetter {
        NewDeadLetter {
            record: RawRecord {
                dlq_topic: topic.into(),
                dlq_partition: 0,
                dlq_offset: offset,
                timestamp_ms: Some(1_000),
                key: None,
                value: Some(b"v".to_vec()),
                headers: vec![],
            },
            convention: Convention::Unknown,
            fingerprint: "f".into(),
            normalized: Normalized {
                source_topic: Some("orders".into()),
                ..Normalized::default()
            },
            dead_lettered_at_ms: 1_000,
            ingested_at_ms: 1_000,
        }
    }

    /// A store in a temporary file (removed when the directory is dropped).
    async fn store_with(topic: &str, n: i64) -> (Store, tempfile::TempDir) {
        let (store, dir) = crate::store::test_file::sqlite_store("t.db").await;
        // Approval acts as the requester as they are now: they must exist.
        for name in ["ann", "bob"] {
            store
                .create_user(&crate::store::NewUser {
                    name,
                    role: crate::permission::Role::Operator,
                    password_hash: "x",
                    created_at_ms: 0,
                })
                .await
                .unwrap();
        }
        let rows: Vec<NewDeadLetter> = (0..n).map(|o| record(topic, o)).collect();
        for chunk in rows.chunks(1000) {
            store.insert_batch(chunk).await.unwrap();
        }
        (store, dir)
    }

    fn policy(min: u64) -> ApprovalPolicy {
        ApprovalPolicy::new(
            &ApprovalConfig {
                min_records: min,
                dlq_topics: vec!["payments.DLT".into()],
                ..ApprovalConfig::default()
            },
            &ReasonsConfig::default(),
        )
        .unwrap()
    }

    fn replay_all(topic: &str) -> ReplayRequest {
        ReplayRequest {
            selection: Selection::Filter(Filter {
                dlq_topic: Some(topic.into()),
                ..Filter::default()
            }),
            target_topic: None,
            rate_per_sec: None,
            reason: Some("OPS-1".into()),
            options: ReplayOptions::default(),
        }
    }

    /// A replay over a filter of more than one chunk waits (nothing queued), is approved by
    /// another user, and queues exactly the records that matched at request time.
    #[tokio::test]
    async fn an_approved_bulk_replay_acts_on_what_was_asked_for() {
        let n = (CHUNK_ROWS + 10) as i64;
        let (store, _dir) = store_with("orders.DLT", n).await;
        let req = replay_all("orders.DLT");
        let pending = store
            .submit_for_approval(
                &policy(100),
                &Actor::operator("ann"),
                ActionKind::Replay,
                &req,
            )
            .await
            .unwrap()
            .expect("over min_records: pending");
        assert_eq!(pending.count, n);
        assert_eq!(pending.per_topic, vec![("orders.DLT".to_string(), n)]);
        assert_eq!(store.outbox_rows().await.unwrap(), 0);
        assert!(store.jobs(10).await.unwrap().is_empty());
        // Arriving later: not swept in.
        store
            .insert_batch(&[record("orders.DLT", n)])
            .await
            .unwrap();

        let e = store
            .approve_request(&Actor::operator("ann"), pending.id, None)
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{e}");
        let out = store
            .approve_request(&Actor::operator("bob"), pending.id, Some("ok"))
            .await
            .unwrap();
        assert_eq!(out.affected, n);
        assert_eq!(out.request.status, RequestStatus::Approved);
        let job = out.job.expect("a job");
        assert_eq!(out.request.job_id.as_deref(), Some(job.id.as_str()));
        assert_eq!(store.outbox_rows().await.unwrap(), n);
        let late = Filter {
            dlq_topic: Some("orders.DLT".into()),
            status: Some(Status::New),
            ..Filter::default()
        };
        assert_eq!(store.count(&late).await.unwrap(), 1, "only the late one");
        let e = store
            .approve_request(&Actor::operator("bob"), pending.id, None)
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Conflict(_)), "{e}");
    }

    /// Small and outside the topics: no request. On a gated topic: a request, which a
    /// decline closes without writing anything.
    #[tokio::test]
    async fn small_actions_pass_and_declines_write_nothing() {
        let (store, _dir) = store_with("payments.DLT", 2).await;
        let small = replay_all("orders.DLT");
        assert!(store
            .submit_for_approval(
                &policy(100),
                &Actor::operator("ann"),
                ActionKind::Replay,
                &small
            )
            .await
            .unwrap()
            .is_none());
        let req = ReplayRequest {
            reason: None,
            ..replay_all("payments.DLT")
        };
        let r = store
            .submit_for_approval(
                &policy(100),
                &Actor::operator("ann"),
                ActionKind::Delete,
                &req,
            )
            .await
            .unwrap()
            .expect("a gated topic");
        assert!(r.why.contains("payments.DLT"), "{}", r.why);
        assert!(matches!(
            store
                .decline_request(&Actor::operator("bob"), r.id, None)
                .await,
            Err(StoreError::Invalid(_))
        ));
        let d = store
            .decline_request(&Actor::operator("bob"), r.id, Some("no"))
            .await
            .unwrap();
        assert_eq!(d.status, RequestStatus::Declined);
        assert_eq!(store.outbox_rows().await.unwrap(), 0);
        let deleted = Filter {
            status: Some(Status::Deleted),
            ..Filter::default()
        };
        assert_eq!(store.count(&deleted).await.unwrap(), 0);
        assert!(matches!(
            store
                .cancel_request(&Actor::operator("ann"), r.id, None)
                .await,
            Err(StoreError::Conflict(_))
        ));
    }
}
