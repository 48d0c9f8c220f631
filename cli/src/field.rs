//! `l3 encode-field` and `l3 decode-field`: float32 arrays (raw `.f32` with a JSON sidecar,
//! or `.npy`) to error-bounded field files (`.l3f`, `l3::field`) and back.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::fsio;

/// Largest `.npy` header accepted.
const MAX_NPY_HEADER: usize = 1 << 16;

#[derive(Args)]
pub struct EncodeFieldArgs {
    /// A float32 array: `NAME.f32` (raw little-endian, C order) with `NAME.json` beside it
    /// (`{"shape": [..], "fill_value": number or null}`), or `NAME.npy` (`<f4`, C order).
    pub input: PathBuf,
    /// Output file (default: the input with the extension `.l3f`).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Absolute bound: every decoded value within this of the original.
    #[arg(
        long,
        conflicts_with = "relative",
        required_unless_present = "relative"
    )]
    pub max_error: Option<f64>,
    /// Bound as a fraction of the value range (max - min of the finite, non-fill values).
    #[arg(long)]
    pub relative: Option<f64>,
    /// Fill value kept exactly (default: the sidecar's `fill_value`, if any).
    #[arg(long)]
    pub fill_value: Option<f32>,
    /// Profile of the bin image.
    #[arg(long, value_enum, default_value_t = crate::ProfileArg::Compact)]
    pub profile: crate::ProfileArg,
}

#[derive(Args)]
pub struct DecodeFieldArgs {
    /// A field file (`.l3f`).
    pub input: PathBuf,
    /// Output: `.npy`, or `.f32` (raw, with a `.json` sidecar giving the shape).
    #[arg(short, long)]
    pub output: PathBuf,
}

/// A float32 array read from disk: values (C order), shape, the sidecar's fill value.
struct Array {
    values: Vec<f32>,
    shape: Vec<u32>,
    fill: Option<f32>,
}

fn shape_len(shape: &[u32]) -> Result<usize> {
    if !(2..=3).contains(&shape.len()) || shape.contains(&0) {
        bail!("a field has 2 or 3 non-zero dimensions, got shape {shape:?}");
    }
    Ok(shape.iter().map(|&d| d as u64).product::<u64>() as usize)
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Reads a `.npy` file: version 1-3 header, `'<f4'`, C order, 2 or 3 dimensions.
fn read_npy(path: &Path, limit: u64) -> Result<Array> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        bail!("not a .npy file (bad magic)");
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => bail!(".npy version {v} is not supported"),
    };
    if header_len > MAX_NPY_HEADER || start + header_len > bytes.len() {
        bail!(".npy header of {header_len} bytes does not fit the file");
    }
    let header = std::str::from_utf8(&bytes[start..start + header_len])
        .context(".npy header is not text")?;
    let field = |key: &str| -> Result<&str> {
        let at = header
            .find(&format!("'{key}'"))
            .with_context(|| format!(".npy header has no '{key}'"))?;
        Ok(header[at + key.len() + 2..].trim_start_matches([':', ' ']))
    };
    if !field("descr")?.starts_with("'<f4'") {
        bail!(".npy dtype must be '<f4' (little-endian float32)");
    }
    if !field("fortran_order")?.starts_with("False") {
        bail!(".npy array must be in C order");
    }
    let shape_text = field("shape")?;
    let close = shape_text.find(')').context(".npy shape is not a tuple")?;
    let shape: Vec<u32> = shape_text[1..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().context(".npy shape entry is not a number"))
        .collect::<Result<_>>()?;
    let n = shape_len(&shape)?;
    let data = &bytes[start + header_len..];
    if (n as u64) * 4 > limit || data.len() != n * 4 {
        bail!(
            ".npy data is {} bytes, the shape {shape:?} needs {}",
            data.len(),
            n * 4
        );
    }
    Ok(Array {
        values: floats(data),
        shape,
        fill: None,
    })
}

/// Reads a raw `.f32` file and its `.json` sidecar.
fn read_raw(path: &Path, limit: u64) -> Result<Array> {
    let sidecar = path.with_extension("json");
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&sidecar).with_context(|| format!("reading {}", sidecar.display()))?,
    )
    .with_context(|| format!("{}: not JSON", sidecar.display()))?;
    let shape: Vec<u32> = meta["shape"]
        .as_array()
        .with_context(|| format!("{}: no \"shape\" list", sidecar.display()))?
        .iter()
        .map(|d| {
            d.as_u64()
                .and_then(|d| u32::try_from(d).ok())
                .context("shape entries must be integers below 2^32")
        })
        .collect::<Result<_>>()?;
    let n = shape_len(&shape)?;
    let len = std::fs::metadata(path)?.len();
    if len > limit || len != n as u64 * 4 {
        bail!(
            "{} is {len} bytes, the shape {shape:?} needs {}",
            path.display(),
            n * 4
        );
    }
    let bytes = std::fs::read(path)?;
    Ok(Array {
        values: floats(&bytes),
        shape,
        fill: meta["fill_value"].as_f64().map(|f| f as f32),
    })
}

