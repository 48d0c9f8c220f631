//! A table of the report (a header and rows of cells, shown as text or Markdown) and the rate
//! formats its cells use.

use crate::measure::Stats;

/// Bytes per second in GB/s.
pub fn gbs(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}
/// Pixels per second in MP/s.
pub fn mps(pixels: u64, secs: f64) -> f64 {
    pixels as f64 / secs / 1e6
}

/// `median [slowest..fastest]` throughput.
pub fn tput(units: u64, s: Stats, f: fn(u64, f64) -> f64, prec: usize) -> String {
    format!(
        "{:.p$} [{:.p$}-{:.p$}]",
        f(units, s.median),
        f(units, s.max),
        f(units, s.min),
        p = prec
    )
}

/// A header and rows of cells, aligned as text or written as a Markdown table.
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }
    pub fn text(&self) -> String {
        let n = self.header.len();
        let mut w = vec![0; n];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let mut s = String::new();
            for (i, c) in r.iter().enumerate() {
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    s += c;
                    s += &" ".repeat(pad);
                } else {
                    s += "  ";
                    s += &" ".repeat(pad);
                    s += c;
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut s = line(&self.header);
        s += &"-".repeat(w.iter().sum::<usize>() + 2 * (n - 1));
        s += "\n";
        for r in &self.rows {
            s += &line(r);
        }
        s
    }
    pub fn markdown(&self) -> String {
        let mut s = format!("| {} |\n", self.header.join(" | "));
        s += &format!(
            "|{}\n",
            (0..self.header.len())
                .map(|i| if i == 0 { " --- |" } else { " ---: |" })
                .collect::<String>()
        );
        for r in &self.rows {
            let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
            s += &format!("| {} |\n", cells.join(" | "));
        }
        s
    }
}
