//! Reading exception classes and messages out of stack-trace text, and choosing the exception an
//! on-call engineer needs: the one the application's code (or the deserializer) threw, not a
//! framework wrapper (`docs/conventions.md`, "Which exception": the first exception of the
//! `Caused by:` chain that is not in [`FRAMEWORK_WRAPPERS`]).

/// A plausible exception class name: `java.lang.IllegalStateException`, `Foo$Bar`, `ValueError`.
fn is_class_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && s.len() <= 512
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '$' | '_' | '`'))
}

/// Splits a `Class: message` line (Java `Throwable.toString()`, .NET, Python) into the class
/// and the message (absent when the exception had none).
fn class_and_message(line: &str) -> Option<(&str, Option<&str>)> {
    let line = line.trim();
    let (class, message) = match line.split_once(": ") {
        Some((c, m)) => (c, Some(m.trim()).filter(|m| !m.is_empty())),
        None => (line.strip_suffix(':').unwrap_or(line), None),
    };
    is_class_name(class).then_some((class, message))
}

/// Exception classes that frameworks wrap around the exception the application (or the
/// deserializer or converter) threw, as seen in the captured corpus (`docs/conventions.md`).
/// The user's exception is the first one of the `Caused by:` chain that is not listed here;
/// if all are, the innermost (so a wrapper without a cause is reported as itself).
pub const FRAMEWORK_WRAPPERS: &[&str] = &[
    // Spring Kafka: the container's and the @KafkaListener adapter's wrapper (twice on the
    // non-blocking retry path), the retry-topic back-off wrapper, and ErrorHandlingDeserializer's.
    "org.springframework.kafka.listener.ListenerExecutionFailedException",
    "org.springframework.kafka.listener.TimestampedException",
    "org.springframework.kafka.support.serializer.DeserializationException",
    // Kafka Connect: a converter's wrapper around its deserializer's exception
    // (`JsonConverter`: DataException -> SerializationException -> Jackson's parse error).
    "org.apache.kafka.connect.errors.DataException",
    // Kafka's deserializers wrap the parser's exception (`new SerializationException(e)`, the
    // message is the cause's `toString()`); a SerializationException without a cause (Kafka's
    // `LongDeserializer`) is the innermost and is reported.
    "org.apache.kafka.common.errors.SerializationException",
    // Spring Cloud Stream's binder (Spring Integration): MessagingException ("Retry policy ...
    // exhausted") -> Spring Framework 7's RetryException -> MessageHandlingException ("error
    // occurred in message handler") -> the function's exception.
    "org.springframework.messaging.MessagingException",
    "org.springframework.core.retry.RetryException",
    "org.springframework.messaging.MessageHandlingException",
];

/// True if `class` is one of [`FRAMEWORK_WRAPPERS`].
pub fn is_wrapper(class: &str) -> bool {
    FRAMEWORK_WRAPPERS.contains(&class)
}

/// A Java `printStackTrace` text as its exception chain, outermost first: `(class, message)`
/// for the first line and each column-0 `Caused by:` line (causes of `Suppressed:` blocks are
/// indented and skipped). A message runs, newlines included, up to the first frame line
/// (`\tat`, `\t... N more`, `\tSuppressed:`), exactly as `Throwable.toString()` printed it.
/// Empty when the first line is not `Class[: message]`.
pub(crate) fn java_chain(stack: &str) -> Vec<(String, Option<String>)> {
    fn start(line: &str) -> Option<(String, Option<String>)> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let (class, message) = match line.split_once(": ") {
            Some((c, m)) => (c, Some(m.to_string())),
            None => (line.strip_suffix(':').unwrap_or(line), None),
        };
        is_class_name(class).then(|| (class.to_string(), message))
    }
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    let mut in_message = false;
    for (i, line) in stack.lines().enumerate() {
        if i == 0 {
            match start(line) {
                Some(e) => out.push(e),
                None => return out,
            }
            in_message = true;
        } else if let Some(rest) = line.strip_prefix("Caused by: ") {
            match start(rest) {
                Some(e) => out.push(e),
                None => break,
            }
            in_message = true;
        } else if is_frame(line) {
            in_message = false;
        } else if in_message {
            if let Some((_, Some(m))) = out.last_mut() {
                m.push('\n');
                m.push_str(line.strip_suffix('\r').unwrap_or(line));
            }
        }
    }
    out
}

/// A line that ends an exception's message: a Java frame (`\tat`, `\t... N more`,
/// `\tSuppressed:`, an indented `Caused by:`; Java indents with tabs) or a .NET one (`   at`,
/// ` ---> `). A message line such as Jackson's ` at [Source: ...; line: 1, column: 22]`
/// (one space) is not a frame.
fn is_frame(line: &str) -> bool {
    let t = line.trim_start();
    if line.starts_with('\t') {
        return ["at ", "... ", "Suppressed: ", "Caused by: "]
            .iter()
            .any(|p| t.starts_with(p));
    }
    (line.starts_with("   ") && t.starts_with("at "))
        || t.starts_with("---> ")
        || t.starts_with("--- End of")
}

