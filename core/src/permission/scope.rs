//! DLQ-topic scopes: one entry ([`TopicPattern`], written as the `permission` module docs say)
//! and a compiled scope ([`TopicScope`]) that tells which topics an actor sees.

#[cfg(doc)]
use super::Role;
use super::RoleError;

/// One entry of a DLQ-topic scope: an exact topic name, a glob with `*`, or a regular
/// expression starting with `^` (the module docs).
#[derive(Debug, Clone)]
pub enum TopicPattern {
    Exact(String),
    /// A glob (compiled to an anchored regex) or a `^` regular expression.
    Regex(regex::Regex),
}

impl TopicPattern {
    /// Parses one entry (surrounding spaces trimmed).
    ///
    /// Errors: an invalid regular expression, or an entry that is neither a legal topic name
    /// (`[a-zA-Z0-9._-]`, 1 to 249 bytes) nor a glob nor a `^` expression.
    pub fn parse(entry: &str) -> Result<TopicPattern, RoleError> {
        let e = entry.trim();
        if e.starts_with('^') {
            return regex::Regex::new(e)
                .map(TopicPattern::Regex)
                .map_err(|err| {
                    RoleError(format!("`{e}` is not a valid regular expression: {err}"))
                });
        }
        if e.contains('*') {
            let body: Vec<&str> = e.split('*').collect();
            let legal = body.iter().all(|part| {
                part.is_empty()
                    || crate::actions::valid_topic_name(part)
                    || part.bytes().all(|b| b == b'.')
            });
            if !legal {
                return Err(bad_pattern(e));
            }
            let re = format!(
                "^{}$",
                body.iter()
                    .map(|part| regex::escape(part))
                    .collect::<Vec<_>>()
                    .join(".*")
            );
            return regex::Regex::new(&re)
                .map(TopicPattern::Regex)
                .map_err(|_| bad_pattern(e));
        }
        if crate::actions::valid_topic_name(e) {
            Ok(TopicPattern::Exact(e.to_string()))
        } else {
            Err(bad_pattern(e))
        }
    }

    /// Whether `topic` matches.
    pub fn matches(&self, topic: &str) -> bool {
        match self {
            TopicPattern::Exact(t) => t == topic,
            TopicPattern::Regex(re) => re.is_match(topic),
        }
    }
}

fn bad_pattern(e: &str) -> RoleError {
    RoleError(format!(
        "`{e}` is not a DLQ-topic pattern: give a topic name (`orders.DLT`), a glob with `*` \
         (`payments.*`) or a regular expression starting with `^` (`^orders-.*-dlt$`)"
    ))
}

/// A compiled DLQ-topic scope ([`Role::dlq_topics`]): the topics an actor sees and acts on.
#[derive(Debug, Clone)]
pub struct TopicScope {
    patterns: Vec<TopicPattern>,
}

impl TopicScope {
    /// Compiles `entries`. An entry that does not parse matches nothing (start-up validation
    /// refused such entries already; a scope never widens by error).
    pub fn compile<S: AsRef<str>>(entries: &[S]) -> TopicScope {
        TopicScope {
            patterns: entries
                .iter()
                .filter_map(|e| TopicPattern::parse(e.as_ref()).ok())
                .collect(),
        }
    }

    /// Whether `topic` is in the scope.
    pub fn matches(&self, topic: &str) -> bool {
        self.patterns.iter().any(|p| p.matches(topic))
    }

    /// The members of `topics` in the scope, in their order.
    pub fn select(&self, topics: &[String]) -> Vec<String> {
        topics.iter().filter(|t| self.matches(t)).cloned().collect()
    }
}
