//! `teams:`: groups of users that share something: a calendar (CalDAV classes) or a
//! published collection (Morse Code and Atom classes, Cosmo's two views of it); each
//! class joins one by its `params.team`. Checked here: every team named exists, its
//! classes speak one protocol (or Morse Code and Atom) and deal evenly into its teams,
//! each team has two users or more and someone in it writes, and a Morse Code member
//! neither publishes nor deletes (the shared collection is the owner's set-up).

use super::*;
use crate::workload::MorseOp;
use crate::workload::teams::{class_reads_inbox, class_schedules, class_writes, team_of};

const TEAM_KEYS: &[&str] = &["name", "count", "grant"];
/// More teams of one kind than this is a typo, not a company.
const MAX_TEAMS: i64 = 100_000;

/// The `teams:` section, each team's classes found from the classes' `params.team`.
pub(super) fn resolve_teams(cx: &Cx, root: &Node, classes: &[UserClass]) -> R<Vec<Team>> {
    let (mut teams, nodes) = match root.get("teams") {
        Some(node) => declared(cx, node)?,
        None => (Vec::new(), Vec::new()),
    };
    join_classes(cx, root, classes, &mut teams)?;
    // A kept user keeps its book of what it saw from one round into the next, and each
    // round's teams are settled on their own.
    if let (Some(k), false) = (
        root.get("run").and_then(|r| r.get("keep_state")),
        teams.is_empty(),
    ) && matches!(k.value, Value::Bool(true))
    {
        return Err(cx.err(
            k.pos,
            "run.keep_state",
            "teams make their shared calendars and collections afresh each round: remove keep_state, or the teams",
        ));
    }
    for (t, node) in teams.iter().zip(&nodes) {
        check_team(cx, t, node, classes)?;
    }
    Ok(teams)
}

/// The teams as written, with their nodes (for the positions of later mistakes).
fn declared<'n>(cx: &Cx, node: &'n Node) -> R<(Vec<Team>, Vec<&'n Node>)> {
    let Value::Seq(items) = &node.value else {
        return Err(cx.err(
            node.pos,
            "teams",
            format!("expected a list of teams, found {}", node.value.kind()),
        ));
    };
    let mut teams: Vec<Team> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("teams[{i}]");
        cx.check_keys(cx.map(item, &path)?, TEAM_KEYS, &path)?;
        let name_node = required(cx, item, "name", &path)?;
        let name = cx.string(name_node, &join(&path, "name"))?;
        if teams.iter().any(|t| t.name == name) {
            return Err(cx.err(
                name_node.pos,
                &join(&path, "name"),
                format!("team '{name}' appears twice"),
            ));
        }
        let count = match item.get("count") {
            Some(n) => {
                let c = cx.int(n, &join(&path, "count"), 1)?;
                if c > MAX_TEAMS {
                    return Err(cx.err(
                        n.pos,
                        &join(&path, "count"),
                        format!("at most {MAX_TEAMS} teams of one kind, got {c}"),
                    ));
                }
                c as u32
            }
            None => 1,
        };
        let grant = match item.get("grant") {
            None => Grant::Acl,
            Some(n) => grant(cx, n, &join(&path, "grant"))?,
        };
        teams.push(Team {
            name,
            count,
            grant,
            classes: Vec::new(),
        });
    }
    Ok((teams, items.iter().collect()))
}

fn grant(cx: &Cx, n: &Node, path: &str) -> R<Grant> {
    let g = cx.string(n, path)?;
    match g.as_str() {
        "acl" => Ok(Grant::Acl),
        "server" => Ok(Grant::Server),
        _ => Err(cx.err_hint(
            n.pos,
            path,
            format!("no grant named '{g}'"),
            Some(format!(
                "write {} (an ACL request granting the members) or {} (the server's own rights let them in)",
                Grant::NAMES[0],
                Grant::NAMES[1]
            )),
        )),
    }
}

/// Each class that names a team in its `params.team` joins it, in file order.
fn join_classes(cx: &Cx, root: &Node, classes: &[UserClass], teams: &mut [Team]) -> R<()> {
    let items = match root.get("users").map(|u| &u.value) {
        Some(Value::Seq(items)) => items.as_slice(),
        _ => &[],
    };
    for (ci, class) in classes.iter().enumerate() {
        let Some(name) = team_of(class) else {
            if class_schedules(class) {
                let pos = items.get(ci).map_or(Pos { line: 0, column: 0 }, |n| n.pos);
                return Err(cx.err_hint(
                    pos,
                    &format!("users[{ci}]"),
                    format!(
                        "class '{}' invites, reads its inbox or answers, but is in no team: its invitations go to its team's other members",
                        class.name
                    ),
                    Some("give the class params: { team: NAME } and a teams: entry".into()),
                ));
            }
            continue;
        };
        let path = format!("users[{ci}].params.team");
        let pos = items
            .get(ci)
            .and_then(|n| n.get("params"))
            .and_then(|p| p.get("team"))
            .map_or(Pos { line: 0, column: 0 }, |n| n.pos);
        let Some(k) = teams.iter().position(|t| t.name == name) else {
            let hint = match did_you_mean(name, teams.iter().map(|t| t.name.as_str())) {
                Some(s) => format!("did you mean '{s}'?"),
                None => format!("add it to teams: (- name: {name})"),
            };
            return Err(cx.err_hint(pos, &path, format!("no team named '{name}'"), Some(hint)));
        };
        let team = &mut teams[k];
        fits_team(cx, pos, &path, class, team, classes)?;
        if class.arrival.is_some() {
            return Err(cx.err(
                pos,
                &path,
                format!(
                    "class '{}' is open (its sessions come and go): a team needs users who stay; give the class a count",
                    class.name
                ),
            ));
        }
        let n = Workload::peak_users(class);
        // A class turned off (`--users NAME=0`) joins nobody.
        if n == 0 {
            continue;
        }
        if !n.is_multiple_of(team.count) {
            return Err(cx.err(
                pos,
                &path,
                format!(
                    "class '{}' has {n} users, which do not deal evenly into the {} teams of '{name}': give it a multiple of {}",
                    class.name, team.count, team.count
                ),
            ));
        }
        team.classes.push(ci);
    }
    Ok(())
}

