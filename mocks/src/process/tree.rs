//! Process-tree tracking. A managed process is a session and process-group leader; its
//! tree is every live process in that session or group, every descendant reached through
//! parent links (which also catches children that called `setsid` themselves), and every
//! process seen as a member before (orphans re-parented to init keep their identity).
//! On Linux this reads `/proc`; elsewhere only the process group can be probed.

use std::collections::{HashMap, HashSet};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// A process identity that survives pid reuse: the pid plus its start time in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcId {
    pub pid: i32,
    pub start: u64,
}

/// The fields of `/proc/<pid>/stat` the tracker needs.
#[derive(Debug, Clone, Copy)]
pub struct ProcStat {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    pub start: u64,
    pub zombie: bool,
}

/// All processes of the host at one instant, keyed by pid (`None` where `/proc` is absent).
pub type Snapshot = HashMap<i32, ProcStat>;

/// Parses the text of `/proc/<pid>/stat`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid: i32 = text[..open].trim().parse().ok()?;
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // fields[0] is the state (field 3 of stat); starttime is field 22.
    Some(ProcStat {
        pid,
        zombie: matches!(fields.first(), Some(&"Z") | Some(&"X")),
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Reads one process's stat entry.
pub fn stat_of(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Reads every process of the host; `None` when `/proc` is unavailable (not Linux).
pub fn snapshot() -> Option<Snapshot> {
    let dir = std::fs::read_dir("/proc").ok()?;
    let mut out = HashMap::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(stat) = stat_of(pid) {
            out.insert(pid, stat);
        }
    }
    Some(out)
}

/// Tracks the members of one process tree across snapshots.
#[derive(Debug)]
pub struct TreeTracker {
    leader: ProcId,
    known: HashSet<ProcId>,
}

impl TreeTracker {
    pub fn new(leader: ProcId) -> Self {
        let mut known = HashSet::new();
        known.insert(leader);
        TreeTracker { leader, known }
    }

    /// Live (non-zombie) members in `snap`, remembering them for later snapshots.
    pub fn members(&mut self, snap: &Snapshot) -> Vec<i32> {
        let lead = self.leader;
        let mut members: HashSet<i32> = snap
            .values()
            .filter(|p| {
                let same_group =
                    (p.session == lead.pid || p.pgrp == lead.pid) && p.start >= lead.start;
                same_group
                    || self.known.contains(&ProcId {
                        pid: p.pid,
                        start: p.start,
                    })
            })
            .map(|p| p.pid)
            .collect();
        // Close over parent links: children of members are members.
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for p in snap.values() {
            children.entry(p.ppid).or_default().push(p.pid);
        }
        let mut frontier: Vec<i32> = members.iter().copied().collect();
        while let Some(pid) = frontier.pop() {
            for &child in children.get(&pid).map(Vec::as_slice).unwrap_or(&[]) {
                if members.insert(child) {
                    frontier.push(child);
                }
            }
        }
        let live: Vec<i32> = members
            .into_iter()
            .filter_map(|pid| snap.get(&pid))
            .filter(|p| !p.zombie)
            .map(|p| p.pid)
            .collect();
        self.known = live
            .iter()
            .filter_map(|pid| snap.get(pid))
            .map(|p| ProcId {
                pid: p.pid,
                start: p.start,
            })
            .collect();
        live
    }

    /// Live members now: from `/proc` when available, else whether the group still exists.
    pub fn live_members(&mut self) -> Vec<i32> {
        match snapshot() {
            Some(snap) => self.members(&snap),
            None => {
                if killpg(Pid::from_raw(self.leader.pid), None).is_ok() {
                    vec![self.leader.pid]
                } else {
                    Vec::new()
                }
            }
        }
    }
}

/// Sends `sig` to the leader's process group and to every listed member (members that
/// moved to other groups or sessions are reached individually). Vanished targets are fine.
pub fn signal_tree(leader_pid: i32, members: &[i32], sig: Signal) {
    if leader_pid > 0 {
        let _ = killpg(Pid::from_raw(leader_pid), sig);
    }
    for &pid in members {
        if pid > 0 {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }
}

/// Command line of a process: (program, arguments).
#[cfg(target_os = "linux")]
pub fn command_line(pid: i32) -> Option<(String, Vec<String>)> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut parts = raw
        .split(|b| *b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect::<Vec<_>>();
    if parts.last().is_some_and(|s| s.is_empty()) {
        parts.pop();
    }
    if parts.is_empty() {
        // Kernel threads and zombies have no command line; fall back to the short name.
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        return Some((comm.trim().to_string(), Vec::new()));
    }
    let cmd = parts.remove(0);
    Some((cmd, parts))
}

/// Command line of a process: (program, arguments) — via `ps` where `/proc` is absent.
#[cfg(not(target_os = "linux"))]
pub fn command_line(pid: i32) -> Option<(String, Vec<String>)> {
    let out = std::process::Command::new("ps")
        .args(["-o", "comm=", "-p", &pid.to_string()])
        .output()
        .ok()?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!name.is_empty()).then_some((name, Vec::new()))
}

/// A live process in group `pgid`, preferring the group leader itself.
pub fn group_representative(pgid: i32) -> Option<i32> {
    if stat_of(pgid).is_some_and(|p| !p.zombie) {
        return Some(pgid);
    }
    match snapshot() {
        Some(snap) => {
            if snap.get(&pgid).is_some_and(|p| !p.zombie) {
                return Some(pgid);
            }
            snap.values()
                .filter(|p| p.pgrp == pgid && !p.zombie)
                .map(|p| p.pid)
                .min()
        }
        None => Some(pgid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pid: i32, ppid: i32, pgrp: i32, session: i32, start: u64) -> ProcStat {
        ProcStat {
            pid,
            ppid,
            pgrp,
            session,
            start,
            zombie: false,
        }
    }

    #[test]
    fn parses_stat_with_spaces_in_comm() {
        let text = "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        let s = parse_stat(text).unwrap();
        assert_eq!(
            (s.pid, s.ppid, s.pgrp, s.session, s.start, s.zombie),
            (4242, 1, 4242, 4242, 987654, false)
        );
    }

    #[test]
    fn members_follow_session_parents_and_known_orphans() {
        let mut t = TreeTracker::new(ProcId {
            pid: 100,
            start: 10,
        });
        let mut snap: Snapshot = HashMap::new();
        snap.insert(100, stat(100, 1, 100, 100, 10));
        snap.insert(101, stat(101, 100, 101, 100, 11)); // job in its own group
        snap.insert(102, stat(102, 101, 102, 102, 12)); // called setsid
        snap.insert(200, stat(200, 1, 200, 200, 5)); // unrelated
        let mut m = t.members(&snap);
        m.sort();
        assert_eq!(m, vec![100, 101, 102]);
        // Leader and middle child die; the setsid'd grandchild is re-parented to init.
        snap.remove(&100);
        snap.remove(&101);
        snap.insert(102, stat(102, 1, 102, 102, 12));
        assert_eq!(t.members(&snap), vec![102]);
        snap.get_mut(&102).unwrap().zombie = true;
        assert!(t.members(&snap).is_empty());
    }
}
