//! Waiting with an optional limit, shared by the core and the faces. A leaf module: it imports
//! nothing from the crate, so any module can use it without an upward arrow.

use std::time::Duration;

/// Sleep for `limit`, or never end when there is none: the deadline arm of a `select!` whose
/// limit is optional.
pub async fn sleep_or_forever(limit: Option<Duration>) {
    match limit {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_limit_ends_and_none_never_does() {
        let limited = tokio::time::timeout(
            Duration::from_secs(2),
            sleep_or_forever(Some(Duration::from_secs(1))),
        );
        assert!(limited.await.is_ok());
        let forever = tokio::time::timeout(Duration::from_secs(3600), sleep_or_forever(None));
        assert!(forever.await.is_err());
    }
}
