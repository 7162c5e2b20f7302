//! CardDAV: its schema and its typed operations. Driven by `protocol/carddav/`.

use super::{
    ClassKind, DELTA_SYNC, INITIAL_SYNC, InitialSync, ParamKind, ProtocolDef, batch_of, defaults,
    each, label_index, op, p,
};
use crate::workload::Params;
use crate::workload::dist::{Dist, Unit};

pub(super) static DEF: ProtocolDef = ProtocolDef {
    ops: &[
        op(CarddavOp::NAMES[0], &[]),
        op(CarddavOp::NAMES[1], CONTACT),
        op(CarddavOp::NAMES[2], CONTACT),
        op(CarddavOp::NAMES[3], &[]),
        op(CarddavOp::NAMES[4], &[]),
        op(CarddavOp::NAMES[5], &[]),
        op(
            CarddavOp::NAMES[6],
            &[p("count", ParamKind::Integer, "contacts per multiget")],
        ),
        op(CarddavOp::NAMES[7], &[]),
        op(CarddavOp::NAMES[8], &[]),
        op(CarddavOp::NAMES[9], INITIAL_SYNC),
        op(CarddavOp::NAMES[10], DELTA_SYNC),
    ],
    class_params: &[
        p(
            "addressbook_home",
            ParamKind::Text,
            "path of the address book home ({user}, {vu}, {run_id}); discovered when absent",
        ),
        p("discovery", ParamKind::Text, "where discovery starts"),
        p(
            "initial_contacts",
            ParamKind::Dist(Unit::Count),
            "contacts each user's first address book holds before the clock starts (a count or a distribution), in the shape of its put_contact",
        ),
    ],
};

/// What a contact a user puts or rewrites looks like.
const CONTACT: &[super::ParamDef] = &[
    p(
        "version",
        ParamKind::Choice(&["3.0", "4.0"]),
        "the vCard version written (3.0, which every CardDAV server takes, by default)",
    ),
    p(
        "photo",
        ParamKind::Dist(Unit::Size),
        "size of the contact's PHOTO before base64 (no photo when absent)",
    ),
    p(
        "photos",
        ParamKind::Probability,
        "chance a contact carries a photo of `photo`'s size (1 when `photo` is given)",
    ),
    p(
        "emails",
        ParamKind::Integer,
        "EMAIL addresses per contact, at most 64 (2 by default)",
    ),
    p(
        "phones",
        ParamKind::Integer,
        "TEL numbers per contact, at most 64 (1 by default)",
    ),
    p(
        "notes",
        ParamKind::Probability,
        "chance a contact carries a NOTE and CATEGORIES",
    ),
];

/// What a contact a user puts looks like: its vCard version, its photo, how many emails
/// and phone numbers, and how often it has a note.
#[derive(Debug, Clone, PartialEq)]
pub struct ContactShape {
    /// `3.0` or `4.0`.
    pub version: &'static str,
    /// The photo's size in bytes (before base64), when contacts have one.
    pub photo: Option<Dist>,
    /// Chance a contact carries its photo.
    pub photos: f64,
    /// EMAIL properties per contact.
    pub emails: u32,
    /// TEL properties per contact.
    pub phones: u32,
    /// Chance of a NOTE and CATEGORIES.
    pub notes: f64,
}

/// The most EMAIL or TEL properties one generated contact carries.
pub(crate) const MAX_FIELDS: u32 = 64;

impl Default for ContactShape {
    /// A contact as address book clients most often hold one: vCard 3.0, two addresses,
    /// one phone number, no photo.
    fn default() -> ContactShape {
        ContactShape {
            version: "3.0",
            photo: None,
            photos: 0.0,
            emails: 2,
            phones: 1,
            notes: defaults::CONTACT_NOTES,
        }
    }
}

impl ContactShape {
    fn of(p: &Params) -> ContactShape {
        let d = ContactShape::default();
        let photo = p.dist("photo").cloned();
        let count = |k: &str, or: u32| {
            p.number(k)
                .map_or(or, |n| n.clamp(0.0, f64::from(MAX_FIELDS)) as u32)
        };
        ContactShape {
            version: match p.text("version") {
                Some("4.0") => "4.0",
                _ => d.version,
            },
            photos: p
                .number("photos")
                .unwrap_or(if photo.is_some() { 1.0 } else { 0.0 }),
            photo,
            emails: count("emails", d.emails),
            phones: count("phones", d.phones),
            notes: p.number("notes").unwrap_or(d.notes),
        }
    }

