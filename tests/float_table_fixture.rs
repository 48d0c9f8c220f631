//! Lossless files of modes that came in after `float_fixtures.rs`'s, written when each came
//! in, keep decoding bit for bit on the CPU and, on a GPU (lavapipe in CI), to the CPU's
//! bytes:
//! - a value-table file (field version 2, header flag bit 2; l3's Python
//!   `encode_field(lossless=True, fill_value=-999.0)` of `table_src.f32`: 40 x 60 unpacked
//!   int16 on a coarse grid with a NaN payload, -0.0, an infinity and fill cells, inline);
//! - a second-differences file (header byte `axes2`; `encode_lossless` with default options
//!   of `second_src.f32`: 8192 integer counts of a smooth 1-D signal, a seismogram's kind).
#![cfg(all(feature = "gpu", feature = "dataset"))]

#[path = "common/gpu_support.rs"]
mod gpu_support;

use l3::decode::DecodeOptions;
use l3::field::gpu::decode_lossless_fields;
use l3::field::{decode_lossless, field_version, parse_lossless, FloatVec, LosslessHeader};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fields");

fn check(fixture: &str, source: &str, shape: &[u32], mode: impl Fn(&LosslessHeader) -> bool) {
    let source = std::fs::read(format!("{DIR}/{source}")).unwrap();
    let file = std::fs::read(format!("{DIR}/{fixture}")).unwrap();
    assert_eq!(field_version(&file), Some(2));
    let h = parse_lossless(&file).unwrap();
    assert_eq!(h.shape, shape);
    assert!(mode(&h), "{fixture}: {h:?}");
    for parallel in [false, true] {
        let o = DecodeOptions {
            parallel,
            ..Default::default()
        };
        let cpu = match decode_lossless(&file, &o).unwrap().1 {
            FloatVec::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
            other => panic!("{other:?}"),
        };
        assert!(cpu == source, "{fixture}: CPU decode (parallel {parallel})");
    }
    let Some(gpu) = gpu_support::gpu() else {
        return;
    };
    let on_gpu = decode_lossless_fields(gpu, &[&file])
        .unwrap()
        .read_back_array(0)
        .unwrap();
    assert!(on_gpu == source, "{fixture}: GPU decode");
}

#[test]
fn the_value_table_file_decodes_bit_for_bit_on_the_cpu_and_the_gpu() {
    check("v2_table.l3f", "table_src.f32", &[40, 60], |h| {
        !h.table.is_empty() && h.mult_base.is_none()
    });
}

#[test]
fn the_second_differences_file_decodes_bit_for_bit_on_the_cpu_and_the_gpu() {
    check("v2_second.l3f", "second_src.f32", &[8192], |h| {
        (h.axes, h.axes2) == (1, 1)
    });
}
