//! The UI's server-rendered pages, requested through the real site router over a real (SQLite)
//! store: hostile markup renders inert, awkward records (tombstone, null key, binary, 1 MiB)
//! render, a bad filter is a 400 with its reason, a missing dead letter a 404.
//!
//! No browser and no wasm needed: these are the HTML pages as a browser without JavaScript
//! sees them (`end2end/` covers hydration).

use axum::body::Body;
use axum::http::{Request, StatusCode};
use redrive_core::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use redrive_testkit::{fresh_store, Backend};
use tower::ServiceExt;

use crate::site;
use crate::support::InProcessSite;

const SCRIPT: &str = "<script>alert(1)</script>";
const IMG: &str = "\"><img src=x onerror=alert(1)>";

/// Fixed times so the list order is known: the hostile record is the newest.
const T0: i64 = 1_796_104_800_000;

fn dead_letter(
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<Header>,
    normalized: Normalized,
) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: "pages.DLT".into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(T0 + offset),
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
        dead_lettered_at_ms: T0 + offset * 1000,
        ingested_at_ms: T0 + offset * 1000 + 5,
    }
}

fn header(name: &str, value: Option<&[u8]>) -> Header {
    Header {
        name: name.into(),
        value: value.map(<[u8]>::to_vec),
    }
}

/// The records under test, by dlq offset: 0 tombstone + null key, 1 binary, 2 one MiB of
/// JSON, 3 empty value and empty/null headers, 4 hostile everywhere (newest).
fn records() -> Vec<NewDeadLetter> {
    let hostile = format!("{SCRIPT}{IMG}");
    let plain = |class: &str, msg: &str| Normalized {
        source_topic: Some("orders".into()),
        error_class: Some(class.into()),
        error_message: Some(msg.into()),
        ..Normalized::default()
    };
    let mut big = b"{\"items\":[".to_vec();
    while big.len() < 1024 * 1024 {
        big.extend_from_slice(b"{\"sku\":\"A-1\",\"qty\":1},");
    }
    big.extend_from_slice(b"{}]}");
    vec![
        dead_letter(
            0,
            None,
            None,
            vec![],
            plain("com.example.TombstoneException", "tombstone"),
        ),
        dead_letter(
            1,
            Some(b"k1".to_vec()),
            Some(vec![0, 0, 0, 0, 0x2a, 0xde, 0xad, 0xbe, 0xef, 0xff, 0x10]),
            vec![header("trace-id", Some(&[0xc3, 0x28]))],
            plain(
                "org.apache.kafka.connect.errors.DataException",
                "Unknown magic byte!",
            ),
        ),
        dead_letter(
            2,
            Some(b"big".to_vec()),
            Some(big),
            vec![],
            plain("com.example.TooBigException", "one MiB"),
        ),
        dead_letter(
            3,
            Some(vec![]),
            Some(vec![]),
            vec![header("empty", Some(b"")), header("nothing", None)],
            plain("com.example.EmptyException", "empty"),
        ),
        dead_letter(
            4,
            Some(hostile.clone().into_bytes()),
            Some(hostile.clone().into_bytes()),
            vec![
                header(&hostile, Some(hostile.as_bytes())),
                header("x-error", Some(hostile.as_bytes())),
            ],
            Normalized {
                source_topic: Some(hostile.clone()),
                consumer_group: Some(hostile.clone()),
                error_class: Some(hostile.clone()),
                error_message: Some(hostile.clone()),
                stack_trace: Some(hostile.clone()),
                decode_warnings: vec![hostile.clone()],
                ..Normalized::default()
            },
        ),
    ]
}

/// Markup from the data must never appear as markup: neither as an element nor as an
/// attribute broken out of its quotes.
fn assert_inert(page: &str, html: &str) {
    for raw in [
        "<script>alert(1)",
        "<img src=x",
        "<img src=\"x\"",
        "\"><img",
    ] {
        if let Some(at) = html.find(raw) {
            panic!(
                "{page}: raw markup {raw:?} in the HTML: …{}…",
                &html[at.saturating_sub(100)..(at + 300).min(html.len())]
            );
        }
    }
}

