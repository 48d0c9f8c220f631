//! The codec comparison: every codec of `codecs` and the memcpy reference rows on every image,
//! image by image, the decoders of an image timed in alternation.

use anyhow::{Context, Result};
use rayon::prelude::*;

use crate::args::Args;
use crate::codecs::Codec;
use crate::images::Pixels;
use crate::measure::{measure, stats_of, timed_reps, Stats};
use crate::rows::{Cell, CodecResult, CodecRun};

/// One codec's encoded file of one image, its encode timing, and whether a decode of it
/// gave back the image (the untimed warm-up decode).
struct Prepared {
    file: Vec<u8>,
    enc: Option<Stats>,
    lossless: bool,
    /// The warm-up decode's seconds (how many timed decodes fit the time cap).
    warm: f64,
}

/// Encodes `p` with `codec` (timed when the codec encodes) and decodes it once: `None` when
/// the codec does not take the image.
fn prepare(codec: Codec, p: &Pixels, args: &Args) -> Result<Option<Prepared>> {
    if !codec.supports(p) {
        return Ok(None);
    }
    let (enc, file) = if codec.times_encode() {
        let (s, f) = measure(args.reps, args.max_seconds, || codec.encode(p))
            .with_context(|| format!("{} encoding {}", codec.name(), p.name))?;
        (Some(s), f)
    } else {
        (None, codec.encode(p)?)
    };
    let mut out = Vec::new();
    let t = std::time::Instant::now();
    codec
        .decode(&file, &mut out)
        .with_context(|| format!("{} decoding {}", codec.name(), p.name))?;
    let warm = t.elapsed().as_secs_f64();
    let lossless = codec.canonical(&out, p) == p.bytes;
    if !lossless {
        eprintln!("  NOT LOSSLESS: {} on {}", codec.name(), p.name);
    }
    Ok(Some(Prepared {
        file,
        enc,
        lossless,
        warm,
    }))
}

/// Times the decoders of one image in alternation, one decode of each per round, so that a
/// change in the machine's speed (a neighbour on a shared VM) falls on all of them alike
/// instead of on whichever codec was being measured then. A codec takes part in up to
/// `reps` rounds, fewer when its warm-up says they would exceed `max_seconds`.
fn decode_in_rounds(
    codecs: &[Codec],
    prepared: &[Option<Prepared>],
    p: &Pixels,
    args: &Args,
) -> Result<Vec<Option<Cell>>> {
    let rounds: Vec<usize> = prepared
        .iter()
        .map(|c| {
            c.as_ref()
                .map_or(0, |c| timed_reps(args.reps, args.max_seconds, c.warm))
        })
        .collect();
    let mut times: Vec<Vec<f64>> = rounds.iter().map(|&n| Vec::with_capacity(n)).collect();
    let mut out = Vec::new();
    for round in 0..rounds.iter().copied().max().unwrap_or(0) {
        for (k, (codec, c)) in codecs.iter().zip(prepared).enumerate() {
            let Some(c) = c.as_ref().filter(|_| round < rounds[k]) else {
                continue;
            };
            let t = std::time::Instant::now();
            codec
                .decode(&c.file, &mut out)
                .with_context(|| format!("{} decoding {}", codec.name(), p.name))?;
            times[k].push(t.elapsed().as_secs_f64());
            std::hint::black_box(&out);
        }
    }
    Ok(prepared
        .iter()
        .zip(times)
        .map(|(c, t)| {
            c.as_ref().map(|c| Cell {
                size: c.file.len() as u64,
                enc: c.enc,
                dec: stats_of(t),
                lossless: c.lossless,
            })
        })
        .collect())
}

/// One-thread or all-thread memcpy of an image's raw size.
fn bench_memcpy(p: &Pixels, args: &Args, parallel: bool) -> Result<Stats> {
    let mut dst = vec![1u8; p.bytes.len()];
    let (s, ()) = measure(args.reps, args.max_seconds, || {
        if parallel {
            let chunk = (p.bytes.len() / (rayon::current_num_threads() * 4)).max(1 << 16);
            dst.par_chunks_mut(chunk)
                .zip(p.bytes.par_chunks(chunk))
                .for_each(|(d, s)| d.copy_from_slice(s));
        } else {
            dst.copy_from_slice(&p.bytes);
        }
        std::hint::black_box(&dst);
        Ok(())
    })?;
    Ok(s)
}

/// The codec section: every codec and the memcpy reference rows on every image.
pub fn bench_codecs(images: &[Pixels], args: &Args) -> Result<CodecRun> {
    let codecs: Vec<Codec> = Codec::ALL.into_iter().filter(|_| !args.no_codecs).collect();
    let mut results: Vec<CodecResult> = codecs
        .iter()
        .map(|&codec| CodecResult {
            codec,
            cells: Vec::with_capacity(images.len()),
        })
        .collect();
    let (mut memcpy_1, mut memcpy_n) = (Stats::default(), Stats::default());
    let mut memcpy_1_each = Vec::with_capacity(images.len());
    // Image by image, every codec and the memcpy rows in turn: the ratios between codecs
    // compare runs minutes apart at most, so a machine whose speed drifts (shared VMs) moves
    // all of them together.
    for (i, p) in images.iter().enumerate() {
        eprintln!("  [{}/{}] {}...", i + 1, images.len(), p.name);
        // One-thread measurements first (with the one-thread memcpy), then the parallel
        // ones, with a pause after those so that the pool's workers are asleep before the
        // next image's one-thread runs (on a 2-core machine a spinning worker takes half of
        // it).
        for parallel in [false, true] {
            let group: Vec<usize> = (0..results.len())
                .filter(|&k| results[k].codec.parallel() == parallel)
                .collect();
            let codecs: Vec<Codec> = group.iter().map(|&k| results[k].codec).collect();
            let prepared = codecs
                .iter()
                .map(|&codec| prepare(codec, p, args))
                .collect::<Result<Vec<_>>>()?;
            let cells = decode_in_rounds(&codecs, &prepared, p, args)?;
            for (&k, cell) in group.iter().zip(cells) {
                results[k].cells.push(cell);
            }
            if parallel {
                memcpy_n = memcpy_n.add(bench_memcpy(p, args, true)?);
            } else {
                let one = bench_memcpy(p, args, false)?;
                memcpy_1 = memcpy_1.add(one);
                memcpy_1_each.push(one);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(CodecRun {
        results,
        memcpy_1,
        memcpy_n,
        memcpy_1_each,
    })
}
