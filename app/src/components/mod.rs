//! Building blocks of the pages, each named for what the user sees.

mod badges;
mod bulk_actions;
mod canary;
mod chart;
mod cut_notice;
mod dead_letter_table;
mod error_group_table;
mod filter_bar;
mod header_table;
mod history;
mod job_lag;
mod job_progress;
mod labels;
mod list_tools;
mod pager;
mod payload_view;

pub use badges::{MalformedBadge, StatusBadge, TierBadge};
pub use bulk_actions::{ActionError, ActionNotice, BulkActions, Picked};
pub use canary::{CanaryFields, CanarySection};
pub use chart::{RateChart, Sparkline};
pub use cut_notice::CutNotice;
pub use dead_letter_table::DeadLetterTable;
pub use error_group_table::ErrorGroupTable;
pub use filter_bar::FilterBar;
pub use header_table::HeaderTable;
pub use history::History;
pub use job_lag::JobLagGate;
pub use job_progress::{measured_rate, settled as job_settled, JobProgress, JobStatusBadge};
pub use labels::{LabelChips, TriageEditor, NOTE_SHOWN_BYTES};
pub use list_tools::ListTools;
pub use pager::Pager;
pub use payload_view::{PayloadView, SchemaDecoded};
