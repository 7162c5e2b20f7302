//! What a user holds that its picks act on, followed without a server: the events of each
//! of a CalDAV user's calendars, the contacts of a CardDAV user's address books, the items of an Atom user's collection. `validate`'s
//! sampled plan walks a class's picks through it to say which share of them would find
//! nothing to act on and send nothing, as the drivers decide it: an update, get or
//! delete of an event needs one in the calendar picked; an Atom update needs an item (in
//! a team, one the user created).
//! Morse Code users always hold a collection (one deleted is published again, as a
//! bootstrap), and what http and broker classes send needs nothing made.

use rand::Rng;

use super::{AtomOp, CaldavOp, CarddavOp, ClassKind, MAX_INITIAL_CONTACTS, MAX_INITIAL_EVENTS};

/// What one user holds, for the operations that need something.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Holdings {
    /// Events in each calendar (contacts in each address book); its first is made (and
    /// filled) in set-up.
    Calendars(Vec<u64>),
    /// Items in the one collection.
    Items(u64),
}

impl ClassKind {
    /// What a user of this class holds when its set-up is done (`initial_events` drawn
    /// from `rng`); `None` when none of its picks can find nothing to act on.
    pub(crate) fn holdings_after_setup(&self, rng: &mut impl Rng) -> Option<Holdings> {
        match self {
            ClassKind::Caldav { params, .. } => {
                let n = params
                    .initial_events
                    .as_ref()
                    .map_or(0, |d| d.sample_count(rng, MAX_INITIAL_EVENTS));
                Some(Holdings::Calendars(vec![n]))
            }
            ClassKind::Carddav { params, .. } => {
                let n = params
                    .initial_contacts
                    .as_ref()
                    .map_or(0, |d| d.sample_count(rng, MAX_INITIAL_CONTACTS));
                Some(Holdings::Calendars(vec![n]))
            }
            // In a team, a user updates only the entries it created itself.
            ClassKind::Atom { params, .. } if params.team.is_some() => Some(Holdings::Items(0)),
            ClassKind::Atom { params, .. } => {
                Some(Holdings::Items(u64::from(params.initial_items)))
            }
            ClassKind::Http { .. }
            | ClassKind::Morse { .. }
            | ClassKind::Stomp { .. }
            | ClassKind::Amqp { .. } => None,
        }
    }

    /// Whether pick `op` acts on what the user holds (and changes it as the driver
    /// would: a put adds an event, a delete takes one away), or finds nothing and is
    /// skipped. The calendar a CalDAV pick works on is drawn from `rng`, as the driver
    /// draws it.
    pub(crate) fn acts(&self, op: usize, held: &mut Holdings, rng: &mut impl Rng) -> bool {
        // What a class holds is of its own kind; another kind's holdings hold nothing
        // its picks need.
        match (self, held) {
            (ClassKind::Caldav { ops, .. }, Holdings::Calendars(cals)) => {
                caldav_acts(ops.get(op), cals, rng)
            }
            (ClassKind::Carddav { ops, .. }, Holdings::Calendars(books)) => {
                carddav_acts(ops.get(op), books, rng)
            }
            (ClassKind::Atom { ops, .. }, Holdings::Items(items)) => match ops.get(op) {
                Some(AtomOp::CreateEvent) => {
                    *items = items.saturating_add(1);
                    true
                }
                Some(AtomOp::UpdateEvent) => *items > 0,
                Some(AtomOp::FullFeed | AtomOp::TimeRangeFeed { .. } | AtomOp::Dashboard)
                | None => true,
            },
            (ClassKind::Caldav { .. } | ClassKind::Carddav { .. }, Holdings::Items(_))
            | (ClassKind::Atom { .. }, Holdings::Calendars(_))
            | (
                ClassKind::Morse { .. }
                | ClassKind::Http { .. }
                | ClassKind::Stomp { .. }
                | ClassKind::Amqp { .. },
                Holdings::Calendars(_) | Holdings::Items(_),
            ) => true,
        }
    }
}

