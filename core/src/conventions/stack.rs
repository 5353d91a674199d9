//! Reading exception classes and messages out of stack-trace text, and choosing the most
//! specific error class (conventions doc, pitfall 7: the fqcn is often a wrapper such as
//! `ListenerExecutionFailedException`; prefer the cause).

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
