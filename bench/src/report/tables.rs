//! The report's tables, built from the sections' results; each table is shown as text
//! (stdout) and as Markdown.

use l3::Profile;

use super::results::Report;
use super::table::{gbs, mps, tput, Table};
use crate::codecs::Codec;
use crate::measure::Stats;
use crate::rows::{Cell, CodecResult, DatasetReport, GpuReport, PipelineRow, ScalingRow};

pub struct Tables {
    /// One row per codec (and the memcpy rows), totals over the images.
    pub main: Table,
    pub per_image: Table,
    /// Per image class (input folder, or `generated`): sizes and decode speeds as ratios.
    pub classes: Table,
    pub pipeline: Table,
    /// The dataset section's timings, and its sizes and ratios.
    pub dataset: Table,
    pub dataset_sizes: Table,
    /// The progressive shards, level by level.
    pub dataset_levels: Table,
    /// The loader rows.
    pub loader: Table,
    pub scaling: Table,
    pub gpu: Table,
}

impl Tables {
    pub fn new(r: &Report) -> Tables {
        Tables {
            main: main_table(r),
            per_image: per_image_table(r),
            classes: class_table(r),
            pipeline: pipeline_table(&r.pipeline),
            dataset: dataset_table(r.dataset.as_ref().and_then(|d| d.as_ref().ok())),
            dataset_sizes: dataset_sizes_table(r.dataset.as_ref().and_then(|d| d.as_ref().ok())),
            dataset_levels: dataset_levels_table(r.dataset.as_ref().and_then(|d| d.as_ref().ok())),
            loader: loader_table(r.dataset.as_ref().and_then(|d| d.as_ref().ok())),
            scaling: scaling_table(r.scaling.as_ref().map(|(_, rows)| rows.as_slice())),
            gpu: gpu_table(r.gpu.as_ref().and_then(|g| g.as_ref().ok())),
        }
    }
}

fn main_table(report: &Report) -> Table {
    let images = &report.images;
    let results = &report.codecs.results;
    let total_px = report.total_pixels();
    let total_raw = report.total_raw_bytes();
    let threads = report.meta.threads;
    let png_default_sizes: Vec<u64> = results
        .iter()
        .find(|r| r.codec == Codec::PngDefault)
        .map(|r| {
            r.cells
                .iter()
                .map(|c| c.as_ref().map_or(0, |c| c.size))
                .collect()
        })
        .unwrap_or_default();

    let mut main = Table::new(&[
        "codec",
        "threads",
        "images",
        "size (bytes)",
        "bits/px",
        "vs png",
        "enc MP/s [min-max]",
        "enc GB/s",
        "dec MP/s [min-max]",
        "dec GB/s",
        "lossless",
        "l3 fast size / this",
        "l3 compact size / this",
        "l3 fast 1T enc speed x",
        "l3 compact 1T enc speed x",
        "l3 fast 1T dec speed x",
        "l3 compact 1T dec speed x",
    ]);
    // The one-thread rows of both l3 profiles: the references of the ratio columns (absent
    // only with --no-codecs, which leaves the table empty).
    let Some(l3_refs) = [Codec::L3_FAST_1, Codec::L3_COMPACT_1]
        .iter()
        .map(|c| results.iter().find(|r| r.codec == *c))
        .collect::<Option<Vec<&CodecResult>>>()
    else {
        return main;
    };
    for r in results {
        // Each l3 profile (1 thread) on the same images, for a like-for-like comparison.
        let mut l3_size = [0u64; 2];
        let mut l3_enc = [Stats::default(); 2];
        let mut l3_dec = [Stats::default(); 2];
        let mut size = 0u64;
        let mut png = 0u64;
        let mut px = 0u64;
        let mut raw = 0u64;
        let mut n = 0;
        let mut enc = Stats::default();
        let mut dec = Stats::default();
        let mut lossless = true;
        for (i, c) in r.cells.iter().enumerate() {
            if let Some(c) = c {
                n += 1;
                size += c.size;
                png += png_default_sizes[i];
                px += images[i].pixels();
                raw += images[i].bytes.len() as u64;
                if let Some(e) = c.enc {
                    enc = enc.add(e);
                }
                dec = dec.add(c.dec);
                lossless &= c.lossless;
                for (k, l3) in l3_refs.iter().enumerate() {
                    if let Some(l) = &l3.cells[i] {
                        l3_size[k] += l.size;
                        l3_enc[k] = l3_enc[k].add(l.enc.unwrap_or_default());
                        l3_dec[k] = l3_dec[k].add(l.dec);
                    }
                }
            }
        }
        let timed_enc = r.codec.times_encode();
        let mut row = vec![
            r.codec.name().into(),
            r.codec.threads(),
            format!("{n}/{}", images.len()),
            size.to_string(),
            format!("{:.3}", size as f64 * 8.0 / px as f64),
            format!("{:.3}", size as f64 / png as f64),
            if timed_enc {
                tput(px, enc, mps, 1)
            } else {
                "-".into()
            },
            if timed_enc {
                format!("{:.3}", gbs(raw, enc.median))
            } else {
                "-".into()
            },
            tput(px, dec, mps, 1),
            format!("{:.3}", gbs(raw, dec.median)),
            if lossless { "yes" } else { "NO" }.into(),
        ];
        row.extend(
            l3_size
                .iter()
                .map(|&l| format!("{:.3}", l as f64 / size as f64)),
        );
        row.extend(l3_enc.iter().map(|l| {
            if timed_enc {
                format!("{:.2}", enc.median / l.median)
            } else {
                "-".into()
            }
        }));
        row.extend(
            l3_dec
                .iter()
                .map(|l| format!("{:.2}", dec.median / l.median)),
        );
        main.push(row);
    }
    for (name, threads, s) in [
        (
            "memcpy (output size)",
            "1".to_string(),
            report.codecs.memcpy_1,
        ),
        (
            "memcpy (output size)",
            threads.to_string(),
            report.codecs.memcpy_n,
        ),
    ] {
        let mut row = vec![
            name.into(),
            threads,
            format!("{}/{}", images.len(), images.len()),
        ];
        row.extend(std::iter::repeat_n(String::from("-"), 5));
        row.push(tput(total_px, s, mps, 0));
        row.push(format!("{:.3}", gbs(total_raw, s.median)));
        row.resize(main.header.len(), "-".into());
        main.push(row);
    }
    main
}

