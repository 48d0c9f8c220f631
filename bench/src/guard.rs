//! How a section's failure stays the section's: `guard` turns a panic into an error, and
//! `one_line` puts an error message on one line of a table.

use anyhow::{anyhow, Result};

/// Runs `f`, turning a panic into an error: a GPU decoder that does not handle some input
/// yet must cost its rows, not the whole report. The panic hook is silenced meanwhile (the
/// error carries the message and location) so the report stays readable.
pub fn guard<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    let location = std::sync::Arc::new(std::sync::Mutex::new(None));
    let previous = std::panic::take_hook();
    let loc = location.clone();
    std::panic::set_hook(Box::new(move |info| {
        if let Ok(mut l) = loc.lock() {
            *l = info.location().map(|l| l.to_string());
        }
    }));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(previous);
    result.unwrap_or_else(|panic| {
        let msg = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        let at = location.lock().ok().and_then(|l| l.clone());
        Err(anyhow!(
            "panicked at {}: {msg}",
            at.as_deref().unwrap_or("?")
        ))
    })
}

/// Error messages (wgpu's span several lines) on one line, for tables.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