/// A CardDAV pick on the user's address books, drawn as the driver draws it.
fn carddav_acts(op: Option<&CarddavOp>, books: &mut Vec<u64>, rng: &mut impl Rng) -> bool {
    let Some(op) = op else { return true };
    if let CarddavOp::CreateAddressbook = op {
        books.push(0);
        return true;
    }
    if books.is_empty() {
        return false;
    }
    let i = (rng.next_u64() % books.len() as u64) as usize;
    let contacts = &mut books[i];
    match op {
        CarddavOp::PutContact(_) => {
            *contacts = contacts.saturating_add(1);
            true
        }
        CarddavOp::DeleteContact => match contacts.checked_sub(1) {
            Some(left) => {
                *contacts = left;
                true
            }
            None => false,
        },
        CarddavOp::UpdateContact(_)
        | CarddavOp::GetContact
        | CarddavOp::AddressbookQuery
        | CarddavOp::AddressbookMultiget { .. } => *contacts > 0,
        CarddavOp::CreateAddressbook
        | CarddavOp::SyncCollection
        | CarddavOp::Propfind
        | CarddavOp::InitialSync(_)
        | CarddavOp::DeltaSync { .. } => true,
    }
}

/// A CalDAV pick on the user's calendars.
fn caldav_acts(op: Option<&CaldavOp>, cals: &mut Vec<u64>, rng: &mut impl Rng) -> bool {
    let Some(op) = op else { return true };
    // Scheduling works in the user's own calendar and inbox, made in set-up; an answer
    // needs an invitation, which only the server's deliveries can tell.
    if op.schedules() {
        return true;
    }
    if let CaldavOp::CreateCalendar = op {
        cals.push(0);
        return true;
    }
    if cals.is_empty() {
        return false;
    }
    // As the driver draws it.
    let i = (rng.next_u64() % cals.len() as u64) as usize;
    let events = &mut cals[i];
    match op {
        CaldavOp::PutEvent(_) => {
            *events = events.saturating_add(1);
            true
        }
        CaldavOp::DeleteEvent => match events.checked_sub(1) {
            Some(left) => {
                *events = left;
                true
            }
            None => false,
        },
        CaldavOp::UpdateEvent(_) | CaldavOp::GetEvent => *events > 0,
        // Reads of the collection, and (above) what needs no event of the user's.
        CaldavOp::CreateCalendar
        | CaldavOp::TimeRangeReport { .. }
        | CaldavOp::Multiget { .. }
        | CaldavOp::SyncCollection
        | CaldavOp::Propfind
        | CaldavOp::InitialSync(_)
        | CaldavOp::DeltaSync { .. }
        | CaldavOp::Invite { .. }
        | CaldavOp::Inbox
        | CaldavOp::Answer { .. }
        | CaldavOp::Cancel
        | CaldavOp::Freebusy { .. } => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn an_event_must_be_there_to_be_updated_got_or_deleted() {
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(1);
        let mut cals = vec![0];
        let put = CaldavOp::PutEvent(Default::default());
        assert!(!caldav_acts(Some(&CaldavOp::GetEvent), &mut cals, &mut rng));
        assert!(!caldav_acts(
            Some(&CaldavOp::DeleteEvent),
            &mut cals,
            &mut rng
        ));
        assert!(caldav_acts(Some(&put), &mut cals, &mut rng));
        assert!(caldav_acts(Some(&CaldavOp::GetEvent), &mut cals, &mut rng));
        assert!(caldav_acts(
            Some(&CaldavOp::DeleteEvent),
            &mut cals,
            &mut rng
        ));
        assert_eq!(cals, vec![0]);
        // A new calendar is empty: picks that land on it find nothing.
        let mut two = vec![5];
        assert!(caldav_acts(
            Some(&CaldavOp::CreateCalendar),
            &mut two,
            &mut rng
        ));
        let found = (0..200)
            .filter(|_| caldav_acts(Some(&CaldavOp::GetEvent), &mut two, &mut rng))
            .count();
        assert!(
            (60..140).contains(&found),
            "{found} of 200 on either calendar"
        );
    }
}
