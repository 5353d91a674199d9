//! redrive's domain: the dead-letter model, the header conventions of the frameworks that write
//! dead letters, error fingerprints, the one `Filter` every surface shares, and (with the
//! `server` feature) the store and the Kafka ingest.
//!
//! Data flows one way: Kafka -> [`ingest`] -> [`conventions`] -> [`store`] -> app.
//! Without the `server` feature the crate compiles to wasm32 and is what the hydrated UI shares.

pub mod actions;
pub mod alerts;
pub mod approval;
pub mod auth;
pub mod automation;
pub mod canary;
pub mod clock;
pub mod conventions;
#[cfg(any(test, feature = "server"))]
pub mod corpus;
pub mod edit;
pub mod filter;
pub mod fingerprint;
pub mod labels;
pub mod limits;
pub mod model;
pub mod outcome;
pub mod permission;
pub mod quarantine;
pub mod replay_sample;
pub mod request;
pub mod search;
pub mod sso;

#[cfg(feature = "server")]
pub mod accounts;
#[cfg(feature = "server")]
pub mod archive;
#[cfg(feature = "server")]
pub mod export;
#[cfg(feature = "server")]
pub mod ingest;
#[cfg(feature = "server")]
pub mod kafka_brokers;
#[cfg(feature = "server")]
pub mod leader;
#[cfg(feature = "server")]
pub mod password_work;
#[cfg(feature = "server")]
pub mod replay;
#[cfg(feature = "server")]
pub mod retention;
#[cfg(feature = "server")]
pub mod schema;
#[cfg(feature = "server")]
pub mod search_indexer;
#[cfg(feature = "server")]
pub mod store;

pub use filter::{Cursor, Filter, FilterError, ListQuery};
pub use model::*;
