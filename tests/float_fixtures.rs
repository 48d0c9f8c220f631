//! Float files written by an earlier version (l3 at 3901e8e, `l3 encode-field` of
//! `tests/fixtures/fields/src.f32`: a 48 x 64 field with a NaN, an infinity and -0.0) keep
//! decoding bit for bit: version 1 (error-bounded, 1e-3), version 2 (lossless) and version 3
//! (error-bounded, 1e-3 absolute and 1e-2 relative). Each decode's CRC-32 is the one that
//! version's own decoder gave; on a GPU (lavapipe in CI) the bytes are the CPU's.
#![cfg(all(feature = "gpu", feature = "dataset"))]

#[path = "common/gpu_support.rs"]
mod gpu_support;

use l3::decode::DecodeOptions;
use l3::field::gpu::{decode_bounded_fields, decode_fields, decode_lossless_fields};
use l3::field::{decode_bounded, decode_field, decode_lossless, field_version, FloatVec};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fields");

/// (file, version, CRC-32 of the values as 3901e8e's `l3 decode-field` wrote them).
const FIXTURES: [(&str, u8, u32); 4] = [
    ("v1_abs1e-3.l3f", 1, 987_822_221),
    ("v2_lossless.l3f", 2, 4_270_171_323),
    ("v3_abs1e-3.l3f", 3, 109_559_498),
    ("v3_rel1e-2.l3f", 3, 343_327_512),
];

/// (block-coded stream, bound, stride offered, CRC-32 of the values 184e23a decoded).
const BLOCK_FIXTURES: [(&str, f64, usize, u32); 2] = [
    ("blocks_abs1e-3_s64.l3b", 0.001, 64, 154_187_708),
    ("blocks_abs1e-2.l3b", 0.01, 0, 3_591_766_487),
];

fn bytes_of(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn earlier_files_decode_bit_for_bit_on_the_cpu_and_the_gpu() {
    let source = std::fs::read(format!("{DIR}/src.f32")).unwrap();
    let gpu = gpu_support::gpu();
    for (name, version, crc) in FIXTURES {
        let file = std::fs::read(format!("{DIR}/{name}")).unwrap();
        assert_eq!(field_version(&file), Some(version), "{name}");
        let o = DecodeOptions::default();
        let cpu = match version {
            1 => bytes_of(&decode_field(&file, &o).unwrap().1),
            2 => match decode_lossless(&file, &o).unwrap().1 {
                FloatVec::F32(v) => bytes_of(&v),
                other => panic!("{name}: {other:?}"),
            },
            _ => bytes_of(&decode_bounded(&file, &o).unwrap().1),
        };
        assert_eq!(crc32fast::hash(&cpu), crc, "{name}: CPU decode");
        if version == 2 {
            assert_eq!(cpu, source, "{name}: lossless");
        }
        let Some(gpu) = gpu else { continue };
        let on_gpu = match version {
            1 => bytes_of(
                &decode_fields(gpu, &[&file])
                    .unwrap()
                    .read_back_field(0)
                    .unwrap(),
            ),
            2 => decode_lossless_fields(gpu, &[&file])
                .unwrap()
                .read_back_array(0)
                .unwrap(),
            _ => bytes_of(
                &decode_bounded_fields(gpu, &[&file], &o)
                    .unwrap()
                    .read_back_array(0)
                    .unwrap(),
            ),
        };
        assert_eq!(on_gpu, cpu, "{name}: GPU decode");
    }
}

/// Block-coded streams (`l3::field::blocks`, "L3B2") of `src.f32`, written by l3 at 184e23a
/// (`l3.encode_blocks`: 1e-3 absolute offered the row's 64 as a stride, 1e-2 with none): each
/// decodes to the values whose CRC-32 that version's decoder gave, on the CPU and the GPU,
/// and this version's encoder still writes the same bytes.
#[test]
fn block_coded_streams_decode_bit_for_bit_on_the_cpu_and_the_gpu() {
    use l3::field::blocks::gpu::decode_blocks_gpu;
    use l3::field::blocks::{decode_blocks, encode_blocks};
    let source = std::fs::read(format!("{DIR}/src.f32")).unwrap();
    let values: Vec<f32> = source
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let gpu = gpu_support::gpu().map(l3::gpu::GpuBlocks::from_decoder);
    for (name, bound, stride, crc) in BLOCK_FIXTURES {
        let file = std::fs::read(format!("{DIR}/{name}")).unwrap();
        let cpu = bytes_of(&decode_blocks(&file, u64::MAX).unwrap());
        assert_eq!(crc32fast::hash(&cpu), crc, "{name}: CPU decode");
        assert!(
            encode_blocks(&values, bound, stride).unwrap() == file,
            "{name}: encoder"
        );
        if let Some(gpu) = &gpu {
            let on_gpu = bytes_of(&decode_blocks_gpu(gpu, &file, u64::MAX).unwrap());
            assert_eq!(on_gpu, cpu, "{name}: GPU decode");
        }
    }
}
