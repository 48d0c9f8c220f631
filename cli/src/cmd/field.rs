//! `l3 encode-field` and `l3 decode-field`: float32 arrays (raw `.f32` with a JSON sidecar,
//! or `.npy`) to error-bounded field files (`.l3f`, `l3::field`: version 1 of 2 or 3 axes,
//! version 3 of 1 to 4 axes) and back; with `--lossless`, float32, float16 or bfloat16 arrays
//! of 1 to 4 axes stored bit for bit (field version 2).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::flags::ProfileArg;
use crate::fsio;
use crate::inputs::{self, Array, Sidecar, MAX_SIDECAR_BYTES};
use crate::limits::{decode_options, limits};
use crate::resume;

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
        conflicts_with_all = ["relative", "lossless"],
        required_unless_present_any = ["relative", "lossless"]
    )]
    pub max_error: Option<f64>,
    /// Bound as a fraction of the value range (max - min of the finite, non-fill values).
    #[arg(long, conflicts_with = "lossless")]
    pub relative: Option<f64>,
    /// Store every value bit for bit (field version 2): 1 to 4 axes, float32, float16 or
    /// bfloat16 (`--dtype`, or the sidecar's "dtype"), NaN payloads and -0.0 included.
    #[arg(long)]
    pub lossless: bool,
    /// Element type of a raw lossless input (default: the sidecar's "dtype", else f32).
    #[arg(long, value_enum, requires = "lossless")]
    pub dtype: Option<DtypeArg>,
    /// Fill value kept exactly (default: the sidecar's `fill_value`, if any).
    #[arg(long)]
    pub fill_value: Option<f32>,
    /// Error-bounded format: v3 (1 to 4 axes, lattice interpolation or differences along the
    /// array's own axes; the smaller file) or v1 (2 or 3 axes, the bins as an L3 image;
    /// decodes faster on the CPU); both decode on the CPU and the GPU.
    #[arg(long, value_enum, conflicts_with = "lossless", default_value_t = FieldFormatArg::V3)]
    pub format: FieldFormatArg,
    /// Profile of the bin image (version 1 only; default: compact).
    #[arg(long, value_enum)]
    pub profile: Option<ProfileArg>,
    /// Encode even if the output is up to date, and replace an existing output that is not a
    /// field file. Without it an output is skipped when its resume record (a hidden
    /// `.NAME.l3f.l3-resume` beside it) shows the same l3 version, options and input files
    /// (name, length, modification time); otherwise it is encoded again and replaced.
    #[arg(long)]
    pub force: bool,
}

/// Error-bounded field format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FieldFormatArg {
    /// Version 1: 2 or 3 axes, bins as an L3 image.
    V1,
    /// Version 3: 1 to 4 axes, lattice interpolation or differences.
    V3,
}

/// Element type of a raw lossless input.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum DtypeArg {
    /// float32.
    F32,
    /// float16 (IEEE binary16).
    F16,
    /// bfloat16.
    Bf16,
}

impl DtypeArg {
    fn float_type(self) -> l3::field::FloatType {
        match self {
            DtypeArg::F32 => l3::field::FloatType::F32,
            DtypeArg::F16 => l3::field::FloatType::F16,
            DtypeArg::Bf16 => l3::field::FloatType::BF16,
        }
    }
}

#[derive(Args)]
pub struct DecodeFieldArgs {
    /// A field file (`.l3f`).
    pub input: PathBuf,
    /// Output: `.npy`, or `.f32` (raw, with a `.json` sidecar giving the shape).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Replace existing output files (by default an existing output, or sidecar, is an error).
    #[arg(long)]
    pub force: bool,
}

/// Reads a `.npy` file within `limit` bytes ([`inputs::parse_npy`]).
fn read_npy(path: &Path, limit: u64) -> Result<Array> {
    inputs::parse_npy(&fsio::read_limited(path, limit)?)
}

