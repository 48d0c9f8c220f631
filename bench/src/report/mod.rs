//! The report: tables built from the sections' results (`rows`, gathered in `results::Report`),
//! written as text (stdout), Markdown and JSON.

pub mod json;
pub mod markdown;
pub mod meta;
pub mod results;
pub mod table;
pub mod tables;
pub mod text;

use anyhow::{Context, Result};

pub use results::Report;
use tables::Tables;

/// Prints the text report, then writes the Markdown and JSON files asked for.
pub fn write(report: &Report) -> Result<()> {
    let tables = Tables::new(report);
    print!("{}", text::text(report, &tables));
    if let Some(path) = &report.args.markdown {
        std::fs::write(path, markdown::markdown(report, &tables))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &report.args.json {
        std::fs::write(path, json::json(report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