/// One row per image class. Each ratio is taken over the class's images that both codecs
/// ran (QOI takes 8-bit RGB(A) only, WebP 8-bit only); decode speeds are one thread, as
/// ratios of summed medians; "of memcpy" is the decoder's speed as a fraction of a
/// one-thread copy of the same output in the same run, the figure that stays comparable
/// across machines. QOI's own fraction shows where "fast at 3x QOI" is out of reach of any
/// decoder that writes its output: where it is above 1/3.
fn class_table(report: &Report) -> Table {
    let images = &report.images;
    let results = &report.codecs.results;
    let mut table = Table::new(&[
        "class",
        "images",
        "MP",
        "compact size / png",
        "fast size / png",
        "compact dec / png (1T speed)",
        "compact dec / webp",
        "fast dec / qoi",
        "compact dec of memcpy",
        "fast dec of memcpy",
        "qoi dec of memcpy",
        "compact 128px size / png",
        "compact 128px dec / png",
        "fast 128px size / png",
        "fast 128px dec / qoi",
    ]);
    let find = |c: Codec| results.iter().find(|r| r.codec == c);
    let (Some(fast), Some(compact)) = (find(Codec::L3_FAST_1), find(Codec::L3_COMPACT_1)) else {
        return table;
    };
    let mut classes: Vec<&str> = Vec::new();
    for p in images {
        if !classes.contains(&p.class.as_str()) {
            classes.push(&p.class);
        }
    }
    let memcpy = &report.codecs.memcpy_1_each;
    for class in classes {
        let members: Vec<usize> = (0..images.len())
            .filter(|&i| images[i].class == class)
            .collect();
        // (sum over images both ran of a's value, of b's value) for `value` of a cell.
        let pair = |a: &CodecResult, b: Option<&CodecResult>, value: fn(&Cell) -> f64| {
            let b = b?;
            let (mut sa, mut sb) = (0.0, 0.0);
            for &i in &members {
                if let (Some(ca), Some(cb)) = (&a.cells[i], &b.cells[i]) {
                    sa += value(ca);
                    sb += value(cb);
                }
            }
            (sb > 0.0).then_some((sa, sb))
        };
        let size = |c: &Cell| c.size as f64;
        let time = |c: &Cell| c.dec.median;
        let ratio = |r: Option<(f64, f64)>| r.map_or("-".into(), |(a, b)| format!("{:.3}", a / b));
        // Speed ratio: the peer's time over ours.
        let speed = |r: Option<(f64, f64)>| r.map_or("-".into(), |(a, b)| format!("{:.2}", b / a));
        let of_memcpy = |r: &CodecResult| {
            let (mut t, mut m) = (0.0, 0.0);
            for &i in &members {
                if let (Some(c), Some(s)) = (&r.cells[i], memcpy.get(i)) {
                    t += c.dec.median;
                    m += s.median;
                }
            }
            if t > 0.0 {
                format!("{:.3}", m / t)
            } else {
                "-".into()
            }
        };
        let png = find(Codec::PngDefault);
        let px: u64 = members.iter().map(|&i| images[i].pixels()).sum();
        table.push(vec![
            class.to_string(),
            members.len().to_string(),
            format!("{:.1}", px as f64 / 1e6),
            ratio(pair(compact, png, size)),
            ratio(pair(fast, png, size)),
            speed(pair(compact, png, time)),
            speed(pair(compact, find(Codec::WebpLossless), time)),
            speed(pair(fast, find(Codec::Qoi), time)),
            of_memcpy(compact),
            of_memcpy(fast),
            find(Codec::Qoi).map_or("-".into(), of_memcpy),
            find(Codec::L3Compact128).map_or("-".into(), |c| ratio(pair(c, png, size))),
            find(Codec::L3Compact128).map_or("-".into(), |c| speed(pair(c, png, time))),
            find(Codec::L3Fast128).map_or("-".into(), |c| ratio(pair(c, png, size))),
            find(Codec::L3Fast128).map_or("-".into(), |c| speed(pair(c, find(Codec::Qoi), time))),
        ]);
    }
    table
}