    /// As `validate` shows it; `size` is the photo's size in words.
    pub fn describe(&self, size: Option<String>) -> String {
        let photo = match size {
            Some(s) => format!("photo {s} ({} of contacts)", self.photos),
            None => "no photo".into(),
        };
        format!(
            "vCard {} · {} emails · {} phones · notes {} · {photo}",
            self.version, self.emails, self.phones, self.notes
        )
    }
}

/// The most contacts set-up puts in one user's first address book, whatever
/// `initial_contacts` draws.
pub(crate) const MAX_INITIAL_CONTACTS: u64 = 100_000;

/// CardDAV operations.
#[derive(Debug, Clone, PartialEq)]
pub enum CarddavOp {
    /// An address book made (extended MKCOL).
    CreateAddressbook,
    /// A new contact of this shape.
    PutContact(ContactShape),
    /// One of the user's contacts rewritten in this shape (If-Match its ETag).
    UpdateContact(ContactShape),
    GetContact,
    DeleteContact,
    /// An `addressbook-query` for the contacts whose FN or EMAIL contains a part of one
    /// of the user's contacts' names.
    AddressbookQuery,
    /// An `addressbook-multiget` of `count` of the user's contacts.
    AddressbookMultiget {
        count: u32,
    },
    /// `sync-collection` from the last token (from scratch the first time).
    SyncCollection,
    /// PROPFIND Depth 1 of the address book: every contact's ETag.
    Propfind,
    /// A client's first copy of the book: every contact listed, then fetched.
    InitialSync(InitialSync),
    /// A client's sync after that: sync-collection from its last token, then a
    /// multiget of what changed, `batch` a request.
    DeltaSync {
        batch: u32,
    },
}

impl CarddavOp {
    pub const NAMES: [&'static str; 11] = [
        "create_addressbook",
        "put_contact",
        "update_contact",
        "get_contact",
        "delete_contact",
        "addressbook_query",
        "addressbook_multiget",
        "sync_collection",
        "propfind",
        "initial_sync",
        "delta_sync",
    ];

    pub fn name(&self) -> &'static str {
        match self {
            CarddavOp::CreateAddressbook => Self::NAMES[0],
            CarddavOp::PutContact(_) => Self::NAMES[1],
            CarddavOp::UpdateContact(_) => Self::NAMES[2],
            CarddavOp::GetContact => Self::NAMES[3],
            CarddavOp::DeleteContact => Self::NAMES[4],
            CarddavOp::AddressbookQuery => Self::NAMES[5],
            CarddavOp::AddressbookMultiget { .. } => Self::NAMES[6],
            CarddavOp::SyncCollection => Self::NAMES[7],
            CarddavOp::Propfind => Self::NAMES[8],
            CarddavOp::InitialSync(_) => Self::NAMES[9],
            CarddavOp::DeltaSync { .. } => Self::NAMES[10],
        }
    }

    fn build(name: &str, p: &Params) -> Option<CarddavOp> {
        Some(match name {
            "create_addressbook" => CarddavOp::CreateAddressbook,
            "put_contact" => CarddavOp::PutContact(ContactShape::of(p)),
            "update_contact" => CarddavOp::UpdateContact(ContactShape::of(p)),
            "get_contact" => CarddavOp::GetContact,
            "delete_contact" => CarddavOp::DeleteContact,
            "addressbook_query" => CarddavOp::AddressbookQuery,
            "addressbook_multiget" => CarddavOp::AddressbookMultiget {
                count: p.number("count").map_or(defaults::MULTIGET_COUNT, |n| {
                    n.clamp(1.0, u32::MAX as f64) as u32
                }),
            },
            "sync_collection" => CarddavOp::SyncCollection,
            "propfind" => CarddavOp::Propfind,
            "initial_sync" => CarddavOp::InitialSync(InitialSync::of(p)),
            "delta_sync" => CarddavOp::DeltaSync { batch: batch_of(p) },
            _ => return None,
        })
    }

    /// It acts on one of the user's contacts, and sends nothing when there is none.
    pub(crate) fn needs_a_contact(&self) -> bool {
        match self {
            CarddavOp::UpdateContact(_)
            | CarddavOp::GetContact
            | CarddavOp::DeleteContact
            | CarddavOp::AddressbookQuery
            | CarddavOp::AddressbookMultiget { .. } => true,
            CarddavOp::CreateAddressbook
            | CarddavOp::PutContact(_)
            | CarddavOp::SyncCollection
            | CarddavOp::Propfind
            | CarddavOp::InitialSync(_)
            | CarddavOp::DeltaSync { .. } => false,
        }
    }
}

