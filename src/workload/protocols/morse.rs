//! Cosmo Morse Code: its schema and its typed operations. Driven by `protocol/morse.rs`.

use super::{ClassKind, ParamKind, ProtocolDef, defaults, each, label_index, op, p};
use crate::workload::Params;
use crate::workload::dist::{Dist, DistSpec, Unit};

pub(super) static DEF: ProtocolDef = ProtocolDef {
    ops: &[
        op(MorseOp::Publish.name(), &[]),
        op(MorseOp::Sync.name(), &[]),
        op(MorseOp::Update.name(), &[]),
        op(MorseOp::Subscribe.name(), &[]),
        op(MorseOp::Delete.name(), &[]),
    ],
    class_params: &[
        p(
            "collection_size",
            ParamKind::Dist(Unit::Count),
            "items in a published collection",
        ),
        p(
            "no_change_sync",
            ParamKind::Probability,
            "share of syncs that use the newest token",
        ),
        p(
            "tombstone",
            ParamKind::Probability,
            "chance an update also deletes an item",
        ),
        p(
            "team",
            ParamKind::Text,
            "the team (under teams:) whose shared collection its users sync and update, reached by ticket",
        ),
    ],
};

/// Morse Code operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MorseOp {
    Publish,
    Sync,
    Update,
    Subscribe,
    Delete,
}

impl MorseOp {
    pub const ALL: [MorseOp; 5] = [
        MorseOp::Publish,
        MorseOp::Sync,
        MorseOp::Update,
        MorseOp::Subscribe,
        MorseOp::Delete,
    ];
    pub const fn name(self) -> &'static str {
        match self {
            MorseOp::Publish => "publish",
            MorseOp::Sync => "sync",
            MorseOp::Update => "update",
            MorseOp::Subscribe => "subscribe",
            MorseOp::Delete => "delete",
        }
    }
}

/// Morse Code class parameters and the labels its driver adds.
#[derive(Debug, Clone)]
pub struct MorseParams {
    pub collection_size: Dist,
    pub no_change_sync: f64,
    pub tombstone: f64,
    /// A sync with the newest token.
    pub label_sync_no_change: usize,
    /// The first collection, published outside the table.
    pub label_publish: usize,
    /// The team (its `teams:` name) whose shared collection the users work in; `None`:
    /// each works in its own.
    pub team: Option<String>,
    /// An update refused because another changed the collection first (205) or was
    /// changing it (423), synced and sent again, and refused once more: contention, not
    /// a failure. Only a team's classes that update have it.
    pub label_update_contended: Option<usize>,
}

/// The class's typed operations and parameters, with every default applied.
pub(super) fn build(
    ops: &[(&str, &Params)],
    class_params: &Params,
    labels: &mut Vec<String>,
) -> Result<ClassKind, super::BuildError> {
    let ops = each(ops, |n, _| MorseOp::ALL.into_iter().find(|o| o.name() == n))?;
    let collection_size = match class_params.dist("collection_size") {
        Some(d) => d.clone(),
        None => Dist::new(DistSpec::Exponential {
            mean: defaults::COLLECTION_SIZE_MEAN,
            max: Some(defaults::COLLECTION_SIZE_MAX),
        })
        .map_err(|e| format!("default collection_size: {e}"))?,
    };
    Ok(ClassKind::Morse {
        params: MorseParams {
            collection_size,
            no_change_sync: class_params
                .number("no_change_sync")
                .unwrap_or(defaults::NO_CHANGE_SYNC),
            tombstone: class_params
                .number("tombstone")
                .unwrap_or(defaults::TOMBSTONE),
            label_sync_no_change: label_index(labels, "sync_no_change"),
            label_publish: label_index(labels, "publish"),
            team: class_params.text("team").map(str::to_string),
            label_update_contended: (class_params.text("team").is_some()
                && ops.contains(&MorseOp::Update))
            .then(|| label_index(labels, "update_contended")),
        },
        ops,
    })
}
