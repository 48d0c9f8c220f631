//! `l3 info`: a file's header, patch table statistics and bits per pixel.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use crate::limits::{decode_options, read_l3};

#[derive(Args)]
pub(crate) struct InfoArgs {
    /// L3 files.
    #[arg(required = true)]
    pub(crate) files: Vec<PathBuf>,
}

pub(crate) fn cmd_info(a: InfoArgs) -> Result<u64> {
    let mut failed = 0;
    for path in &a.files {
        let r = (|| -> Result<()> {
            let data = read_l3(path)?;
            if l3::field::field_version(&data) == Some(l3::field::LOSSLESS_VERSION) {
                return print_lossless_info(path, &data);
            }
            if l3::field::field_version(&data) == Some(l3::field::BOUNDED_VERSION) {
                return print_bounded_info(path, &data);
            }
            if data.starts_with(&l3::field::FIELD_MAGIC) {
                return print_field_info(path, &data);
            }
            let ins = l3::inspect::inspect(&data, &decode_options())?;
            print_info(path, &ins);
            Ok(())
        })();
        if let Err(e) = r {
            failed += 1;
            eprintln!("error: {}: {e:#}", path.display());
        }
    }
    Ok(failed)
}

/// A lossless float array (field version 2): its header (the CRC and chunk table are
/// checked by a decode).
fn print_lossless_info(path: &Path, data: &[u8]) -> Result<()> {
    let h = l3::field::parse_lossless(data)?;
    l3::field::decode_lossless(data, &decode_options())?;
    println!("{}", path.display());
    println!(
        "  format     L3 lossless float array (field version {}), {} shape {:?}",
        l3::field::LOSSLESS_VERSION,
        h.dtype.name(),
        h.shape
    );
    match h.fill_value {
        Some(f) => println!("  fill       bits {f:#x}"),
        None => println!("  fill       none declared"),
    }
    match (h.mult_base, h.table.len()) {
        (Some(b), _) => println!("  input      float-mult, base {b:e}"),
        (None, 0) => println!("  input      ordered float bits"),
        (None, k) => println!("  input      value table, {k} distinct values"),
    }
    println!(
        "  axes       differenced along {:#b} (bit 0 = axis 0){}",
        h.axes,
        match h.axes2 {
            0 => String::new(),
            a2 => format!(", again along {a2:#b} (second differences)"),
        }
    );
    println!(
        "  chunks     {} of {} values, {} segments each; {} exception runs",
        h.chunks(),
        1u64 << h.chunk_log2,
        h.segments,
        h.runs
    );
    println!(
        "  size       {} bytes for {} raw ({:.3}x)",
        data.len(),
        h.output_bytes(),
        h.output_bytes() as f64 / data.len() as f64
    );
    Ok(())
}

/// An error-bounded array of 1 to 4 axes (field version 3): its header (the rest is checked
/// by a decode).
fn print_bounded_info(path: &Path, data: &[u8]) -> Result<()> {
    let h = l3::field::parse_bounded(data)?;
    l3::field::decode_bounded(data, &decode_options())?;
    println!("{}", path.display());
    println!(
        "  format     L3 error-bounded array (field version {}), float32 shape {:?}",
        l3::field::BOUNDED_VERSION,
        h.shape
    );
    match h.predictor {
        l3::field::Predictor::Lattice => println!(
            "  predictor  lattice interpolation: unit {:e} from {:e}, axis order {:?}, {} levels, steps {:?}, {} of {} passes cubic",
            h.unit,
            h.offset,
            h.axes,
            h.levels,
            h.steps,
            h.cubic.iter().filter(|&&c| c).count(),
            h.cubic.len()
        ),
        l3::field::Predictor::Differences => println!(
            "  predictor  differences of bins of {:e} from {:e} along axes {:#b}",
            h.unit, h.offset, h.axes[0]
        ),
    }
    println!("  bound      every regular value within {:.6e}", h.bound);
    match h.fill_value {
        Some(f) => println!("  fill       {f} (kept exactly)"),
        None => println!("  fill       none declared"),
    }
    println!(
        "  exact      {} runs (NaN, infinities, fill, and values the predictor would miss)",
        h.runs
    );
    println!(
        "  chunks     {} of {} values, {} segments each",
        h.chunks(),
        1u64 << h.chunk_log2,
        h.segments
    );
    println!(
        "  size       {} bytes for {} values: {:.2}x smaller than raw float32",
        data.len(),
        h.len(),
        h.output_bytes() as f64 / data.len() as f64
    );
    Ok(())
}

