//! What an [`Actor`] may do and see: its permissions and its DLQ-topic scope.

use crate::actions::Actor;

use super::{Permission, TopicScope};

impl Actor {
    /// Whether this actor holds permission `p`: its role grants it, and it is not a
    /// `read_only` API token (which holds none).
    pub fn can(&self, p: Permission) -> bool {
        !self.read_only && self.role.grants(p)
    }

    /// The DLQ topics this actor is limited to, compiled; `None` for every topic.
    pub fn topic_scope(&self) -> Option<TopicScope> {
        self.role.dlq_topics().map(TopicScope::compile)
    }

    /// Whether this actor sees and acts on dead letters of DLQ topic `topic`.
    pub fn sees_topic(&self, topic: &str) -> bool {
        self.topic_scope().is_none_or(|s| s.matches(topic))
    }
}
