//! Real-encoder study of the compact profile (format version 2): what each of its design
//! choices buys, measured with the shipped encoder and decoder on every readable image of each
//! folder of the test data, next to PNG and QOI on the same pixels.
//!
//! `cargo run --release --example compact_variants -- [IMAGES_ROOT] [--per-image]`
//! (default root: `$L3_TEST_DATA/images`, else `../shared/data/images`; each subfolder is one
//! group). Prints Markdown tables; see docs/compression-study.md for a run and its reading.
//!
//! Variants, each a cumulative step towards the compact default:
//! a. fast profile (v1) as shipped; b. compact with predictors {up, gradient} only, no
//! subtract-green, no pair tokens; c. b + subtract-green; d. c + pair tokens, with run tokens,
//! palettes and shared codes, which came later and are switched with them; e. d + all six
//! predictors (= the compact default, 64-px patches); f. e with 128-px patches; g. e with
//! 32-px patches.
//!
//! Peers: PNG is the `png` crate's default compression (`Compression::Balanced`, as in
//! l3-bench), written through `image` (`CompressionType::Default`, adaptive filter); "png
//! fast" is the size of `image`'s own default, `CompressionType::Fast`, which
//! `DynamicImage::write_to` writes and the pre-v2 model study compared with. QOI (through `image`) only
//! stores 8-bit RGB(A): 8-bit gray and gray+alpha images are given to it expanded to RGB and
//! RGBA (what a QOI user has to do), 16-bit images are left out, and "vs QOI" ratios compare
//! both codecs on the images QOI took. Every l3 file is decoded and compared with the source
//! pixels; any mismatch or error is reported and makes the run exit with status 1.
//!
//! Decode speed: one thread (`DecodeOptions { parallel: false, .. }`, checksum verified as by
//! default), best of 3 timed runs after a warm-up, summed over a group's images. Encode speed
//! (all threads, one run) is indicative only.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Instant;

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use l3::CompactPredictor as Predictor;
use l3::{CompactOptions, DecodeOptions, EncodeOptions, PredictorSet, ProfileOptions};

struct Variant {
    key: &'static str,
    name: &'static str,
    options: EncodeOptions,
}

fn variants() -> Vec<Variant> {
    let compact = |predictors, subtract_green, pair_tokens, patch_log2| EncodeOptions {
        profile: ProfileOptions::Compact(CompactOptions {
            predictors,
            subtract_green,
            pair_tokens,
            run_tokens: pair_tokens,
            palette: pair_tokens,
            shared_codes: pair_tokens,
        }),
        patch_log2,
        ..EncodeOptions::default()
    };
    let two = PredictorSet::only(&[Predictor::Up, Predictor::Gradient]);
    let all = PredictorSet::all();
    vec![
        Variant {
            key: "a",
            name: "fast (v1)",
            options: EncodeOptions::for_profile(l3::Profile::Fast),
        },
        Variant {
            key: "b",
            name: "up+gradient",
            options: compact(two, false, false, 6),
        },
        Variant {
            key: "c",
            name: "b + SG",
            options: compact(two, true, false, 6),
        },
        Variant {
            key: "d",
            name: "c + pairs, runs, palette, shared codes",
            options: compact(two, true, true, 6),
        },
        Variant {
            key: "e",
            name: "d + 6 preds (default)",
            options: compact(all, true, true, 6),
        },
        Variant {
            key: "f",
            name: "e, 128 px",
            options: compact(all, true, true, 7),
        },
        Variant {
            key: "g",
            name: "e, 32 px",
            options: compact(all, true, true, 5),
        },
    ]
}

