//! The server's allocator options (`docs/configuration.md`, "Memory bounds"), through the real
//! binary: jemalloc reads the `malloc_conf` compiled into it (a misnamed symbol would be
//! ignored without a word), and `MALLOC_CONF` in the environment still adds to it.

use crate::support::redrive_std_command;

/// jemalloc's own statistics, printed at exit (`stats_print`), show the option in effect.
#[test]
fn the_binary_gives_freed_memory_back_after_one_second() {
    let out = redrive_std_command()
        .arg("--version")
        .env("MALLOC_CONF", "stats_print:true")
        .output()
        .expect("run redrive --version");
    assert!(out.status.success(), "{out:?}");
    let stats = String::from_utf8_lossy(&out.stderr);
    assert!(
        stats.contains("opt.dirty_decay_ms: 1000 "),
        "jemalloc's options: {}",
        stats
            .lines()
            .filter(|l| l.contains("decay"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
