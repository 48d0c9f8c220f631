//! Decodes one image repeatedly on the CPU and prints the throughput, single-threaded and
//! multi-threaded: `cargo run --release --example cpu_decode -- IMAGE [REPS]` (an .l3 file,
//! or any image the `image` crate reads, which is encoded first). The file's checksum is not
//! verified (the decoders' own speed), unless `L3_VERIFY_CHECKSUM=1` is set (what
//! `DecodeOptions::default()` does). With `L3_COLD=1` a 64 MB buffer is written between timed
//! decodes (untimed), so the file and the output start outside the caches, as they do in
//! `l3-bench`'s rounds.
//!
//! `cargo run --release --example cpu_decode -- --set ROUNDS FILE.l3...` decodes the files one
//! after another on one thread, each once per round (first decodes, as a loader meets files:
//! repeating one file lets the branch predictor learn it), and prints the MP/s of every round
//! with their median.
use std::io::Write;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: cpu_decode IMAGE [REPS]")?;
    if path == "--set" {
        let rounds: usize = args.next().ok_or("--set ROUNDS FILE...")?.parse()?;
        return decode_set(rounds, &args.collect::<Vec<_>>());
    }
    let reps: usize = args.next().map(|r| r.parse()).transpose()?.unwrap_or(20);
    // An .l3 file is decoded as it is; any other image is encoded first.
    let (file, expected) = if path.ends_with(".l3") {
        (std::fs::read(&path)?, None)
    } else {
        let image = l3::read_image(path.as_ref())?;
        (
            l3::encode_image(&image, &l3::EncodeOptions::for_profile(l3::Profile::Fast))?,
            Some(image),
        )
    };
    let header = l3::read_header(&file)?;
    let mut out = vec![0u8; header.output_bytes() as usize];
    let mpix = header.width as f64 * header.height as f64 / 1e6;
    for parallel in [false, true] {
        let options = l3::DecodeOptions {
            parallel,
            verify_checksum: std::env::var("L3_VERIFY_CHECKSUM").is_ok_and(|v| v == "1"),
            ..Default::default()
        };
        let mut best = f64::MAX;
        let mut evict = if std::env::var("L3_COLD").is_ok_and(|v| v == "1") {
            vec![0u8; 64 << 20]
        } else {
            Vec::new()
        };
        for rep in 0..reps {
            evict.fill(rep as u8);
            std::hint::black_box(&evict);
            let t = Instant::now();
            l3::decode_into(&file, &mut out, &options)?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        // A closed pipe (`| head -1` in the timing scripts) is not an error here.
        let _ = writeln!(
            std::io::stdout(),
            "{} {}x{}x{}: {:.1} MP/s, {:.2} GB/s of output ({})",
            path,
            header.width,
            header.height,
            header.channels(),
            mpix / best,
            header.output_bytes() as f64 / best / 1e9,
            if parallel { "all threads" } else { "1 thread" }
        );
    }
    if let Some(image) = expected {
        assert_eq!(out, image.as_bytes(), "decode is not lossless");
    }
    Ok(())
}

/// `--set ROUNDS FILE...`: each round decodes every file once, in order, on this thread.
fn decode_set(rounds: usize, paths: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let files = paths
        .iter()
        .map(std::fs::read)
        .collect::<Result<Vec<_>, _>>()?;
    let mut outs = Vec::new();
    let mut pixels = 0f64;
    for f in &files {
        let h = l3::read_header(f)?;
        outs.push(vec![0u8; h.output_bytes() as usize]);
        pixels += h.width as f64 * h.height as f64;
    }
    let options = l3::DecodeOptions {
        parallel: false,
        verify_checksum: std::env::var("L3_VERIFY_CHECKSUM").is_ok_and(|v| v == "1"),
        ..Default::default()
    };
    let mut speeds = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        for (f, out) in files.iter().zip(&mut outs) {
            l3::decode_into(f, out, &options)?;
        }
        speeds.push(pixels / 1e6 / t.elapsed().as_secs_f64());
    }
    let shown: Vec<String> = speeds.iter().map(|s| format!("{s:.1}")).collect();
    speeds.sort_by(f64::total_cmp);
    let _ = writeln!(
        std::io::stdout(),
        "{} files, {:.2} MP: median {:.1} MP/s (rounds: {})",
        files.len(),
        pixels / 1e6,
        speeds[speeds.len() / 2],
        shown.join(" ")
    );
    Ok(())
}
