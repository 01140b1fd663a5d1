//! Per-sandbox network view. On Linux as root each sandbox gets its own network namespace
//! holding only a loopback interface (brought up), so two sandboxes can both listen on
//! the same port. The namespace is created on a short-lived thread (namespaces are per
//! thread) and kept alive by an open `/proc/thread-self/ns/net` descriptor; children join
//! it with `setns` before exec, and tunnels connect from a short-lived thread that joined
//! it. Without root (or off Linux) sandboxes share the host network.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// How long a tunnel waits for the sandbox-side TCP connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Creates a fresh network namespace with loopback up and returns a descriptor for it.
#[cfg(target_os = "linux")]
pub fn create() -> io::Result<OwnedFd> {
    use nix::fcntl::OFlag;
    use nix::sched::CloneFlags;
    use nix::sys::stat::Mode;
    use std::os::fd::FromRawFd;

    let worker = std::thread::Builder::new()
        .name("netns-create".into())
        .spawn(|| -> io::Result<OwnedFd> {
            nix::sched::unshare(CloneFlags::CLONE_NEWNET)?;
            bring_loopback_up()?;
            // The namespace belongs to the host's user namespace, while an isolated sandbox's
            // root is only root in its own: let it bind every port (sshd on 22) and ping, as
            // root of a machine can. Per-namespace settings: the host's are untouched.
            for (setting, value) in [
                ("ipv4/ip_unprivileged_port_start", "0"),
                ("ipv4/ping_group_range", "0 2147483647"),
            ] {
                if let Err(err) = std::fs::write(format!("/proc/sys/net/{setting}"), value) {
                    tracing::debug!("sandbox network namespace: cannot set {setting}: {err}");
                }
            }
            let raw = nix::fcntl::open(
                "/proc/thread-self/ns/net",
                OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?;
            // SAFETY: `raw` was just opened and is owned by nobody else.
            Ok(unsafe { OwnedFd::from_raw_fd(raw) })
        })?;
    worker
        .join()
        .map_err(|_| io::Error::other("network namespace thread panicked"))?
}

/// Network namespaces need Linux; callers fall back to the host network.
#[cfg(not(target_os = "linux"))]
pub fn create() -> io::Result<OwnedFd> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "network namespaces need Linux",
    ))
}

#[cfg(target_os = "linux")]
fn bring_loopback_up() -> io::Result<()> {
    use nix::libc;
    // SAFETY: plain socket/ioctl calls on a descriptor we own, with a zeroed ifreq whose
    // name is NUL-terminated.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        let mut result = libc::ioctl(sock, libc::SIOCGIFFLAGS as _, &mut req);
        if result == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            result = libc::ioctl(sock, libc::SIOCSIFFLAGS as _, &req);
        }
        let err = io::Error::last_os_error();
        libc::close(sock);
        if result != 0 {
            return Err(err);
        }
    }
    Ok(())
}

/// Joins the network namespace `fd` from a forked child before exec. Only a raw syscall:
/// safe to call between fork and exec.
#[cfg(target_os = "linux")]
pub fn enter_in_child(fd: RawFd) -> io::Result<()> {
    // SAFETY: setns is async-signal-safe and does not touch memory we own.
    if unsafe { nix::libc::setns(fd, nix::libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Without network namespaces there is nothing to join.
#[cfg(not(target_os = "linux"))]
pub fn enter_in_child(_fd: RawFd) -> io::Result<()> {
    Ok(())
}

/// Connects to `127.0.0.1:port` (then `[::1]:port`) as seen from inside `netns`, or from the
/// host when `netns` is `None`. Connection refused surfaces as `ErrorKind::ConnectionRefused`.
pub async fn connect_loopback(
    netns: Option<&OwnedFd>,
    port: u16,
) -> io::Result<tokio::net::TcpStream> {
    let Some(ns) = netns else {
        return connect_host(port).await;
    };
    let ns = ns.try_clone()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    // A dedicated thread (never a pooled one): it changes its own network namespace.
    std::thread::Builder::new()
        .name("netns-connect".into())
        .spawn(move || {
            let _ = tx.send(connect_from_namespace(ns.as_raw_fd(), port));
        })?;
    let stream = rx
        .await
        .map_err(|_| io::Error::other("tunnel connect thread vanished"))??;
    stream.set_nonblocking(true)?;
    tokio::net::TcpStream::from_std(stream)
}

fn connect_from_namespace(ns: RawFd, port: u16) -> io::Result<std::net::TcpStream> {
    enter_in_child(ns)?;
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    match std::net::TcpStream::connect_timeout(&v4, CONNECT_TIMEOUT) {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
            std::net::TcpStream::connect_timeout(&v6, CONNECT_TIMEOUT).map_err(|_| e)
        }
        other => other,
    }
}

async fn connect_host(port: u16) -> io::Result<tokio::net::TcpStream> {
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(v4)).await {
        Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
            let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
            match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(v6)).await {
                Ok(Ok(s)) => Ok(s),
                _ => Err(e),
            }
        }
        Ok(result) => result,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn namespaces_have_separate_loopbacks() {
        if !nix::unistd::Uid::effective().is_root() {
            return; // namespaces need root; the fallback is the host network
        }
        let a = create().expect("netns a");
        let b = create().expect("netns b");
        // Bind a listener inside `a` from a thread that joined it.
        let a2 = a.try_clone().unwrap();
        let listener = std::thread::spawn(move || {
            enter_in_child(a2.as_raw_fd()).unwrap();
            std::net::TcpListener::bind("127.0.0.1:0").unwrap()
        })
        .join()
        .unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(connect_loopback(Some(&a), port).await.is_ok());
        let refused = connect_loopback(Some(&b), port).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    }
}
