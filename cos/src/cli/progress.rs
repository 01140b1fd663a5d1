//! Transfer progress bars on stderr (only when stderr is a terminal).

use std::io::IsTerminal;
use std::sync::Arc;

use createos_sandbox::api::files::ProgressFn;
use indicatif::{ProgressBar, ProgressStyle};

/// A byte-count bar labelled `label`, and the callback feeding it; `None` when stderr is not
/// a terminal.
pub fn bytes_bar(label: &str) -> Option<(ProgressBar, ProgressFn)> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(0);
    let style =
        ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(label.to_string());
    let feed = bar.clone();
    let report: ProgressFn = Arc::new(move |done, total| {
        match total {
            Some(total) => feed.set_length(total),
            None => feed.set_length(done),
        }
        feed.set_position(done);
    });
    Some((bar, report))
}