/// A float field file (`.l3f`): its header, bound, runs and bin image (checked in full:
/// length, CRC, image header, runs).
fn print_field_info(path: &Path, data: &[u8]) -> Result<()> {
    let layout = l3::field::parse_field(data)?;
    let h = layout.header;
    let image = l3::read_header(layout.image)?;
    let shape = h.dims();
    let exact: u64 = layout.runs.iter().map(|r| r.len as u64).sum();
    println!("{}", path.display());
    println!(
        "  format     L3 float field version {}, float32 shape {shape:?}",
        l3::field::FIELD_VERSION
    );
    println!(
        "  bound      every regular value within {:.6e} (bins of {:.6e} from {:.6e})",
        h.bound, h.bin_width, h.offset
    );
    match h.fill_value {
        Some(f) => println!("  fill       {f} (kept exactly)"),
        None => println!("  fill       none declared"),
    }
    println!(
        "  exact      {} values in {} runs (NaN, infinities, fill, and values binning would miss)",
        exact, h.runs
    );
    println!(
        "  bin image  L3 version {} ({}), {}x{} 16-bit gray, {} bytes",
        image.profile.version(),
        image.profile.name(),
        image.width,
        image.height,
        layout.image.len()
    );
    println!(
        "  size       {} bytes for {} values: {:.2}x smaller than raw float32",
        data.len(),
        h.len(),
        (h.len() * 4) as f64 / data.len() as f64
    );
    Ok(())
}

fn print_info(path: &Path, ins: &l3::inspect::Inspection) {
    let h = &ins.header;
    println!("{}", path.display());
    println!(
        "  format     L3 version {} ({}), {}x{} {} {}-bit",
        h.profile.version(),
        h.profile.name(),
        h.width,
        h.height,
        h.color.name(),
        h.depth
    );
    if h.max_error == 0 {
        println!("  bound      lossless");
    } else {
        println!(
            "  bound      error-bounded: every sample within {} of the original (stored as bins of {})",
            h.max_error,
            l3::quantize::bin_width(h.max_error)
        );
    }
    println!(
        "  patches    {}x{} px, grid {}x{} = {} patches, {} streams",
        h.patch_size(),
        h.patch_size(),
        h.patches_x(),
        h.patches_y(),
        h.patch_count(),
        h.stream_count()
    );
    println!(
        "  size       {} bytes ({:.3} bpp, {:.3}x raw {} bytes); header+table+crc {} bytes",
        ins.file_bytes,
        ins.bits_per_pixel(),
        ins.ratio_to_raw(),
        h.output_bytes(),
        ins.overhead_bytes
    );
    let pixels = h.width as f64 * h.height as f64;
    for (c, bytes) in ins.channel_bytes.iter().enumerate() {
        println!(
            "  channel {c}  {} bytes, {:.3} bits/sample",
            bytes,
            *bytes as f64 * 8.0 / pixels
        );
    }
    println!(
        "  streams    min {} / mean {:.0} / max {} bytes",
        ins.stream_min,
        ins.channel_bytes.iter().sum::<u64>() as f64 / h.stream_count() as f64,
        ins.stream_max
    );
    match &ins.coding {
        l3::inspect::Coding::Fast {
            predictor_counts,
            nbit_counts,
        } => {
            let preds: Vec<String> = l3::FastPredictor::ALL
                .iter()
                .map(|p| format!("{} {}", p.name(), predictor_counts[*p as usize]))
                .collect();
            println!("  predictors {}", preds.join(", "));
            let rows: u64 = nbit_counts.iter().sum();
            let widths: Vec<String> = nbit_counts
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(w, &n)| format!("{w}:{:.1}%", n as f64 * 100.0 / rows as f64))
                .collect();
            println!("  row widths {}", widths.join(" "));
        }
        l3::inspect::Coding::Compact {
            transform_counts,
            predictor_counts,
            header_bits,
        } => {
            use l3::{format::compact::Transform as T, CompactPredictor as P};
            println!(
                "  transforms {} {}, {} {}, {} {}",
                T::None.name(),
                transform_counts[0],
                T::SubtractGreen.name(),
                transform_counts[1],
                T::Palette.name(),
                transform_counts[2]
            );
            let preds: Vec<String> = P::ALL
                .iter()
                .map(|p| format!("{} {}", p.name(), predictor_counts[*p as usize]))
                .collect();
            println!("  predictors {}", preds.join(", "));
            println!(
                "  tables     {} bytes of code and segment-length tables ({:.3} bpp)",
                header_bits / 8,
                *header_bits as f64 / pixels
            );
        }
    }
}