/// The application's exception, as `(class, message)`, from what a convention wrote:
/// - an explicit cause class that is not a wrapper (Spring's `-exception-cause-fqcn`) wins,
///   with its message from the stack trace (else `message`, which the caller has stripped of
///   the wrapper's part);
/// - else the first non-wrapper exception of the stack trace's chain (the innermost one if
///   all are wrappers), with the message printed there (the top-level one falls back to
///   `message`);
/// - else the cause class, a .NET ` ---> ` inner exception, `class` or the trace's first line,
///   with `message` (or the trace's first-line message).
pub(crate) fn user_exception(
    cause_class: Option<String>,
    stack: Option<&str>,
    class: Option<String>,
    message: Option<String>,
) -> (Option<String>, Option<String>) {
    let chain = stack.map(java_chain).unwrap_or_default();
    if let Some(c) = cause_class.as_deref().filter(|c| !is_wrapper(c)) {
        let m = match chain.iter().find(|(k, _)| k == c) {
            Some((_, m)) => m.clone(),
            None => message,
        };
        return (Some(c.to_string()), m);
    }
    let pick = chain
        .iter()
        .position(|(c, _)| !is_wrapper(c))
        .or(chain.len().checked_sub(1));
    if let Some(i) = pick {
        let (c, m) = chain[i].clone();
        let m = if i == 0 { m.or(message) } else { m };
        return (Some(c), m);
    }
    let m = message.or_else(|| stack.and_then(first_line_message));
    (choose_class(cause_class, stack, class), m)
}

/// The class of the first cause in a stack trace: Java's first `Caused by: X: ...` line (the
/// immediate cause), or .NET's first ` ---> X: ...` inner exception.
pub(crate) fn first_cause_class(stack: &str) -> Option<String> {
    stack.lines().find_map(|line| {
        let l = line.trim_start();
        let rest = l
            .strip_prefix("Caused by: ")
            .or_else(|| l.strip_prefix("---> "))
            .or_else(|| l.find(" ---> ").map(|i| &l[i + 6..]))?;
        class_and_message(rest).map(|(c, _)| c.to_string())
    })
}

/// The message of the top-level exception, from a Java or .NET stack trace's first line
/// (`org.x.DataException: Unknown magic byte!`). Used only when the message header is absent.
pub(crate) fn first_line_message(stack: &str) -> Option<String> {
    let first = stack.lines().next()?;
    class_and_message(first).and_then(|(_, m)| m.map(str::to_string))
}

/// The exception class and message from the last line of a Python traceback
/// (`ValueError: bad input`).
pub(crate) fn python_exception(traceback: &str) -> Option<(String, Option<String>)> {
    let last = traceback.lines().rev().find(|l| !l.trim().is_empty())?;
    if last.starts_with(char::is_whitespace) {
        return None;
    }
    class_and_message(last).map(|(c, m)| (c.to_string(), m.map(str::to_string)))
}

/// The class of the top-level exception, from a Java or .NET stack trace's first line.
pub(crate) fn first_line_class(stack: &str) -> Option<String> {
    let first = stack.lines().next()?;
    class_and_message(first).map(|(c, _)| c.to_string())
}

