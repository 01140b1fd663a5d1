//! The metrics store (E57–E59): usage counters and the timeseries samples per tenant.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Instant;

use time::OffsetDateTime;

use crate::auth::TenantId;
use crate::clock::now;
use crate::sandbox::{Sandboxes, Status};

/// Samples kept per tenant for the timeseries (one per sampling tick).
pub(crate) const MAX_SAMPLES: usize = 10_000;

#[derive(Debug, Default, Clone)]
pub(crate) struct TenantUsage {
    pub(crate) created_total: u64,
    pub(crate) exec_total: u64,
    /// CPU seconds of sandboxes already destroyed.
    pub(crate) cpu_seconds_destroyed: f64,
}

#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub(crate) at: OffsetDateTime,
    pub(crate) cpu_seconds_total: f64,
    pub(crate) sandboxes_running: usize,
    pub(crate) exec_total: u64,
}

#[derive(Debug)]
pub struct Metrics {
    pub(crate) period_start: OffsetDateTime,
    pub(crate) usage: Mutex<HashMap<TenantId, TenantUsage>>,
    pub(crate) samples: Mutex<HashMap<TenantId, VecDeque<Sample>>>,
    /// Per sandbox: (instant, cpu seconds) of the previous metrics read.
    pub(crate) last_cpu: Mutex<HashMap<String, (Instant, f64)>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            period_start: now(),
            usage: Mutex::default(),
            samples: Mutex::default(),
            last_cpu: Mutex::default(),
        }
    }
}

impl Metrics {
    pub(crate) fn with_usage<R>(
        &self,
        tenant: &TenantId,
        f: impl FnOnce(&mut TenantUsage) -> R,
    ) -> R {
        let mut map = self.usage.lock().unwrap_or_else(|e| e.into_inner());
        f(map.entry(tenant.clone()).or_default())
    }

    pub fn sandbox_created(&self, tenant: &TenantId) {
        self.with_usage(tenant, |u| u.created_total += 1);
    }

    pub fn sandbox_destroyed(&self, tenant: &TenantId, cpu_seconds: f64) {
        self.with_usage(tenant, |u| u.cpu_seconds_destroyed += cpu_seconds);
    }

    pub fn exec_started(&self, tenant: &TenantId) {
        self.with_usage(tenant, |u| u.exec_total += 1);
    }

    /// Records one timeseries sample for every tenant that has sandboxes.
    pub fn sample_all(&self, sandboxes: &Sandboxes) {
        let mut tenants: Vec<TenantId> = sandboxes.all().iter().map(|s| s.tenant.clone()).collect();
        tenants.sort();
        tenants.dedup();
        for tenant in tenants {
            let sample = self.live_sample(sandboxes, &tenant);
            let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
            let series = samples.entry(tenant).or_default();
            series.push_back(sample);
            while series.len() > MAX_SAMPLES {
                series.pop_front();
            }
        }
    }

    pub(crate) fn live_sample(&self, sandboxes: &Sandboxes, tenant: &TenantId) -> Sample {
        let usage = self.with_usage(tenant, |u| u.clone());
        let mut live_cpu = 0.0;
        let mut running = 0;
        for s in sandboxes.of_tenant(tenant) {
            let status = s.status();
            if status.is_terminal() {
                continue;
            }
            if status == Status::Running {
                running += 1;
            }
            live_cpu += s.runtime().resource_usage().cpu_seconds;
        }
        Sample {
            at: now(),
            cpu_seconds_total: usage.cpu_seconds_destroyed + live_cpu,
            sandboxes_running: running,
            exec_total: usage.exec_total,
        }
    }
}
