//! The HTTP status of a server-rendered page (400 for a bad filter, 404 for a missing dead
//! letter), set from inside the page. In the browser there is no response to set: a no-op.

#[cfg(feature = "ssr")]
use leptos::prelude::*;

/// Handle on the response being rendered; take it while the component is created (the
/// context is not reliably reachable from inside an async block later).
#[derive(Clone, Default)]
pub struct HttpStatus {
    #[cfg(feature = "ssr")]
    options: Option<leptos_axum::ResponseOptions>,
}

impl HttpStatus {
    /// The current response's handle (none outside a server render).
    pub fn current() -> HttpStatus {
        HttpStatus {
            #[cfg(feature = "ssr")]
            options: use_context::<leptos_axum::ResponseOptions>(),
        }
    }

    /// Sets the status code of the server-rendered response.
    pub fn set(&self, code: u16) {
        #[cfg(feature = "ssr")]
        if let (Some(options), Ok(status)) = (
            &self.options,
            leptos::server_fn::http_export::StatusCode::from_u16(code),
        ) {
            options.set_status(status);
        }
        #[cfg(not(feature = "ssr"))]
        let _ = code;
    }
}