/// The most specific class: an explicit cause class, else the stack's first cause, else the
/// exception's own class, else the class on the stack's first line.
pub(crate) fn choose_class(
    cause_class: Option<String>,
    stack: Option<&str>,
    class: Option<String>,
) -> Option<String> {
    cause_class
        .or_else(|| stack.and_then(first_cause_class))
        .or(class)
        .or_else(|| stack.and_then(first_line_class))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPRING: &str = "org.springframework.kafka.listener.ListenerExecutionFailedException: Listener method threw exception\n\tat org.springframework.kafka.listener.KafkaMessageListenerContainer.decorateException(KafkaMessageListenerContainer.java:2945)\nCaused by: java.lang.IllegalStateException: Payment 4711 declined by provider\n\tat com.example.payments.PaymentListener.onMessage(PaymentListener.java:42)\n\t... 12 more\nCaused by: java.net.SocketTimeoutException: Read timed out\n";

    #[test]
    fn java_first_cause() {
        assert_eq!(
            first_cause_class(SPRING).as_deref(),
            Some("java.lang.IllegalStateException")
        );
        assert_eq!(
            first_line_message(SPRING).as_deref(),
            Some("Listener method threw exception")
        );
        assert_eq!(
            first_cause_class("x.Y: no cause\n\tat a.b(C.java:1)\n"),
            None
        );
        assert_eq!(first_cause_class("Caused by: not a class name: x"), None);
        assert_eq!(
            first_cause_class("Caused by: a.B$Inner\n").as_deref(),
            Some("a.B$Inner")
        );
    }

    #[test]
    fn chain_skips_wrappers_and_suppressed() {
        let s = "org.springframework.kafka.listener.ListenerExecutionFailedException: Listener failed\n\tat a.B(B.java:1)\n\tSuppressed: org.springframework.kafka.listener.ListenerExecutionFailedException: Restored Stack Trace\n\t\tat c.D(D.java:2)\n\tCaused by: x.Hidden: no\nCaused by: org.springframework.kafka.listener.TimestampedException: Exception thrown at 2026-12-01T11:31:28Z\n\t... 10 more\nCaused by: com.acme.Rejected: line one\nline two: still the message\n\tat com.acme.L.on(L.java:45)\nCaused by: java.lang.IllegalStateException: limit\n\t... 27 more\n";
        let chain = java_chain(s);
        let classes: Vec<&str> = chain.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            classes,
            [
                "org.springframework.kafka.listener.ListenerExecutionFailedException",
                "org.springframework.kafka.listener.TimestampedException",
                "com.acme.Rejected",
                "java.lang.IllegalStateException"
            ]
        );
        assert_eq!(
            user_exception(None, Some(s), None, Some("Listener failed; x".into())),
            (
                Some("com.acme.Rejected".into()),
                Some("line one\nline two: still the message".into())
            )
        );
        // Jackson's location line is part of the message; the converter's and the
        // deserializer's wrappers are looked through.
        let j = "org.apache.kafka.connect.errors.DataException: Converting byte[] to Kafka Connect data failed due to serialization error: \n\tat a.B(B.java:1)\nCaused by: org.apache.kafka.common.errors.SerializationException: com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input\n at [Source: REDACTED; line: 1, column: 22]\n\tat c.D(D.java:75)\n\t... 19 more\nCaused by: com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input\n at [Source: REDACTED; line: 1, column: 22]\n\tat e.F(F.java:642)\n";
        assert_eq!(
            user_exception(None, Some(j), None, None),
            (
                Some("com.fasterxml.jackson.core.io.JsonEOFException".into()),
                Some("Unexpected end-of-input\n at [Source: REDACTED; line: 1, column: 22]".into())
            )
        );
        // A wrapper named as the cause (Spring's deserialization failures) is looked through.
        let d = "org.springframework.kafka.support.serializer.DeserializationException: failed to deserialize\n\tat a.B(B.java:1)\nCaused by: org.apache.kafka.common.errors.SerializationException: Size of data received by LongDeserializer is not 8\n\t... 16 more\n";
        assert_eq!(
            user_exception(
                Some(
                    "org.springframework.kafka.support.serializer.DeserializationException".into()
                ),
                Some(d),
                None,
                Some("failed to deserialize".into())
            ),
            (
                Some("org.apache.kafka.common.errors.SerializationException".into()),
                Some("Size of data received by LongDeserializer is not 8".into())
            )
        );
        // Nothing but wrappers: the innermost.
        assert_eq!(
            user_exception(
                None,
                Some("org.springframework.kafka.listener.ListenerExecutionFailedException\n"),
                None,
                None
            )
            .0
            .as_deref(),
            Some("org.springframework.kafka.listener.ListenerExecutionFailedException")
        );
        // No trace: the header cause and message.
        assert_eq!(
            user_exception(Some("a.B".into()), None, Some("W".into()), Some("m".into())),
            (Some("a.B".into()), Some("m".into()))
        );
    }

    #[test]
    fn dotnet_inner_exception() {
        let s = "System.InvalidOperationException: outer\n ---> System.Net.Http.HttpRequestException: refused\n   at X.Y()\n   --- End of inner exception stack trace ---";
        assert_eq!(
            first_cause_class(s).as_deref(),
            Some("System.Net.Http.HttpRequestException")
        );
    }

    #[test]
    fn python_traceback() {
        let tb = "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    f()\nTimeoutError: LLM call timed out\n";
        assert_eq!(
            python_exception(tb),
            Some((
                "TimeoutError".to_string(),
                Some("LLM call timed out".to_string())
            ))
        );
        assert_eq!(python_exception("  File \"a.py\"\n"), None);
    }

    #[test]
    fn cause_beats_stack_beats_class() {
        let c = |x: &str| Some(x.to_string());
        assert_eq!(
            choose_class(c("A"), Some(SPRING), c("W")).as_deref(),
            Some("A")
        );
        assert_eq!(
            choose_class(None, Some(SPRING), c("W")).as_deref(),
            Some("java.lang.IllegalStateException")
        );
        assert_eq!(choose_class(None, Some("x"), c("W")).as_deref(), Some("W"));
        assert_eq!(
            choose_class(None, Some("a.B: m\n\tat c.D(D.java:1)"), None).as_deref(),
            Some("a.B")
        );
        assert_eq!(choose_class(None, None, None), None);
    }
}
