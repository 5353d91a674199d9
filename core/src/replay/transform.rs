//! Transform on replay: a small Rhai script (<https://rhai.rs>, an embedded scripting language
//! with no file, network or process access) run on each record before it is published. The
//! contract, the limits and examples are in `docs/replay.md`, "Transform on replay".
//!
//! In short, the script sees one variable, `record`, an object map:
//!
//! | field | what |
//! |---|---|
//! | `key` | the key: a string when it is UTF-8, else a blob; `()` when the record has none |
//! | `value` | the value, the same way; `()` for a tombstone |
//! | `json` | the value parsed as JSON (a map, array, number, ...), `()` when it does not parse |
//! | `headers` | array of `#{name, value}` in record order (duplicates kept), without redrive's own and the convention's diagnostics |
//! | `topic` | the target topic (read only) |
//!
//! and its last expression is the answer: the record (changed or not) to publish it, or
//! `skip()` / `skip("why")` to not publish it. Anything else is an error for that record. A
//! changed `json` is published as compact JSON in place of the value; an unchanged one leaves
//! the value's bytes exactly as they were.
//!
//! Limits per record: operations (`max_operations`), wall-clock time (`time_limit_ms`, checked
//! between operations), string size, array and blob size, map size, call depth and expression
//! depth ([`ENGINE_LIMITS`]). A record that breaks one fails with the reason; the job goes on.

use std::cell::Cell;
use std::time::{Duration, Instant};

use rhai::{Array, Blob, Dynamic, Engine, EvalAltResult, Map, Scope, AST};

use crate::actions::TransformOptions;
use crate::model::Header;

use super::record::REDRIVE_HEADER_PREFIX;

/// The fixed limits of the sandbox, beside the per-job operation and time limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineLimits {
    /// Longest string a script may build, bytes of UTF-8.
    pub max_string_bytes: usize,
    /// Most elements of an array, and bytes of a blob.
    pub max_array_len: usize,
    /// Most properties of an object map.
    pub max_map_len: usize,
    /// Deepest nesting of function calls.
    pub max_call_levels: usize,
    /// Deepest nesting of expressions (top level, in functions).
    pub max_expr_depth: (usize, usize),
}

/// The sandbox's fixed limits (`docs/replay.md` and `docs/limits.md` list them).
pub const ENGINE_LIMITS: EngineLimits = EngineLimits {
    max_string_bytes: 16 * 1024 * 1024,
    max_array_len: 1_000_000,
    max_map_len: 10_000,
    max_call_levels: 32,
    max_expr_depth: (64, 32),
};

/// How often (in operations) the wall-clock limit is checked.
const CLOCK_EVERY_OPS: u64 = 128;

thread_local! {
    /// When the record being transformed on this thread runs out of time.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Why a script does not compile: the message and where (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the transform script does not compile: {message}{}", at(*line, *column))]
pub struct CompileError {
    pub message: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

fn at(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
        (Some(l), None) => format!(" (line {l})"),
        _ => String::new(),
    }
}

/// What `skip()` returns: the record is not published.
#[derive(Debug, Clone)]
struct SkipRecord(Option<String>);

/// The record as the script receives it.
#[derive(Debug, Clone, Copy)]
pub struct RecordIn<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The headers the record would be published with (application headers, in order),
    /// without redrive's own.
    pub headers: &'a [Header],
    /// The target topic.
    pub topic: &'a str,
}

/// The record the script returned, to publish (redrive's own headers are added after).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordOut {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

/// What became of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Publish this record.
    Publish(RecordOut),
    /// The script skipped it, with its reason if it gave one.
    Skip(Option<String>),
    /// The script failed on it (a runtime error, the operation or a size limit, a wrong
    /// answer): the message. The same record fails the same way again.
    Failed(String),
    /// The script ran out of its wall-clock limit on it: the message. A busy machine can
    /// cause this, so the relay retries it like a publish error (`max_attempts`).
    OutOfTime(String),
}

impl Outcome {
    /// The error of a failed or timed-out record.
    pub fn error(&self) -> Option<&str> {
        match self {
            Outcome::Failed(e) | Outcome::OutOfTime(e) => Some(e),
            _ => None,
        }
    }
}

