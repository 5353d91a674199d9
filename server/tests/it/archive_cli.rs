//! `redrive archive create` and `redrive archive restore` as an operator runs them on the
//! server host (the CLI, not the API; `docs/retention.md`, "Archive"), on SQLite and
//! PostgreSQL: an archive of a filter to a filesystem directory has a manifest whose counts,
//! ranges and SHA-256 match the object written, and restoring it into a fresh store gives
//! back every dead letter byte for byte, with its status, history and normalised fields.

use std::io::Read as _;
use std::path::Path;

use redrive_core::actions::{Actor, Selection};
use redrive_core::model::{Convention, DeadLetter, Header, NewDeadLetter, Normalized, RawRecord};
use redrive_core::store::Store;
use redrive_core::{Filter, ListQuery, Status};
use redrive_testkit::{fresh_database, unique, Backend};
use serde_json::Value;
use sha2::Digest as _;

use crate::support::{run_redrive, TestApp};

/// Awkward records: null key, tombstone, empty value, non-UTF-8 bytes, duplicate and
/// null-valued headers, two partitions.
fn awkward(topic: &str, n: i64) -> Vec<NewDeadLetter> {
    (0..n)
        .map(|i| {
            let key = match i % 3 {
                0 => None,
                1 => Some(vec![0xff, 0x00, 0xfe, i as u8]),
                _ => Some(format!("key-{i}").into_bytes()),
            };
            let value = match i % 4 {
                0 => None,
                1 => Some(Vec::new()),
                2 => Some(vec![0xc3, 0x28, 0x00, 0x80, i as u8]),
                _ => Some(format!("{{\"n\":{i},\"text\":\"caf\u{e9}\"}}").into_bytes()),
            };
            let headers = vec![
                Header {
                    name: "x-trace".into(),
                    value: Some(format!("t{i}").into_bytes()),
                },
                Header {
                    name: "x-null".into(),
                    value: None,
                },
                Header {
                    name: "x-trace".into(),
                    value: Some(vec![0xde, 0xad]),
                },
            ];
            let normalized = Normalized {
                source_topic: Some(format!("src\u{7}{}", i % 2)),
                error_class: Some(format!("com.example.Archived{}", i % 2)),
                error_message: Some(format!("failed {i}\nsecond line")),
                retry_count: Some(i as i32),
                ..Normalized::default()
            };
            let at = 1_796_000_000_000 + i * 1000;
            NewDeadLetter {
                record: RawRecord {
                    dlq_topic: topic.to_string(),
                    dlq_partition: (i % 2) as i32,
                    dlq_offset: 100 + i,
                    timestamp_ms: (i % 5 != 0).then_some(at - 7),
                    key,
                    value,
                    headers,
                },
                convention: Convention::Unknown,
                fingerprint: redrive_core::fingerprint::fingerprint(
                    normalized.error_class.as_deref(),
                    normalized.error_message.as_deref(),
                ),
                normalized,
                dead_lettered_at_ms: at,
                ingested_at_ms: at + 3,
            }
        })
        .collect()
}

/// Every dead letter of `topic` with `status` (`None`: the live ones), by (partition, offset).
async fn stored(store: &Store, topic: &str, status: Option<Status>) -> Vec<DeadLetter> {
    let page = store
        .list(&ListQuery {
            filter: Filter {
                dlq_topic: Some(topic.to_string()),
                status,
                ..Filter::default()
            },
            limit: 500,
            cursor: None,
        })
        .await
        .expect("list");
    assert!(page.next_cursor.is_none());
    let mut out = Vec::new();
    for s in page.items {
        out.push(store.get(s.id).await.expect("get").expect("listed"));
    }
    out.sort_by_key(|d| (d.record.dlq_partition, d.record.dlq_offset));
    out
}

/// What must survive an archive and a restore: everything but the store's own id.
fn essence(d: &DeadLetter) -> (RawRecord, Normalized, String, Status, i64, i64, i32) {
    (
        d.record.clone(),
        d.normalized.clone(),
        d.summary.fingerprint.clone(),
        d.summary.status,
        d.summary.dead_lettered_at_ms,
        d.ingested_at_ms,
        d.replay_count,
    )
}