fn per_image_table(report: &Report) -> Table {
    let images = &report.images;
    let results = &report.codecs.results;
    let mut header = vec![
        "image".to_string(),
        "size".into(),
        "type".into(),
        "raw MB".into(),
    ];
    // One size column per codec (the all-thread l3 rows write the same files).
    let per_image_size = |c: Codec| !matches!(c, Codec::ZunePng | Codec::L3 { parallel: true, .. });
    for r in results {
        if per_image_size(r.codec) {
            header.push(format!("{} bpp", r.codec.name()));
        }
    }
    let profiles = [Profile::Fast, Profile::Compact];
    for profile in profiles {
        header.push(format!("l3 {} dec MP/s (1T / all)", profile.name()));
    }
    header.push("png dec MP/s".into());
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut per_image = Table::new(&hdr);
    for (i, p) in images.iter().enumerate() {
        let mut row = vec![
            p.name.clone(),
            format!("{}x{}", p.width, p.height),
            p.kind(),
            format!("{:.1}", p.bytes.len() as f64 / 1e6),
        ];
        let mut l3_dec = [Vec::new(), Vec::new()];
        let mut png_dec = String::from("-");
        for r in results {
            let cell = r.cells[i].as_ref();
            if let (Codec::L3 { profile, .. }, Some(c)) = (r.codec, cell) {
                let k = profiles.iter().position(|&p| p == profile).unwrap_or(0);
                l3_dec[k].push(format!("{:.0}", mps(p.pixels(), c.dec.median)));
            }
            if let (Codec::PngDefault, Some(c)) = (r.codec, cell) {
                png_dec = format!("{:.0}", mps(p.pixels(), c.dec.median));
            }
            if !per_image_size(r.codec) {
                continue;
            }
            row.push(match cell {
                Some(c) => format!(
                    "{:.2}{}",
                    c.size as f64 * 8.0 / p.pixels() as f64,
                    if c.lossless { "" } else { " (LOSSY!)" }
                ),
                None => "n/a".into(),
            });
        }
        row.extend(l3_dec.iter().map(|d| d.join(" / ")));
        row.push(png_dec);
        per_image.push(row);
    }
    per_image
}

