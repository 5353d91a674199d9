//! The quarantine page's server function (see `redrive_core::quarantine`).

use leptos::prelude::*;
use redrive_core::quarantine::QuarantinedRecord;
use serde::{Deserialize, Serialize};

/// Most quarantined records the page lists (the newest); the API pages through all of them.
pub const PAGE_LIMIT: u32 = 100;

/// What the quarantine page shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineListing {
    /// Records in quarantine, all of them.
    pub total: i64,
    /// The newest, at most [`PAGE_LIMIT`].
    pub items: Vec<QuarantinedRecord>,
}

/// The newest quarantined records and how many there are.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn list_quarantine() -> Result<QuarantineListing, ServerFnError> {
    use redrive_core::store::{Store, StoreError};
    let store = use_context::<Store>()
        .ok_or_else(|| ServerFnError::new("redrive is misconfigured: no store in context"))?;
    let failed = |e: StoreError| {
        tracing::error!(error = %e, "listing the quarantine failed");
        let hint = match e {
            StoreError::Unavailable(_) => "the database is unavailable; try again in a moment",
            _ => "see the server log for the cause",
        };
        ServerFnError::new(format!("Could not list the quarantine: {hint}."))
    };
    let total = store.quarantine_count().await.map_err(failed)?;
    let mut items = store
        .list_quarantine(PAGE_LIMIT, None)
        .await
        .map_err(failed)?;
    // A role limited to some DLQ topics sees their quarantined records only.
    let sees = crate::auth_context::topic_check();
    items.retain(|q| sees(&q.dlq_topic));
    Ok(QuarantineListing { total, items })
}
