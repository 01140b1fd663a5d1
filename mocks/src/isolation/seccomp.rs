//! The seccomp filters every isolated sandbox command runs under (compiled once with
//! `seccompiler`, loaded between fork and exec).
//!
//! Refused with `EPERM`: every mount call (`mount`, `umount2`, `pivot_root` and the new
//! mount API), `ptrace` attach (`PTRACE_ATTACH`, `PTRACE_SEIZE`: a process can still be
//! traced by its parent through `PTRACE_TRACEME`), `process_vm_readv/writev`, kernel module
//! calls, keyring calls, `kexec`, `reboot`, `bpf`, `perf_event_open`, `userfaultfd`,
//! `open_by_handle_at`, `setns`, and new user namespaces (`unshare`/`clone` with
//! `CLONE_NEWUSER`). `clone3` answers `ENOSYS` (its flags cannot be inspected), so libc
//! falls back to `clone`, whose flags can.

use std::collections::BTreeMap;
use std::io;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The compiled filters.
#[derive(Debug)]
pub struct Filters {
    programs: Vec<BpfProgram>,
}

fn arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("seccomp: unsupported architecture: {e:?}"))
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
        .map_err(|e| format!("seccomp: {e}"))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| format!("seccomp: {e}"))
}

impl Filters {
    pub fn build() -> Result<Filters, String> {
        let mut denied: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for nr in [
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_open_tree,
            libc::SYS_move_mount,
            libc::SYS_fsopen,
            libc::SYS_fsconfig,
            libc::SYS_fsmount,
            libc::SYS_fspick,
            libc::SYS_mount_setattr,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_keyctl,
            libc::SYS_kexec_load,
            libc::SYS_kexec_file_load,
            libc::SYS_reboot,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_userfaultfd,
            libc::SYS_open_by_handle_at,
            libc::SYS_setns,
        ] {
            denied.insert(nr, Vec::new());
        }
        let attach = [libc::PTRACE_ATTACH as u64, 0x4206 /* PTRACE_SEIZE */];
        denied.insert(
            libc::SYS_ptrace,
            attach
                .iter()
                .map(|&req| rule(vec![cond(0, SeccompCmpOp::Eq, req)?]))
                .collect::<Result<_, String>>()?,
        );
        let newuser = libc::CLONE_NEWUSER as u64;
        denied.insert(
            libc::SYS_unshare,
            vec![rule(vec![cond(
                0,
                SeccompCmpOp::MaskedEq(newuser),
                newuser,
            )?])?],
        );
        denied.insert(
            libc::SYS_clone,
            vec![rule(vec![cond(
                0,
                SeccompCmpOp::MaskedEq(newuser),
                newuser,
            )?])?],
        );
        let eperm = SeccompFilter::new(
            denied,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch()?,
        )
        .map_err(|e| format!("seccomp: {e}"))?;
        let mut clone3 = BTreeMap::new();
        clone3.insert(libc::SYS_clone3, Vec::new());
        let enosys = SeccompFilter::new(
            clone3,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS as u32),
            arch()?,
        )
        .map_err(|e| format!("seccomp: {e}"))?;
        let programs = [eperm, enosys]
            .into_iter()
            .map(|f| BpfProgram::try_from(f).map_err(|e| format!("seccomp: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Filters { programs })
    }

    /// Sets `no_new_privs` and loads the filters into the calling thread. Only raw
    /// syscalls on prepared programs: callable between fork and exec.
    pub fn apply(&self) -> io::Result<()> {
        for program in &self.programs {
            seccompiler::apply_filter(program).map_err(|_| io::Error::last_os_error())?;
        }
        Ok(())
    }
}
