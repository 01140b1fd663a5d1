//! Fault injection rules.
//!
//! ```text
//! RULE   := [METHOD] PATH_GLOB ACTION [OPTION ...]      (space separated)
//! METHOD := GET|POST|PUT|PATCH|DELETE|*                 (default *)
//! PATH_GLOB: `*` matches any run of characters including '/'
//! ACTION := status=CODE [retry_after=SECS] | reset [when=before|after] | delay=DUR [when=before|after]
//!         | cut=BYTES
//! ```
//!
//! `delay … when=after` holds the answer back once the handler has acted: the request took
//! effect but its answer is late, which is what a client that gives up mid-request meets.
//!
//! ```text
//! OPTION := rate=P (0..1, default 1) | count=N (fire at most N times) | after=N (skip first N matches)
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rand::Rng;
use serde::Serialize;

use crate::config::parse_duration;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultAction {
    /// Answer `code` with a JSend error before the handler runs.
    Status { code: u16, retry_after: Option<u64> },
    /// Drop the connection: before the handler runs, or after it (cut mid-body).
    Reset { after_handler: bool },
    /// Sleep before the handler, or after it (the request acted; its answer is late).
    Delay {
        #[serde(serialize_with = "ser_duration_ms")]
        duration: Duration,
        after_handler: bool,
    },
    /// Abort a (streaming) response after this many body bytes.
    Cut { bytes: u64 },
}

fn ser_duration_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

#[derive(Debug, Serialize)]
pub struct FaultRule {
    pub rule: String,
    pub method: Option<String>,
    pub path_glob: String,
    pub action: FaultAction,
    pub rate: f64,
    pub count: Option<u64>,
    pub after: u64,
    #[serde(serialize_with = "ser_atomic")]
    seen: AtomicU64,
    #[serde(serialize_with = "ser_atomic")]
    fired: AtomicU64,
}

fn ser_atomic<S: serde::Serializer>(a: &AtomicU64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(a.load(Ordering::Relaxed))
}

impl FaultRule {
    /// Parses one rule of the grammar above.
    pub fn parse(raw: &str) -> Result<FaultRule, String> {
        let tokens: Vec<&str> = raw.split_whitespace().collect();
        if tokens.is_empty() {
            return Err("empty fault rule".into());
        }
        let mut idx = 0;
        let method = match tokens[0] {
            "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS" => {
                idx = 1;
                Some(tokens[0].to_string())
            }
            "*" if tokens.len() > 2 && !tokens[1].contains('=') && tokens[1] != "reset" => {
                idx = 1;
                None
            }
            _ => None,
        };
        let path_glob = tokens
            .get(idx)
            .ok_or_else(|| format!("fault rule {raw:?} has no path"))?
            .to_string();
        if !(path_glob.starts_with('/') || path_glob == "*") {
            return Err(format!(
                "fault rule {raw:?}: path glob must start with '/' or be '*'"
            ));
        }
        let action_token = tokens
            .get(idx + 1)
            .ok_or_else(|| format!("fault rule {raw:?} has no action"))?;
        let mut action = if *action_token == "reset" {
            FaultAction::Reset {
                after_handler: false,
            }
        } else if let Some(v) = action_token.strip_prefix("status=") {
            let code: u16 = v.parse().map_err(|_| format!("bad status in {raw:?}"))?;
            if !(100..=599).contains(&code) {
                return Err(format!("status out of range in {raw:?}"));
            }
            FaultAction::Status {
                code,
                retry_after: None,
            }
        } else if let Some(v) = action_token.strip_prefix("delay=") {
            FaultAction::Delay {
                duration: parse_duration(v)?,
                after_handler: false,
            }
        } else if let Some(v) = action_token.strip_prefix("cut=") {
            let bytes: u64 = v.parse().map_err(|_| format!("bad cut in {raw:?}"))?;
            if bytes == 0 {
                return Err(format!("cut must be > 0 in {raw:?}"));
            }
            FaultAction::Cut { bytes }
        } else {
            return Err(format!(
                "unknown fault action {action_token:?} (status=|reset|delay=|cut=)"
            ));
        };
        let (mut rate, mut count, mut after) = (1.0f64, None, 0u64);
        for opt in &tokens[idx + 2..] {
            let (k, v) = opt
                .split_once('=')
                .ok_or_else(|| format!("bad option {opt:?} in {raw:?}"))?;
            match k {
                "rate" => {
                    rate = v.parse().map_err(|_| format!("bad rate in {raw:?}"))?;
                    if !(0.0..=1.0).contains(&rate) {
                        return Err(format!("rate must be within 0..1 in {raw:?}"));
                    }
                }
                "count" => count = Some(v.parse().map_err(|_| format!("bad count in {raw:?}"))?),
                "after" => after = v.parse().map_err(|_| format!("bad after in {raw:?}"))?,
                "retry_after" => match &mut action {
                    FaultAction::Status { retry_after, .. } => {
                        *retry_after = Some(
                            v.parse()
                                .map_err(|_| format!("bad retry_after in {raw:?}"))?,
                        )
                    }
                    _ => return Err(format!("retry_after only applies to status= in {raw:?}")),
                },
                "when" => match &mut action {
                    FaultAction::Reset { after_handler }
                    | FaultAction::Delay { after_handler, .. } => {
                        *after_handler = match v {
                            "before" => false,
                            "after" => true,
                            _ => return Err(format!("when must be before|after in {raw:?}")),
                        }
                    }
                    _ => return Err(format!("when only applies to reset and delay in {raw:?}")),
                },
                _ => return Err(format!("unknown option {k:?} in {raw:?}")),
            }
        }
        Ok(FaultRule {
            rule: raw.trim().to_string(),
            method,
            path_glob,
            action,
            rate,
            count,
            after,
            seen: AtomicU64::new(0),
            fired: AtomicU64::new(0),
        })
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && glob_match(&self.path_glob, path)
    }