/// Reads a raw `.f32` file and its `.json` sidecar, within `limit` bytes.
fn read_raw(path: &Path, limit: u64) -> Result<Array> {
    let sidecar = path.with_extension("json");
    let text = fsio::read_limited(&sidecar, MAX_SIDECAR_BYTES)
        .with_context(|| format!("the sidecar {} (shape)", sidecar.display()))?;
    let meta = inputs::parse_sidecar(&text, &sidecar)?;
    let bytes = fsio::read_limited(path, limit)?;
    inputs::raw_array(&bytes, path, meta, &sidecar)
}

/// The limit on an array file: its values are the field's decoded size (`--max-output-bytes`)
/// and the file is an input (`--max-input-bytes`).
fn array_limit() -> u64 {
    let l = limits();
    l.max_input_bytes.min(l.max_output_bytes)
}

/// `l3 encode-field`; every error names the input.
pub fn cmd_encode_field(a: EncodeFieldArgs) -> Result<u64> {
    let input = a.input.clone();
    encode_field(a).with_context(|| input.display().to_string())
}

fn encode_field(a: EncodeFieldArgs) -> Result<u64> {
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| a.input.with_extension("l3f"));
    if a.lossless {
        return encode_lossless(&a, &out);
    }
    let bound = match (a.max_error, a.relative) {
        (Some(e), _) => l3::field::Bound::Absolute(e),
        (None, Some(r)) => l3::field::Bound::Relative(r),
        (None, None) => bail!("give --max-error or --relative"),
    };
    if let Some(e) = a
        .max_error
        .or(a.relative)
        .filter(|e| !(e.is_finite() && *e > 0.0))
    {
        bail!("the bound (--max-error or --relative) must be a finite number above 0, got {e}");
    }
    if a.profile.is_some() && a.format != FieldFormatArg::V1 {
        bail!("--profile is for --format v1 (the bins as an L3 image); the default is v3");
    }
    let profile = a.profile.unwrap_or(ProfileArg::Compact);
    let ext = a.input.extension().and_then(|e| e.to_str()).unwrap_or("");
    let sources: Vec<PathBuf> = match ext {
        "npy" => vec![a.input.clone()],
        "f32" | "raw" => vec![a.input.clone(), a.input.with_extension("json")],
        _ => bail!("expected a .f32 (+ .json) or .npy file"),
    };
    // Everything that changes the output's bytes (the sidecar's fill value is in its stamp).
    let key = format!(
        "field bound={bound:?} fill={:?} profile={} format={:?}",
        a.fill_value.map(f32::to_bits),
        profile.name(),
        a.format
    );
    let stamps = sources
        .iter()
        .map(|p| resume::Stamp::of(p))
        .collect::<Result<Vec<_>>>()?;
    if !a.force && resume::is_up_to_date(&stamps, &out, &key) {
        println!("{}: up to date, skipped", a.input.display());
        return Ok(0);
    }
    fsio::check_replace(&out, &l3::field::FIELD_MAGIC, a.force)?;
    let array = match ext {
        "npy" => read_npy(&a.input, array_limit()),
        _ => read_raw(&a.input, array_limit()),
    }?;
    let fill = a.fill_value.or(array.fill);
    let file = if a.format == FieldFormatArg::V3 {
        let options = l3::field::BoundedOptions {
            fill_value: fill,
            ..l3::field::BoundedOptions::new(bound)
        };
        l3::field::encode_bounded(&array.values, &array.shape, &options)?
    } else {
        let mut options = l3::field::FieldOptions::new(bound);
        options.fill_value = fill;
        options.image = l3::EncodeOptions::for_profile(profile.profile());
        l3::field::encode_field(&array.values, &array.shape, &options)?
    };
    // A bound too fine for the bins: the encoders store the array exactly (version 2).
    let version = l3::field::field_version(&file).unwrap_or(0);
    let (stated, runs, back) = match version {
        l3::field::LOSSLESS_VERSION => {
            let (h, back) = l3::field::decode_lossless(&file, &decode_options())?;
            let l3::field::FloatVec::F32(back) = back else {
                bail!("verification failed: the lossless file is not float32 (encoder bug)");
            };
            if back
                .iter()
                .zip(&array.values)
                .any(|(a, b)| a.to_bits() != b.to_bits())
            {
                bail!("verification failed: the exact file differs (encoder bug)");
            }
            (0.0, h.runs, back)
        }
        l3::field::BOUNDED_VERSION => {
            let (h, back) = l3::field::decode_bounded(&file, &decode_options())?;
            (h.bound, h.runs, back)
        }
        _ => {
            let (h, back) = l3::field::decode_field(&file, &decode_options())?;
            (h.bound, h.runs, back)
        }
    };
    // Verified before anything is written: the bound, and NaN / fill exactly.
    let fill_bits = fill.map(f32::to_bits);
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
    if worst > stated {
        bail!("verification failed: error {worst} over the bound {stated} (encoder bug)");
    }
    resume::forget_output(&out)?;
    fsio::write_atomic(&out, &file)?;
    if let Err(e) = resume::record_output(stamps, &out, &key) {
        eprintln!(
            "warning: {}: no resume record ({e:#}); a rerun encodes it again",
            out.display()
        );
    }
    println!(
        "{} -> {}: {} values, {} -> {} bytes ({:.2}x), version {}, bound {:.4e}, max error {:.4e}, {} exact runs",
        a.input.display(),
        out.display(),
        array.values.len(),
        array.values.len() * 4,
        file.len(),
        (array.values.len() * 4) as f64 / file.len() as f64,
        version,
        stated,
        worst,
        runs
    );
    Ok(0)
}