/// A compiled transform: compile once per job (or preview), run per record, from any thread.
pub struct Transform {
    engine: Engine,
    ast: AST,
    time_limit: Duration,
    time_limit_ms: u32,
    max_operations: u64,
}

impl std::fmt::Debug for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transform")
            .field("time_limit_ms", &self.time_limit_ms)
            .field("max_operations", &self.max_operations)
            .finish_non_exhaustive()
    }
}

/// The sandboxed engine: the standard library (strings, arrays, maps, blobs, math, time), no
/// `eval`, no modules, `print` and `debug` discarded, [`ENGINE_LIMITS`] and the job's limits.
fn engine(max_operations: u64) -> Engine {
    let mut e = Engine::new_raw();
    e.register_global_module(rhai::packages::Package::as_shared_module(
        &rhai::packages::StandardPackage::new(),
    ));
    e.disable_symbol("eval");
    e.set_max_operations(max_operations);
    e.set_max_string_size(ENGINE_LIMITS.max_string_bytes);
    e.set_max_array_size(ENGINE_LIMITS.max_array_len);
    e.set_max_map_size(ENGINE_LIMITS.max_map_len);
    e.set_max_call_levels(ENGINE_LIMITS.max_call_levels);
    e.set_max_expr_depths(
        ENGINE_LIMITS.max_expr_depth.0,
        ENGINE_LIMITS.max_expr_depth.1,
    );
    e.on_progress(|ops| {
        if ops % CLOCK_EVERY_OPS != 0 {
            return None;
        }
        let late = DEADLINE
            .with(|d| d.get())
            .is_some_and(|d| Instant::now() >= d);
        late.then(|| Dynamic::from("time limit"))
    });
    e.register_type_with_name::<SkipRecord>("Skip");
    e.register_fn("skip", || SkipRecord(None));
    e.register_fn("skip", |why: &str| SkipRecord(Some(why.to_string())));
    e
}

impl Transform {
    /// Compiles `options.script` under its limits (checked first).
    ///
    /// Errors: [`CompileError`] with the parser's message and position, or a limit out of
    /// range (no position).
    pub fn compile(options: &TransformOptions) -> Result<Transform, CompileError> {
        options.check_limits().map_err(|message| CompileError {
            message,
            line: None,
            column: None,
        })?;
        let engine = engine(options.max_operations());
        let ast = engine.compile(&options.script).map_err(|e| CompileError {
            message: e.err_type().to_string(),
            line: e.position().line(),
            column: e.position().position(),
        })?;
        let ms = options.time_limit_ms();
        Ok(Transform {
            engine,
            ast,
            time_limit: Duration::from_millis(u64::from(ms)),
            time_limit_ms: ms,
            max_operations: options.max_operations(),
        })
    }

    /// Runs the script on one record. Never panics on anything the record or script holds.
    pub fn apply(&self, input: RecordIn<'_>) -> Outcome {
        let parsed = input
            .value
            .and_then(|v| serde_json::from_slice::<serde_json::Value>(v).ok());
        let json_in = parsed
            .as_ref()
            .and_then(|j| rhai::serde::to_dynamic(j).ok())
            .unwrap_or(Dynamic::UNIT);
        let mut record = Map::new();
        record.insert("key".into(), bytes_in(input.key));
        record.insert("value".into(), bytes_in(input.value));
        record.insert("json".into(), json_in.clone());
        record.insert("headers".into(), headers_in(input.headers));
        record.insert("topic".into(), Dynamic::from(input.topic.to_string()));
        let mut scope = Scope::new();
        scope.push("record", record);

        DEADLINE.with(|d| d.set(Some(Instant::now() + self.time_limit)));
        let result = self
            .engine
            .eval_ast_with_scope::<Dynamic>(&mut scope, &self.ast);
        DEADLINE.with(|d| d.set(None));
        let answer = match result {
            Ok(a) => a,
            Err(e) if matches!(*e, EvalAltResult::ErrorTerminated(..)) => {
                return Outcome::OutOfTime(self.runtime_error(&e))
            }
            Err(e) => return Outcome::Failed(self.runtime_error(&e)),
        };
        if answer.is::<SkipRecord>() {
            let reason = answer.try_cast::<SkipRecord>().and_then(|s| s.0);
            return Outcome::Skip(reason);
        }
        let type_name = answer.type_name();
        let Some(map) = answer.try_cast::<Map>() else {
            return Outcome::Failed(format!(
                "the script must end with the record to publish (`record`, changed or not) or \
                 `skip()`, but it returned {}",
                shown_type(type_name)
            ));
        };
        match record_out(map, input, &json_in) {
            Ok(out) => Outcome::Publish(out),
            Err(e) => Outcome::Failed(e),
        }
    }

