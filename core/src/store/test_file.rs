//! A SQLite store in a file for the store's own tests (tests that need a second connection or
//! handle on the same database, which `sqlite::memory:` cannot give), in a temporary directory
//! that is removed when the returned [`tempfile::TempDir`] is dropped: keep it alive for as
//! long as the store is used.

use super::Store;

/// `sqlite:<new temporary directory>/<name>` and the directory.
pub(crate) fn sqlite_url(name: &str) -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    (format!("sqlite:{}", dir.path().join(name).display()), dir)
}

/// A migrated store in `<new temporary directory>/<name>`, and the directory.
pub(crate) async fn sqlite_store(name: &str) -> (Store, tempfile::TempDir) {
    let (url, dir) = sqlite_url(name);
    let store = Store::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    (store, dir)
}

/// The SQLite pool of a store opened on a `sqlite:` URL, for tests that run SQL of their own.
pub(crate) fn sqlite_pool(store: &Store) -> &sqlx::SqlitePool {
    let super::Pool::Sqlite(pool) = &store.pool else {
        unreachable!("a sqlite: URL")
    };
    pool
}