/// A raw lossless input: the element bits and the sidecar's shape, dtype and fill value.
struct LosslessInput {
    bits: Vec<u32>,
    shape: Vec<u32>,
    dtype: l3::field::FloatType,
    fill: Option<u32>,
}

/// Reads a raw array (`.f32`/`.raw` + `.json`: "shape" of 1 to 4 axes, optional "dtype"
/// float32/float16/bfloat16 and "fill_value") or a float32 `.npy`.
fn read_lossless(a: &EncodeFieldArgs) -> Result<LosslessInput> {
    use l3::field::FloatType;
    let ext = a.input.extension().and_then(|e| e.to_str()).unwrap_or("");
    if ext == "npy" {
        let arr = read_npy(&a.input, array_limit())?;
        return Ok(LosslessInput {
            bits: arr.values.iter().map(|v| v.to_bits()).collect(),
            shape: arr.shape,
            dtype: FloatType::F32,
            fill: arr.fill.map(f32::to_bits),
        });
    }
    if ext != "f32" && ext != "raw" {
        bail!("expected a .f32/.raw (+ .json) or .npy file");
    }
    let sidecar = a.input.with_extension("json");
    let text = fsio::read_limited(&sidecar, MAX_SIDECAR_BYTES)
        .with_context(|| format!("the sidecar {} (shape)", sidecar.display()))?;
    let meta: serde_json::Value = serde_json::from_slice(&text)
        .with_context(|| format!("{}: not a valid sidecar", sidecar.display()))?;
    let shape: Vec<u32> = meta["shape"]
        .as_array()
        .and_then(|s| {
            s.iter()
                .map(|d| d.as_u64().and_then(|d| u32::try_from(d).ok()))
                .collect()
        })
        .with_context(|| format!("{}: \"shape\" must be a list of u32", sidecar.display()))?;
    let dtype = match (a.dtype, meta["dtype"].as_str()) {
        (Some(d), _) => d.float_type(),
        (None, None | Some("float32")) => FloatType::F32,
        (None, Some("float16")) => FloatType::F16,
        (None, Some("bfloat16")) => FloatType::BF16,
        (None, Some(d)) => bail!(
            "{}: dtype {d:?} is not float32, float16 or bfloat16",
            sidecar.display()
        ),
    };
    let bytes = fsio::read_limited(&a.input, array_limit())?;
    let n: u128 = shape.iter().map(|&d| d as u128).product();
    if shape.is_empty() || shape.len() > 4 || n * dtype.size() as u128 != bytes.len() as u128 {
        bail!(
            "{} is {} bytes; shape {shape:?} of {} needs 1 to 4 axes and {} bytes",
            a.input.display(),
            bytes.len(),
            dtype.name(),
            n * dtype.size() as u128
        );
    }
    let bits: Vec<u32> = match dtype {
        FloatType::F32 => bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect(),
        _ => bytes
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as u32)
            .collect(),
    };
    // A fill value from the sidecar is a number; in the 16-bit types it must be exact.
    let fill = match meta["fill_value"].as_f64() {
        None => None,
        Some(f) => Some(match dtype {
            FloatType::F32 => (f as f32).to_bits(),
            FloatType::BF16 if (f as f32).to_bits() & 0xffff == 0 => (f as f32).to_bits() >> 16,
            FloatType::F16 if f == 0.0 || f.is_nan() => {
                if f.is_nan() {
                    0x7e00
                } else {
                    0
                }
            }
            _ => bail!(
                "{}: a fill value in {} needs --fill-value of float32 or none",
                sidecar.display(),
                dtype.name()
            ),
        }),
    };
    Ok(LosslessInput {
        bits,
        shape,
        dtype,
        fill,
    })
}

