//! Criterion benches of the CPU codec on bundled samples, both profiles: encode (all threads),
//! decode on one thread and on all threads. Throughput is in bytes of raw (decoded) pixels.
//! Groups: `l3` (the fast profile, format version 1; the group kept its name so saved
//! baselines still compare) and `l3_compact` (version 2).
//!
//! `cargo bench --bench codec` (add `-- decode` or `-- l3_compact` to filter). The measurement time is short on
//! purpose; pass `-- --measurement-time 10` for steadier figures.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use l3::{DecodeOptions, EncodeOptions, Profile};

const SAMPLES: &[&str] = &[
    "skimage_coffee.png",
    "jxl_bliznaca_rgb.png",
    "skimage_camera_gray.png",
];

fn load(name: &str) -> image::DynamicImage {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples")
        .join(name);
    l3::read_image(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn codec(c: &mut Criterion) {
    for (group, profile) in [("l3", Profile::Fast), ("l3_compact", Profile::Compact)] {
        profile_group(c, group, profile);
    }
}

fn profile_group(c: &mut Criterion, group: &str, profile: Profile) {
    let encode_options = EncodeOptions::for_profile(profile);
    for name in SAMPLES {
        let img = load(name);
        let raw_bytes = img.as_bytes().len() as u64;
        let file = l3::encode_image(&img, &encode_options).expect("encode");
        let mut out = vec![0u8; raw_bytes as usize];

        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Bytes(raw_bytes));
        g.bench_function(BenchmarkId::new("encode", name), |b| {
            b.iter(|| l3::encode_image(&img, &encode_options).expect("encode"))
        });
        for (label, parallel) in [("decode_1_thread", false), ("decode_all_threads", true)] {
            let options = DecodeOptions {
                parallel,
                ..DecodeOptions::default()
            };
            g.bench_function(BenchmarkId::new(label, name), |b| {
                b.iter(|| l3::decode_into(&file, &mut out, &options).expect("decode"))
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = codec
}
criterion_main!(benches);
