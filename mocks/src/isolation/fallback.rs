//! Process-group based control used when namespaces are unavailable (and as a backstop
//! in namespaces mode): every sandbox command is a session leader, so its pid is the
//! id of a process group that can be stopped, continued and killed as a whole.

use std::path::Path;
use std::process::Command;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// Makes the child a session (and process-group) leader.
pub fn configure(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and the closure allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            if nix::libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

pub enum Stop {
    Stop,
    Continue,
}

/// True while process group `pgid` has at least one member.
pub fn group_alive(pgid: i32) -> bool {
    pgid > 0 && killpg(Pid::from_raw(pgid), None).is_ok()
}

pub fn signal_groups(groups: &[i32], which: Stop) {
    let sig = match which {
        Stop::Stop => Signal::SIGSTOP,
        Stop::Continue => Signal::SIGCONT,
    };
    for &g in groups {
        let _ = killpg(Pid::from_raw(g), sig);
    }
}

pub fn kill_groups(groups: &[i32]) {
    for &g in groups {
        let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
        // A stopped group must be continued for SIGKILL to be reaped promptly everywhere.
        let _ = killpg(Pid::from_raw(g), Signal::SIGCONT);
    }
}

/// Members of the given process groups (Linux: every process whose pgid matches;
/// elsewhere: the group leaders that are still alive).
pub fn group_members(groups: &[i32]) -> Vec<u32> {
    if groups.is_empty() {
        return Vec::new();
    }
    #[cfg(target_os = "linux")]
    {
        let mut pids = Vec::new();
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u32>().ok())
                else {
                    continue;
                };
                if let Some(pgid) = super::usage::proc_pgid(pid) {
                    if groups.contains(&pgid) {
                        pids.push(pid);
                    }
                }
            }
        }
        pids
    }
    #[cfg(not(target_os = "linux"))]
    {
        groups
            .iter()
            .filter(|&&g| group_alive(g))
            .map(|&g| g as u32)
            .collect()
    }
}

pub fn symlink_dir(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}
