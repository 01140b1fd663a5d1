//! Deciding what travels: a pure comparison of the two manifests (and, for two-way, the state
//! of the last sync).

use std::collections::{BTreeMap, BTreeSet};

use super::state::{Meta, Synced};
use super::SyncMode;

/// What one sync does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Local → guest.
    pub push: Vec<String>,
    /// Guest → local.
    pub pull: Vec<String>,
    /// Deleted in the guest.
    pub delete_remote: Vec<String>,
    /// Deleted locally.
    pub delete_local: Vec<String>,
    /// Changed on both sides (two-way): the local version wins the path, the guest's is kept
    /// as a conflict copy.
    pub conflicts: Vec<String>,
}

/// Regular files on both sides with the same size but another mtime: worth hashing — unless
/// neither side changed since the last sync (`base`, two-way), when they are known to agree.
pub(crate) fn hash_candidates(
    local: &BTreeMap<String, Meta>,
    remote: &BTreeMap<String, Meta>,
    base: Option<&BTreeMap<String, Synced>>,
) -> Vec<String> {
    local
        .iter()
        .filter_map(|(path, l)| {
            let r = remote.get(path)?;
            let differs = l.link.is_none()
                && r.link.is_none()
                && l.size == r.size
                && l.mtime_ns != r.mtime_ns;
            let settled = base
                .and_then(|b| b.get(path))
                .is_some_and(|b| &b.local == l && &b.remote == r);
            (differs && !settled).then(|| path.clone())
        })
        .collect()
}

/// Same content: same link target, or same size and (same mtime or same hash).
fn same(path: &str, l: &Meta, r: &Meta, equal_hash: &BTreeSet<String>) -> bool {
    match (&l.link, &r.link) {
        (Some(a), Some(b)) => a == b,
        (None, None) => l.size == r.size && (l.mtime_ns == r.mtime_ns || equal_hash.contains(path)),
        _ => false,
    }
}

/// Compare the sides. `base` is the last synced state (two-way only; `None` on a first sync).
pub(crate) fn plan(
    mode: SyncMode,
    local: &BTreeMap<String, Meta>,
    remote: &BTreeMap<String, Meta>,
    base: Option<&BTreeMap<String, Synced>>,
    equal_hash: &BTreeSet<String>,
) -> Plan {
    let mut plan = Plan::default();
    if mode != SyncMode::TwoWay {
        for (path, l) in local {
            if remote
                .get(path)
                .is_none_or(|r| !same(path, l, r, equal_hash))
            {
                plan.push.push(path.clone());
            }
        }
        if mode == SyncMode::Mirror {
            plan.delete_remote = remote
                .keys()
                .filter(|p| !local.contains_key(*p))
                .cloned()
                .collect();
        }
        return plan;
    }
    let paths: BTreeSet<&String> = local.keys().chain(remote.keys()).collect();
    for path in paths {
        let before = base.and_then(|b| b.get(path));
        match (local.get(path), remote.get(path)) {
            (Some(l), Some(r)) => {
                if same(path, l, r, equal_hash) {
                    continue;
                }
                match before {
                    None => plan.conflicts.push(path.clone()),
                    Some(b) => match (&b.local != l, &b.remote != r) {
                        // in step at the last sync, and neither side changed since
                        (false, false) => {}
                        (true, false) => plan.push.push(path.clone()),
                        (false, true) => plan.pull.push(path.clone()),
                        (true, true) => plan.conflicts.push(path.clone()),
                    },
                }
            }
            // a modification beats a deletion: nothing is lost
            (Some(l), None) => match before {
                Some(b) if &b.local == l => plan.delete_local.push(path.clone()),
                _ => plan.push.push(path.clone()),
            },
            (None, Some(r)) => match before {
                Some(b) if &b.remote == r => plan.delete_remote.push(path.clone()),
                _ => plan.pull.push(path.clone()),
            },
            (None, None) => {}
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(size: u64, mtime_ns: i64) -> Meta {
        Meta {
            size,
            mtime_ns,
            link: None,
        }
    }

    fn map(items: &[(&str, Meta)]) -> BTreeMap<String, Meta> {
        items
            .iter()
            .map(|(p, m)| (p.to_string(), m.clone()))
            .collect()
    }

    #[test]
    fn one_way_and_mirror() {
        let local = map(&[("a", m(1, 1)), ("b", m(2, 2)), ("c", m(3, 3))]);
        let remote = map(&[("a", m(1, 1)), ("b", m(2, 9)), ("x", m(1, 1))]);
        let same_b: BTreeSet<String> = ["b".to_string()].into();
        let p = plan(SyncMode::OneWay, &local, &remote, None, &BTreeSet::new());
        assert_eq!(p.push, ["b", "c"]);
        assert!(p.delete_remote.is_empty());
        let p = plan(SyncMode::Mirror, &local, &remote, None, &same_b);
        assert_eq!(p.push, ["c"]);
        assert_eq!(p.delete_remote, ["x"]);
    }

    #[test]
    fn two_way_cases() {
        let base: BTreeMap<String, Synced> = ["lc", "rc", "both", "ldel", "rdel", "same"]
            .iter()
            .map(|p| {
                (
                    p.to_string(),
                    Synced {
                        local: m(1, 1),
                        remote: m(1, 1),
                    },
                )
            })
            .collect();
        let local = map(&[
            ("lc", m(2, 2)),
            ("rc", m(1, 1)),
            ("both", m(2, 2)),
            ("rdel", m(1, 1)),
            ("same", m(1, 1)),
            ("newl", m(1, 1)),
        ]);
        let remote = map(&[
            ("lc", m(1, 1)),
            ("rc", m(3, 3)),
            ("both", m(3, 3)),
            ("ldel", m(1, 1)),
            ("same", m(1, 1)),
            ("newr", m(1, 1)),
        ]);
        let p = plan(
            SyncMode::TwoWay,
            &local,
            &remote,
            Some(&base),
            &BTreeSet::new(),
        );
        assert_eq!(p.push, ["lc", "newl"]);
        assert_eq!(p.pull, ["newr", "rc"]);
        assert_eq!(p.conflicts, ["both"]);
        assert_eq!(p.delete_local, ["rdel"]);
        assert_eq!(p.delete_remote, ["ldel"]);
        // in step at the last sync (their mtimes differ, as after a pull) and unchanged since:
        // nothing to do, nothing to hash
        let settled: BTreeMap<String, Synced> = [(
            "p".to_string(),
            Synced {
                local: m(1, 1),
                remote: m(1, 5),
            },
        )]
        .into();
        let (l, r) = (map(&[("p", m(1, 1))]), map(&[("p", m(1, 5))]));
        assert!(hash_candidates(&l, &r, Some(&settled)).is_empty());
        assert_eq!(hash_candidates(&l, &r, None), ["p"]);
        assert_eq!(
            plan(SyncMode::TwoWay, &l, &r, Some(&settled), &BTreeSet::new()),
            Plan::default()
        );
        // first sync: differing files on both sides conflict, nothing is deleted
        let p = plan(SyncMode::TwoWay, &local, &remote, None, &BTreeSet::new());
        assert_eq!(p.conflicts, ["both", "lc", "rc"]);
        assert!(p.delete_local.is_empty() && p.delete_remote.is_empty());
    }
}
