//! Support of `spec_conformance.rs`: the spec loader and validator, a checking client,
//! generic probes, fixtures and the per-area scenarios.
#![allow(dead_code)]

pub mod fixtures;
pub mod harness;
pub mod probes;
pub mod raw;
pub mod samples;
pub mod scen_computer;
pub mod scen_core;
pub mod scen_process;
pub mod scen_resources;
pub mod spec;
