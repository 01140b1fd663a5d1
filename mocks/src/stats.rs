//! Request counters behind `GET /_mock/stats`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Stats {
    requests: Mutex<BTreeMap<String, u64>>,
    handled: Mutex<BTreeMap<String, u64>>,
    faults_injected: AtomicU64,
    sandboxes_created: AtomicU64,
    oauth_refreshes: AtomicU64,
}

/// A copy of the counters.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StatsSnapshot {
    pub requests: BTreeMap<String, u64>,
    pub handled: BTreeMap<String, u64>,
    pub faults_injected: u64,
    pub sandboxes_created: u64,
    pub oauth_refreshes: u64,
}

fn bump(map: &Mutex<BTreeMap<String, u64>>, key: &str) {
    *map.lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key.to_string())
        .or_insert(0) += 1;
}

impl Stats {
    /// A request reached a route (before faults).
    pub fn request(&self, operation: &str) {
        bump(&self.requests, operation);
    }

    /// A route's handler ran.
    pub fn handled(&self, operation: &str) {
        bump(&self.handled, operation);
    }

    pub fn fault_injected(&self) {
        self.faults_injected.fetch_add(1, Ordering::Relaxed);
    }

    pub fn sandbox_created(&self) {
        self.sandboxes_created.fetch_add(1, Ordering::Relaxed);
    }

    pub fn oauth_refreshed(&self) {
        self.oauth_refreshes.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self
                .requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            handled: self
                .handled
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            faults_injected: self.faults_injected.load(Ordering::Relaxed),
            sandboxes_created: self.sandboxes_created.load(Ordering::Relaxed),
            oauth_refreshes: self.oauth_refreshes.load(Ordering::Relaxed),
        }
    }

    pub fn reset(&self) {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.handled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.faults_injected.store(0, Ordering::Relaxed);
        self.sandboxes_created.store(0, Ordering::Relaxed);
        self.oauth_refreshes.store(0, Ordering::Relaxed);
    }
}
