//! A value-table lossless file (field version 2, header flag bit 2), written when the mode
//! came in (l3's Python `encode_field(lossless=True, fill_value=-999.0)` of
//! `tests/fixtures/fields/table_src.f32`: 40 x 60 unpacked int16 on a coarse grid with a NaN
//! payload, -0.0, an infinity and fill cells, inline), keeps decoding bit for bit on the CPU and, on a
//! GPU (lavapipe in CI), to the CPU's bytes.
#![cfg(all(feature = "gpu", feature = "dataset"))]

#[path = "common/gpu_support.rs"]
mod gpu_support;

use l3::decode::DecodeOptions;
use l3::field::gpu::decode_lossless_fields;
use l3::field::{decode_lossless, field_version, parse_lossless, FloatVec};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fields");

#[test]
fn the_value_table_file_decodes_bit_for_bit_on_the_cpu_and_the_gpu() {
    let source = std::fs::read(format!("{DIR}/table_src.f32")).unwrap();
    let file = std::fs::read(format!("{DIR}/v2_table.l3f")).unwrap();
    assert_eq!(field_version(&file), Some(2));
    let h = parse_lossless(&file).unwrap();
    assert_eq!(h.shape, [40, 60]);
    assert!(!h.table.is_empty() && h.mult_base.is_none(), "{h:?}");
    for parallel in [false, true] {
        let o = DecodeOptions {
            parallel,
            ..Default::default()
        };
        let cpu = match decode_lossless(&file, &o).unwrap().1 {
            FloatVec::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
            other => panic!("{other:?}"),
        };
        assert!(cpu == source, "CPU decode (parallel {parallel})");
    }
    let Some(gpu) = gpu_support::gpu() else {
        return;
    };
    let on_gpu = decode_lossless_fields(gpu, &[&file])
        .unwrap()
        .read_back_array(0)
        .unwrap();
    assert!(on_gpu == source, "GPU decode");
}
