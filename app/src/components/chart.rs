//! Server-rendered SVG bar charts: the overview's dead-letter rate and the error groups'
//! trend sparklines. Plain `<rect>`s, each with a `<title>` (the browser shows it on hover,
//! no JavaScript needed) and, for the rate chart, a link into the list filtered to its bucket.
//!
//! Drawn as Leptos SVG elements rather than with a plotting crate: `plotters`' SVG backend
//! writes bare shapes, without the per-bar `<title>` and `<a>` that make the chart readable
//! and navigable without JavaScript, and the same view renders on the server and hydrates in
//! the browser with no extra wasm. The markup is bounded by the series' length (360 minute
//! bars or 168 hour bars at most).

use leptos::prelude::*;

use crate::display::format_time;

/// Chart width and height in SVG user units (the element scales to its container).
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 160.0;
/// Room for the y-axis labels on the left and the x-axis labels below.
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 18.0;

/// A bar chart of `series` (`(bucket start ms, count)`, oldest first, equal buckets of
/// `bucket_ms`). `href` gives each bar's link (the list filtered to its bucket), `None` for
/// no links. `label` names the chart for screen readers.
#[component]
pub fn RateChart(
    series: Vec<(i64, i64)>,
    bucket_ms: i64,
    label: String,
    #[prop(optional)] href: Option<Callback<(i64, i64), String>>,
) -> impl IntoView {
    // The highest bar, as said; `scale` only keeps the division away from 0.
    let max = series.iter().map(|(_, n)| *n).max().unwrap_or(0).max(0);
    let scale = max.max(1);
    let n = series.len().max(1) as f64;
    let plot_w = WIDTH - LEFT;
    let plot_h = HEIGHT - BOTTOM;
    let bar_w = plot_w / n;
    let unit = if bucket_ms >= 3_600_000 {
        "hour"
    } else {
        "minute"
    };
    let total: i64 = series.iter().map(|(_, c)| *c).sum();
    let first = series.first().map(|(t, _)| *t);
    let last = series.last().map(|(t, _)| *t + bucket_ms);
    let bars = series
        .into_iter()
        .enumerate()
        .filter(|(_, (_, c))| *c > 0)
        .map(|(i, (t, c))| {
            let h = (c as f64 / scale as f64) * (plot_h - 4.0);
            let x = LEFT + i as f64 * bar_w;
            let y = plot_h - h;
            // An arrival history: the list behind the bar shows the ones not deleted or
            // purged since (`docs/stats.md`).
            let title = format!("{} UTC: {c} dead letters arrived", format_time(t));
            let rect = view! {
                <rect
                    class="bar"
                    x=format!("{x:.2}")
                    y=format!("{y:.2}")
                    width=format!("{:.2}", (bar_w - 0.4).max(0.6))
                    height=format!("{h:.2}")
                >
                    <title>{title}</title>
                </rect>
            };
            match &href {
                Some(f) => view! { <a href=f.run((t, t + bucket_ms))>{rect}</a> }.into_any(),
                None => rect.into_any(),
            }
        })
        .collect_view();
    let start_label = first.map(format_time).unwrap_or_default();
    let end_label = last.map(format_time).unwrap_or_default();
    let summary = if total == 0 {
        format!("{label}: no dead letters in this range")
    } else {
        format!("{label}: {total} dead letters in this range, at most {max} in one {unit}")
    };
    let caption = if total == 0 {
        format!("{label}: no dead letters in this range; times UTC.")
    } else {
        format!(
            "{label}: {total} dead letters in this range, at most {max} in one {unit}; times UTC."
        )
    };
    view! {
        <figure class="chart">
            <svg
                viewBox=format!("0 0 {WIDTH} {HEIGHT}")
                role="img"
                aria-label=summary
                preserveAspectRatio="none"
            >
                <line class="axis" x1=LEFT y1=plot_h x2=WIDTH y2=plot_h />
                <line class="axis" x1=LEFT y1="0" x2=LEFT y2=plot_h />
                {(max > 0)
                    .then(|| {
                        view! {
                            <text class="tick" x=LEFT - 4.0 y="10" text-anchor="end">
                                {max.to_string()}
                            </text>
                        }
                    })}
                <text class="tick" x=LEFT - 4.0 y=plot_h text-anchor="end">
                    "0"
                </text>
                <text class="tick" x=LEFT y=HEIGHT - 4.0 text-anchor="start">
                    {start_label}
                </text>
                <text class="tick" x=WIDTH y=HEIGHT - 4.0 text-anchor="end">
                    {end_label}
                </text>
                {bars}
            </svg>
            <figcaption class="dim">
                {caption}
            </figcaption>
        </figure>
    }
}

/// A small bar sparkline of `counts` (one per bucket of `bucket_ms` from `start_ms`, oldest
/// first), each bar with a `<title>`. A bucket with nothing has no bar (it would be 0 high)
/// and no markup: a quiet group's sparkline is an empty box, not 24 invisible bars. `span`
/// says what the whole covers, after the total ("in the last 24 h").
#[component]
pub fn Sparkline(start_ms: i64, bucket_ms: i64, counts: Vec<i64>, span: String) -> impl IntoView {
    let max = counts.iter().copied().max().unwrap_or(0).max(1);
    let n = counts.len().max(1) as f64;
    let (w, h) = (96.0_f64, 20.0_f64);
    let bar_w = w / n;
    let total: i64 = counts.iter().sum();
    let bars = counts
        .into_iter()
        .enumerate()
        .filter(|(_, c)| *c > 0)
        .map(|(i, c)| {
            let t = start_ms + i as i64 * bucket_ms;
            let bh = ((c as f64 / max as f64) * (h - 1.0)).max(1.0);
            view! {
                <rect
                    class="bar"
                    x=format!("{:.2}", i as f64 * bar_w)
                    y=format!("{:.2}", h - bh)
                    width=format!("{:.2}", (bar_w - 0.5).max(0.5))
                    height=format!("{bh:.2}")
                >
                    <title>{bar_title(t, bucket_ms, c)}</title>
                </rect>
            }
        })
        .collect_view();
    view! {
        <svg
            class="sparkline"
            width="96"
            height="20"
            viewBox="0 0 96 20"
            role="img"
            aria-label=format!("{total} {span}, per {}", per_bucket(bucket_ms))
        >
            <title>{format!("{total} {span}")}</title>
            {bars}
        </svg>
    }
}

/// A bar's tooltip: its bucket's start and count ("2026-12-07 13:00:00 UTC: 3", and "in 4 h"
/// for a bucket of several hours).
fn bar_title(start_ms: i64, bucket_ms: i64, count: i64) -> String {
    let mut t = format!("{} UTC: {count}", format_time(start_ms));
    if bucket_ms > 3_600_000 {
        t.push_str(&format!(" in {}", per_bucket(bucket_ms)));
    }
    t
}

/// "hour", or "N h" for a bucket of several hours.
fn per_bucket(bucket_ms: i64) -> String {
    match bucket_ms / 3_600_000 {
        0 | 1 => "hour".into(),
        h => format!("{h} h"),
    }
}