/// Checks a run's directory against its manifest; returns the manifest and the lines.
fn check_run(manifest_path: &Path, want_records: u64, what: &str) -> (Value, Vec<Value>) {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(manifest_path).expect("manifest")).expect("JSON");
    assert_eq!(manifest["format"], "redrive-archive/1", "{what}");
    assert_eq!(manifest["kind"], "archive", "{what}");
    assert_eq!(manifest["actor"], "(cli)", "{what}");
    assert_eq!(manifest["records"].as_u64(), Some(want_records), "{what}");
    let objects = manifest["objects"].as_array().expect("objects");
    assert_eq!(objects.len(), 1, "{what}: {manifest}");
    let obj = &objects[0];
    let bytes = std::fs::read(manifest_path.with_file_name(obj["name"].as_str().expect("name")))
        .expect("the object");
    assert_eq!(obj["bytes"].as_u64(), Some(bytes.len() as u64), "{what}");
    assert_eq!(obj["compression"], "gzip", "{what}");
    assert_eq!(
        obj["sha256"].as_str(),
        Some(hex(&sha2::Sha256::digest(&bytes)).as_str()),
        "{what}: the checksum is of the stored bytes"
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .expect("gzip");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len() as u64, want_records, "{what}");
    assert_eq!(obj["records"].as_u64(), Some(want_records), "{what}");
    // The coordinates and ranges cover exactly the lines.
    let coords = manifest["coordinates"].as_array().expect("coordinates");
    let in_coords: u64 = coords.iter().filter_map(|c| c["records"].as_u64()).sum();
    assert_eq!(in_coords, want_records, "{what}: {manifest}");
    for c in coords {
        let offsets: Vec<i64> = lines
            .iter()
            .filter(|l| l["dlq_partition"] == c["partition"] && l["dlq_topic"] == c["dlq_topic"])
            .filter_map(|l| l["dlq_offset"].as_i64())
            .collect();
        assert_eq!(offsets.len() as u64, c["records"].as_u64().unwrap_or(0));
        assert_eq!(offsets.iter().min().copied(), c["first_offset"].as_i64());
        assert_eq!(offsets.iter().max().copied(), c["last_offset"].as_i64());
    }
    let ids: Vec<i64> = lines.iter().filter_map(|l| l["id"].as_i64()).collect();
    assert_eq!(
        manifest["id_range"],
        serde_json::json!([ids.iter().min(), ids.iter().max()]),
        "{what}"
    );
    (manifest, lines)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The one run directory under `root` whose manifest says `kind`, newest last.
