//! What a user must hold before its first request for its sessions to go as the log's
//! went: a session that reads, updates or deletes an item it never put acted on data its
//! user had before. A replay whose users start empty would find nothing to act on for
//! those picks and send nothing, so the inferred class gives each user the fewest items
//! that every client of the log needed (`params.initial_events` for CalDAV,
//! `initial_items` for Atom).

/// How one protocol's operations make, use and remove the items a user holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Items {
    /// The class parameter that fills a user's store before its first pick.
    pub param: &'static str,
    /// The operation that adds an item.
    pub put: &'static str,
    /// Operations that need an item and leave it.
    pub uses: &'static [&'static str],
    /// The operation that needs an item and removes it.
    pub delete: Option<&'static str>,
}

/// CalDAV: events put, read, updated and deleted in the user's calendar.
pub(crate) const CALDAV: Items = Items {
    param: "initial_events",
    put: "put_event",
    uses: &["get_event", "update_event"],
    delete: Some("delete_event"),
};

/// Atom: entries posted to a collection, then updated.
pub(crate) const ATOM: Items = Items {
    param: "initial_items",
    put: "create_event",
    uses: &["update_event"],
    delete: None,
};

/// The most items a user is given, whatever a log shows: a client that deleted a
/// hundred thousand events does not make every replayed user put as many.
pub(crate) const MOST: u64 = 10_000;

/// The items one user needed before its first request, from its operations in the order
/// it sent them: at each one that needs an item, one more than it had put and not
/// deleted by then.
pub(crate) fn needed<'a>(items: &Items, ops: impl IntoIterator<Item = &'a str>) -> u64 {
    // Items put and not yet deleted, counted from what the user started with.
    let mut balance: i64 = 0;
    let mut need: i64 = 0;
    for op in ops {
        if op == items.put {
            balance = balance.saturating_add(1);
        } else if items.uses.contains(&op) {
            need = need.max(1i64.saturating_sub(balance));
        } else if items.delete == Some(op) {
            need = need.max(1i64.saturating_sub(balance));
            balance = balance.saturating_sub(1);
        }
    }
    u64::try_from(need).unwrap_or(0).min(MOST)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_needs_what_it_used_before_putting_it() {
        // Puts first: nothing needed.
        assert_eq!(
            needed(
                &CALDAV,
                ["report", "put_event", "get_event", "delete_event"]
            ),
            0
        );
        // Two deletes with nothing put: two events held from the start.
        assert_eq!(
            needed(
                &CALDAV,
                ["report", "delete_event", "report", "delete_event"]
            ),
            2
        );
        // A read with nothing put: one.
        assert_eq!(needed(&CALDAV, ["get_event", "update_event"]), 1);
        // A put covers one later delete, not two.
        assert_eq!(
            needed(&CALDAV, ["put_event", "delete_event", "delete_event"]),
            1
        );
        // A delete, then a put, then a read of it: one, the first delete's.
        assert_eq!(
            needed(&CALDAV, ["delete_event", "put_event", "get_event"]),
            1
        );
        assert_eq!(
            needed(&ATOM, ["update_event", "create_event", "update_event"]),
            1
        );
        assert_eq!(needed(&ATOM, ["full_feed", "dashboard"]), 0);
    }

    #[test]
    fn what_a_log_asks_for_is_bounded() {
        let many = std::iter::repeat_n("delete_event", 1_000_000);
        assert_eq!(needed(&CALDAV, many), MOST);
    }
}
