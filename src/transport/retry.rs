//! Whether a failed attempt may be sent again, and after how long.

use std::time::Duration;

use super::endpoints::Endpoint;
use crate::config::RetryPolicy;
use crate::error::Error;

/// What to do after a failed attempt.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Retry(Duration),
    GiveUp,
}

/// Decide for `outcome` of attempt number `attempt` (0-based).
///
/// Safe means: the request never reached the server (connect failures, any method); or it may be
/// applied twice without harm (idempotent methods); or the server said it did not apply it
/// (429/503, any method — the SDKs' policy). A streamed body is never sent twice.
pub(crate) fn judge<T>(
    outcome: &Result<T, Error>,
    endpoint: &Endpoint,
    replayable: bool,
    attempt: u32,
    policy: &RetryPolicy,
) -> Verdict {
    let Err(err) = outcome else {
        return Verdict::GiveUp;
    };
    if !replayable || attempt >= policy.max_retries {
        return Verdict::GiveUp;
    }
    let idempotent = endpoint.idempotent();
    let retryable = match err {
        Error::Connection { source, .. } if source.is::<super::tls::UntrustedCertificate>() => {
            false
        }
        Error::Connection { source, .. } => {
            let before_send = source
                .downcast_ref::<reqwest::Error>()
                .map(|e| e.is_connect())
                .unwrap_or(false);
            before_send || idempotent
        }
        Error::Timeout { .. } => idempotent,
        other => match other.status() {
            Some(429) | Some(503) => true,
            Some(408) | Some(500) | Some(502) | Some(504) => idempotent,
            _ => false,
        },
    };
    if !retryable {
        return Verdict::GiveUp;
    }
    let server_asked = err.api().and_then(|a| a.retry_after);
    match server_asked {
        Some(wait) if wait > policy.max_retry_after => Verdict::GiveUp,
        Some(wait) => Verdict::Retry(wait),
        None => Verdict::Retry(policy.backoff(attempt)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;
    use crate::transport::endpoints;

    fn api(status: u16, retry_after: Option<Duration>) -> Error {
        Error::from_api(ApiError {
            status,
            code: None,
            message: String::new(),
            fields: Default::default(),
            request_id: None,
            endpoint: String::new(),
            path: None,
            retry_after,
        })
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            ..Default::default()
        }
    }

    #[test]
    fn status_rules() {
        let p = fast();
        let get = &endpoints::GET_SANDBOX;
        let post = &endpoints::CREATE_SANDBOX;
        let r = |e: Error, ep, replay| judge::<()>(&Err(e), ep, replay, 0, &p);
        assert!(matches!(r(api(503, None), post, true), Verdict::Retry(_)));
        assert!(matches!(r(api(429, None), post, true), Verdict::Retry(_)));
        assert_eq!(r(api(500, None), post, true), Verdict::GiveUp);
        assert!(matches!(r(api(500, None), get, true), Verdict::Retry(_)));
        assert!(matches!(r(api(408, None), get, true), Verdict::Retry(_)));
        assert_eq!(r(api(404, None), get, true), Verdict::GiveUp);
        assert_eq!(r(api(402, None), post, true), Verdict::GiveUp);
        assert_eq!(
            r(api(503, None), &endpoints::UPLOAD_FILE, false),
            Verdict::GiveUp
        );
        // POSTs that set a state are retried like idempotent methods; others are not.
        assert!(matches!(
            r(api(502, None), &endpoints::CLOSE_PROCESS_STDIN, true),
            Verdict::Retry(_)
        ));
        assert!(matches!(
            r(api(502, None), &endpoints::RESIZE_PROCESS, true),
            Verdict::Retry(_)
        ));
        assert_eq!(
            r(api(502, None), &endpoints::SIGNAL_PROCESS, true),
            Verdict::GiveUp
        );
    }

    #[test]
    fn retry_after_overrides_and_is_bounded() {
        let p = fast();
        let v = judge::<()>(
            &Err(api(429, Some(Duration::from_secs(2)))),
            &endpoints::EXEC,
            true,
            0,
            &p,
        );
        assert_eq!(v, Verdict::Retry(Duration::from_secs(2)));
        let v = judge::<()>(
            &Err(api(429, Some(Duration::from_secs(3600)))),
            &endpoints::EXEC,
            true,
            0,
            &p,
        );
        assert_eq!(v, Verdict::GiveUp);
    }

    #[test]
    fn budget_is_respected() {
        let p = RetryPolicy {
            max_retries: 2,
            ..fast()
        };
        assert!(matches!(
            judge::<()>(&Err(api(503, None)), &endpoints::GET_SANDBOX, true, 1, &p),
            Verdict::Retry(_)
        ));
        assert_eq!(
            judge::<()>(&Err(api(503, None)), &endpoints::GET_SANDBOX, true, 2, &p),
            Verdict::GiveUp
        );
    }
}
