//! One leader among several instances on one PostgreSQL (`redrive_core::leader`): exactly one
//! reports `redrive_leader 1`; when it dies by SIGKILL another takes over; a clean shutdown
//! hands over too. On SQLite the one process is the leader.

use std::time::Duration;

use redrive_testkit::Backend;

use crate::support::{eventually, run_redrive, Auth, TestApp};

const PUBLIC_METRICS: (&str, &str) = ("REDRIVE_METRICS_PUBLIC", "true");

/// `redrive_leader` from `/metrics`: Some(true/false), or None when not exported/unreachable.
async fn is_leader(app: &TestApp) -> Option<bool> {
    let res = reqwest::get(app.url("/metrics")).await.ok()?;
    let text = res.text().await.ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("redrive_leader "))
        .map(|v| v.trim() == "1")
}

async fn leaders(apps: &[&TestApp]) -> Vec<Option<bool>> {
    let mut out = Vec::new();
    for app in apps {
        out.push(is_leader(app).await);
    }
    out
}

#[tokio::test]
async fn sqlite_instance_is_its_own_leader() {
    let app = TestApp::start_on(Backend::Sqlite, &[PUBLIC_METRICS]).await;
    assert_eq!(is_leader(&app).await, Some(true), "{}", app.log());
    let res = app.get("/metrics", Auth::None).await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn sqlite_refuses_a_second_instance_on_the_same_file_until_the_first_is_gone() {
    let mut first = TestApp::start_on(Backend::Sqlite, &[PUBLIC_METRICS]).await;
    let env = [
        ("REDRIVE_DATABASE_URL", first.db_url.as_str()),
        ("REDRIVE_LISTEN", "127.0.0.1:0"),
        ("REDRIVE_INGEST_ENABLED", "false"),
    ];
    let (code, out, err) = run_redrive(&["serve"], &env, None).await;
    assert_ne!(
        code,
        Some(0),
        "a second serve on one SQLite file must fail\n{out}\n{err}"
    );
    assert!(
        err.contains("another `redrive serve` is using") && err.contains("PostgreSQL"),
        "the refusal says why and what to do instead: {err}"
    );
    // Nor through a symlink to the same file.
    let path = first.db_url.trim_start_matches("sqlite:").to_string();
    let link = format!("{path}.link");
    std::os::unix::fs::symlink(&path, &link).expect("symlink");
    let via_link = format!("sqlite:{link}");
    let env = [
        ("REDRIVE_DATABASE_URL", via_link.as_str()),
        ("REDRIVE_LISTEN", "127.0.0.1:0"),
        ("REDRIVE_INGEST_ENABLED", "false"),
    ];
    let (code, _, err) = run_redrive(&["serve"], &env, None).await;
    assert_ne!(code, Some(0), "a symlink must not bypass the lock\n{err}");
    assert!(err.contains("another `redrive serve` is using"), "{err}");
    // The CLI's other commands still work beside the server.
    let (code, _, err) = first.cli(&["user", "list"], None).await;
    assert_eq!(code, Some(0), "{err}");

    // The OS releases the lock however the holder ends, SIGKILL included.
    first.kill().await;
    let second = first.another_instance(&[PUBLIC_METRICS]).await;
    assert_eq!(is_leader(&second).await, Some(true), "{}", second.log());
}

#[tokio::test]
async fn postgres_has_one_leader_and_fails_over_on_sigkill_and_on_shutdown() {
    let mut first = TestApp::start_on(Backend::Postgres, &[PUBLIC_METRICS]).await;
    eventually(
        "the first instance to lead",
        Duration::from_secs(20),
        || async { is_leader(&first).await == Some(true) },
    )
    .await;
    let second = first.another_instance(&[PUBLIC_METRICS]).await;
    let third = first.another_instance(&[PUBLIC_METRICS]).await;
    // The followers keep trying (every 2 s); none of them may take over while the leader lives.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            leaders(&[&first, &second, &third]).await,
            vec![Some(true), Some(false), Some(false)]
        );
    }

    // Crash the leader: PostgreSQL ends its session, the lock is free, one follower takes it.
    first.kill().await;
    eventually(
        "a follower to take over after SIGKILL",
        Duration::from_secs(30),
        || async { leaders(&[&second, &third]).await.contains(&Some(true)) },
    )
    .await;
    let now = leaders(&[&second, &third]).await;
    assert_eq!(
        now.iter().filter(|l| **l == Some(true)).count(),
        1,
        "exactly one leader: {now:?}"
    );

    // A clean shutdown of the new leader hands over to the last one.
    let (leader, follower) = if now[0] == Some(true) {
        (second, third)
    } else {
        (third, second)
    };
    let (code, log) = leader.terminate(Duration::from_secs(30)).await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("leadership released at shutdown"), "{log}");
    eventually(
        "the last instance to take over",
        Duration::from_secs(30),
        || async { is_leader(&follower).await == Some(true) },
    )
    .await;
}
