//! redrive's integration tests: one test binary (linked once, which matters on two cores), one
//! module per concern, one harness ([`support`]).
//!
//! Everything here runs against the real thing: a real Kafka broker (KRaft) and a real
//! PostgreSQL on loopback (`redrive_testkit` starts them, or uses the ones `make test` started),
//! real SQLite files, and either the real `redrive` binary ([`support::TestApp`]) or, for the
//! server-rendered pages, the binary's own site router in process ([`site`]).

mod support;

// The site module belongs to the binary; the page tests compile it in to render in process.
#[path = "../../src/site.rs"]
#[allow(dead_code)]
mod site;

mod actions;
mod alerts;
mod alerts_config;
mod alerts_delivery;
mod alerts_ingest;
mod allocator;
mod api;
mod approvals;
mod archive_cli;
mod auth;
mod authz_matrix;
mod automation_rounds;
mod automation_rules;
mod backpressure_rebalance;
mod bulk_label_resume;
mod canary;
mod cli_client;
mod concurrency;
mod confirm_all;
mod corpus;
mod crash_safety;
mod demo_pipeline;
mod display_caps;
mod edit_replay;
mod group_counts;
mod hardening;
mod ingest_conventions;
mod ingest_edge_cases;
mod ingest_hostile;
mod ingest_quarantine;
mod instances;
mod kafka_brokers;
mod labels;
mod lag_gate;
mod leader;
mod monitoring;
mod openapi;
mod outcome_links;
mod overview;
mod pages;
mod replay;
mod replay_control;
mod replay_counters;
mod replay_order;
mod replay_outcome;
mod replay_rate;
mod replay_resume;
mod replay_streaming;
mod retention;
mod retention_chunks;
mod schema_registry;
mod search;
mod soak;
mod sso;
mod stats;
mod stats_caps;
mod store;
mod tiers;
mod transform;
mod ui_actions;
mod ui_refusals;
mod users;