    /// Counts a match and decides whether the rule fires for it.
    fn fire(&self) -> bool {
        let seen = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        if seen <= self.after {
            return false;
        }
        if let Some(max) = self.count {
            if self.fired.load(Ordering::Relaxed) >= max {
                return false;
            }
        }
        if self.rate < 1.0 && rand::thread_rng().gen::<f64>() >= self.rate {
            return false;
        }
        if let Some(max) = self.count {
            // Another request may have raced us to the last firing.
            if self.fired.fetch_add(1, Ordering::Relaxed) >= max {
                return false;
            }
            return true;
        }
        self.fired.fetch_add(1, Ordering::Relaxed);
        true
    }
}

/// `*` matches any run of characters (including `/`); everything else literally.
pub fn glob_match(glob: &str, text: &str) -> bool {
    let g = glob.as_bytes();
    let t = text.as_bytes();
    let (mut gi, mut ti) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while ti < t.len() {
        if gi < g.len() && g[gi] == b'*' {
            star = Some(gi);
            gi += 1;
            mark = ti;
        } else if gi < g.len() && g[gi] == t[ti] {
            gi += 1;
            ti += 1;
        } else if let Some(s) = star {
            gi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while gi < g.len() && g[gi] == b'*' {
        gi += 1;
    }
    gi == g.len()
}

/// What the rules decided for one request.
#[derive(Debug, Default, Clone)]
pub struct FaultPlan {
    pub delay: Duration,
    /// Held back after the handler ran.
    pub delay_after: Duration,
    pub status: Option<(u16, Option<u64>)>,
    pub reset_before: bool,
    pub reset_after: bool,
    pub cut: Option<u64>,
    /// Number of rules that fired.
    pub fired: u64,
}

/// The active rules.
#[derive(Debug, Default)]
pub struct Faults {
    rules: RwLock<Vec<Arc<FaultRule>>>,
}

impl Faults {
    pub fn add(&self, raw: &str) -> Result<Arc<FaultRule>, String> {
        let rule = Arc::new(FaultRule::parse(raw)?);
        self.rules
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&rule));
        Ok(rule)
    }

    pub fn clear(&self) {
        self.rules
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub fn list(&self) -> Vec<Arc<FaultRule>> {
        self.rules.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Evaluates every rule against a request.
    pub fn plan(&self, method: &str, path: &str) -> FaultPlan {
        let mut plan = FaultPlan::default();
        for rule in self.list() {
            if !rule.matches(method, path) || !rule.fire() {
                continue;
            }
            plan.fired += 1;
            match rule.action {
                FaultAction::Delay {
                    duration,
                    after_handler: false,
                } => plan.delay += duration,
                FaultAction::Delay {
                    duration,
                    after_handler: true,
                } => plan.delay_after += duration,
                FaultAction::Status { code, retry_after } => {
                    if plan.status.is_none() {
                        plan.status = Some((code, retry_after));
                    }
                }
                FaultAction::Reset {
                    after_handler: false,
                } => plan.reset_before = true,
                FaultAction::Reset {
                    after_handler: true,
                } => plan.reset_after = true,
                FaultAction::Cut { bytes } => {
                    plan.cut = Some(plan.cut.map_or(bytes, |c| c.min(bytes)))
                }
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("/v1/sandboxes/*", "/v1/sandboxes/sb-1/exec"));
        assert!(glob_match("*", "/anything"));
        assert!(glob_match("/v1/*/exec", "/v1/sandboxes/x/exec"));
        assert!(!glob_match("/v1/sandboxes", "/v1/sandboxes/x"));
    }

    #[test]
    fn parse_variants() {
        let r = FaultRule::parse("POST /v1/sandboxes status=503 count=2").unwrap();
        assert_eq!(r.method.as_deref(), Some("POST"));
        assert_eq!(
            r.action,
            FaultAction::Status {
                code: 503,
                retry_after: None
            }
        );
        let r = FaultRule::parse("/v1/* reset when=after").unwrap();
        assert_eq!(
            r.action,
            FaultAction::Reset {
                after_handler: true
            }
        );
        let r = FaultRule::parse("* /v1/* status=429 retry_after=2").unwrap();
        assert_eq!(
            r.action,
            FaultAction::Status {
                code: 429,
                retry_after: Some(2)
            }
        );
        assert!(FaultRule::parse("/x bogus").is_err());
        let r = FaultRule::parse("POST /x delay=2s when=after").unwrap();
        assert_eq!(
            r.action,
            FaultAction::Delay {
                duration: Duration::from_secs(2),
                after_handler: true
            }
        );
        assert!(FaultRule::parse("/x status=503 when=after").is_err());
        let f = Faults::default();
        f.add("/x delay=1s when=after").unwrap();
        f.add("/x delay=2s").unwrap();
        let plan = f.plan("GET", "/x");
        assert_eq!(
            (plan.delay, plan.delay_after),
            (Duration::from_secs(2), Duration::from_secs(1))
        );
    }

    #[test]
    fn count_and_after() {
        let f = Faults::default();
        f.add("GET /x status=503 after=1 count=2").unwrap();
        let fired: Vec<bool> = (0..5)
            .map(|_| f.plan("GET", "/x").status.is_some())
            .collect();
        assert_eq!(fired, vec![false, true, true, false, false]);
        assert!(f.plan("POST", "/x").status.is_none());
    }
}