/// `l3 encode-field --lossless`: encodes, decodes again and compares bit for bit before
/// anything is written.
fn encode_lossless(a: &EncodeFieldArgs, out: &Path) -> Result<u64> {
    use l3::field::{FloatSlice, FloatType};
    let ext = a.input.extension().and_then(|e| e.to_str()).unwrap_or("");
    let mut sources = vec![a.input.clone()];
    if ext != "npy" {
        sources.push(a.input.with_extension("json"));
    }
    let key = format!(
        "lossless fill={:?} dtype={:?}",
        a.fill_value.map(f32::to_bits),
        a.dtype.map(|d| d.float_type().name())
    );
    let stamps = sources
        .iter()
        .map(|p| resume::Stamp::of(p))
        .collect::<Result<Vec<_>>>()?;
    if !a.force && resume::is_up_to_date(&stamps, out, &key) {
        println!("{}: up to date, skipped", a.input.display());
        return Ok(0);
    }
    fsio::check_replace(out, &l3::field::FIELD_MAGIC, a.force)?;
    let input = read_lossless(a)?;
    let fill_value = match (a.fill_value, input.dtype) {
        (Some(f), FloatType::F32) => Some(f.to_bits()),
        (Some(f), FloatType::BF16) if f.to_bits() & 0xffff == 0 => Some(f.to_bits() >> 16),
        (Some(_), _) => bail!("--fill-value must be exact in {}", input.dtype.name()),
        (None, _) => input.fill,
    };
    let options = l3::field::LosslessOptions {
        fill_value,
        ..Default::default()
    };
    let v16: Vec<u16> = input.bits.iter().map(|&b| b as u16).collect();
    let v32: Vec<f32> = match input.dtype {
        FloatType::F32 => input.bits.iter().map(|&b| f32::from_bits(b)).collect(),
        _ => Vec::new(),
    };
    let values = match input.dtype {
        FloatType::F32 => FloatSlice::F32(&v32),
        FloatType::F16 => FloatSlice::F16(&v16),
        FloatType::BF16 => FloatSlice::BF16(&v16),
    };
    let file = l3::field::encode_lossless(values, &input.shape, &options)?;
    let (h, back) = l3::field::decode_lossless(&file, &decode_options())?;
    let same = match input.dtype {
        FloatType::F32 => bytemuck_eq(
            back.as_bytes(),
            &v32.iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect::<Vec<u8>>(),
        ),
        _ => bytemuck_eq(
            back.as_bytes(),
            &v16.iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect::<Vec<u8>>(),
        ),
    };
    if !same {
        bail!("verification failed: the decoded values differ (encoder bug)");
    }
    resume::forget_output(out)?;
    fsio::write_atomic(out, &file)?;
    if let Err(e) = resume::record_output(stamps, out, &key) {
        eprintln!(
            "warning: {}: no resume record ({e:#}); a rerun encodes it again",
            out.display()
        );
    }
    let raw = h.output_bytes();
    println!(
        "{} -> {}: {} {} values, {} -> {} bytes ({:.3}x), lossless, axes {:#b}, {}{} exception runs",
        a.input.display(),
        out.display(),
        h.len(),
        h.dtype.name(),
        raw,
        file.len(),
        raw as f64 / file.len() as f64,
        h.axes,
        match (h.mult_base, h.table.len()) {
            (Some(b), _) => format!("float-mult base {b}, "),
            (None, 0) => String::new(),
            (None, k) => format!("value table of {k}, "),
        },
        h.runs
    );
    Ok(0)
}