/// Fastest of 3 timed calls after one warm-up call, in seconds.
fn best_of_3(mut f: impl FnMut()) -> f64 {
    f();
    (0..3)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// One codec's results on one image.
#[derive(Clone, Copy, Default)]
struct Measure {
    bytes: u64,
    dec_s: f64,
    enc_s: f64,
}

struct ImageResult {
    group: String,
    name: String,
    pixels: u64,
    png: Measure,
    /// Bytes of the `image` crate's default PNG (fast compression).
    png_fast: u64,
    /// None where QOI cannot store the image (16-bit).
    qoi: Option<Measure>,
    variants: Vec<Measure>,
}

/// PNG through `image` at `compression`, with its default adaptive filter.
fn png_encode(img: &image::DynamicImage, compression: CompressionType) -> Vec<u8> {
    let mut out = Vec::new();
    let encoder = PngEncoder::new_with_quality(&mut out, compression, FilterType::Adaptive);
    img.write_with_encoder(encoder)
        .unwrap_or_else(|e| panic!("png encode: {e}"));
    out
}

/// A peer's file, timed through `image`: encode once, decode best of 3.
fn peer_measure(
    encode: impl FnOnce() -> Vec<u8>,
    format: image::ImageFormat,
) -> (Measure, Vec<u8>) {
    let t = Instant::now();
    let file = encode();
    let enc_s = t.elapsed().as_secs_f64();
    let dec_s = best_of_3(|| {
        std::hint::black_box(
            image::load_from_memory_with_format(&file, format)
                .unwrap_or_else(|e| panic!("{format:?} decode: {e}")),
        );
    });
    let m = Measure {
        bytes: file.len() as u64,
        dec_s,
        enc_s,
    };
    (m, file)
}

/// QOI's input for an image: 8-bit RGB(A) as it is, 8-bit gray expanded; None for 16-bit.
fn qoi_input(img: &image::DynamicImage) -> Option<image::DynamicImage> {
    use image::DynamicImage as D;
    match img {
        D::ImageRgb8(_) | D::ImageRgba8(_) => Some(img.clone()),
        D::ImageLuma8(_) => Some(D::ImageRgb8(img.to_rgb8())),
        D::ImageLumaA8(_) => Some(D::ImageRgba8(img.to_rgba8())),
        _ => None,
    }
}

/// Encodes with `v`, checks the round trip (an error or a mismatch is pushed to `failures`)
/// and times the one-thread decode.
fn l3_measure(
    img: &image::DynamicImage,
    v: &Variant,
    label: &str,
    failures: &mut Vec<String>,
) -> Measure {
    let t = Instant::now();
    let file = match l3::encode_image(img, &v.options) {
        Ok(f) => f,
        Err(e) => {
            failures.push(format!("{label}: variant {} encode error: {e}", v.key));
            return Measure::default();
        }
    };
    let enc_s = t.elapsed().as_secs_f64();
    let options = DecodeOptions {
        parallel: false,
        ..DecodeOptions::default()
    };
    let mut out = vec![0u8; img.as_bytes().len()];
    // The warm-up decode is the round-trip check.
    if let Err(e) = l3::decode_into(&file, &mut out, &options) {
        failures.push(format!("{label}: variant {} decode error: {e}", v.key));
        return Measure::default();
    }
    if out != img.as_bytes() {
        let first = out
            .iter()
            .zip(img.as_bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        failures.push(format!(
            "{label}: variant {} ROUND TRIP MISMATCH (first differing byte {first})",
            v.key
        ));
    }
    let dec_s = best_of_3(|| {
        l3::decode_into(&file, &mut out, &options).expect("decoded once already");
    });
    Measure {
        bytes: file.len() as u64,
        dec_s,
        enc_s,
    }
}

fn images_root(arg: Option<&String>) -> PathBuf {
    if let Some(a) = arg {
        return PathBuf::from(a);
    }
    match std::env::var_os("L3_TEST_DATA") {
        Some(d) => Path::new(&d).join("images"),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/images"),
    }
}

/// Sums over a set of images.
struct Group {
    name: String,
    images: usize,
    pixels: u64,
    png: Measure,
    png_fast: u64,
    qoi_images: usize,
    qoi_pixels: u64,
    qoi: Measure,
    variants: Vec<Measure>,
    /// Each variant's bytes on the images QOI took.
    variants_on_qoi: Vec<u64>,
}

fn sum(name: &str, results: &[&ImageResult], nvar: usize) -> Group {
    let add = |a: &mut Measure, b: &Measure| {
        a.bytes += b.bytes;
        a.dec_s += b.dec_s;
        a.enc_s += b.enc_s;
    };
    let mut g = Group {
        name: name.into(),
        images: results.len(),
        pixels: 0,
        png: Measure::default(),
        png_fast: 0,
        qoi_images: 0,
        qoi_pixels: 0,
        qoi: Measure::default(),
        variants: vec![Measure::default(); nvar],
        variants_on_qoi: vec![0; nvar],
    };
    for r in results {
        g.pixels += r.pixels;
        add(&mut g.png, &r.png);
        g.png_fast += r.png_fast;
        for (a, b) in g.variants.iter_mut().zip(&r.variants) {
            add(a, b);
        }
        if let Some(q) = &r.qoi {
            g.qoi_images += 1;
            g.qoi_pixels += r.pixels;
            add(&mut g.qoi, q);
            for (a, b) in g.variants_on_qoi.iter_mut().zip(&r.variants) {
                *a += b.bytes;
            }
        }
    }
    g
}

fn bpp(bytes: u64, pixels: u64) -> String {
    format!("{:.3}", bytes as f64 * 8.0 / pixels as f64)
}

fn mps(pixels: u64, secs: f64) -> String {
    format!("{:.0}", pixels as f64 / secs / 1e6)
}

fn table(title: &str, header: &[String], rows: &[Vec<String>]) {
    println!("{title}\n");
    println!("| {} |", header.join(" | "));
    println!("|---|{}", "---:|".repeat(header.len().saturating_sub(1)));
    for r in rows {
        println!("| {} |", r.join(" | "));
    }
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let per_image = args.iter().any(|a| a == "--per-image");
    let root = images_root(args.iter().find(|a| !a.starts_with("--")));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let variants = variants();
    let mut results: Vec<ImageResult> = Vec::new();
    let mut failures = Vec::new();
    for dir in &dirs {
        let group = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let img = match l3::read_image(&f) {
                Ok(img) => img,
                Err(e) => {
                    eprintln!("skipping {group}/{name}: {e}");
                    continue;
                }
            };
            if matches!(
                img,
                image::DynamicImage::ImageRgb32F(_) | image::DynamicImage::ImageRgba32F(_)
            ) {
                eprintln!("skipping {group}/{name}: float samples");
                continue;
            }
            let label = format!("{group}/{name}");
            eprintln!(
                "  {label} ({}x{}, {:?})",
                img.width(),
                img.height(),
                img.color()
            );
            // png's default (Compression::Balanced, as l3-bench's "png (default)"); image's
            // own default, CompressionType::Fast (what `DynamicImage::write_to` writes and the
            // pre-v2 study below compared with), is kept for its size only.
            let (png, _) = peer_measure(
                || png_encode(&img, CompressionType::Default),
                image::ImageFormat::Png,
            );
            let png_fast = png_encode(&img, CompressionType::Fast).len() as u64;
            let qoi = qoi_input(&img).map(|q| {
                let encode = || {
                    let mut out = Cursor::new(Vec::new());
                    q.write_to(&mut out, image::ImageFormat::Qoi)
                        .unwrap_or_else(|e| panic!("qoi encode: {e}"));
                    out.into_inner()
                };
                peer_measure(encode, image::ImageFormat::Qoi).0
            });
            let measured = variants
                .iter()
                .map(|v| l3_measure(&img, v, &label, &mut failures))
                .collect();
            results.push(ImageResult {
                group: group.clone(),
                name,
                pixels: img.width() as u64 * img.height() as u64,
                png,
                png_fast,
                qoi,
                variants: measured,
            });
        }
    }
    let nvar = variants.len();
    let mut groups: Vec<Group> = dirs
        .iter()
        .map(|d| {
            let g = d.file_name().unwrap().to_string_lossy().into_owned();
            let rs: Vec<&ImageResult> = results.iter().filter(|r| r.group == g).collect();
            sum(&g, &rs, nvar)
        })
        .filter(|g| g.images > 0)
        .collect();
    // The size goal is stated on photos.
    let photos: Vec<&ImageResult> = results
        .iter()
        .filter(|r| r.group == "photo_lossless" || r.group == "photo_png_jpeg_origin")
        .collect();
    groups.push(sum(
        "**photos** (photo_lossless + photo_png_jpeg_origin)",
        &photos,
        nvar,
    ));
    let all: Vec<&ImageResult> = results.iter().collect();
    groups.push(sum("**all**", &all, nvar));

    let keys = |suffix: &str| -> Vec<String> {
        variants
            .iter()
            .map(|v| format!("{}. {}{suffix}", v.key, v.name))
            .collect()
    };
    let head = |first: &[&str], suffix: &str| -> Vec<String> {
        first
            .iter()
            .map(|s| s.to_string())
            .chain(keys(suffix))
            .collect()
    };

    let rows: Vec<Vec<String>> = groups
        .iter()
        .map(|g| {
            let mut r = vec![
                g.name.clone(),
                g.images.to_string(),
                format!("{:.1}", g.pixels as f64 / 1e6),
                bpp(g.png.bytes, g.pixels),
                bpp(g.png_fast, g.pixels),
                if g.qoi_pixels > 0 {
                    bpp(g.qoi.bytes, g.qoi_pixels)
                } else {
                    "n/a".into()
                },
            ];
            r.extend(g.variants.iter().map(|m| bpp(m.bytes, g.pixels)));
            r
        })
        .collect();
    table(
        "Bits per pixel (QOI: on the images it takes, see the notes)",
        &head(&["folder", "images", "MP", "png", "png fast", "qoi"], ""),
        &rows,
    );

    let rows: Vec<Vec<String>> = groups
        .iter()
        .map(|g| {
            let mut r = vec![g.name.clone()];
            r.extend(
                g.variants
                    .iter()
                    .map(|m| format!("{:.3}", m.bytes as f64 / g.png.bytes as f64)),
            );
            r
        })
        .collect();
    table("Size / png default size", &head(&["folder"], ""), &rows);

    let rows: Vec<Vec<String>> = groups
        .iter()
        .map(|g| {
            let mut r = vec![g.name.clone(), format!("{}/{}", g.qoi_images, g.images)];
            r.extend(g.variants_on_qoi.iter().map(|&b| {
                if g.qoi_pixels > 0 {
                    format!("{:.3}", b as f64 / g.qoi.bytes as f64)
                } else {
                    "n/a".into()
                }
            }));
            r
        })
        .collect();
    table(
        "Size / QOI size (images QOI takes: 8-bit; gray given as RGB, gray+alpha as RGBA)",
        &head(&["folder", "images"], ""),
        &rows,
    );

    let rows: Vec<Vec<String>> = groups
        .iter()
        .map(|g| {
            let mut r = vec![
                g.name.clone(),
                mps(g.pixels, g.png.dec_s),
                if g.qoi_pixels > 0 {
                    mps(g.qoi_pixels, g.qoi.dec_s)
                } else {
                    "n/a".into()
                },
            ];
            r.extend(g.variants.iter().map(|m| mps(g.pixels, m.dec_s)));
            r
        })
        .collect();
    table(
        "CPU decode MP/s, one thread (best of 3 after a warm-up, summed over the images)",
        &head(&["folder", "png", "qoi"], ""),
        &rows,
    );

    let rows: Vec<Vec<String>> = groups
        .iter()
        .rev()
        .take(2)
        .rev()
        .map(|g| {
            let mut r = vec![
                g.name.clone(),
                mps(g.pixels, g.png.enc_s),
                if g.qoi_pixels > 0 {
                    mps(g.qoi_pixels, g.qoi.enc_s)
                } else {
                    "n/a".into()
                },
            ];
            r.extend(g.variants.iter().map(|m| mps(g.pixels, m.enc_s)));
            r
        })
        .collect();
    table(
        "Encode MP/s (l3 on all threads, peers on one; one run: indicative)",
        &head(&["folder", "png", "qoi"], ""),
        &rows,
    );

    if per_image {
        let rows: Vec<Vec<String>> = results
            .iter()
            .map(|r| {
                let mut row = vec![
                    format!("{}/{}", r.group, r.name),
                    bpp(r.png.bytes, r.pixels),
                    r.qoi.map_or("n/a".into(), |q| bpp(q.bytes, r.pixels)),
                ];
                row.extend(r.variants.iter().map(|m| bpp(m.bytes, r.pixels)));
                row
            })
            .collect();
        table(
            "Per image, bits per pixel",
            &head(&["image", "png", "qoi"], ""),
            &rows,
        );
    }

    // The goal of version 2, on photos: <= 0.90x PNG and <= 0.85x QOI.
    let p = &groups[groups.len() - 2];
    let e = variants.iter().position(|v| v.key == "e").unwrap();
    let vs_png = p.variants[e].bytes as f64 / p.png.bytes as f64;
    let vs_qoi = p.variants_on_qoi[e] as f64 / p.qoi.bytes as f64;
    println!(
        "Photo goal (compact default, e): {vs_png:.3}x png (goal <= 0.90: {}), {vs_qoi:.3}x QOI \
         (goal <= 0.85: {}).",
        if vs_png <= 0.90 { "met" } else { "NOT met" },
        if vs_qoi <= 0.85 { "met" } else { "NOT met" }
    );

    if !failures.is_empty() {
        eprintln!("\n{} ROUND-TRIP FAILURE(S):", failures.len());
        for f in &failures {
            eprintln!("  {f}");
        }
        std::process::exit(1);
    }
    eprintln!(
        "all {} images x {} variants round-tripped bit-exactly",
        results.len(),
        nvar
    );
}
