//! The array inputs of `l3 encode-field` as bytes in, checked values out: `.npy` files and
//! the `.json` sidecars of raw `.f32` files, and `l3 pack --labels`. No file access here, so the fuzz target
//! `cli_inputs` runs exactly this code.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Deepest bracket nesting accepted in a `.npy` header (a float32 array's is 2: the dict
/// and its shape tuple).
pub const MAX_NPY_NESTING: usize = 3;

/// Largest `.npy` header accepted (NumPy writes well under a kilobyte).
pub const MAX_NPY_HEADER: usize = 1 << 16;

/// Largest `.json` sidecar accepted.
pub const MAX_SIDECAR_BYTES: u64 = 1 << 16;

/// A float32 array read from disk: values (C order), shape, the sidecar's fill value.
pub struct Array {
    /// The values, C order.
    pub values: Vec<f32>,
    /// The dimensions, outermost first.
    pub shape: Vec<u32>,
    /// The sidecar's fill value.
    pub fill: Option<f32>,
}

/// The number of values of a field's shape: 1 to 4 non-zero dimensions (version 1 fields
/// take 2 or 3, which its encoder checks), the product checked.
pub fn shape_len(shape: &[u32]) -> Result<usize> {
    if !(1..=4).contains(&shape.len()) || shape.contains(&0) {
        bail!("a field has 1 to 4 non-zero dimensions, got shape {shape:?}");
    }
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
        .with_context(|| format!("shape {shape:?} has more values than memory can address"))
}

