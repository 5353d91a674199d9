//! The store (stub).
