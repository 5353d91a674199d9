//! `Store::connect` on SQLite: two openers of one new file at the same moment both get it
//! (`connect_sqlite`; `docs/invariants.md`, "Writers on SQLite").

use super::test_file::sqlite_url;
use super::Store;

/// SQLite refuses a new connection's switch to WAL at once while another connection switches
/// the same new file; the connect tries again. Without that, about 1 trial in 30 failed with
/// "(code: 5) database is locked".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_openers_of_one_new_file_both_connect() {
    for trial in 0..100 {
        let (url, _dir) = sqlite_url("new.db");
        let (a, b) = tokio::join!(Store::connect(&url), Store::connect(&url));
        a.unwrap_or_else(|e| panic!("trial {trial}, first: {e}"));
        b.unwrap_or_else(|e| panic!("trial {trial}, second: {e}"));
    }
}
