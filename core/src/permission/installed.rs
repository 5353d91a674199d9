//! The roles installed for this process at start-up ([`install_roles`]) and read back from
//! anywhere ([`installed_roles`], [`role_names`]).

use std::sync::{Arc, RwLock};

use super::Roles;

static INSTALLED: RwLock<Option<Arc<Roles>>> = RwLock::new(None);

/// Makes `roles` the roles of this process (`serve` and the CLI call it once at start-up, from
/// the configuration). Later calls replace them.
pub fn install_roles(roles: Roles) {
    let mut slot = INSTALLED.write().unwrap_or_else(|e| e.into_inner());
    *slot = Some(Arc::new(roles));
}

/// The installed roles ([`install_roles`]); the built-in ones if none were installed.
pub fn installed_roles() -> Arc<Roles> {
    let slot = INSTALLED.read().unwrap_or_else(|e| e.into_inner());
    slot.clone().unwrap_or_else(|| Arc::new(Roles::built_in()))
}

/// The installed role names as a sentence part: `` `admin`, `operator`, `viewer` ``.
pub fn role_names() -> String {
    installed_roles()
        .names()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
