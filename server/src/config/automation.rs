//! The `[automation]` table of `redrive.toml`.

use serde::{Deserialize, Serialize};

/// The `[automation]` table: a rule set as `redrive_core::automation::RuleSetSpec` reads it,
/// or nothing. (A newtype so that `Config` keeps `Eq`: the spec holds `f64`s, compared as
/// values, never NaN after [`AutomationTable::rule_set`] checked them.)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AutomationTable(pub Option<redrive_core::automation::RuleSetSpec>);

impl Eq for AutomationTable {}

impl AutomationTable {
    /// True when `redrive.toml` has no `[automation]` table.
    pub fn is_absent(&self) -> bool {
        self.0.is_none()
    }

    /// The table as rule set TOML text (without the `automation.` prefix: the text the UI
    /// edits), compiled; `None` without a table. The text is the spec written back
    /// (`RuleSet::to_toml`): comments of the file are not kept, and the same table always
    /// gives the same text, so an unchanged file is recognised at the next start.
    ///
    /// Errors: the rule set's own message (what to change), prefixed `[automation]`.
    pub fn rule_set(&self) -> Result<Option<(String, redrive_core::automation::RuleSet)>, String> {
        let Some(spec) = &self.0 else {
            return Ok(None);
        };
        let set = redrive_core::automation::RuleSet::compile(spec.clone())
            .map_err(|e| format!("[automation]: {e} (see docs/automation.md)"))?;
        let text = set.to_toml();
        Ok(Some((text, set)))
    }
}
