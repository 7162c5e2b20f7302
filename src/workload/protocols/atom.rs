//! Cosmo Atom feeds and AtomPub: its schema and its typed operations. Driven by
//! `protocol/atom.rs`.

use super::{
    ClassKind, ParamKind, ProtocolDef, RANGE, defaults, each, label_index, op, p, range_default,
};
use crate::workload::Params;
use crate::workload::dist::Dist;

pub(super) static DEF: ProtocolDef = ProtocolDef {
    ops: &[
        op(AtomOp::NAMES[0], &[RANGE]),
        op(AtomOp::NAMES[1], &[]),
        op(AtomOp::NAMES[2], &[]),
        op(AtomOp::NAMES[3], &[]),
        op(AtomOp::NAMES[4], &[]),
    ],
    class_params: &[
        p(
            "initial_items",
            ParamKind::Integer,
            "items in the collection published first",
        ),
        p(
            "team",
            ParamKind::Text,
            "the team (under teams:) whose shared collection its users read and write, reached by ticket",
        ),
    ],
};

/// Atom operations.
#[derive(Debug, Clone, PartialEq)]
pub enum AtomOp {
    TimeRangeFeed { range: Dist },
    FullFeed,
    Dashboard,
    CreateEvent,
    UpdateEvent,
}

impl AtomOp {
    pub const NAMES: [&'static str; 5] = [
        "time_range_feed",
        "full_feed",
        "dashboard",
        "create_event",
        "update_event",
    ];
    pub fn name(&self) -> &'static str {
        match self {
            AtomOp::TimeRangeFeed { .. } => Self::NAMES[0],
            AtomOp::FullFeed => Self::NAMES[1],
            AtomOp::Dashboard => Self::NAMES[2],
            AtomOp::CreateEvent => Self::NAMES[3],
            AtomOp::UpdateEvent => Self::NAMES[4],
        }
    }
    fn build(name: &str, p: &Params) -> Option<AtomOp> {
        Some(match name {
            "time_range_feed" => AtomOp::TimeRangeFeed {
                range: p.dist("range").cloned().unwrap_or_else(range_default),
            },
            "full_feed" => AtomOp::FullFeed,
            "dashboard" => AtomOp::Dashboard,
            "create_event" => AtomOp::CreateEvent,
            "update_event" => AtomOp::UpdateEvent,
            _ => return None,
        })
    }
}

/// Atom class parameters.
#[derive(Debug, Clone)]
pub struct AtomParams {
    pub initial_items: u32,
    /// The first collection, published through Morse Code outside the table.
    pub label_publish: usize,
    /// The team (its `teams:` name) whose shared collection the users work in; `None`:
    /// each works in its own.
    pub team: Option<String>,
    /// A team's write refused twice because another member was writing (423): contention,
    /// not a failure. Only a team's classes that write have it.
    pub label_contended: Option<usize>,
}

/// The class's typed operations and parameters, with every default applied.
pub(super) fn build(
    ops: &[(&str, &Params)],
    class_params: &Params,
    labels: &mut Vec<String>,
) -> Result<ClassKind, super::BuildError> {
    let ops = each(ops, AtomOp::build)?;
    let team = class_params.text("team").map(str::to_string);
    let writes = ops
        .iter()
        .any(|o| matches!(o, AtomOp::CreateEvent | AtomOp::UpdateEvent));
    Ok(ClassKind::Atom {
        params: AtomParams {
            initial_items: class_params
                .number("initial_items")
                .map_or(defaults::INITIAL_ITEMS, |n| {
                    n.clamp(1.0, u32::MAX as f64) as u32
                }),
            label_publish: label_index(labels, "publish"),
            label_contended: (team.is_some() && writes).then(|| label_index(labels, "contended")),
            team,
        },
        ops,
    })
}
