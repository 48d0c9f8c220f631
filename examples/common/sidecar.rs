//! The sidecar of a corpus array (`NAME.json` beside `NAME.f32`, the layout of
//! scripts/peers_lossless.py), read without a JSON crate, shared by the corpus examples.

/// The "shape" list of a sidecar (a small JSON reader: numbers in the first [...] after it).
pub fn parse_shape(meta: &str) -> Vec<u32> {
    let at = meta.find("\"shape\"").expect("a shape");
    let rest = &meta[at..];
    let (a, b) = (rest.find('[').unwrap(), rest.find(']').unwrap());
    rest[a + 1..b]
        .split(',')
        .map(|s| s.trim().parse().expect("a size"))
        .collect()
}

/// The "fill_value" of a sidecar: a number, or none (null, absent).
pub fn parse_fill(meta: &str) -> Option<f32> {
    let at = meta.find("\"fill_value\"")?;
    let rest = meta[at + 12..].trim_start_matches([':', ' ']);
    let end = rest.find([',', '}', '\n']).unwrap_or(rest.len());
    rest[..end].trim().parse::<f64>().ok().map(|f| f as f32)
}

/// The corpus arrays of `dir` (`NAME.f32` files) whose names contain `filter`, sorted.
pub fn array_names(dir: &std::path::Path, filter: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("a folder")
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "f32").then(|| p.file_stem()?.to_str().map(String::from))?
        })
        .filter(|n| n.contains(filter))
        .collect();
    names.sort();
    names
}