/// A class joins a team of its own protocol; a Morse Code class in one works in the
/// shared collection only.
fn fits_team(
    cx: &Cx,
    pos: Pos,
    path: &str,
    class: &UserClass,
    team: &Team,
    classes: &[UserClass],
) -> R<()> {
    // Morse Code and Atom are Cosmo's two views of one collection: they may share one.
    let cosmo = |p: Protocol| matches!(p, Protocol::Morse | Protocol::Atom);
    if let Some(first) = team.classes.first().and_then(|&ci| classes.get(ci))
        && first.protocol != class.protocol
        && !(cosmo(first.protocol) && cosmo(class.protocol))
    {
        return Err(cx.err(
            pos,
            path,
            format!(
                "class '{}' ({}) cannot join team '{}' of class '{}' ({}): a team shares one calendar (CalDAV) or one collection (Morse Code, Atom)",
                class.name,
                class.protocol.name(),
                team.name,
                first.name,
                first.protocol.name()
            ),
        ));
    }
    let ClassKind::Morse { ops, .. } = &class.kind else {
        return Ok(());
    };
    if let Some(op) = ops
        .iter()
        .find(|o| matches!(o, MorseOp::Publish | MorseOp::Delete))
    {
        return Err(cx.err_hint(
            pos,
            path,
            format!(
                "class '{}' is in team '{}' but has {}: a team's users sync and update the collection its owner publishes in set-up",
                class.name,
                team.name,
                op.name()
            ),
            Some(format!("remove {} from the class's operations", op.name())),
        ));
    }
    Ok(())
}

/// A team shares among two users or more, and someone in it writes.
fn check_team(cx: &Cx, t: &Team, node: &Node, classes: &[UserClass]) -> R<()> {
    let path = "teams";
    if t.classes.is_empty() {
        return Err(cx.err_hint(
            node.pos,
            path,
            format!("team '{}' has no class", t.name),
            Some(format!(
                "give a CalDAV or Morse Code class params: {{ team: {} }}, or remove the team",
                t.name
            )),
        ));
    }
    let per_team: u32 = t
        .classes
        .iter()
        .map(|&ci| Workload::peak_users(&classes[ci]) / t.count)
        .sum();
    if per_team < 2 {
        return Err(cx.err(
            node.pos,
            path,
            format!(
                "each of the {} teams of '{}' would have one user: a team shares its calendar among two or more",
                t.count, t.name
            ),
        ));
    }
    if !t.classes.iter().any(|&ci| class_writes(&classes[ci])) {
        return Err(cx.err(
            node.pos,
            path,
            format!(
                "nobody in team '{}' writes (none of its classes has put_event, update_event or invite, Morse Code's update, Atom's create_event or update_event): its members would observe what nobody changes",
                t.name
            ),
        ));
    }
    check_invitations(cx, t, node, classes)
}

/// A team whose users invite has someone else to invite (a member who reads their inbox),
/// and a class that answers reads its inbox, where invitations are found.
fn check_invitations(cx: &Cx, t: &Team, node: &Node, classes: &[UserClass]) -> R<()> {
    let per_team = |ci: usize| Workload::peak_users(&classes[ci]) / t.count.max(1);
    let readers: u32 = t
        .classes
        .iter()
        .filter(|&&ci| class_reads_inbox(&classes[ci]))
        .map(|&ci| per_team(ci))
        .sum();
    for &ci in &t.classes {
        let ClassKind::Caldav { ops, .. } = &classes[ci].kind else {
            continue;
        };
        let name = &classes[ci].name;
        let invites = ops.iter().any(|o| matches!(o, CaldavOp::Invite { .. }));
        // An inviter never invites itself.
        let others = readers.saturating_sub(u32::from(class_reads_inbox(&classes[ci])));
        if invites && others == 0 {
            return Err(cx.err_hint(
                node.pos,
                "teams",
                format!(
                    "class '{name}' invites, but nobody else in team '{}' reads an inbox: its invitations would reach nobody",
                    t.name
                ),
                Some("give a class of the team an inbox operation".into()),
            ));
        }
        let cancels = ops.contains(&CaldavOp::Cancel);
        if cancels && !invites {
            return Err(cx.err_hint(
                node.pos,
                "teams",
                format!("class '{name}' cancels invitations but never invites"),
                Some("give the class an invite operation".into()),
            ));
        }
        let answers = ops.iter().any(|o| matches!(o, CaldavOp::Answer { .. }));
        if answers && !class_reads_inbox(&classes[ci]) {
            return Err(cx.err_hint(
                node.pos,
                "teams",
                format!(
                    "class '{name}' answers invitations but never reads its inbox, where they arrive"
                ),
                Some("give the class an inbox operation".into()),
            ));
        }
    }
    Ok(())
}