fn run_dirs(root: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .expect("archive dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("manifest.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[tokio::test]
async fn archive_create_by_filter_then_restore_into_a_fresh_store_is_byte_exact() {
    for backend in Backend::ALL {
        let what = format!("{backend:?}");
        let topic = unique("cli_arch.DLT");
        let other = unique("cli_other.DLT");
        let mut records = awkward(&topic, 14);
        records.extend(awkward(&other, 5));
        let app = TestApp::with_records(backend, &records, &[]).await;
        // Three of the topic's dead letters deleted: the default filter leaves them out.
        let victims: Vec<i64> = stored(&app.store, &topic, None)
            .await
            .iter()
            .step_by(5)
            .map(|d| d.summary.id)
            .collect();
        assert_eq!(victims.len(), 3);
        app.store
            .delete(
                &Actor::operator("ops"),
                &Selection::Ids(victims),
                Some("cli test"),
            )
            .await
            .expect("delete");
        let live = stored(&app.store, &topic, None).await;
        let deleted = stored(&app.store, &topic, Some(Status::Deleted)).await;
        assert_eq!((live.len(), deleted.len()), (11, 3));

        let archive = tempfile::tempdir().expect("tempdir");
        let location = archive.path().to_str().expect("utf-8 path").to_string();
        let filter = format!("dlq_topic={topic}");
        let (code, out, err) = app
            .cli(
                &[
                    "archive",
                    "create",
                    "--filter",
                    &filter,
                    "--location",
                    &location,
                ],
                None,
            )
            .await;
        assert_eq!(code, Some(0), "{what}: {out}\n{err}");
        assert!(out.contains("archived 11 dead letters"), "{what}: {out}");
        let dirs = run_dirs(archive.path());
        assert_eq!(dirs.len(), 1, "{what}: one run directory: {dirs:?}");
        let manifest_path = dirs[0].join("manifest.json");
        assert!(
            out.contains(manifest_path.to_str().expect("path")),
            "{what}: prints the manifest's location: {out}"
        );
        let name = dirs[0].file_name().and_then(|n| n.to_str()).unwrap_or("");
        assert!(name.contains("-archive-"), "{what}: {name}");
        let (manifest, lines) = check_run(&manifest_path, 11, &what);
        assert!(
            manifest["reason"].as_str().unwrap_or("").contains(&topic),
            "{what}: the filter is the reason: {manifest}"
        );
        assert!(
            lines.iter().all(|l| l["dlq_topic"] == topic.as_str()),
            "{what}: only the filter's topic"
        );
        // Nothing deleted, and one audit row by the CLI.
        assert_eq!(stored(&app.store, &topic, None).await.len(), 11, "{what}");
        let audit = app.audit_of("archive").await;
        assert_eq!(audit.len(), 1, "{what}: {audit:?}");
        assert_eq!((audit[0].actor.as_str(), audit[0].count), ("(cli)", 11));

        // The deleted ones, archived on their own (status kept).
        let filter_deleted = format!("dlq_topic={topic}&status=deleted");
        let (code, out, err) = app
            .cli(
                &[
                    "archive",
                    "create",
                    "--filter",
                    &filter_deleted,
                    "--location",
                    &location,
                ],
                None,
            )
            .await;
        assert_eq!(code, Some(0), "{what}: {out}\n{err}");
        assert!(out.contains("archived 3 dead letters"), "{what}: {out}");
        let dirs = run_dirs(archive.path());
        assert_eq!(dirs.len(), 2, "{what}: {dirs:?}");
        let deleted_dir = dirs
            .iter()
            .find(|d| d.join("manifest.json") != manifest_path)
            .expect("the second run")
            .clone();
        let (_, lines) = check_run(&deleted_dir.join("manifest.json"), 3, &what);
        assert!(lines.iter().all(|l| l["status"] == "deleted"), "{what}");

        // Into a fresh store (`--create`: a missing SQLite file is otherwise refused):
        // byte-exact, statuses and history kept.
        let (fresh_url, _fresh_dir) = fresh_database(backend).await.expect("fresh db");
        let env = [("REDRIVE_DATABASE_URL", fresh_url.as_str())];
        for dir in [&dirs[0], &dirs[1]] {
            let loc = dir.to_str().expect("path");
            let (code, out, err) =
                run_redrive(&["archive", "restore", loc, "--create"], &env, None).await;
            assert_eq!(code, Some(0), "{what}: {out}\n{err}");
            assert!(out.contains("restored, 0 already present"), "{what}: {out}");
        }
        let fresh = Store::connect(&fresh_url).await.expect("connect");
        let back_live = stored(&fresh, &topic, None).await;
        let back_deleted = stored(&fresh, &topic, Some(Status::Deleted)).await;
        assert_eq!(
            back_live.iter().map(essence).collect::<Vec<_>>(),
            live.iter().map(essence).collect::<Vec<_>>(),
            "{what}: live dead letters restored exactly"
        );
        assert_eq!(
            back_deleted.iter().map(essence).collect::<Vec<_>>(),
            deleted.iter().map(essence).collect::<Vec<_>>(),
            "{what}: deleted ones restored exactly, still deleted"
        );
        assert!(
            stored(&fresh, &other, None).await.is_empty(),
            "{what}: the filter's other topic was not archived"
        );
        let history = fresh
            .history(back_deleted[0].summary.id)
            .await
            .expect("history");
        assert!(
            history.iter().any(|e| e.kind == "archive_restored"),
            "{what}: {history:?}"
        );
        fresh.close().await;

        // A filter the list refuses, or no location at all: an error, nothing written.
        let (code, _, err) = app
            .cli(
                &[
                    "archive",
                    "create",
                    "--filter",
                    "colour=red",
                    "--location",
                    &location,
                ],
                None,
            )
            .await;
        assert_ne!(code, Some(0), "{what}: {err}");
        assert!(err.contains("unknown parameter `colour`"), "{what}: {err}");
        let (code, _, err) = app
            .cli(&["archive", "create", "--filter", &filter], None)
            .await;
        assert_ne!(code, Some(0), "{what}");
        assert!(err.contains("no archive location"), "{what}: {err}");
        assert_eq!(run_dirs(archive.path()).len(), 2, "{what}");
        let (code, log) = app.terminate(std::time::Duration::from_secs(40)).await;
        assert_eq!(code, Some(0), "{log}");
    }
}