    /// A runtime error as the outbox row and the preview show it.
    fn runtime_error(&self, e: &EvalAltResult) -> String {
        let line = e.position().line();
        let where_ = line.map(|l| format!(" (line {l})")).unwrap_or_default();
        match e {
            EvalAltResult::ErrorTerminated(..) => format!(
                "the script ran longer than its time limit of {} ms for this record",
                self.time_limit_ms
            ),
            EvalAltResult::ErrorTooManyOperations(..) => format!(
                "the script needed more than its limit of {} operations for this record{where_}",
                self.max_operations
            ),
            EvalAltResult::ErrorRuntime(v, _) => {
                let text = if v.is_string() {
                    v.clone().into_string().unwrap_or_default()
                } else {
                    v.to_string()
                };
                format!("the script threw: {text}{where_}")
            }
            // Its text ends with its position already.
            other => format!("the script failed: {other}"),
        }
    }
}

/// `null` for `()`, else the script type's name.
fn shown_type(t: &str) -> String {
    match t {
        "()" => "nothing (`()`): an `if` without `else`? End with `record` or `skip()`".into(),
        t => format!("a value of type {t}"),
    }
}

fn bytes_in(b: Option<&[u8]>) -> Dynamic {
    match b {
        None => Dynamic::UNIT,
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => Dynamic::from(s.to_string()),
            Err(_) => Dynamic::from_blob(b.to_vec()),
        },
    }
}

fn headers_in(headers: &[Header]) -> Dynamic {
    let arr: Array = headers
        .iter()
        .map(|h| {
            let mut m = Map::new();
            m.insert("name".into(), Dynamic::from(h.name.clone()));
            m.insert("value".into(), bytes_in(h.value.as_deref()));
            Dynamic::from_map(m)
        })
        .collect();
    Dynamic::from_array(arr)
}

/// A string, a blob or `()` as bytes; `what` names the field for the error.
fn bytes_out(v: Dynamic, what: &str) -> Result<Option<Vec<u8>>, String> {
    if v.is_unit() {
        return Ok(None);
    }
    if v.is_string() {
        return Ok(Some(v.into_string().unwrap_or_default().into_bytes()));
    }
    if v.is_blob() {
        let b: Blob = v.into_blob().unwrap_or_default();
        return Ok(Some(b));
    }
    Err(format!(
        "`{what}` must be a string, a blob or () (none), not {}",
        v.type_name()
    ))
}

fn headers_out(v: Dynamic) -> Result<Vec<Header>, String> {
    let t = v.type_name();
    let Some(arr) = v.try_cast::<Array>() else {
        return Err(format!(
            "`headers` must be an array of #{{name, value}}, not {t}"
        ));
    };
    let mut out = Vec::with_capacity(arr.len());
    for (i, h) in arr.into_iter().enumerate() {
        let t = h.type_name();
        let Some(mut m) = h.try_cast::<Map>() else {
            return Err(format!("header {i} must be #{{name, value}}, not {t}"));
        };
        if let Some(k) = m.keys().find(|k| !matches!(k.as_str(), "name" | "value")) {
            return Err(format!(
                "header {i} has an unknown field `{k}` (a header has `name` and `value`)"
            ));
        }
        let name = m.remove("name").unwrap_or(Dynamic::UNIT);
        if !name.is_string() {
            return Err(format!("header {i}'s `name` must be a string"));
        }
        let name = name.into_string().unwrap_or_default();
        if name.starts_with(REDRIVE_HEADER_PREFIX) {
            return Err(format!(
                "header `{name}`: `{REDRIVE_HEADER_PREFIX}*` headers are redrive's own (added \
                 after the script); the script may not set them"
            ));
        }
        let value = bytes_out(
            m.remove("value").unwrap_or(Dynamic::UNIT),
            &format!("header `{name}` value"),
        )?;
        out.push(Header { name, value });
    }
    Ok(out)
}

