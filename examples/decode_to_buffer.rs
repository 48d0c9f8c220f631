//! Decodes a folder of images (default `samples/`) as one GPU batch into one GPU buffer,
//! prints each image's CRC-32 (read back from the GPU, compared with the CPU decoder's) and
//! the adapter name, then times both decoders.
//!
//! Images that are not L3 files are read with the `image` crate and encoded first.
//!
//! ```text
//! WGPU_BACKEND=vulkan cargo run --release --example decode_to_buffer -- [FOLDER] [--repeat N]
//! ```

use std::path::PathBuf;
use std::time::Instant;

use l3::decode::DecodeOptions;
use l3::gpu::{GpuDecoder, OutputLayout};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("samples");
    let mut repeat = 5usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--repeat" {
            repeat = args.next().unwrap_or_default().parse()?;
        } else {
            folder = PathBuf::from(a);
        }
    }
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&folder)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let mut names = Vec::new();
    let mut files = Vec::new();
    for p in &paths {
        let data = std::fs::read(p)?;
        let file = if l3::read_header(&data).is_ok() {
            data
        } else {
            match l3::read_image(p).and_then(|img| l3::encode_image(&img, &Default::default())) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("skipping {}: {e}", p.display());
                    continue;
                }
            }
        };
        names.push(p.file_name().unwrap().to_string_lossy().into_owned());
        files.push(file);
    }
    let decoder = GpuDecoder::new_default()?;
    println!(
        "adapter: {} (largest chunk binding {} MiB)",
        decoder.adapter_name(),
        decoder.chunk_limit() >> 20
    );
    let refs: Vec<&[u8]> = files.iter().map(|f| f.as_slice()).collect();
    let batch = decoder.decode_batch(&refs, OutputLayout::Interleaved)?;
    println!(
        "{} images in one {}-byte buffer",
        batch.images.len(),
        batch.buffer.size()
    );
    let images = batch.read_back()?;
    let mut mismatches = 0;
    let mut pixels = 0u64;
    for ((name, file), (got, layout)) in names
        .iter()
        .zip(&files)
        .zip(images.iter().zip(&batch.images))
    {
        let (_, want) = l3::decode::decode(file, &DecodeOptions::default())?;
        let (g, w) = (crc32fast::hash(got), crc32fast::hash(&want));
        let ok = got == &want;
        mismatches += usize::from(!ok);
        pixels += layout.width as u64 * layout.height as u64;
        println!(
            "{name}: {}x{}x{} {}-bit at byte {}: GPU crc32 {g:08x}, CPU crc32 {w:08x} {}",
            layout.width,
            layout.height,
            layout.channels,
            layout.depth,
            layout.offset,
            if ok { "OK" } else { "MISMATCH" }
        );
    }
    // Throughput: the blocking batch decode (upload, validation, kernels, error-flag read
    // back; not the pixel read back) against the CPU decoder on all cores.
    let mp = pixels as f64 / 1e6;
    let t = Instant::now();
    for _ in 0..repeat {
        decoder.decode_batch(&refs, OutputLayout::Interleaved)?;
    }
    let gpu_s = t.elapsed().as_secs_f64() / repeat as f64;
    let t = Instant::now();
    for _ in 0..repeat {
        for f in &files {
            std::hint::black_box(l3::decode::decode(f, &DecodeOptions::default())?);
        }
    }
    let cpu_s = t.elapsed().as_secs_f64() / repeat as f64;
    println!(
        "{mp:.2} MP per batch, mean of {repeat}: GPU {:.1} ms = {:.1} MP/s, CPU {:.1} ms = {:.1} MP/s",
        gpu_s * 1e3,
        mp / gpu_s,
        cpu_s * 1e3,
        mp / cpu_s
    );
    if mismatches > 0 {
        return Err(format!("{mismatches} images differ between GPU and CPU").into());
    }
    Ok(())
}