pub fn cmd_encode_field(a: EncodeFieldArgs) -> Result<u64> {
    let limit = crate::limits().max_output_bytes;
    let ext = a.input.extension().and_then(|e| e.to_str()).unwrap_or("");
    let array = match ext {
        "npy" => read_npy(&a.input, limit),
        "f32" | "raw" => read_raw(&a.input, limit),
        _ => bail!(
            "{}: expected a .f32 (+ .json) or .npy file",
            a.input.display()
        ),
    }
    .with_context(|| a.input.display().to_string())?;
    let bound = match (a.max_error, a.relative) {
        (Some(e), _) => l3::field::Bound::Absolute(e),
        (None, Some(r)) => l3::field::Bound::Relative(r),
        (None, None) => bail!("give --max-error or --relative"),
    };
    let mut options = l3::field::FieldOptions::new(bound);
    options.fill_value = a.fill_value.or(array.fill);
    options.image = l3::EncodeOptions::for_profile(match a.profile {
        crate::ProfileArg::Fast => l3::Profile::Fast,
        crate::ProfileArg::Compact => l3::Profile::Compact,
    });
    let file = l3::field::encode_field(&array.values, &array.shape, &options)?;
    // Verified before anything is written: the bound, and NaN / fill exactly.
    let (h, back) = l3::field::decode_field(&file, &crate::decode_options())?;
    let fill_bits = options.fill_value.map(f32::to_bits);
    let mut worst = 0f64;
    for (&x, &y) in array.values.iter().zip(&back) {
        if !x.is_finite() || Some(x.to_bits()) == fill_bits {
            if x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan()) {
                bail!("verification failed: a NaN, infinity or fill value changed (encoder bug)");
            }
        } else {
            worst = worst.max((x as f64 - y as f64).abs());
        }
    }
    if worst > h.bound {
        bail!(
            "verification failed: error {worst} over the bound {} (encoder bug)",
            h.bound
        );
    }
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| a.input.with_extension("l3f"));
    fsio::write_atomic(&out, &file)?;
    println!(
        "{} -> {}: {} values, {} -> {} bytes ({:.2}x), bound {:.4e}, max error {:.4e}, {} exact runs",
        a.input.display(),
        out.display(),
        array.values.len(),
        array.values.len() * 4,
        file.len(),
        (array.values.len() * 4) as f64 / file.len() as f64,
        h.bound,
        worst,
        h.runs
    );
    Ok(0)
}

pub fn cmd_decode_field(a: DecodeFieldArgs) -> Result<u64> {
    let data = std::fs::read(&a.input).with_context(|| format!("reading {}", a.input.display()))?;
    let (h, values) = l3::field::decode_field(&data, &crate::decode_options())
        .with_context(|| a.input.display().to_string())?;
    let shape = h.dims();
    let body: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    match a.output.extension().and_then(|e| e.to_str()) {
        Some("npy") => {
            let dims: Vec<String> = shape.iter().map(u32::to_string).collect();
            let mut header = format!(
                "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
                dims.join(", ")
            );
            // Pad so the data starts on a 64-byte boundary, ending with a newline.
            while (10 + header.len() + 1) % 64 != 0 {
                header.push(' ');
            }
            header.push('\n');
            let mut out = b"\x93NUMPY\x01\x00".to_vec();
            out.extend_from_slice(&(header.len() as u16).to_le_bytes());
            out.extend_from_slice(header.as_bytes());
            out.extend_from_slice(&body);
            fsio::write_atomic(&a.output, &out)?;
        }
        Some("f32") | Some("raw") => {
            let meta = serde_json::json!({
                "shape": shape,
                "dtype": "float32",
                "byte_order": "little",
                "order": "C",
                "fill_value": h.fill_value,
                "max_error": h.bound,
            });
            fsio::write_atomic(&a.output, &body)?;
            fsio::write_atomic(
                &a.output.with_extension("json"),
                serde_json::to_string_pretty(&meta)?.as_bytes(),
            )?;
        }
        _ => bail!("{}: the output must be .npy or .f32", a.output.display()),
    }
    println!(
        "{} -> {}: shape {shape:?}, within {:.4e} of the original",
        a.input.display(),
        a.output.display(),
        h.bound
    );
    Ok(0)
}
