//! Streaming answers: the NDJSON decoder shared by streaming exec, process output and template
//! logs.

pub mod ndjson;
pub mod process_output;

pub use ndjson::{NdjsonDecoder, MAX_LINE};