fn pipeline_table(pipeline: &[PipelineRow]) -> Table {
    let mut pipe_table = Table::new(&[
        "pipeline (decode + normalise to f32 CHW)",
        "images",
        "on disk (bytes)",
        "images/s [min-max]",
        "MP/s",
    ]);
    for r in pipeline {
        let (speed, mp) = match &r.stats {
            Ok(s) => (
                tput(r.images as u64, *s, |n, s| n as f64 / s, 1),
                format!("{:.1}", mps(r.pixels, s.median)),
            ),
            Err(e) => (e.clone(), "-".into()),
        };
        pipe_table.push(vec![
            r.name.clone(),
            r.images.to_string(),
            r.disk_bytes.to_string(),
            speed,
            mp,
        ]);
    }
    pipe_table
}

fn dataset_table(d: Option<&DatasetReport>) -> Table {
    let mut t = Table::new(&[
        "dataset (one run)",
        "cache",
        "file bytes",
        "images/s [min-max]",
        "MB/s of pixels",
        "file GB/s",
        "speed vs PNG",
    ]);
    let Some(d) = d else { return t };
    for r in &d.rows {
        let s = r.time;
        let vs_png = match d.png_row_for(r) {
            Some(p) if !r.png_reference => format!("{:.2}x", p.time.median / s.median),
            _ => "-".into(),
        };
        t.push(vec![
            format!("{}: {}", r.kind, r.name),
            r.cache.into(),
            r.file_bytes.to_string(),
            tput(r.images as u64, s, |n, s| n as f64 / s, 1),
            format!("{:.1}", r.raw_bytes as f64 / s.median / 1e6),
            format!("{:.3}", gbs(r.file_bytes, s.median)),
            vs_png,
        ]);
    }
    t
}

fn dataset_sizes_table(d: Option<&DatasetReport>) -> Table {
    let mut t = Table::new(&["dataset sizes", "value"]);
    let Some(d) = d else { return t };
    let rows = [
        (
            format!(
                "l3 shards ({} records, {} shard(s) of up to {})",
                d.records, d.shards, d.records_per_shard
            ),
            format!("{} bytes", d.shard_bytes),
        ),
        (
            "payload (sum of the records' L3 files)".into(),
            format!("{} bytes", d.payload_bytes),
        ),
        (
            "shard overhead (shard - payload) / payload: header + index + trailer".into(),
            format!("{:.5}", d.shard_overhead),
        ),
        (
            "read_prefix(0): bytes read / sum of records' level-0 bytes".into(),
            format!("{:.5} ({} bytes)", d.prefix_read_vs_ideal, d.prefix_read_bytes),
        ),
        (
            "tar of the same records (COMPUTED: 512 B header + 512 B padding per member + 1024 B end)"
                .into(),
            format!("{} bytes", d.tar_bytes_computed),
        ),
        (
            "tar overhead (tar - payload) / payload (computed)".into(),
            format!("{:.5}", d.tar_overhead_computed),
        ),
        (
            "tar bytes / shard bytes (computed)".into(),
            format!("{:.5}", d.tar_vs_shard),
        ),
        (
            "PNG files (png crate default), for reference".into(),
            format!(
                "{} bytes ({:.3}x the shards)",
                d.png_bytes,
                d.png_bytes as f64 / d.shard_bytes as f64
            ),
        ),
    ];
    for (k, v) in rows {
        t.push(vec![k, v]);
    }
    t
}

fn dataset_levels_table(d: Option<&DatasetReport>) -> Table {
    let mut t = Table::new(&[
        "prefix to level",
        "per side",
        "bytes read",
        "share of all levels",
        "read / ideal",
        "read + CPU decode ms",
        "images/s",
        "MB/s of pixels out",
        "read only ms",
        "decode time vs full",
        "cold: read + CPU decode ms",
        "cold images/s",
    ]);
    let Some(d) = d else { return t };
    let p = &d.progressive;
    let full = p.rows.last().map_or(f64::NAN, |r| r.read_decode.median);
    for r in &p.rows {
        t.push(vec![
            r.level.to_string(),
            format!("1/{}", r.stride),
            r.prefix_bytes.to_string(),
            format!("{:.1}%", 100.0 * r.share),
            format!("{:.5}", r.prefix_bytes as f64 / r.ideal_bytes as f64),
            format!("{:.1}", 1e3 * r.read_decode.median),
            tput(d.records as u64, r.read_decode, |n, s| n as f64 / s, 1),
            format!("{:.1}", r.output_bytes as f64 / r.read_decode.median / 1e6),
            format!("{:.1}", 1e3 * r.read_only.median),
            format!("{:.3}", r.read_decode.median / full),
            r.read_decode_cold
                .map_or("-".into(), |c| format!("{:.1}", 1e3 * c.median)),
            r.read_decode_cold.map_or("-".into(), |c| {
                tput(d.records as u64, c, |n, s| n as f64 / s, 1)
            }),
        ]);
    }
    t
}