/// CardDAV class parameters.
#[derive(Debug, Clone)]
pub struct CarddavParams {
    /// The address book home, as a template (`{user}`, `{vu}`, `{run_id}`,
    /// `{context}`); discovered when `None`.
    pub addressbook_home: Option<String>,
    /// Where discovery starts (a template); `None`: `/.well-known/carddav`, then the
    /// context's root.
    pub discovery: Option<String>,
    /// A sync whose token the server rejected, repeated from scratch.
    pub label_resync: usize,
    /// The first address book, made outside the table.
    pub label_create_addressbook: usize,
    /// Contacts put in a user's first address book in its set-up (`None`: none).
    pub initial_contacts: Option<Dist>,
}

/// Why a class with these operations could never act on what most of them need:
/// contacts to update, read, find or delete, and none ever put. `None` when it can.
pub(super) fn nothing_to_act_on(
    ops: &[CarddavOp],
    weights: &[f64],
    params: &CarddavParams,
) -> Option<String> {
    let needs: Vec<&str> = ops
        .iter()
        .zip(weights)
        .filter(|(o, w)| **w > 0.0 && o.needs_a_contact())
        .map(|(o, _)| o.name())
        .collect();
    let puts = ops
        .iter()
        .zip(weights)
        .any(|(o, w)| *w > 0.0 && matches!(o, CarddavOp::PutContact(_)));
    let prefilled = params
        .initial_contacts
        .as_ref()
        .is_some_and(|d| d.mean() > 0.0);
    (!needs.is_empty() && !puts && !prefilled).then(|| {
        format!(
            "{} act on contacts, and no operation of this class puts one: every such pick would send nothing (give put_contact a weight, or params.initial_contacts a count)",
            needs.join(", ")
        )
    })
}

/// The class's typed operations and parameters, with every default applied.
pub(super) fn build(
    ops: &[(&str, &Params)],
    class_params: &Params,
    labels: &mut Vec<String>,
) -> Result<ClassKind, super::BuildError> {
    let ops = each(ops, CarddavOp::build)?;
    let initial_contacts = class_params.dist("initial_contacts").cloned();
    if let Some(d) = &initial_contacts {
        let top = d.upper_bound().unwrap_or(0.0).max(d.mean());
        if top.round() > MAX_INITIAL_CONTACTS as f64 {
            return Err(super::BuildError::Params(format!(
                "params.initial_contacts draws up to {top:.0} contacts, and set-up puts at \
                 most {MAX_INITIAL_CONTACTS} in one user's address book (give it a max of \
                 at most {MAX_INITIAL_CONTACTS})"
            )));
        }
    }
    Ok(ClassKind::Carddav {
        ops,
        params: CarddavParams {
            addressbook_home: class_params.text("addressbook_home").map(str::to_string),
            discovery: class_params.text("discovery").map(str::to_string),
            label_resync: label_index(labels, "sync_collection_resync"),
            label_create_addressbook: label_index(labels, "create_addressbook"),
            initial_contacts,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::ParamValue;

    #[test]
    fn a_photo_given_is_on_every_contact_unless_photos_says_otherwise() {
        let mut p = Params::default();
        assert_eq!(ContactShape::of(&p), ContactShape::default());
        p.0.push(("photo".into(), ParamValue::Dist(Dist::constant(5000.0))));
        assert_eq!(ContactShape::of(&p).photos, 1.0);
        p.0.push(("photos".into(), ParamValue::Number(0.25)));
        p.0.push(("version".into(), ParamValue::Text("4.0".into())));
        p.0.push(("emails".into(), ParamValue::Number(1e9)));
        let s = ContactShape::of(&p);
        assert_eq!((s.photos, s.version, s.emails), (0.25, "4.0", MAX_FIELDS));
    }
}
