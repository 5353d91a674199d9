//! The error of a refused role definition or DLQ-topic pattern ([`RoleError`]).

/// Why a role definition or a DLQ-topic pattern was refused; the message names the entry and
/// says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RoleError(pub String);