fn bytemuck_eq(a: &[u8], b: &[u8]) -> bool {
    a == b
}

/// `l3 decode-field` of a lossless file: raw little-endian values (`.f32`/`.raw` + `.json`
/// with shape and dtype), or `.npy` for float32.
fn decode_lossless(a: &DecodeFieldArgs, data: &[u8]) -> Result<u64> {
    let (h, values) = l3::field::decode_lossless(data, &decode_options())
        .with_context(|| a.input.display().to_string())?;
    let pending =
        |path: &Path,
         write: &dyn Fn(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>| {
            fsio::create_parent(path)?;
            l3::shard::PendingWrite::new(path, write)
                .with_context(|| format!("writing {}", path.display()))
        };
    match (a.output.extension().and_then(|e| e.to_str()), &values) {
        (Some("npy"), l3::field::FloatVec::F32(v)) => {
            check_free(&a.output, a.force)?;
            let dims: Vec<usize> = h.shape.iter().map(|&d| d as usize).collect();
            let view = ndarray::ArrayView::from_shape(ndarray::IxDyn(&dims), v)
                .context("array shape does not match its values (decoder bug)")?;
            let p = pending(&a.output, &|f| {
                ndarray_npy::WriteNpyExt::write_npy(&view, f).map_err(std::io::Error::other)
            })?;
            commit(p, a.force)?;
        }
        (Some("npy"), _) => bail!(
            "{}: .npy output is for float32; use .raw",
            a.output.display()
        ),
        (Some("f32") | Some("raw"), _) => {
            let sidecar = a.output.with_extension("json");
            check_free(&a.output, a.force)?;
            check_free(&sidecar, a.force)?;
            let body: Vec<u8> = match &values {
                l3::field::FloatVec::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                l3::field::FloatVec::F16(v) | l3::field::FloatVec::BF16(v) => {
                    v.iter().flat_map(|x| x.to_le_bytes()).collect()
                }
            };
            let meta = serde_json::json!({
                "shape": h.shape,
                "dtype": h.dtype.name(),
                "byte_order": "little",
                "order": "C",
                "fill_value_bits": h.fill_value,
                "bytes": body.len(),
                "crc32": crc32fast::hash(&body),
            });
            let json = serde_json::to_vec_pretty(&meta)?;
            let data_write = pending(&a.output, &|f| std::io::Write::write_all(f, &body))?;
            let sidecar_write = pending(&sidecar, &|f| std::io::Write::write_all(f, &json))?;
            commit(data_write, a.force)?;
            commit(sidecar_write, a.force)?;
        }
        _ => bail!(
            "{}: the output must be .npy or .f32/.raw",
            a.output.display()
        ),
    }
    println!(
        "{} -> {}: {} shape {:?}, lossless",
        a.input.display(),
        a.output.display(),
        h.dtype.name(),
        h.shape
    );
    Ok(0)
}

/// Fails unless `path` is free or `force` (a folder is never replaced).
fn check_free(path: &Path, force: bool) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        Ok(m) if m.is_dir() => bail!("{} is a directory", path.display()),
        Ok(_) if force => Ok(()),
        Ok(_) => bail!(
            "{} already exists (use --force to overwrite)",
            path.display()
        ),
    }
}

