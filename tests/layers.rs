//! The library's layers, checked from its sources: every `crate::` and `super::` path a file
//! of `src/` names is resolved to the file that defines it, and
//! - no file names a module of a higher layer (the table in [`LAYERS`], the picture in
//!   ARCHITECTURE.md): the GPU engine (`gpu/`) knows nothing of progressive records, fields,
//!   shards or the loader; a data-side module's GPU stage lives in its own `gpu.rs`;
//! - no files import each other in a circle, directly or through others (a `mod.rs` naming
//!   its own children, to declare or re-export them, is not an import).
//!
//! A text scan, not a compiler pass: it reads `use` items (groups included) and paths in
//! code, with comments and string literals left out. Its resolver is tested below on this
//! crate's own known arrows, so a scan that found nothing would fail.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Top-level modules from the lowest layer up; a module may name its own layer and those
/// below. Peers share a layer.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["format", "limits"],
    &["raw", "layout", "quantize"],
    &["codec"],
    &["fast", "compact"],
    &["encode", "decode"],
    &["gpu", "inspect"],
    // `image_support` converts progressive levels to the `image` crate's images too.
    &["progressive", "field", "tensor", "image_support"],
    &["store"],
    &["shard"],
    &["loader"],
];

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&top))
}

/// A module path (`["gpu", "readback"]`) and the file that holds it.
struct Module {
    path: Vec<String>,
    file: PathBuf,
}

fn modules(src: &Path) -> Vec<Module> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap();
            let mut path: Vec<String> = rel
                .iter()
                .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if path.last().map(String::as_str) == Some("mod") || path == ["lib"] {
                path.pop();
            }
            out.push(Module { path, file: p });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The source with comments, string and char literals blanked (lines kept).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'r' && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            let end: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&end) {
                j += 1;
            }
            i = j + end.len();
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && (b.get(i + 2) == Some(&b'\'') || (b.get(i + 1) == Some(&b'\\')))
        {
            // A char literal ('x', '\n', '\''); lifetimes ('a) have no closing quote there.
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The code without its `#[cfg(test)]` items (unit tests may use any layer), and the names
/// of the child modules declared test-only (`#[cfg(test)] mod name;`).
fn without_tests(code: &str) -> (String, Vec<String>) {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut test_mods = Vec::new();
    let mut rest = code;
    while let Some(k) = rest.find(ATTR) {
        out.push_str(&rest[..k]);
        let item = &rest[k + ATTR.len()..];
        let trimmed = item.trim_start();
        if let Some(name) = trimmed
            .strip_prefix("mod ")
            .or_else(|| trimmed.strip_prefix("pub(crate) mod "))
            .and_then(|m| m.split_once(';'))
            .map(|(n, _)| n.trim())
            .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
        {
            test_mods.push(name.to_string());
        }
        // Skip the item: to its `;` or the end of its first balanced block.
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, test_mods)
}

/// Every path the code names that starts with `crate::`, `super::` or `self::`, with `use`
/// groups expanded (`use crate::{a::B, c}` gives `crate::a::B` and `crate::c`).
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .find(|s| starts_with(&chars, i, s))
            .filter(|_| i == 0 || !is_ident(chars[i - 1]) && chars[i - 1] != ':');
        let Some(start) = starts else {
            i += 1;
            continue;
        };
        let head = start.trim_end_matches("::").to_string();
        let (paths, next) = parse_tree(&chars, i + start.len(), vec![head]);
        out.extend(paths);
        i = next.max(i + 1);
    }
    out
}

fn starts_with(chars: &[char], i: usize, s: &str) -> bool {
    s.chars()
        .enumerate()
        .all(|(k, c)| chars.get(i + k) == Some(&c))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Parses a path tail (`a::b::{c, d::e}`) after `prefix`; returns the full paths and the
/// index after it.
fn parse_tree(chars: &[char], mut i: usize, prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let mut path = prefix;
    loop {
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        if chars.get(i) == Some(&'{') {
            let mut out = Vec::new();
            i += 1;
            loop {
                while chars.get(i).is_some_and(|c| c.is_whitespace() || *c == ',') {
                    i += 1;
                }
                match chars.get(i) {
                    None => return (out, i),
                    Some('}') => return (out, i + 1),
                    _ => {}
                }
                let (sub, next) = parse_tree(chars, i, path.clone());
                out.extend(sub);
                // Skip an `as name` and anything else up to the next item.
                i = next;
                while chars.get(i).is_some_and(|c| *c != ',' && *c != '}') {
                    i += 1;
                }
            }
        }
        let s = i;
        while chars.get(i).is_some_and(|c| is_ident(*c) || *c == '*') {
            i += 1;
        }
        if i == s {
            return (vec![path], i);
        }
        path.push(chars[s..i].iter().collect());
        if starts_with(chars, i, "::") {
            i += 2;
        } else {
            return (vec![path], i);
        }
    }
}

/// The file a path names: the longest prefix of it that is a module of the crate.
fn resolve<'a>(
    from: &[String],
    is_mod_file: bool,
    path: &[String],
    modules: &'a BTreeMap<Vec<String>, PathBuf>,
) -> Option<&'a PathBuf> {
    // The module the path is relative to: for `super` in `a/b.rs` that is `a`; in
    // `a/b/mod.rs` (module a::b) it is `a` as well.
    let mut base: Vec<String> = match path[0].as_str() {
        "crate" => Vec::new(),
        "self" => from.to_vec(),
        _ => from.to_vec(),
    };
    let mut rest = &path[1..];
    if path[0] == "super" {
        base.pop();
        while rest.first().map(String::as_str) == Some("super") {
            base.pop();
            rest = &rest[1..];
        }
    }
    let _ = is_mod_file;
    let mut best = None;
    let mut m = base.clone();
    if modules.contains_key(&m) {
        best = modules.get(&m);
    }
    for seg in rest {
        m.push(seg.clone());
        match modules.get(&m) {
            Some(f) => best = Some(f),
            None => break,
        }
    }
    best
}

