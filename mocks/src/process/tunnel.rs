//! E33 `/tunnel/{port}`: after the 101, a raw byte relay between the client and
//! `127.0.0.1:<port>` inside the sandbox's network view. EOF on one side half-closes the
//! other; the relay ends when both directions are done (SSH handshakes interleave).

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::SessionGuard;

/// Parses the `{port}` path segment: 1..=65535.
pub fn parse_port(raw: &str) -> Option<u16> {
    match raw.trim().parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => Some(p as u16),
        _ => None,
    }
}

/// Relays until both directions finished, the sandbox goes away, or the mock shuts down.
pub async fn relay<S>(
    mut client: S,
    mut upstream: TcpStream,
    guard: SessionGuard,
    shutdown: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    tokio::select! {
        result = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
            if let Err(err) = result {
                tracing::debug!("tunnel relay ended: {err}");
            }
        }
        _ = guard.cancel.cancelled() => {}
        _ = shutdown.cancelled() => {}
    }
    drop(guard);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_validate() {
        assert_eq!(parse_port("22"), Some(22));
        assert_eq!(parse_port("65535"), Some(65535));
        assert_eq!(parse_port("0"), None);
        assert_eq!(parse_port("65536"), None);
        assert_eq!(parse_port("http"), None);
    }
}