/// Renames a pending write into place: replacing only with `force`, else refusing an existing
/// file atomically (one created since [`check_free`] looked).
fn commit(p: l3::shard::PendingWrite, force: bool) -> Result<()> {
    let target = p.target().to_path_buf();
    match if force { p.commit() } else { p.commit_new() } {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "{} already exists (use --force to overwrite)",
            target.display()
        ),
        r => r.with_context(|| format!("writing {}", target.display())),
    }
}

pub fn cmd_decode_field(a: DecodeFieldArgs) -> Result<u64> {
    let data = fsio::read_limited(&a.input, limits().max_input_bytes)
        .with_context(|| a.input.display().to_string())?;
    if l3::field::field_version(&data) == Some(l3::field::LOSSLESS_VERSION) {
        return decode_lossless(&a, &data);
    }
    let (shape, fill_value, bound, values) =
        if l3::field::field_version(&data) == Some(l3::field::BOUNDED_VERSION) {
            let (h, values) = l3::field::decode_bounded(&data, &decode_options())
                .with_context(|| a.input.display().to_string())?;
            (h.shape, h.fill_value, h.bound, values)
        } else {
            let (h, values) = l3::field::decode_field(&data, &decode_options())
                .with_context(|| a.input.display().to_string())?;
            (h.dims().to_vec(), h.fill_value, h.bound, values)
        };
    let pending =
        |path: &Path,
         write: &dyn Fn(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>| {
            fsio::create_parent(path)?;
            l3::shard::PendingWrite::new(path, write)
                .with_context(|| format!("writing {}", path.display()))
        };
    match a.output.extension().and_then(|e| e.to_str()) {
        Some("npy") => {
            check_free(&a.output, a.force)?;
            let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            let view = ndarray::ArrayView::from_shape(ndarray::IxDyn(&dims), &values)
                .context("field shape does not match its values (decoder bug)")?;
            let p = pending(&a.output, &|f| {
                ndarray_npy::WriteNpyExt::write_npy(&view, f).map_err(std::io::Error::other)
            })?;
            commit(p, a.force)?;
        }
        Some("f32") | Some("raw") => {
            let sidecar = a.output.with_extension("json");
            check_free(&a.output, a.force)?;
            check_free(&sidecar, a.force)?;
            let body: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let meta = Sidecar {
                shape: shape.clone(),
                fill_value,
                dtype: Some("float32".into()),
                byte_order: Some("little".into()),
                order: Some("C".into()),
                max_error: Some(bound),
                bytes: Some(body.len() as u64),
                crc32: Some(crc32fast::hash(&body)),
            };
            let json = serde_json::to_vec_pretty(&meta)?;
            // Both files complete on disk first; then the old sidecar goes, the data takes its
            // place, and the new sidecar last: a crash in between leaves data without a
            // sidecar (an error on reading), never data with a sidecar that is not its own.
            let data_write = pending(&a.output, &|f| std::io::Write::write_all(f, &body))?;
            let sidecar_write = pending(&sidecar, &|f| std::io::Write::write_all(f, &json))?;
            if a.force {
                match std::fs::remove_file(&sidecar) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(e).with_context(|| format!("removing {}", sidecar.display()))
                    }
                    _ => {}
                }
            }
            commit(data_write, a.force)?;
            commit(sidecar_write, a.force)?;
        }
        _ => bail!("{}: the output must be .npy or .f32", a.output.display()),
    }
    println!(
        "{} -> {}: shape {:?}, within {:.4e} of the original",
        a.input.display(),
        a.output.display(),
        shape,
        bound
    );
    Ok(0)
}