fn loader_table(d: Option<&DatasetReport>) -> Table {
    let mut t = Table::new(&[
        "loader: one epoch to augmented f32 NCHW 224x224 batches",
        "images/s",
        "CPU ms per image",
        "speed vs PNG loader",
        "CPU per image vs PNG loader",
    ]);
    let Some(d) = d else { return t };
    let png = d.loader.iter().find(|r| r.png_reference);
    for r in &d.loader {
        let cpu_ms = r.cpu_seconds.map(|c| 1e3 * c / r.images as f64);
        let png_cpu = png
            .and_then(|p| p.cpu_seconds)
            .map(|c| 1e3 * c / r.images as f64);
        t.push(vec![
            r.name.clone(),
            tput(r.images as u64, r.time, |n, s| n as f64 / s, 1),
            cpu_ms.map_or("-".into(), |c| format!("{c:.1}")),
            match png {
                Some(p) if !r.png_reference => format!("{:.2}x", p.time.median / r.time.median),
                _ => "-".into(),
            },
            match (png_cpu, cpu_ms) {
                (Some(p), Some(c)) if !r.png_reference => format!("{:.2}x", p / c),
                _ => "-".into(),
            },
        ]);
    }
    t
}

fn scaling_table(scaling: Option<&[ScalingRow]>) -> Table {
    let mut scale_table = Table::new(&[
        "size",
        "MP",
        "codec",
        "bits/px",
        "enc ms (all)",
        "dec ms (1T)",
        "dec ms (all)",
        "png dec ms (1T)",
        "dec ns/px (1T)",
        "png dec ns/px",
        "cold dec ns/px (1T)",
        "cold png dec ns/px",
        "dec peak added / output",
    ]);
    if let Some(rows) = scaling {
        for r in rows {
            let px = r.width as u64 * r.height as u64;
            scale_table.push(vec![
                format!("{}x{}", r.width, r.height),
                format!("{:.1}", px as f64 / 1e6),
                format!("l3 {}", r.profile.name()),
                format!("{:.3}", r.l3_size as f64 * 8.0 / px as f64),
                format!("{:.1}", r.l3_enc.median * 1e3),
                format!("{:.1}", r.l3_dec_1.median * 1e3),
                format!("{:.1}", r.l3_dec_n.median * 1e3),
                format!("{:.1}", r.png_dec.median * 1e3),
                format!("{:.2}", r.l3_dec_1.median * 1e9 / px as f64),
                format!("{:.2}", r.png_dec.median * 1e9 / px as f64),
                format!("{:.2}", r.l3_dec_1_cold.median * 1e9 / px as f64),
                format!("{:.2}", r.png_dec_cold.median * 1e9 / px as f64),
                r.decode_peak_added_bytes.map_or("-".into(), |b| {
                    let ratio = b as f64 / r.raw_bytes as f64;
                    // Below the output's size, the output landed in memory the process
                    // already had (freed by earlier rows): nothing new was needed.
                    if ratio < 0.5 {
                        format!("{ratio:.3} (reused)")
                    } else {
                        format!("{ratio:.3}")
                    }
                }),
            ]);
        }
    }
    scale_table
}

fn gpu_table(gpu: Option<&GpuReport>) -> Table {
    let mut gpu_table = Table::new(&["gpu", "MB", "GB/s [min-max]", "MP/s", "ms", "note"]);
    if let Some(g) = gpu {
        for r in &g.rows {
            match r.stats {
                Some(s) => gpu_table.push(vec![
                    r.name.clone(),
                    format!("{:.1}", r.bytes as f64 / 1e6),
                    tput(r.bytes, s, gbs, 3),
                    if r.pixels > 0 {
                        format!("{:.1}", mps(r.pixels, s.median))
                    } else {
                        "-".into()
                    },
                    format!("{:.2}", s.median * 1e3),
                    r.note.clone(),
                ]),
                None => gpu_table.push(vec![
                    r.name.clone(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    r.note.clone(),
                ]),
            }
        }
    }
    gpu_table
}
