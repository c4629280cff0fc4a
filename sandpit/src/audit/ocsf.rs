//! Every audit record classified after OCSF (the Open Cybersecurity Schema
//! Framework, 1.x): the activity class, the activity within it, and what was done.
//! The fields keep OCSF's names so a pipeline that speaks OCSF can map a record
//! without a table of its own; the record's own fields (`action`, `subject`,
//! `decision`, `rule`, …) stay as they were, so older readers keep working.
//!
//! | record `action` | OCSF class (`class_uid`) | `activity_id` |
//! |---|---|---|
//! | `read`, `write` | File System Activity (1001) | 2 Read, 3 Update |
//! | `quarantine` | File System Activity (1001) | 5 Rename |
//! | `exec`, `start` | Process Activity (1007) | 1 Launch |
//! | `exit` | Process Activity (1007) | 2 Terminate |
//! | `connect`, `udp` | Network Activity (4001) | 1 Open (allowed), 5 Refuse (denied), 6 Traffic (udp) |
//! | `resolve` | DNS Activity (4003) | 1 Query |
//! | `setup`, `summarised`, `telemetry` | Application Lifecycle (6002) | 3 Start, 99 Other |
//! | `other` | Base Event (0) | 99 Other |
use serde::{Deserialize, Serialize};

use super::Decision;

/// The OCSF classification of one record. All zero in records written before it
/// existed (read back with their defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ocsf {
    #[serde(default)]
    pub class_uid: u32,
    #[serde(default)]
    pub class_name: String,
    #[serde(default)]
    pub category_uid: u32,
    #[serde(default)]
    pub category_name: String,
    #[serde(default)]
    pub activity_id: u32,
    #[serde(default)]
    pub activity_name: String,
    /// `class_uid * 100 + activity_id`.
    #[serde(default)]
    pub type_uid: u64,
    /// 1 Allowed, 2 Denied, 0 Unknown (not a decision: start, setup, exit).
    #[serde(default)]
    pub action_id: u32,
    /// 1 Allowed, 2 Blocked, 3 Quarantined, 15 Detected (learn mode: would have
    /// been blocked, let through), 17 Logged (not a decision).
    #[serde(default)]
    pub disposition_id: u32,
    /// 1 Informational, 2 Low (learned), 3 Medium (denied).
    #[serde(default)]
    pub severity_id: u32,
}

impl Ocsf {
    /// The classification of a record with this `action` and `decision`.
    pub fn of(action: &str, decision: Decision) -> Ocsf {
        const SYSTEM: (u32, &str) = (1, "System Activity");
        const NETWORK: (u32, &str) = (4, "Network Activity");
        const APPLICATION: (u32, &str) = (6, "Application Activity");
        const UNCATEGORIZED: (u32, &str) = (0, "Uncategorized");
        let denied = decision == Decision::Deny;
        let ((class_uid, class_name), category, (activity_id, activity_name)) = match action {
            "read" => ((1001, "File System Activity"), SYSTEM, (2, "Read")),
            "write" => ((1001, "File System Activity"), SYSTEM, (3, "Update")),
            "quarantine" => ((1001, "File System Activity"), SYSTEM, (5, "Rename")),
            "exec" | "start" => ((1007, "Process Activity"), SYSTEM, (1, "Launch")),
            "exit" => ((1007, "Process Activity"), SYSTEM, (2, "Terminate")),
            "connect" if denied => ((4001, "Network Activity"), NETWORK, (5, "Refuse")),
            "connect" => ((4001, "Network Activity"), NETWORK, (1, "Open")),
            "udp" if denied => ((4001, "Network Activity"), NETWORK, (5, "Refuse")),
            "udp" => ((4001, "Network Activity"), NETWORK, (6, "Traffic")),
            "resolve" => ((4003, "DNS Activity"), NETWORK, (1, "Query")),
            "setup" => ((6002, "Application Lifecycle"), APPLICATION, (3, "Start")),
            "summarised" | "telemetry" | "limit" => {
                ((6002, "Application Lifecycle"), APPLICATION, (99, "Other"))
            }
            _ => ((0, "Base Event"), UNCATEGORIZED, (99, "Other")),
        };
        let (action_id, disposition_id, severity_id) = match decision {
            Decision::Allow => (1, 1, 1),
            Decision::Deny if action == "quarantine" => (2, 3, 3),
            Decision::Deny => (2, 2, 3),
            Decision::Learn => (1, 15, 2),
            Decision::Info => (0, 17, 1),
        };
        Ocsf {
            class_uid,
            class_name: class_name.into(),
            category_uid: category.0,
            category_name: category.1.into(),
            activity_id,
            activity_name: activity_name.into(),
            type_uid: u64::from(class_uid) * 100 + u64::from(activity_id),
            action_id,
            disposition_id,
            severity_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_ocsf() {
        let r = Ocsf::of("read", Decision::Deny);
        assert_eq!(
            (r.class_uid, r.category_uid, r.activity_id, r.type_uid),
            (1001, 1, 2, 100102)
        );
        assert_eq!((r.action_id, r.disposition_id, r.severity_id), (2, 2, 3));
        let c = Ocsf::of("connect", Decision::Allow);
        assert_eq!((c.class_uid, c.activity_id, c.action_id), (4001, 1, 1));
        assert_eq!(Ocsf::of("connect", Decision::Deny).type_uid, 400105);
        assert_eq!(Ocsf::of("resolve", Decision::Deny).class_uid, 4003);
        let e = Ocsf::of("exec", Decision::Learn);
        assert_eq!(
            (
                e.class_name.as_str(),
                e.activity_name.as_str(),
                e.disposition_id
            ),
            ("Process Activity", "Launch", 15)
        );
        assert_eq!(Ocsf::of("other", Decision::Deny).class_uid, 0);
    }
}