struct Graph {
    /// file -> files it imports
    edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
    /// file -> its module path
    paths: BTreeMap<PathBuf, Vec<String>>,
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let by_path: BTreeMap<Vec<String>, PathBuf> = mods
        .iter()
        .map(|m| (m.path.clone(), m.file.clone()))
        .collect();
    let mut code = BTreeMap::new();
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    for m in &mods {
        let (c, test_mods) = without_tests(&code_only(&fs::read_to_string(&m.file).unwrap()));
        for name in test_mods {
            let mut p = m.path.clone();
            p.push(name);
            test_only.insert(p);
        }
        code.insert(m.file.clone(), c);
    }
    // Test-only files (and their children) are tests, not layers.
    let mods: Vec<Module> = mods
        .into_iter()
        .filter(|m| !test_only.iter().any(|t| m.path.starts_with(t)))
        .collect();
    let mut edges = BTreeMap::new();
    let mut paths = BTreeMap::new();
    for m in &mods {
        let is_mod_file = m.file.file_name().unwrap() == "mod.rs" || m.path.is_empty();
        let mut to = BTreeSet::new();
        for p in named_paths(&code[&m.file]) {
            if let Some(f) = resolve(&m.path, is_mod_file, &p, &by_path) {
                let Some(target) = mods.iter().find(|x| &x.file == f).map(|x| &x.path) else {
                    continue; // a test-only file
                };
                // A module naming its own descendants (declaring, re-exporting) is not an
                // import; nor is a file naming itself.
                if f == &m.file || (target.len() > m.path.len() && target.starts_with(&m.path)) {
                    continue;
                }
                to.insert(f.clone());
            }
        }
        edges.insert(m.file.clone(), to);
        paths.insert(m.file.clone(), m.path.clone());
    }
    Graph { edges, paths }
}

fn short(p: &Path) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    p.strip_prefix(&src).unwrap_or(p).display().to_string()
}

#[test]
fn the_scan_finds_known_arrows() {
    // Arrows that must exist while the crate has this shape: if the scan misread the code,
    // these would go missing and the two tests below could pass on an empty graph.
    let g = graph();
    let has = |from: &str, to: &str| {
        g.edges
            .iter()
            .find(|(f, _)| short(f) == from)
            .is_some_and(|(_, t)| t.iter().any(|x| short(x) == to))
    };
    assert!(
        has("decode.rs", "format/mod.rs"),
        "use crate::format::{{..}}"
    );
    assert!(
        has("format/container.rs", "limits.rs"),
        "use crate::limits::Limits"
    );
    assert!(has("shard/reader.rs", "error.rs"), "crate::error in code");
    assert!(
        has("compact/encode.rs", "compact/huffman.rs"),
        "use super::huffman"
    );
    assert!(g.edges.len() > 60, "{} files found", g.edges.len());
    let arrows: usize = g.edges.values().map(BTreeSet::len).sum();
    assert!(arrows > 200, "{arrows} arrows found");
}

#[test]
fn every_import_points_down_the_layers() {
    let g = graph();
    let mut up = Vec::new();
    for (from, tos) in &g.edges {
        let Some(lf) = g.paths[from].first().and_then(|t| layer_of(t)) else {
            continue; // lib.rs
        };
        for to in tos {
            let Some(top) = g.paths[to].first() else {
                continue;
            };
            let lt = layer_of(top).unwrap_or_else(|| {
                panic!("src/{}: a top-level module missing from LAYERS", short(to))
            });
            if lt > lf {
                up.push(format!("{} -> {}", short(from), short(to)));
            }
        }
    }
    for top in fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).unwrap() {
        let name = top
            .unwrap()
            .file_name()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if name != "lib" {
            assert!(
                layer_of(&name).is_some(),
                "src/{name}: a top-level module missing from LAYERS"
            );
        }
    }
    assert!(up.is_empty(), "imports up the layers:\n{}", up.join("\n"));
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let g = graph();
    // Tarjan's strongly connected components, iteratively small enough to recurse here.
    let files: Vec<&PathBuf> = g.edges.keys().collect();
    let index_of: BTreeMap<&PathBuf, usize> =
        files.iter().enumerate().map(|(i, f)| (*f, i)).collect();
    let n = files.len();
    let adj: Vec<Vec<usize>> = files
        .iter()
        .map(|f| {
            g.edges[*f]
                .iter()
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();
    struct T<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        sccs: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for k in 0..t.adj[v].len() {
            let w = t.adj[v][k];
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                t.sccs.push(scc);
            }
        }
    }
    let mut t = T {
        adj: &adj,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        sccs: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    let circles: Vec<String> = t
        .sccs
        .iter()
        .map(|scc| {
            let mut names: Vec<String> = scc.iter().map(|&i| short(files[i])).collect();
            names.sort();
            names.join(", ")
        })
        .collect();
    assert!(
        circles.is_empty(),
        "files in a circle of imports:\n{}",
        circles.join("\n")
    );
}

#[test]
fn path_scanner_reads_groups_and_skips_comments() {
    let code = code_only(
        "use crate::{a::B, c::{d, e as f}};\n// crate::zz::Y\nlet s = \"crate::q\"; super::w::V;",
    );
    let paths: Vec<String> = named_paths(&code).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        ["crate::a::B", "crate::c::d", "crate::c::e", "super::w::V"]
    );
}