/// JSON of a script value (the same lossy conversion on both sides of a comparison).
fn json_of(v: &Dynamic) -> Option<serde_json::Value> {
    rhai::serde::from_dynamic::<serde_json::Value>(v).ok()
}

/// The record to publish from the map the script returned: fields it left out keep the
/// input's; a changed `json` becomes the value (compact JSON).
fn record_out(mut map: Map, input: RecordIn<'_>, json_in: &Dynamic) -> Result<RecordOut, String> {
    if let Some(k) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "key" | "value" | "json" | "headers" | "topic"))
    {
        return Err(format!(
            "the returned record has an unknown field `{k}` (a record has key, value, json, \
             headers and topic)"
        ));
    }
    if let Some(t) = map.remove("topic") {
        let same = t.is_string() && t.into_string().unwrap_or_default() == input.topic;
        if !same {
            return Err(
                "the script may not change `topic`: give the replay's target topic instead".into(),
            );
        }
    }
    let key = match map.remove("key") {
        Some(k) => bytes_out(k, "key")?,
        None => input.key.map(<[u8]>::to_vec),
    };
    let mut value = match map.remove("value") {
        Some(v) => bytes_out(v, "value")?,
        None => input.value.map(<[u8]>::to_vec),
    };
    let value_changed = value.as_deref() != input.value;
    if let Some(j) = map.remove("json") {
        // `()` is "no JSON" on both sides (a value that is not JSON, a JSON `null`, a
        // tombstone): `json_of(())` would be `Some(Null)` and a script returning such a
        // record untouched would count as having set `json` to `()`.
        let before = if json_in.is_unit() {
            None
        } else {
            json_of(json_in)
        };
        let after = if j.is_unit() { None } else { json_of(&j) };
        if j.is_unit() != json_in.is_unit() || after != before {
            if j.is_unit() {
                return Err(
                    "`json` was set to (); to change the value, set `value` instead".into(),
                );
            }
            let Some(after) = after else {
                return Err(format!(
                    "`json` holds a {} that is not JSON (a map, array, string, number, bool \
                     or ())",
                    j.type_name()
                ));
            };
            if value_changed {
                return Err(
                    "the script changed both `value` and `json`; change one of them".into(),
                );
            }
            value = Some(serde_json::to_vec(&after).map_err(|e| format!("`json`: {e}"))?);
        }
    }
    let headers = match map.remove("headers") {
        Some(h) => headers_out(h)?,
        None => input.headers.to_vec(),
    };
    Ok(RecordOut {
        key,
        value,
        headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::{MAX_TRANSFORM_OPERATIONS, MAX_TRANSFORM_TIME_LIMIT_MS};

    /// A transform whose clock cannot run out on a busy machine.
    fn t(script: &str) -> Transform {
        Transform::compile(&TransformOptions {
            script: script.into(),
            time_limit_ms: Some(MAX_TRANSFORM_TIME_LIMIT_MS),
            ..TransformOptions::default()
        })
        .unwrap()
    }

    fn rec<'a>(value: &'a [u8], headers: &'a [Header]) -> RecordIn<'a> {
        RecordIn {
            key: Some(b"k1"),
            value: Some(value),
            headers,
            topic: "orders",
        }
    }

    #[test]
    fn returning_the_record_unchanged_keeps_every_byte() {
        let headers = vec![
            Header {
                name: "x".into(),
                value: Some(vec![0xff, 0]),
            },
            Header {
                name: "x".into(),
                value: None,
            },
        ];
        let value = br#"{ "b": 1,   "a": 12345678901234567890 }"#;
        let Outcome::Publish(out) = t("record").apply(rec(value, &headers)) else {
            panic!("published")
        };
        assert_eq!(out.value.as_deref(), Some(&value[..]));
        assert_eq!(out.key.as_deref(), Some(&b"k1"[..]));
        assert_eq!(out.headers, headers);
    }

    /// A value that is not JSON, a JSON `null` and a tombstone have `record.json == ()`:
    /// returning the record (also after adding a header) publishes the stored value.
    #[test]
    fn a_record_without_json_returned_unchanged_keeps_its_value() {
        let header = "record.headers.push(#{ name: \"x-bench\", value: \"1\" }); record";
        for value in [Some(&b"not json \xff"[..]), Some(&b"null"[..]), None] {
            for script in ["record", header] {
                let input = RecordIn {
                    value,
                    ..rec(b"", &[])
                };
                let Outcome::Publish(out) = t(script).apply(input) else {
                    panic!("{value:?} with {script:?} not published")
                };
                assert_eq!(out.value.as_deref(), value, "{script:?}");
            }
        }
    }

    #[test]
    fn a_changed_json_becomes_the_value_and_headers_can_change() {
        let s = r#"
            record.json.version = 2;
            record.json.remove("legacy");
            record.headers.push(#{ name: "x-fixed", value: "yes" });
            record
        "#;
        let Outcome::Publish(out) =
            t(s).apply(rec(br#"{"version":1,"legacy":true,"id":"a"}"#, &[]))
        else {
            panic!("published")
        };
        assert_eq!(
            out.value.as_deref(),
            Some(&br#"{"id":"a","version":2}"#[..])
        );
        assert_eq!(out.headers.len(), 1);
        assert_eq!(out.headers[0].value.as_deref(), Some(&b"yes"[..]));
    }

    #[test]
    fn skip_error_limits_and_wrong_answers_are_per_record_outcomes() {
        let headers = [];
        let r = rec(br#"{"n": 3}"#, &headers);
        assert_eq!(
            t(r#"if record.json.n == 3 { skip("three") } else { record }"#).apply(r),
            Outcome::Skip(Some("three".into()))
        );
        assert_eq!(t("skip()").apply(r), Outcome::Skip(None));
        let Outcome::Failed(e) = t(r#"throw "bad record " + record.json.n"#).apply(r) else {
            panic!()
        };
        assert_eq!(e, "the script threw: bad record 3 (line 1)");
        // The operation limit, with a clock that cannot run out first on a busy machine.
        let spinning = Transform::compile(&TransformOptions {
            script: "loop { }".into(),
            time_limit_ms: Some(MAX_TRANSFORM_TIME_LIMIT_MS),
            max_operations: Some(10_000),
        })
        .unwrap();
        let Outcome::Failed(e) = spinning.apply(r) else {
            panic!()
        };
        assert!(e.contains("limit of 10000 operations"), "{e}");
        let slow = Transform::compile(&TransformOptions {
            script: "let x = 0; loop { x += 1; }".into(),
            time_limit_ms: Some(20),
            max_operations: Some(MAX_TRANSFORM_OPERATIONS),
        })
        .unwrap();
        let Outcome::OutOfTime(e) = slow.apply(r) else {
            panic!()
        };
        assert!(e.contains("time limit of 20 ms"), "{e}");
        let Outcome::Failed(e) = t("if false { record }").apply(r) else {
            panic!()
        };
        assert!(e.contains("returned nothing"), "{e}");
        let Outcome::Failed(e) =
            t(r#"record.headers.push(#{name: "redrive-replay-id", value: "x"}); record"#).apply(r)
        else {
            panic!()
        };
        assert!(e.contains("redrive's own"), "{e}");
        let Outcome::Failed(e) = t(r#"record.valeu = "x"; record"#).apply(r) else {
            panic!()
        };
        assert!(e.contains("unknown field `valeu`"), "{e}");
    }

    #[test]
    fn compile_errors_say_where() {
        let e = Transform::compile(&TransformOptions {
            script: "let x = ;\nrecord".into(),
            ..TransformOptions::default()
        })
        .unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = Transform::compile(&TransformOptions {
            script: "import \"x\" as y; record".into(),
            ..TransformOptions::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("does not compile"), "{e}");
    }
}
