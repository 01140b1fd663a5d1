//! Wall-clock helpers: RFC 3339 UTC timestamps with millisecond precision.

use time::macros::format_description;
use time::OffsetDateTime;

/// `2026-11-30T05:00:00.123Z` for a given instant.
pub fn rfc3339(at: OffsetDateTime) -> String {
    let fmt =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    at.to_offset(time::UtcOffset::UTC)
        .format(&fmt)
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".to_string())
}

/// The current instant (UTC).
pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// `rfc3339(now())`.
pub fn now_rfc3339() -> String {
    rfc3339(now())
}

/// Parses an RFC 3339 timestamp (any offset).
pub fn parse_rfc3339(raw: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339).ok()
}