/// Stored text never appears inside a `<script>` (the hydration data is base64, see
/// `redrive_app::wire`), not even as escaped JSON.
fn assert_not_in_scripts(page: &str, html: &str) {
    for chunk in html.split("<script").skip(1) {
        let body = chunk.split("</script>").next().unwrap_or("");
        assert!(
            !body.contains("alert(1)"),
            "{page}: stored text inside a script: {body}"
        );
    }
}

fn id_of(html: &str, needle: &str) -> i64 {
    // Rows link to /dead-letters/{id}; find the row holding `needle` and take its link
    // (searching the table only: the filter bar's suggestions hold some of the same text).
    let table = &html[html.find("<tbody>").expect("a table")..];
    let at = table
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in list"));
    let before = &table[..at];
    let start = before.rfind("/dead-letters/").expect("a detail link") + "/dead-letters/".len();
    before[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .expect("an id")
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_render_awkward_and_hostile_records_inertly() {
    let site = InProcessSite::start(&records()).await;

    let (status, list) = site.get("/").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_inert("list", &list);
    assert_not_in_scripts("list", &list);
    assert!(
        list.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "escaped text shown"
    );
    assert!(list.contains("Unknown magic byte!"));
    assert!(list.contains("com.example.TombstoneException"));
    // Newest first: the hostile record (offset 4) before the tombstone (offset 0).
    let hostile_at = list.find("&lt;script&gt;").expect("hostile row");
    let tombstone_at = list.find("TombstoneException").expect("tombstone row");
    assert!(hostile_at < tombstone_at, "newest first");

    let (status, groups) = site.get("/groups").await;
    assert_eq!(status, StatusCode::OK);
    assert_inert("groups", &groups);
    assert!(groups.contains("/?fingerprint="));

    let hostile_id = id_of(&list, "&lt;script&gt;alert(1)");
    let (status, detail) = site.get(&format!("/dead-letters/{hostile_id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_inert("detail", &detail);
    assert_not_in_scripts("detail", &detail);
    assert!(
        detail.contains("onerror=alert(1)&gt;"),
        "hostile text shown as text"
    );
    assert!(detail.contains(&format!("/dead-letters/{hostile_id}/raw/value")));

    for (needle, expect) in [
        ("TombstoneException", "null (tombstone)"),
        ("DataException", "de ad be ef ff 10"),
        ("TooBigException", "Only the beginning is shown"),
        ("EmptyException", "(empty: 0 bytes)"),
    ] {
        let id = id_of(&list, needle);
        let (status, html) = site.get(&format!("/dead-letters/{id}")).await;
        assert_eq!(status, StatusCode::OK, "{needle}");
        assert!(html.contains(expect), "{needle}: expected {expect:?}");
    }
    // Null and empty header values are told apart.
    let id = id_of(&list, "EmptyException");
    let (_, html) = site.get(&format!("/dead-letters/{id}")).await;
    assert!(html.contains(r#"<span class="null">null</span>"#));
    assert!(html.contains(r#"<span class="empty">(empty)</span>"#));
}

#[tokio::test(flavor = "multi_thread")]
async fn filters_bad_parameters_and_missing_records() {
    let site = InProcessSite::start(&records()).await;

    let (status, html) = site.get("/?q=magic+byte").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Unknown magic byte!"));
    assert!(!html.contains("TombstoneException"));
    assert!(
        html.contains(r#"value="magic byte""#),
        "the filter bar keeps the text"
    );

    let (status, html) = site.get("/?limit=2").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Older →"));
    assert!(html.contains("cursor="));

    let (status, html) = site.get("/?status=gone").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains("`status` must be one of"), "{html}");
    let (status, _) = site.get("/groups?colour=red").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let (status, html) = site.get("/dead-letters/999999").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains("There is no dead letter 999999"));
    let (status, html) = site.get("/dead-letters/not-a-number").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        html.contains("ids are whole numbers, as in /dead-letters/42"),
        "{html}"
    );
    let (status, _) = site.get("/no/such/page").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The cause of the old "one render in thirty never completes": building a site router
/// generates the route list, which used to switch resource loading off process-wide while
/// other renders ran, leaving their resources pending forever. Here 4 tasks each build a fresh
/// router and render the list and a search, 25 times, all at once; every render must complete.
/// (With the route list generated per router, this stalled within a few dozen renders.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn routers_built_while_pages_render_never_stall_a_render() {
    let (store, _db) = fresh_store(Backend::Sqlite).await.expect("a fresh store");
    store.insert_batch(&records()).await.expect("insert");
    let site_root = tempfile::tempdir().expect("tempdir");
    let root = site_root.path().display().to_string();
    let mut tasks = Vec::new();
    for task in 0..4 {
        let (store, root) = (store.clone(), root.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..25 {
                let options = site::leptos_options(&root, "127.0.0.1:0".parse().expect("addr"));
                let router = crate::support::site_router_as_admin(store.clone(), options);
                for uri in ["/", "/?q=magic+byte"] {
                    let render = router
                        .clone()
                        .oneshot(Request::get(uri).body(Body::empty()).expect("request"));
                    // A bound on a hang, not a speed target: a stalled render never completes.
                    let res = tokio::time::timeout(std::time::Duration::from_secs(60), render)
                        .await
                        .unwrap_or_else(|_| panic!("task {task} round {round}: GET {uri} stalled"))
                        .expect("infallible");
                    assert_eq!(res.status(), StatusCode::OK, "GET {uri}");
                    axum::body::to_bytes(res.into_body(), 64 * 1024 * 1024)
                        .await
                        .unwrap_or_else(|e| panic!("GET {uri}: body: {e}"));
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("render task");
    }
}

/// The first `<svg ...>...` of `html` (up to its `</svg>`).
fn first_svg(html: &str) -> &str {
    let start = html.find("<svg").expect("a sparkline");
    &html[start..start + html[start..].find("</svg>").expect("closed")]
}

/// The groups page's sparkline draws a bar for each hour with arrivals and nothing for the
/// quiet hours (no invisible zero-high bars: their markup was most of the page's 228 KB with
/// 50 groups), with the 24 hours' total as its title.
#[tokio::test(flavor = "multi_thread")]
async fn a_groups_sparkline_has_bars_for_the_busy_hours_only() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    const HOUR: i64 = 3_600_000;
    // Three dead letters two hours ago, one five hours ago: two busy hours of 24.
    let at = [
        now - 2 * HOUR,
        now - 2 * HOUR,
        now - 2 * HOUR,
        now - 5 * HOUR,
    ];
    let records: Vec<NewDeadLetter> = at
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut d = dead_letter(
                i as i64,
                Some(b"k".to_vec()),
                Some(b"v".to_vec()),
                vec![],
                Normalized {
                    error_class: Some("com.example.SparkException".into()),
                    error_message: Some("spark".into()),
                    ..Normalized::default()
                },
            );
            d.dead_lettered_at_ms = *t;
            d.ingested_at_ms = *t;
            d
        })
        .collect();
    let site = InProcessSite::start(&records).await;
    let (status, html) = site.get("/groups").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let svg = first_svg(&html);
    assert_eq!(svg.matches("<rect").count(), 2, "{svg}");
    assert!(svg.contains("<title>4 in the last 24 h</title>"), "{svg}");
    assert!(svg.contains(" UTC: 3</title>"), "{svg}");
    assert!(svg.contains(" UTC: 1</title>"), "{svg}");
    assert!(!svg.contains(" UTC: 0</title>"), "{svg}");
    assert!(
        html.contains(">Last 24 h</th>"),
        "the column names its window"
    );

    // Under a time range the sparkline covers the range, not the last 24 h: from 4 hours
    // ago to now it holds the three of two hours ago and not the one of five hours ago.
    let (status, html) = site.get(&format!("/groups?from={}", now - 4 * HOUR)).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let svg = first_svg(&html);
    assert_eq!(svg.matches("<rect").count(), 1, "{svg}");
    assert!(svg.contains("<title>3 from "), "{svg}");
    assert!(svg.contains(", per hour\""), "{svg}");
    assert!(html.contains(">In the range</th>"), "{html}");
    // Eight days (as far back as hourly counts are kept) in buckets of 4 hours, 48 bars at
    // most; a range older than that is cut, and the column's title says so.
    let (status, html) = site
        .get(&format!("/groups?from={}&to={}", now - 30 * 24 * HOUR, now))
        .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let svg = first_svg(&html);
    assert!(svg.contains("<title>4 from "), "{svg}");
    assert!(svg.contains(", per 4 h\""), "{svg}");
    assert!(
        html.contains("the range&#x27;s older part is not drawn")
            || html.contains("the range's older part is not drawn"),
        "{html}"
    );
}