/// The data bytes a shape needs (4 per value), checked against the bytes present.
fn check_data_len(shape: &[u32], present: u64, what: &str) -> Result<usize> {
    let n = shape_len(shape)?;
    let need = (n as u64).checked_mul(4);
    if need != Some(present) {
        bail!(
            "{what} is {present} bytes, the shape {shape:?} needs {}",
            need.map_or("more than 2^64".into(), |b| b.to_string())
        );
    }
    Ok(n)
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Parses the bytes of a `.npy` file: the header by `ndarray-npy` (version 1-3, `'<f4'`, C
/// order, 1 to 4 dimensions), the data checked against the shape before any value is
/// converted.
pub fn parse_npy(bytes: &[u8]) -> Result<Array> {
    use ndarray_npy::npy::header::{Header, Layout};
    // The preamble (magic, version, header length) is checked here so that the parser never
    // sizes a buffer from a header length the file does not hold.
    if !bytes.starts_with(b"\x93NUMPY") {
        bail!("not a .npy file (bad magic)");
    }
    let (start, header_len) = match (bytes.get(6), bytes.get(8..12)) {
        (Some(1), Some(n)) => (10, u16::from_le_bytes([n[0], n[1]]) as usize),
        (Some(2 | 3), Some(n)) => (12, u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as usize),
        (Some(v @ 4..), _) | (Some(v @ 0), _) => bail!(".npy version {v} is not supported"),
        _ => bail!(
            ".npy file of {} bytes ends inside its preamble",
            bytes.len()
        ),
    };
    if header_len > MAX_NPY_HEADER || header_len > bytes.len() - start {
        bail!(
            ".npy header of {header_len} bytes does not fit the file ({} bytes)",
            bytes.len()
        );
    }
    // The header parser backtracks: each level of nested brackets multiplies its work, so
    // 30 levels in a 118-byte header never finish (found by fuzzing). A float32 array's
    // header is a dict holding one tuple; deeper nesting is refused before parsing.
    let mut depth = 0usize;
    for &b in &bytes[start..start + header_len] {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_NPY_NESTING {
            bail!(".npy header nests brackets more than {MAX_NPY_NESTING} deep");
        }
    }
    let mut rest = bytes;
    let header = Header::from_reader(&mut rest).map_err(|e| {
        // The parser's message quotes the whole header line; keep its first and last lines.
        let text = e.to_string();
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let first = lines.next().unwrap_or_default().to_string();
        match lines.next_back() {
            Some(last) => anyhow!(".npy header: {first} {}", last.trim_start_matches("= ")),
            None => anyhow!(".npy header: {first}"),
        }
    })?;
    if header.type_descriptor.as_string().map(|d| d.as_str()) != Some("<f4") {
        bail!(
            ".npy dtype must be '<f4' (little-endian float32), got {}",
            header.type_descriptor
        );
    }
    if header.layout != Layout::Standard {
        bail!(".npy array must be in C order");
    }
    let shape: Vec<u32> = header
        .shape
        .iter()
        .map(|&d| u32::try_from(d).map_err(|_| anyhow!(".npy shape entry {d} is 2^32 or more")))
        .collect::<Result<_>>()?;
    check_data_len(&shape, rest.len() as u64, ".npy data")?;
    Ok(Array {
        values: floats(rest),
        shape,
        fill: None,
    })
}

/// The `.json` sidecar of a raw `.f32` array (`l3 decode-field` writes every field; a user's
/// needs only `shape`). Unknown fields are refused, so a misspelt one is never ignored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    /// Dimensions, outermost first.
    pub shape: Vec<u32>,
    /// The value kept exactly, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill_value: Option<f32>,
    /// `"float32"` if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// `"little"` if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_order: Option<String>,
    /// `"C"` if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    /// The bound the data was decoded within (information only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_error: Option<f64>,
    /// The data file's length, checked if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The data file's CRC-32, checked if given: a sidecar left from other data is caught.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc32: Option<u32>,
}

/// Parses a `.json` sidecar (named `sidecar` in errors) and checks its fields.
pub fn parse_sidecar(text: &[u8], sidecar: &Path) -> Result<Sidecar> {
    let meta: Sidecar = serde_json::from_slice(text)
        .with_context(|| format!("{}: not a valid sidecar", sidecar.display()))?;
    let bad =
        |field: &str, want: &str| anyhow!("{}: \"{field}\" must be {want}", sidecar.display());
    if meta.dtype.as_deref().is_some_and(|d| d != "float32") {
        return Err(bad("dtype", "\"float32\""));
    }
    if meta.byte_order.as_deref().is_some_and(|d| d != "little") {
        return Err(bad("byte_order", "\"little\""));
    }
    if meta.order.as_deref().is_some_and(|d| d != "C") {
        return Err(bad("order", "\"C\""));
    }
    shape_len(&meta.shape).with_context(|| format!("{}: \"shape\"", sidecar.display()))?;
    Ok(meta)
}

/// The values of raw `.f32` data (`path` in errors) described by `meta`, a parsed sidecar
/// (named `sidecar`): length, CRC-32 and shape checked before any value is converted.
pub fn raw_array(bytes: &[u8], path: &Path, meta: Sidecar, sidecar: &Path) -> Result<Array> {
    let len = bytes.len() as u64;
    if meta.bytes.is_some_and(|b| b != len) {
        bail!(
            "{} is {len} bytes, its sidecar {} says {} (a sidecar of other data?)",
            path.display(),
            sidecar.display(),
            meta.bytes.unwrap_or_default()
        );
    }
    if meta.crc32.is_some_and(|c| c != crc32fast::hash(bytes)) {
        bail!(
            "{}: CRC-32 differs from its sidecar {} (a sidecar of other data?)",
            path.display(),
            sidecar.display()
        );
    }
    check_data_len(&meta.shape, len, &path.display().to_string())?;
    Ok(Array {
        values: floats(bytes),
        shape: meta.shape,
        fill: meta.fill_value,
    })
}

/// A label and metadata per image key, from `--labels`.
pub type LabelFile = std::collections::HashMap<String, (String, Vec<u8>)>;

/// Parses a `--labels` file's text (`path` in errors): CSV `path,label` lines (an optional
/// `path,label` header) or, with `jsonl`, one `{"path", "label", "meta"}` object per line.
/// Every line must parse and every listed path must be among `keys`; a path listed twice is
/// an error.
pub fn parse_labels(
    text: &str,
    jsonl: bool,
    keys: &std::collections::BTreeSet<String>,
    path: &Path,
) -> Result<LabelFile> {
    let mut labels = LabelFile::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let at = || format!("{}:{}", path.display(), n + 1);
        if line.is_empty() || (!jsonl && n == 0 && line == "path,label") {
            continue;
        }
        let (key, label, meta) = if jsonl {
            let v: serde_json::Value =
                serde_json::from_str(line).with_context(|| format!("{}: not JSON", at()))?;
            let key = v["path"]
                .as_str()
                .with_context(|| format!("{}: no string \"path\"", at()))?
                .to_owned();
            let label = match &v["label"] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(x) => x.to_string(),
                _ => bail!("{}: \"label\" must be a string or a number", at()),
            };
            let meta = match v.get("meta") {
                Some(m) => serde_json::to_vec(m)?,
                None => Vec::new(),
            };
            (key, label, meta)
        } else {
            let (key, label) = line
                .rsplit_once(',')
                .with_context(|| format!("{}: expected path,label", at()))?;
            (key.trim().to_owned(), label.trim().to_owned(), Vec::new())
        };
        if !keys.contains(&key) {
            bail!("{}: {key:?} is not an image under the source folder", at());
        }
        if labels.insert(key.clone(), (label, meta)).is_some() {
            bail!("{}: {key:?} is listed twice", at());
        }
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.npy` file: the version 1 preamble, then `dict` padded as NumPy pads it.
    fn npy(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut header = dict.to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend((header.len() as u16).to_le_bytes());
        v.extend(header.as_bytes());
        v.extend(data);
        v
    }

    #[test]
    fn deeply_nested_npy_headers_are_refused_before_parsing() {
        let good = npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }",
            &[0; 8],
        );
        assert_eq!(parse_npy(&good).unwrap().shape, vec![1, 2]);
        // The fuzzer's input: 30 brackets deep, which the header parser never finished.
        let nested = format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': {}(1, 2){}}}",
            "[".repeat(30),
            "]".repeat(30)
        );
        match parse_npy(&npy(&nested, &[0; 8])) {
            Err(e) => assert!(e.to_string().contains("nests"), "{e}"),
            Ok(a) => panic!("accepted shape {:?}", a.shape),
        }
    }
}
